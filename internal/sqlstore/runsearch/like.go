package runsearch

import "math"

// SQLite's semantics of the comparisons a search filter renders, in Go,
// for the search index's row and column tests (ops.go): LIKE,
// lower() and integer-against-float comparisons.

// sqliteLike reports whether s matches the LIKE pattern p as SQLite
// matches it on the store's connections: case-sensitive
// (case_sensitive_like), no escape character, '%' for any run of
// characters and '_' for one. It follows SQLite's patternCompare (func.c):
// both strings end at their first NUL (SQLite reads them as C strings),
// characters are read as sqlite3Utf8Read reads them (a lead byte and the
// continuation bytes after it, invalid sequences read as U+FFFD), so that
// the search index (index_query.go) filters as the SQL path does.
func sqliteLike(p, s string) bool {
	return likeCompare(cstr(p), cstr(s)) == likeMatch
}

// The results of likeCompare, as SQLite's SQLITE_MATCH,
// SQLITE_NOMATCH and SQLITE_NOWILDCARDMATCH: the last stops the search
// early, a '%' further left cannot match either.
const (
	likeMatch = iota
	likeNoMatch
	likeNoWildcardMatch
)

// cstr cuts s at its first NUL.
func cstr(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i]
		}
	}
	return s
}

// utf8Read reads the character at the start of s as sqlite3Utf8Read
// does, and returns it with the rest of s; 0 at the end of s.
func utf8Read(s string) (uint32, string) {
	if len(s) == 0 {
		return 0, s
	}
	c := uint32(s[0])
	s = s[1:]
	if c < 0xc0 {
		return c, s
	}
	c = uint32(utf8Trans1[c-0xc0])
	for len(s) > 0 && s[0]&0xc0 == 0x80 {
		c = c<<6 + uint32(0x3f&s[0])
		s = s[1:]
	}
	if c < 0x80 || c&0xFFFFF800 == 0xD800 || c&0xFFFFFFFE == 0xFFFE {
		c = 0xFFFD
	}
	return c, s
}

// utf8Trans1 is SQLite's sqlite3Utf8Trans1: the value bits of a lead byte.
var utf8Trans1 = [64]byte{
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
	0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
}

// likeCompare is SQLite's patternCompare for LIKE without ESCAPE and
// case-sensitive.
func likeCompare(p, s string) int {
	for {
		var c uint32
		c, p = utf8Read(p)
		if c == 0 {
			break
		}
		if c == '%' {
			// Skip more '%' and '_', each '_' taking one character of s.
			for {
				c, p = utf8Read(p)
				if c != '%' && c != '_' {
					break
				}
				if c == '_' {
					var c2 uint32
					if c2, s = utf8Read(s); c2 == 0 {
						return likeNoWildcardMatch
					}
				}
			}
			if c == 0 {
				return likeMatch // '%' at the end of the pattern
			}
			// Try the rest of the pattern after each occurrence of c in s.
			for {
				var c2 uint32
				if c2, s = utf8Read(s); c2 == 0 {
					break
				}
				if c2 != c {
					continue
				}
				if m := likeCompare(p, s); m != likeNoMatch {
					return m
				}
			}
			return likeNoWildcardMatch
		}
		var c2 uint32
		c2, s = utf8Read(s)
		if c == c2 {
			continue
		}
		if c == '_' && c2 != 0 {
			continue
		}
		return likeNoMatch
	}
	if len(s) == 0 {
		return likeMatch
	}
	return likeNoMatch
}

// intFloatCompare compares an INTEGER column with a REAL value as SQLite
// does (sqlite3IntFloatCompare): exactly, whatever their magnitudes. A
// NaN compares above every integer (the search binds none: intCompare).
func intFloatCompare(i int64, r float64) int {
	switch {
	case math.IsNaN(r):
		return 1
	case r < -9223372036854775808.0:
		return 1
	case r >= 9223372036854775808.0:
		return -1
	}
	y := int64(r)
	switch {
	case i < y:
		return -1
	case i > y:
		return 1
	}
	s := float64(i)
	switch {
	case s < r:
		return -1
	case s > r:
		return 1
	}
	return 0
}

// asciiLower lowers ASCII letters only, as SQLite's lower() does (without ICU).
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
