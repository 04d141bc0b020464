package runsearch

import (
	"cmp"
	"math"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking/search"
)

// The one description of each operator of the search grammar
// (search.Ops): its SQL, its meaning on one value (the search index's row
// test), its test of a column of the index, and whether it can drive a
// search. Everything else is derived from opDescs: the SQL of every
// search (filter.go), the index's row tests (memClause) and column tests
// (columnTest), the integer rendering of a numeric comparison (intCompare)
// and both planners' choice of the clauses a search may start from
// (clauseDriver for SQL, drives and selects for the index).
//
// What an operator's description lacks, the index does not do: no row
// test for a clause's kind of value makes the index refuse the search,
// which SQL answers; no column test makes it test the run instead. An
// operator of the grammar without a description has no SQL either, and
// every search using it fails; TestOperatorDescriptions and the
// differential test (TestSearchIndexMatchesSQL), which draws its clauses
// from the grammar's own tables, say so the day it is added.

// opDesc describes one operator.
type opDesc struct {
	// sql renders the comparison of the SQL expression lhs with the
	// clause's value, bound as n arguments: one for a scalar, one per item
	// of a list (valueArgs), none for IS NULL and IS NOT NULL.
	sql func(lhs string, n int) string

	// holds, of an operator that compares numbers, says whether the
	// comparison holds given the three-way comparison (-1, 0, +1) of the
	// run's value with the clause's number, neither being NaN. A NULL
	// value (no value, a NaN metric) fails every comparison. The range of
	// sorted values it selects is derived from it (numRegions): it drives
	// when that range is one.
	holds func(c int) bool
	// nums, when not nil, tests a column of a metric's latest values (NaN:
	// none) against x, as holds does; it is written out for speed (a walk
	// calls it for every run it reads), and TestOperatorDescriptions checks
	// it against holds.
	nums func(vals []float64, x float64) colTest

	// str, of an operator that compares strings, compiles its test of a
	// value against the clause's value v (as CheckString accepts it);
	// false: the index cannot evaluate it as SQLite does. A param's or
	// tag's column tests each distinct value once with it.
	str func(v search.Value) (func(string) bool, bool)
	// drive says how a string comparison selects runs by value, for the
	// planners: driveValue (the runs of one value: also the column test of
	// a param's or tag's dictionary), driveValues (of each listed value),
	// or driveNone.
	drive driveKind

	// present, of IS NULL and IS NOT NULL on a key/value side table (a
	// param, a tag), says whether a run that has the key (has) or lacks it
	// passes.
	present func(has bool) bool
}

// driveKind is how a clause can select the runs a search starts from.
type driveKind uint8

const (
	driveNone   driveKind = iota
	driveRange            // a range of a numeric key's sorted values
	driveValue            // the runs of one value
	driveValues           // the runs of each of a list of values
)

// opDescs holds the description of every operator of the grammar.
var opDescs = map[search.Op]opDesc{
	search.OpEq: {
		sql:   scalarSQL("="),
		holds: func(c int) bool { return c == 0 },
		nums:  func(vs []float64, x float64) colTest { return func(o int32) bool { return vs[o] == x } },
		str: func(v search.Value) (func(string) bool, bool) {
			s := v.Str
			return func(x string) bool { return x == s }, true
		},
		drive: driveValue,
	},
	search.OpNe: {
		sql:   scalarSQL("!="),
		holds: func(c int) bool { return c != 0 },
		// NaN (none) fails every comparison but !=, which checks it.
		nums: func(vs []float64, x float64) colTest {
			return func(o int32) bool { v := vs[o]; return v == v && v != x }
		},
		str: func(v search.Value) (func(string) bool, bool) {
			s := v.Str
			return func(x string) bool { return x != s }, true
		},
	},
	search.OpLt: {
		sql:   scalarSQL("<"),
		holds: func(c int) bool { return c < 0 },
		nums:  func(vs []float64, x float64) colTest { return func(o int32) bool { return vs[o] < x } },
	},
	search.OpLe: {
		sql:   scalarSQL("<="),
		holds: func(c int) bool { return c <= 0 },
		nums:  func(vs []float64, x float64) colTest { return func(o int32) bool { return vs[o] <= x } },
	},
	search.OpGt: {
		sql:   scalarSQL(">"),
		holds: func(c int) bool { return c > 0 },
		nums:  func(vs []float64, x float64) colTest { return func(o int32) bool { return vs[o] > x } },
	},
	search.OpGe: {
		sql:   scalarSQL(">="),
		holds: func(c int) bool { return c >= 0 },
		nums:  func(vs []float64, x float64) colTest { return func(o int32) bool { return vs[o] >= x } },
	},
	// LIKE is case-sensitive (the connection sets case_sensitive_like),
	// as sqliteLike matches.
	search.OpLike: {
		sql: scalarSQL("LIKE"),
		str: func(v search.Value) (func(string) bool, bool) {
			p := v.Str
			if len(p) > likeMaxPattern {
				return nil, false // an error, which the SQL path reports
			}
			return func(x string) bool { return sqliteLike(p, x) }, true
		},
	},
	// ILIKE lowers both sides, ASCII letters only, as SQLite's lower().
	search.OpILike: {
		sql: func(lhs string, _ int) string { return "lower(" + lhs + ") LIKE lower(?)" },
		str: func(v search.Value) (func(string) bool, bool) {
			if len(v.Str) > likeMaxPattern {
				return nil, false
			}
			p := asciiLower(v.Str)
			return func(x string) bool { return sqliteLike(p, asciiLower(x)) }, true
		},
	},
	search.OpIn: {
		sql:   listSQL("IN"),
		str:   func(v search.Value) (func(string) bool, bool) { return inSet(v.List, true), true },
		drive: driveValues,
	},
	search.OpNotIn: {
		sql: listSQL("NOT IN"),
		str: func(v search.Value) (func(string) bool, bool) { return inSet(v.List, false), true },
	},
	search.OpIsNull: {
		sql:     func(lhs string, _ int) string { return lhs + " IS NULL" },
		present: func(has bool) bool { return !has },
	},
	search.OpIsNotNull: {
		sql:     func(lhs string, _ int) string { return lhs + " IS NOT NULL" },
		present: func(has bool) bool { return has },
	},
}

