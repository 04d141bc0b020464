package wire

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The two primitives of every hand-written encoder: a JSON string and an
// MLflow float. AppendString writes what encoding/json writes for the same
// string, byte for byte (FuzzAppendString checks), so a shape encoded by
// hand and one encoded by encoding/json never differ in their strings.

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it: '"', '\\' and control characters, '<', '>' and '&' (as
// \u003c, \u003e, \u0026), U+2028 and U+2029, and each byte of invalid
// UTF-8 as \ufffd. Plain ASCII is skipped eight bytes at a time: log lines
// are megabytes of it.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plainWord(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
		}
		for i < len(s) && jsonSafe[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// plainWord reports whether none of the eight bytes of w needs a look: no
// control character, '"', '\\', '<', '>', '&' or non-ASCII byte.
func plainWord(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	hasLess := func(x uint64, n uint64) uint64 { return (x - lo*n) & ^x & hi }
	hasZero := func(x uint64) uint64 { return (x - lo) & ^x & hi }
	return (w&hi)|hasLess(w, 0x20)|hasZero(w^(lo*'"'))|hasZero(w^(lo*'\\'))|
		hasZero(w^(lo*'<'))|hasZero(w^(lo*'>'))|hasZero(w^(lo*'&')) == 0
}

// jsonSafe marks the ASCII bytes that go into a JSON string as they are.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendFloat appends v as MLflow JSON.
func AppendFloat(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Infinity"`...)
	}
	// Like encoding/json: shortest representation, exponent only for very
	// large or small magnitudes.
	if out, ok := appendFixed(dst, v); ok {
		return out
	}
	abs := math.Abs(v)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	return strconv.AppendFloat(dst, v, fmtc, -1, 64)
}
