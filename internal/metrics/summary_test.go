package metrics

import (
	"math"
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	for name, tc := range map[string]struct {
		pts  []Point
		want Summary
	}{
		"Empty": {},
		"One": {
			pts: []Point{{3, 10, 2}},
			want: Summary{Count: 1, MinStep: 3, MaxStep: 3, MinTimestampMs: 10, MaxTimestampMs: 10,
				MinValue: 2, MaxValue: 2, First: Point{3, 10, 2}, Last: Point{3, 10, 2},
				Low: Point{3, 10, 2}, High: Point{3, 10, 2}},
		},
		"TimestampsNotMonotonic": {
			pts: []Point{{0, 50, 1}, {1, 20, 3}, {1, 90, -1}, {2, 30, 3}},
			want: Summary{Count: 4, MinStep: 0, MaxStep: 2, MinTimestampMs: 20, MaxTimestampMs: 90,
				MinValue: -1, MaxValue: 3, First: Point{0, 50, 1}, Last: Point{2, 30, 3},
				Low: Point{1, 90, -1}, High: Point{1, 20, 3}},
		},
		"NaNIgnored": {
			pts: []Point{{0, 0, nan}, {1, 0, 5}, {2, 0, nan}, {3, 0, posInf}},
			want: Summary{Count: 4, MinStep: 0, MaxStep: 3, MinValue: 5, MaxValue: posInf,
				First: Point{0, 0, nan}, Last: Point{3, 0, posInf}, Low: Point{1, 0, 5}, High: Point{3, 0, posInf}},
		},
		"AllNaN": {
			pts: []Point{{0, 0, nan}, {1, 0, nan}},
			want: Summary{Count: 2, MinStep: 0, MaxStep: 1, MinValue: nan, MaxValue: nan,
				First: Point{0, 0, nan}, Last: Point{1, 0, nan}, Low: Point{0, 0, nan}, High: Point{0, 0, nan}},
		},
		"SignedZeros": {
			pts: []Point{{0, 0, 0}, {1, 0, negZ}},
			want: Summary{Count: 2, MinStep: 0, MaxStep: 1, MinValue: negZ, MaxValue: 0,
				First: Point{0, 0, 0}, Last: Point{1, 0, negZ}, Low: Point{1, 0, negZ}, High: Point{0, 0, 0}},
		},
		"Infinities": {
			pts: []Point{{0, 0, negInf}, {1, 0, posInf}, {2, 0, negInf}},
			want: Summary{Count: 3, MinStep: 0, MaxStep: 2, MinValue: negInf, MaxValue: posInf,
				First: Point{0, 0, negInf}, Last: Point{2, 0, negInf}, Low: Point{0, 0, negInf}, High: Point{1, 0, posInf}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Summarize(tc.pts)
			if !summaryEqual(got, tc.want) {
				t.Errorf("Summarize =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// summaryEqual compares summaries with Equal semantics for values, so that
// NaN equals NaN and -0 differs from +0.
func summaryEqual(a, b Summary) bool {
	v := func(x float64) Point { return Point{Value: x} }
	return a.Count == b.Count && a.MinStep == b.MinStep && a.MaxStep == b.MaxStep &&
		a.MinTimestampMs == b.MinTimestampMs && a.MaxTimestampMs == b.MaxTimestampMs &&
		Equal(v(a.MinValue), v(b.MinValue)) && Equal(v(a.MaxValue), v(b.MaxValue)) &&
		Equal(a.First, b.First) && Equal(a.Last, b.Last) && Equal(a.Low, b.Low) && Equal(a.High, b.High)
}

func TestSketch(t *testing.T) {
	pts := genSeries("float64", 4096, 9)
	pts[1000].Value = 1e9  // a spike
	pts[3000].Value = -1e9 // a dip
	pts[2000].Value = math.NaN()
	sk := Sketch(nil, pts, 16)
	if len(sk) > 3*16+2 || len(sk) < 16 {
		t.Fatalf("%d points", len(sk))
	}
	if !slices.IsSortedFunc(sk, Compare) {
		t.Fatal("not sorted")
	}
	for _, want := range []int{0, 1000, 2000, 3000, 4095} {
		if !slices.ContainsFunc(sk, func(p Point) bool { return Equal(p, pts[want]) }) {
			t.Fatalf("point %d missing", want)
		}
	}
	// Every point of a sketch is a point of the series, and each block's
	// extremes are there.
	for b := range 16 {
		block := pts[b*256 : (b+1)*256]
		s := Summarize(block)
		for _, p := range []Point{s.Low, s.High} {
			if !slices.ContainsFunc(sk, func(q Point) bool { return Equal(p, q) }) {
				t.Fatalf("block %d: extreme %+v missing", b, p)
			}
		}
	}
	if got := Sketch(nil, pts[:3], 16); len(got) != 3 {
		t.Fatalf("sketch of 3 points: %d points", len(got))
	}
	if got := Sketch(nil, nil, 16); len(got) != 0 {
		t.Fatal("sketch of nothing")
	}
}
