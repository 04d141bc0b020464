package pyjson_test

import (
	"testing"

	"github.com/sextant/sextant/internal/pyjson"
)

// TestQuote checks Quote against what Python 3's json.dumps(s) prints.
func TestQuote(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := pyjson.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	f("", `""`)
	f("model", `"model"`)
	f("a\"b\\c/d", `"a\"b\\c/d"`)
	f("\n\r\t\b\f\x01\x1f", `"\n\r\t\b\f\u0001\u001f"`)
	f("é€", `"\u00e9\u20ac"`)
	f("😀", `"\ud83d\ude00"`)
	f("\xff", `"\ufffd"`)
	f("a\x7fb ~", `"a\u007fb ~"`) // DEL is outside Python's printable ASCII: escaped
}
