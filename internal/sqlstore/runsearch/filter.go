package runsearch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/sextant/sextant/internal/tracking/search"
)

// StringCompare renders `col <op> ?` for a string comparison, once
// search decides that c is one, as its operator's description (opDescs)
// writes it.
func StringCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckString(); err != nil {
		return "", nil, err
	}
	d, ok := opDescs[c.Op]
	if !ok || d.str == nil {
		return "", nil, fmt.Errorf("search: no SQL for %s", c)
	}
	args := valueArgs(c.Value)
	return d.sql(col, len(args)), args, nil
}

// NumberCompare renders `col <op> ?` for a numeric comparison, once
// search decides that c is one.
func NumberCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckNumber(); err != nil {
		return "", nil, err
	}
	d, ok := opDescs[c.Op]
	if !ok || d.holds == nil {
		return "", nil, fmt.Errorf("search: no SQL for %s", c)
	}
	return d.sql(col, 1), []any{c.Value.Num}, nil
}

// intCompare renders a numeric comparison of an integer column (a run's
// start or end time) as a comparison with an integer, exactly as SQLite
// compares an integer with any number (intFloatCompare): PostgreSQL binds
// the number as the column's type and refuses one with a fraction or
// beyond int64 (a client's `start_time > 1.5e12` was a server error there),
// and an integer keeps the column's index usable on both. Which integers
// pass is derived from the operator's holds.
func intCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckNumber(); err != nil {
		return "", nil, err
	}
	d, ok := opDescs[c.Op]
	if !ok || d.holds == nil {
		return "", nil, fmt.Errorf("search: no SQL for %s", c)
	}
	v := c.Value.Num
	never, always := "1 = 0", col+" IS NOT NULL"
	// all renders a comparison every integer passes or none does.
	all := func(pass bool) (string, []any, error) {
		if pass {
			return always, nil, nil
		}
		return never, nil, nil
	}
	switch {
	case math.IsNaN(v):
		return never, nil, nil // bound as NULL: no comparison holds
	case v >= 0x1p63:
		return all(d.holds(-1)) // every integer lies below v
	case v < -0x1p63:
		return all(d.holds(+1))
	}
	f := math.Floor(v)
	i := int64(f)
	if f == v {
		return d.sql(col, 1), []any{i}, nil
	}
	// v lies strictly between i and i+1: the integers up to i lie below
	// it, those from i+1 above.
	below, above := d.holds(-1), d.holds(+1)
	switch {
	case below && above:
		return always, nil, nil
	case below:
		return col + " <= ?", []any{i}, nil
	case above:
		return col + " > ?", []any{i}, nil
	}
	return never, nil, nil
}

// SideCompare renders a comparison on a key/value side table (params,
// tags, experiment tags). sub is a subquery selecting the value column of
// the row of the key (its only parameter is the key); a missing key makes
// it NULL, so the comparison is false, as in MLflow. IS NULL means "has no
// such key" (an operator whose description tests presence).
//
// The comparison is written as a correlated scalar subquery, not EXISTS:
// SQLite turns EXISTS into a join and may then drive it from an index on
// the side table's values, scanning that index once per row of the outer
// table. A scalar subquery is always one primary-key lookup per row.
func SideCompare(sub string, c search.Comparison) (string, []any, error) {
	if d := opDescs[c.Op]; d.present != nil {
		return d.sql("("+sub+")", 0), []any{c.Key}, nil
	}
	w, a, err := StringCompare("("+sub+")", c)
	if err != nil {
		return "", nil, err
	}
	return w, append([]any{c.Key}, a...), nil
}

// QueryFingerprint identifies a query in its page tokens, so that a token
// replayed against another query is refused instead of silently skipping.
func QueryFingerprint(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}
