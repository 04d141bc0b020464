package search

import (
	"math"
	"strconv"
	"strings"
)

// The String methods render canonical text that the matching Parse function
// turns back into the same AST: full prefixes (metrics., params., tags.,
// attributes., datasets.), metric, param and tag keys in backticks, string
// values in single quotes with ' doubled, upper-case keywords, and single
// spaces. They are meant for logs, error messages and tests.

// String renders the filter as its comparisons joined by " AND ". The zero
// Filter renders as "".
func (f Filter) String() string {
	parts := make([]string, len(f.Clauses))
	for i, c := range f.Clauses {
		parts[i] = c.String()
	}
	return strings.Join(parts, " AND ")
}

// String renders the comparison, e.g. "metrics.`loss` < 0.5".
func (c Comparison) String() string {
	s := identString(c.Entity, c.Key) + " " + string(c.Op)
	if c.Value.Kind != NoValue {
		s += " " + c.Value.String()
	}
	return s
}

// String renders the value as a literal: a quoted string, a number or a
// parenthesised list. NoValue renders as "".
func (v Value) String() string {
	switch v.Kind {
	case String:
		return quoteString(v.Str)
	case Number:
		return formatNumber(v.Num)
	case List:
		parts := make([]string, len(v.List))
		for i, s := range v.List {
			parts[i] = quoteString(s)
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return ""
}

// String renders the order key with an explicit direction, e.g.
// "metrics.`loss` DESC".
func (k OrderKey) String() string {
	if k.Desc {
		return identString(k.Entity, k.Key) + " DESC"
	}
	return identString(k.Entity, k.Key) + " ASC"
}

// identString renders an identifier. Attribute and dataset keys are
// canonical names and stay bare; other keys are user data and are always
// quoted, so that no key can be mistaken for a keyword or an operator.
func identString(e Entity, key string) string {
	if (e == Attribute || e == Dataset) && isBareKey(key) {
		return e.String() + "." + key
	}
	return e.String() + "." + quoteKey(key)
}

func isBareKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if !isKeyChar(key[i]) {
			return false
		}
	}
	return true
}

// quoteKey quotes a key with backticks, or with double quotes when it holds
// a backtick. The parser never yields a key holding both, since quoted keys
// have no escapes.
func quoteKey(key string) string {
	if strings.IndexByte(key, '`') >= 0 && strings.IndexByte(key, '"') < 0 {
		return `"` + key + `"`
	}
	return "`" + key + "`"
}

func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// formatNumber writes integral values without an exponent, so timestamps
// read as 1700000000000 rather than 1.7e+12.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
