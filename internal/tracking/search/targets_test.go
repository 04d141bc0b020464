package search

import (
	"reflect"
	"testing"
)

// TestRunFilterTargets checks that every operator RunFilterTargets lists
// for a target parses there, with a value of the kind ValueKind says, into
// the comparison that renders it: the tables a store's tests generate
// clauses from agree with the parser.
func TestRunFilterTargets(t *testing.T) {
	seen := map[Op]bool{}
	for _, tg := range RunFilterTargets() {
		key := tg.Key
		if key == "" {
			key = "k"
		}
		for _, op := range tg.Ops {
			seen[op] = true
			c := Comparison{Entity: tg.Entity, Key: key, Op: op}
			switch tg.ValueKind(op) {
			case Number:
				c.Value = num(0.5)
			case String:
				c.Value = str("v")
			case List:
				c.Value = list("a", "b")
			}
			f, err := ParseRunFilter(c.String())
			if err != nil {
				t.Errorf("%s: %v", c, err)
				continue
			}
			if want := filter(c); !reflect.DeepEqual(f, want) {
				t.Errorf("%s: parsed %+v, want %+v", c, f, want)
			}
		}
	}
	for _, op := range Ops() {
		if !seen[op] {
			t.Errorf("no runs filter takes operator %s", op)
		}
	}
}
