package wire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// FuzzAppendString checks that AppendString writes what encoding/json
// writes, byte for byte, for any string, valid UTF-8 or not.
func FuzzAppendString(f *testing.F) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, s := range []string{"", "plain text of some length here", all.String(), "ab\"cdefgh\\ijklmn\x1fopq",
		"é€😀 mixed \x80 bad \xff\xfe", "<html>&amp;</html>", "line\u2028sep\u2029", "\xe2\x80", strings.Repeat("x", 17) + "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := string(AppendFloat(nil, v)); got != want {
			t.Errorf("AppendFloat(%v) = %s, want %s", v, got, want)
		}
	}
	f(0, "0")
	f(1.5, "1.5")
	f(-2, "-2")
	f(1e21, "1e+21")
	f(1e-7, "1e-07")
	f(math.NaN(), `"NaN"`)
	f(math.Inf(1), `"Infinity"`)
	f(math.Inf(-1), `"-Infinity"`)
}
