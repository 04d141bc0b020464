package sqlstore

import (
	"crypto/sha256"
	"encoding/hex"
	"math"

	"github.com/sextant/sextant/internal/tracking/search"
)

// stringCompare renders `col <op> ?` for a string comparison, once
// search decides that c is one. LIKE is case-sensitive (the connection
// sets case_sensitive_like); ILIKE lowers both sides.
func stringCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckString(); err != nil {
		return "", nil, err
	}
	switch c.Op {
	case search.OpLike:
		return col + " LIKE ?", []any{c.Value.Str}, nil
	case search.OpILike:
		return "lower(" + col + ") LIKE lower(?)", []any{c.Value.Str}, nil
	case search.OpIn, search.OpNotIn:
		args := make([]any, len(c.Value.List))
		for i, v := range c.Value.List {
			args[i] = v
		}
		return col + " " + string(c.Op) + " (" + placeholders(len(args)) + ")", args, nil
	}
	// = and !=.
	return col + " " + string(c.Op) + " ?", []any{c.Value.Str}, nil
}

// numberCompare renders `col <op> ?` for a numeric comparison, once
// search decides that c is one.
func numberCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckNumber(); err != nil {
		return "", nil, err
	}
	return col + " " + string(c.Op) + " ?", []any{c.Value.Num}, nil
}

// intCompare renders a numeric comparison of an integer column (a run's
// start or end time) as a comparison with an integer, exactly as SQLite
// compares an integer with any number (intFloatCompare): PostgreSQL binds
// the number as the column's type and refuses one with a fraction or
// beyond int64 (a client's `start_time > 1.5e12` was a server error there),
// and an integer keeps the column's index usable on both.
func intCompare(col string, c search.Comparison) (string, []any, error) {
	if err := c.CheckNumber(); err != nil {
		return "", nil, err
	}
	v := c.Value.Num
	never, always := "1 = 0", col+" IS NOT NULL"
	pick := func(below bool) (string, []any, error) {
		// Every integer lies below v (or above it, !below).
		switch c.Op {
		case search.OpNe:
			return always, nil, nil
		case search.OpLt, search.OpLe:
			if below {
				return always, nil, nil
			}
		case search.OpGt, search.OpGe:
			if !below {
				return always, nil, nil
			}
		}
		return never, nil, nil
	}
	switch {
	case math.IsNaN(v):
		return never, nil, nil // bound as NULL: no comparison holds
	case v >= 0x1p63:
		return pick(true)
	case v < -0x1p63:
		return pick(false)
	}
	f := math.Floor(v)
	i := int64(f)
	if f == v {
		return col + " " + string(c.Op) + " ?", []any{i}, nil
	}
	// v lies strictly between i and i+1.
	switch c.Op {
	case search.OpGt, search.OpGe:
		return col + " > ?", []any{i}, nil
	case search.OpLt, search.OpLe:
		return col + " <= ?", []any{i}, nil
	case search.OpNe:
		return always, nil, nil
	}
	return never, nil, nil
}

// sideCompare renders a comparison on a key/value side table (params,
// tags, experiment tags). sub is a subquery selecting the value column of
// the row of the key (its only parameter is the key); a missing key makes
// it NULL, so the comparison is false, as in MLflow. IS NULL means "has no
// such key".
//
// The comparison is written as a correlated scalar subquery, not EXISTS:
// SQLite turns EXISTS into a join and may then drive it from an index on
// the side table's values, scanning that index once per row of the outer
// table. A scalar subquery is always one primary-key lookup per row.
func sideCompare(sub string, c search.Comparison) (string, []any, error) {
	switch c.Op {
	case search.OpIsNull:
		return "(" + sub + ") IS NULL", []any{c.Key}, nil
	case search.OpIsNotNull:
		return "(" + sub + ") IS NOT NULL", []any{c.Key}, nil
	}
	w, a, err := stringCompare("("+sub+")", c)
	if err != nil {
		return "", nil, err
	}
	return w, append([]any{c.Key}, a...), nil
}

// queryFingerprint identifies a query in its page tokens, so that a token
// replayed against another query is refused instead of silently skipping.
func queryFingerprint(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}
