// Package pyjson writes JSON strings as Python's json.dumps does by
// default, for the values MLflow writes with it and its clients compare
// byte for byte (the mlflow.log-model.history tag, the Python values
// quoted in MLflow's error messages). It imports only the standard
// library.
package pyjson

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

// Quote returns s quoted as json.dumps(s) does by default: ASCII only,
// with \uXXXX escapes (surrogate pairs beyond the BMP).
func Quote(s string) string {
	var b strings.Builder
	WriteQuote(&b, s)
	return b.String()
}

// WriteQuote writes s to b quoted as Quote does.
func WriteQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0x10000):
				fmt.Fprintf(b, `\u%04x`, r)
			case r >= 0x10000:
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
