package metrics

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// mlflowSampledSteps is MLflow's _get_sampled_steps_from_steps
// (mlflow/server/handlers.py) transcribed line by line, for the whole range
// of steps: Python's float is a float64, int() truncates, and the result is
// a set, which is sorted here.
func mlflowSampledSteps(allSteps []int64, maxResults int) []int64 {
	numSteps := len(allSteps)
	if numSteps <= maxResults {
		return slices.Clone(allSteps)
	}
	interval := float64(numSteps) / float64(maxResults)
	set := map[int64]bool{}
	for i := range maxResults {
		idx := int(float64(i) * interval)
		if idx < numSteps {
			set[allSteps[idx]] = true
		}
	}
	set[allSteps[numSteps-1]] = true
	var out []int64
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// seqSteps returns n steps 0, stride, 2*stride, ...
func seqSteps(n int, stride int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i) * stride
	}
	return s
}

func TestSampleSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		steps []int64
		max   int
		want  []int64
	}{
		"Empty":        {steps: nil, max: 10, want: nil},
		"ZeroMax":      {steps: seqSteps(5, 1), max: 0, want: nil},
		"AllFit":       {steps: seqSteps(5, 1), max: 5, want: seqSteps(5, 1)},
		"FewerThanMax": {steps: []int64{3, 9}, max: 100, want: []int64{3, 9}},
		"OneOverMax":   {steps: seqSteps(6, 1), max: 5, want: []int64{0, 1, 2, 3, 4, 5}},
		// n/max = 2.5: indexes 0, 2, 5, 7 and the last, 9.
		"LastAlwaysKept": {steps: seqSteps(10, 10), max: 4, want: []int64{0, 20, 50, 70, 90}},
		"MaxOne":         {steps: seqSteps(10, 1), max: 1, want: []int64{0, 9}},
		// 11 * (30/22) is 14.999999999999998 in float64, so MLflow picks
		// index 14 where exact arithmetic would give 15.
		"FloatLikeMLflow": {
			steps: seqSteps(30, 1), max: 22,
			want: []int64{0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 19, 20, 21, 23, 24, 25, 27, 28, 29},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := SampleSteps(tc.steps, tc.max)
			if !slices.Equal(got, tc.want) {
				t.Errorf("SampleSteps(%d steps, %d) = %v, want %v", len(tc.steps), tc.max, got, tc.want)
			}
		})
	}
}

func TestSampleStepsMatchesMLflow(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	check := func(steps []int64, max int) {
		t.Helper()
		got := SampleSteps(steps, max)
		want := mlflowSampledSteps(steps, max)
		if !slices.Equal(got, want) {
			t.Fatalf("SampleSteps(%d steps, %d): got %v, want %v", len(steps), max, got, want)
		}
		if len(steps) > max && len(got) != max+1 {
			t.Fatalf("SampleSteps(%d steps, %d) returned %d steps, want %d", len(steps), max, len(got), max+1)
		}
		if len(got) > 0 && got[len(got)-1] != steps[len(steps)-1] {
			t.Fatalf("SampleSteps(%d steps, %d) lost the last step", len(steps), max)
		}
	}
	for n := 1; n <= 120; n++ {
		for max := 1; max <= n+2; max++ {
			check(seqSteps(n, 3), max)
		}
	}
	for range 100 {
		n := 1 + r.IntN(100_000)
		check(seqSteps(n, 1+r.Int64N(100)), 1+r.IntN(2000))
	}
	if testing.Short() {
		return
	}
	steps := seqSteps(10_000_000, 1)
	check(steps, 1000)
	check(steps, 999_983)
}

func TestSampleStepsDoesNotAlias(t *testing.T) {
	steps := seqSteps(5, 1)
	got := SampleSteps(steps, 10)
	got[0] = 99
	if steps[0] != 0 {
		t.Fatal("SampleSteps returned a slice sharing the input's memory")
	}
}

func TestUnionSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		dst   []int64
		lists [][]int64
		want  []int64
	}{
		"None":          {},
		"AllEmpty":      {lists: [][]int64{nil, {}}},
		"One":           {lists: [][]int64{{1, 1, 2, 5}}, want: []int64{1, 2, 5}},
		"Two":           {lists: [][]int64{{1, 3, 5}, {2, 3, 4, 6}}, want: []int64{1, 2, 3, 4, 5, 6}},
		"Disjoint":      {lists: [][]int64{{10, 11}, {1, 2}, {5}}, want: []int64{1, 2, 5, 10, 11}},
		"Extremes":      {lists: [][]int64{{math.MinInt64, 0}, {0, math.MaxInt64}, {math.MaxInt64}}, want: []int64{math.MinInt64, 0, math.MaxInt64}},
		"KeepsDst":      {dst: []int64{7}, lists: [][]int64{{1}, {1}}, want: []int64{7, 1}},
		"ManyIdentical": {lists: [][]int64{{1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}}, want: []int64{1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			got := UnionSteps(tc.dst, tc.lists...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("UnionSteps = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnionStepsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for range 300 {
		lists := make([][]int64, r.IntN(12))
		var all []int64
		for i := range lists {
			l := make([]int64, r.IntN(40))
			for j := range l {
				l[j] = r.Int64N(60) - 10
			}
			slices.Sort(l)
			lists[i] = l
			all = append(all, l...)
		}
		slices.Sort(all)
		want := slices.Compact(all)
		if got := UnionSteps(nil, lists...); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("UnionSteps(%v) = %v, want %v", lists, got, want)
		}
	}
}

// refMinMaxBuckets is MinMaxBuckets written the slow, obvious way, with
// exact big-integer bucket numbers.
func refMinMaxBuckets(pts []Point, buckets int) []Point {
	if len(pts) == 0 {
		return nil
	}
	buckets = max(buckets, 1)
	lo := big.NewInt(pts[0].Step)
	span := new(big.Int).Sub(big.NewInt(pts[len(pts)-1].Step), lo)
	span.Add(span, big.NewInt(1))
	bucketOf := func(p Point) int64 {
		d := new(big.Int).Sub(big.NewInt(p.Step), lo)
		d.Mul(d, big.NewInt(int64(buckets)))
		return d.Quo(d, span).Int64()
	}
	keep := map[int]bool{0: true, len(pts) - 1: true}
	for i := 0; i < len(pts); {
		b := bucketOf(pts[i])
		low, high, nan := -1, -1, -1
		j := i
		for ; j < len(pts) && bucketOf(pts[j]) == b; j++ {
			v := pts[j].Value
			switch {
			case math.IsNaN(v):
				if nan < 0 {
					nan = j
				}
			default:
				if low < 0 || Compare(Point{Value: v}, Point{Value: pts[low].Value}) < 0 {
					low = j
				}
				if high < 0 || Compare(Point{Value: v}, Point{Value: pts[high].Value}) > 0 {
					high = j
				}
			}
		}
		for _, k := range []int{low, high, nan} {
			if k >= 0 {
				keep[k] = true
			}
		}
		i = j
	}
	var out []Point
	for i, p := range pts {
		if keep[i] && (len(out) == 0 || !Equal(out[len(out)-1], p)) {
			out = append(out, p)
		}
	}
	return out
}

func TestMinMaxBuckets(t *testing.T) {
	nan := math.NaN()
	for name, tc := range map[string]struct {
		pts     []Point
		buckets int
		want    []Point
	}{
		"Empty": {buckets: 3},
		"One":   {pts: []Point{{5, 0, 1}}, buckets: 3, want: []Point{{5, 0, 1}}},
		"FewPointsKept": {
			pts:     []Point{{0, 0, 1}, {1, 0, 2}, {2, 0, 3}},
			buckets: 10,
			want:    []Point{{0, 0, 1}, {1, 0, 2}, {2, 0, 3}},
		},
		"MinAndMaxPerBucket": {
			// Steps 0..7 in 2 buckets of 4 steps.
			pts: []Point{
				{0, 0, 5}, {1, 0, 9}, {2, 0, 1}, {3, 0, 4},
				{4, 0, 4}, {5, 0, 0}, {6, 0, 8}, {7, 0, 6},
			},
			buckets: 2,
			want:    []Point{{0, 0, 5}, {1, 0, 9}, {2, 0, 1}, {5, 0, 0}, {6, 0, 8}, {7, 0, 6}},
		},
		"NaNKept": {
			pts:     []Point{{0, 0, 1}, {1, 0, nan}, {2, 0, 2}, {3, 0, nan}, {4, 0, 1.5}, {9, 0, 3}},
			buckets: 1,
			want:    []Point{{0, 0, 1}, {1, 0, nan}, {9, 0, 3}},
		},
		"AllNaN": {
			pts:     []Point{{0, 0, nan}, {1, 0, nan}, {2, 0, nan}},
			buckets: 1,
			want:    []Point{{0, 0, nan}, {2, 0, nan}},
		},
		"ZeroBucketsIsOne": {
			pts:     []Point{{0, 0, 1}, {1, 0, 0}, {2, 0, 5}, {3, 0, 2}},
			buckets: 0,
			want:    []Point{{0, 0, 1}, {1, 0, 0}, {2, 0, 5}, {3, 0, 2}},
		},
		"DuplicatePointsOnce": {
			pts:     []Point{{0, 0, 1}, {0, 0, 1}, {0, 0, 1}},
			buckets: 4,
			want:    []Point{{0, 0, 1}},
		},
		"FullInt64Range": {
			pts:     []Point{{math.MinInt64, 0, 1}, {-1, 0, 7}, {0, 0, 3}, {math.MaxInt64, 0, 2}},
			buckets: 2,
			want:    []Point{{math.MinInt64, 0, 1}, {-1, 0, 7}, {0, 0, 3}, {math.MaxInt64, 0, 2}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := MinMaxBuckets(nil, tc.pts, tc.buckets)
			if !pointsEqual(got, tc.want) {
				t.Errorf("MinMaxBuckets = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMinMaxBucketsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	values := []float64{math.NaN(), negZ, 0, 1, -1, 2, posInf, negInf}
	for range 500 {
		pts := make([]Point, r.IntN(200))
		scale := int64(1) << r.IntN(63)
		for i := range pts {
			pts[i] = Point{Step: r.Int64N(scale) - scale/2, TimestampMs: r.Int64N(3), Value: values[r.IntN(len(values))]}
			if r.IntN(3) == 0 {
				pts[i].Value = r.NormFloat64()
			}
		}
		SortPoints(pts)
		buckets := r.IntN(20)
		got := MinMaxBuckets(nil, pts, buckets)
		want := refMinMaxBuckets(pts, buckets)
		if !pointsEqual(got, want) {
			t.Fatalf("MinMaxBuckets(%v, %d) =\n%v\nwant\n%v", pts, buckets, got, want)
		}
		for i := 1; i < len(got); i++ {
			if Compare(got[i-1], got[i]) >= 0 {
				t.Fatalf("result not strictly sorted at %d", i)
			}
		}
		if len(got) > 3*max(buckets, 1)+2 {
			t.Fatalf("%d points from %d buckets", len(got), buckets)
		}
	}
}

func TestMinMaxBucketsSpike(t *testing.T) {
	const n = 1_000_000
	r := rand.New(rand.NewPCG(14, 15))
	for name, spike := range map[string]float64{"High": 1e6, "Low": -1e6, "NaN": math.NaN()} {
		t.Run(name, func(t *testing.T) {
			pts := make([]Point, n)
			for i := range pts {
				pts[i] = Point{Step: int64(i), TimestampMs: startMs + int64(i), Value: r.Float64()}
			}
			at := 123_457
			pts[at].Value = spike
			got := MinMaxBuckets(nil, pts, 100)
			if len(got) > 3*100+2 {
				t.Fatalf("%d points kept", len(got))
			}
			if !slices.ContainsFunc(got, func(p Point) bool { return Equal(p, pts[at]) }) {
				t.Fatalf("spike at step %d lost", at)
			}
			if !Equal(got[0], pts[0]) || !Equal(got[len(got)-1], pts[n-1]) {
				t.Fatal("first or last point lost")
			}
		})
	}
}

func TestMinMaxBucketsUnsortedNoPanic(t *testing.T) {
	pts := []Point{{5, 0, 1}, {-3, 0, 2}, {math.MaxInt64, 0, 3}, {0, 0, 4}, {math.MinInt64, 0, 5}, {1, 0, 6}}
	for b := range 8 {
		MinMaxBuckets(nil, pts, b)
	}
}
