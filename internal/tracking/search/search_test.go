package search

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// Helpers shared by the tests of this package.

func cmp(e Entity, key string, op Op, v Value) Comparison {
	return Comparison{Entity: e, Key: key, Op: op, Value: v}
}

func str(s string) Value            { return Value{Kind: String, Str: s} }
func num(f float64) Value           { return Value{Kind: Number, Num: f} }
func list(s ...string) Value        { return Value{Kind: List, List: s} }
func filter(c ...Comparison) Filter { return Filter{Clauses: c} }

// assertInvalid checks that err is an errs.Invalid *errs.Error whose message
// contains every one of mentions.
func assertInvalid(t *testing.T, err error, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", mentions)
	}
	if _, ok := err.(*errs.Error); !ok {
		t.Fatalf("error %v is a %T, want *errs.Error", err, err)
	}
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("error %v has code %q, want %q", err, errs.CodeOf(err), errs.Invalid)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

// assertRoundTrip checks that f renders to text that parse turns back into f.
func assertRoundTrip(t *testing.T, f Filter, parse func(string) (Filter, error)) {
	t.Helper()
	text := f.String()
	again, err := parse(text)
	if err != nil {
		t.Fatalf("canonical text %q does not parse: %v", text, err)
	}
	if !reflect.DeepEqual(again, f) {
		t.Fatalf("canonical text %q parses to %#v, want %#v", text, again, f)
	}
	if again.String() != text {
		t.Fatalf("canonical text is not stable: %q then %q", text, again.String())
	}
}
