package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	posInf = math.Inf(1)
	negInf = math.Inf(-1)
	negZ   = math.Copysign(0, -1)
)

// otherNaN is a NaN with a payload different from math.NaN's.
var otherNaN = math.Float64frombits(0xFFF8000000000abc)

func TestCompare(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b Point
		want int
	}{
		"StepFirst":           {Point{1, 9, 9}, Point{2, 0, 0}, -1},
		"ThenTimestamp":       {Point{1, 5, 9}, Point{1, 6, 0}, -1},
		"ThenValue":           {Point{1, 5, 1}, Point{1, 5, 2}, -1},
		"Same":                {Point{1, 5, 2}, Point{1, 5, 2}, 0},
		"Greater":             {Point{3, 5, 2}, Point{1, 5, 2}, +1},
		"NegInfBelowFinite":   {Point{0, 0, negInf}, Point{0, 0, -math.MaxFloat64}, -1},
		"FiniteBelowPosInf":   {Point{0, 0, math.MaxFloat64}, Point{0, 0, posInf}, -1},
		"PosInfBelowNaN":      {Point{0, 0, posInf}, Point{0, 0, math.NaN()}, -1},
		"NaNAboveNegative":    {Point{0, 0, otherNaN}, Point{0, 0, -1}, +1},
		"NaNsEqual":           {Point{0, 0, otherNaN}, Point{0, 0, math.NaN()}, 0},
		"NegZeroBelowZero":    {Point{0, 0, negZ}, Point{0, 0, 0}, -1},
		"NegativesOrdered":    {Point{0, 0, -2}, Point{0, 0, -1}, -1},
		"SmallestSubnormal":   {Point{0, 0, 0}, Point{0, 0, math.SmallestNonzeroFloat64}, -1},
		"NegSubnormalBelowNZ": {Point{0, 0, -math.SmallestNonzeroFloat64}, Point{0, 0, negZ}, -1},
		"MinMaxInt64":         {Point{math.MinInt64, 0, 0}, Point{math.MaxInt64, 0, 0}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Compare(tc.a, tc.b); got != tc.want {
				t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := Compare(tc.b, tc.a); got != -tc.want {
				t.Errorf("Compare(%v, %v) = %d, want %d", tc.b, tc.a, got, -tc.want)
			}
			if got := Equal(tc.a, tc.b); got != (tc.want == 0) {
				t.Errorf("Equal(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want == 0)
			}
		})
	}
}

// randomPoints returns n points drawn from a small space, so that equal
// steps, timestamps and values are common, with special values mixed in.
func randomPoints(r *rand.Rand, n int) []Point {
	values := []float64{0, negZ, 1, -1, 2.5, posInf, negInf, math.NaN(), otherNaN}
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{
			Step:        r.Int64N(8),
			TimestampMs: r.Int64N(4),
			Value:       values[r.IntN(len(values))],
		}
	}
	return pts
}

func TestSortPointsDedupSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		pts := randomPoints(r, r.IntN(50))
		SortPoints(pts)
		for i := 1; i < len(pts); i++ {
			if Compare(pts[i-1], pts[i]) > 0 {
				t.Fatalf("not sorted at %d: %v, %v", i, pts[i-1], pts[i])
			}
		}
		n := len(pts)
		got := DedupSorted(slices.Clone(pts))
		for i := 1; i < len(got); i++ {
			if Compare(got[i-1], got[i]) >= 0 {
				t.Fatalf("not strictly increasing at %d: %v, %v", i, got[i-1], got[i])
			}
		}
		// Every input point survives as some output point.
		for _, p := range pts {
			if !slices.ContainsFunc(got, func(q Point) bool { return Equal(p, q) }) {
				t.Fatalf("point %v lost by DedupSorted", p)
			}
		}
		if len(got) > n {
			t.Fatalf("DedupSorted grew %d to %d", n, len(got))
		}
	}
}

func TestMergeSorted(t *testing.T) {
	for name, tc := range map[string]struct {
		dst, a, b, want []Point
	}{
		"BothEmpty": {},
		"OneEmpty": {
			a:    []Point{{1, 0, 1}, {1, 0, 1}, {2, 0, 1}},
			want: []Point{{1, 0, 1}, {2, 0, 1}},
		},
		"Interleaved": {
			a:    []Point{{1, 0, 1}, {3, 0, 1}},
			b:    []Point{{2, 0, 1}, {4, 0, 1}},
			want: []Point{{1, 0, 1}, {2, 0, 1}, {3, 0, 1}, {4, 0, 1}},
		},
		"DuplicatesAcross": {
			a:    []Point{{1, 0, 1}, {2, 0, math.NaN()}},
			b:    []Point{{1, 0, 1}, {2, 0, otherNaN}},
			want: []Point{{1, 0, 1}, {2, 0, math.NaN()}},
		},
		"SameStepDifferentValues": {
			a:    []Point{{1, 0, negZ}, {1, 0, 5}},
			b:    []Point{{1, 0, 0}},
			want: []Point{{1, 0, negZ}, {1, 0, 0}, {1, 0, 5}},
		},
		"KeepsDst": {
			dst:  []Point{{9, 9, 9}},
			a:    []Point{{1, 0, 1}},
			b:    []Point{{1, 0, 1}},
			want: []Point{{9, 9, 9}, {1, 0, 1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := MergeSorted(tc.dst, tc.a, tc.b)
			if !pointsEqual(got, tc.want) {
				t.Errorf("MergeSorted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMergeSortedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		a, b := randomPoints(r, r.IntN(30)), randomPoints(r, r.IntN(30))
		SortPoints(a)
		SortPoints(b)
		want := append(slices.Clone(a), b...)
		SortPoints(want)
		want = DedupSorted(want)
		got := MergeSorted(nil, a, b)
		if !pointsEqual(got, want) {
			t.Fatalf("MergeSorted(%v, %v) = %v, want %v", a, b, got, want)
		}
	}
}

// pointsEqual reports whether a and b hold Equal points in the same order.
func pointsEqual(a, b []Point) bool {
	return slices.EqualFunc(a, b, Equal)
}
