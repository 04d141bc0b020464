package runsearch

import (
	"math"
	"testing"

	"github.com/sextant/sextant/internal/tracking/search"
)

// TestOperatorDescriptions checks opDescs against the grammar: every
// operator of search.Ops has a description with SQL and a meaning (a
// numeric, string or presence test), and the column tests written out for
// speed agree with the meaning they are written from.
func TestOperatorDescriptions(t *testing.T) {
	vals := []float64{math.NaN(), math.Inf(-1), -1, math.Copysign(0, -1), 0, 0.5, 1, math.Inf(1)}
	for _, op := range search.Ops() {
		d, ok := opDescs[op]
		switch {
		case !ok:
			t.Errorf("operator %s of the grammar has no description in opDescs", op)
			continue
		case d.sql == nil:
			t.Errorf("operator %s has no SQL", op)
		case d.holds == nil && d.str == nil && d.present == nil:
			t.Errorf("operator %s has no meaning: no holds, str or present", op)
		}
		if d.nums == nil {
			continue
		}
		if d.holds == nil {
			t.Errorf("operator %s tests a column of numbers but has no holds", op)
			continue
		}
		for _, x := range vals[1:] { // a NaN clause never reaches a column
			test := d.nums(vals, x)
			for i, v := range vals {
				want := !math.IsNaN(v) && d.holds(cmpFloat(v, x))
				if got := test(int32(i)); got != want {
					t.Errorf("%v %s %v: column test %t, holds %t", v, op, x, got, want)
				}
			}
		}
	}
	for op := range opDescs {
		if !containsOp(search.Ops(), op) {
			t.Errorf("opDescs describes %s, which the grammar lacks", op)
		}
	}
}

// intFloatOp compares an integer with a number as the operator's
// description does on the index (intTest), for TestIntFloatCompare.
func intFloatOp(op search.Op, i int64, f float64) bool {
	d := opDescs[op]
	return d.holds != nil && d.holds(intFloatCompare(i, f))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func containsOp(ops []search.Op, op search.Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}