// scalarSQL renders `lhs <op> ?`.
func scalarSQL(op string) func(string, int) string {
	return func(lhs string, _ int) string { return lhs + " " + op + " ?" }
}

// listSQL renders `lhs <op> (?, ...)`.
func listSQL(op string) func(string, int) string {
	return func(lhs string, n int) string { return lhs + " " + op + " (" + sqlrow.Placeholders(n) + ")" }
}

// inSet tests membership of list (in) or its absence (!in).
func inSet(list []string, in bool) func(string) bool {
	set := make(map[string]bool, len(list))
	for _, v := range list {
		set[v] = true
	}
	return func(v string) bool { return set[v] == in }
}

// valueArgs returns the arguments of a string comparison with v, as its
// SQL binds them: each item of a List, else the string.
func valueArgs(v search.Value) []any {
	if v.Kind != search.List {
		return []any{v.Str}
	}
	args := make([]any, len(v.List))
	for i, s := range v.List {
		args[i] = s
	}
	return args
}

// numRegions returns the regions of sorted values that holds selects, as
// the first and last of -1 (below the clause's number), 0 (equal) and +1
// (above); ok false: none, or two apart (!=), which no range is.
func numRegions(holds func(int) bool) (first, last int, ok bool) {
	first, last = 2, -2
	for c := -1; c <= 1; c++ {
		if holds(c) {
			first, last = min(first, c), max(last, c)
		}
	}
	if first > last {
		return 0, 0, false
	}
	for c := first; c <= last; c++ {
		if !holds(c) {
			return 0, 0, false
		}
	}
	return first, last, true
}

// driveOf returns how clause c, whatever it compares, can select the runs
// a search starts from: a number compared by an operator that selects one
// range, or the value or values of a string comparison. Each planner
// takes the kinds its indexes serve for c's target (clauseDriver, drives).
func driveOf(c search.Comparison) driveKind {
	d, ok := opDescs[c.Op]
	if !ok {
		return driveNone
	}
	switch c.Value.Kind {
	case search.Number:
		if d.holds == nil {
			return driveNone
		}
		if _, _, ok := numRegions(d.holds); ok {
			return driveRange
		}
	case search.String:
		if d.drive == driveValue {
			return driveValue
		}
	case search.List:
		if d.drive == driveValues {
			return driveValues
		}
	}
	return driveNone
}

// floatTest compiles the row test of a comparison of a float (a metric's
// latest value) with c's number; false: the operator has none.
func floatTest(c search.Comparison) (func(v float64) bool, bool) {
	d, ok := opDescs[c.Op]
	if !ok || d.holds == nil || c.Value.Kind != search.Number {
		return nil, false
	}
	x, holds := c.Value.Num, d.holds
	if math.IsNaN(x) {
		// Bound as NULL: every comparison is false.
		return func(float64) bool { return false }, true
	}
	return func(v float64) bool { return !math.IsNaN(v) && holds(cmp.Compare(v, x)) }, true
}

// intTest compiles the row test of a comparison of an integer column (a
// run's start or end time) with c's number, as SQLite compares an integer
// with a number (intFloatCompare) and as intCompare renders it; false: the
// operator has none.
func intTest(c search.Comparison) (func(v int64) bool, bool) {
	d, ok := opDescs[c.Op]
	if !ok || d.holds == nil || c.Value.Kind != search.Number {
		return nil, false
	}
	x, holds := c.Value.Num, d.holds
	if math.IsNaN(x) {
		return func(int64) bool { return false }, true
	}
	return func(v int64) bool { return holds(intFloatCompare(v, x)) }, true
}

// stringTest compiles the row test of a string comparison (a String or a
// List value); false: the index cannot evaluate it.
func stringTest(c search.Comparison) (func(string) bool, bool) {
	d, ok := opDescs[c.Op]
	if !ok || d.str == nil {
		return nil, false
	}
	return d.str(c.Value)
}
