package metrics

import (
	"math"
	"testing"
)

// negativeStepSeries are series with negative steps, as MLflow clients log
// them (a warm-up before step 0, a countdown, steps far below zero); the
// chunk format codes steps as wrapping 64-bit deltas, so they need no
// format change.
func negativeStepSeries() map[string][]Point {
	series := map[string][]Point{}
	var warmup, countdown, far, sparse []Point
	for i := range 300 {
		warmup = append(warmup, Point{Step: int64(i) - 100, TimestampMs: 1_700_000_000_000 + int64(i)*7, Value: 1 / float64(i+1)})
		countdown = append(countdown, Point{Step: -300 + int64(i), TimestampMs: 1_700_000_000_000 + int64(i), Value: float64(float32(i) / 3)})
		far = append(far, Point{Step: -(1<<53 - 1) + int64(i)*1000, TimestampMs: 5, Value: float64(i)})
		sparse = append(sparse, Point{Step: -int64(300-i) * int64(300-i) * 1009, TimestampMs: 9, Value: math.Sin(float64(i))})
	}
	series["warmup"], series["countdown"], series["far"], series["sparse"] = warmup, countdown, far, sparse
	series["one"] = []Point{{Step: -1, TimestampMs: 1, Value: 2}}
	series["repeated"] = []Point{{Step: -2, TimestampMs: 1, Value: 1}, {Step: -2, TimestampMs: 2, Value: 1}, {Step: -1, TimestampMs: 0, Value: 3}, {Step: 0, TimestampMs: 0, Value: 3}}
	return series
}

func TestChunkNegativeSteps(t *testing.T) {
	for name, pts := range negativeStepSeries() {
		t.Run(name, func(t *testing.T) {
			SortPoints(pts)
			chunk := checkRoundTrip(t, pts)
			s := Summarize(pts)
			if s.MinStep != pts[0].Step || s.MaxStep != pts[len(pts)-1].Step || s.Count != len(pts) {
				t.Fatalf("Summarize: steps %d..%d count %d, want %d..%d count %d", s.MinStep, s.MaxStep, s.Count, pts[0].Step, pts[len(pts)-1].Step, len(pts))
			}
			// An iterator resumed half way gives the second half.
			var it ChunkIter
			if err := it.Reset(chunk); err != nil {
				t.Fatal(err)
			}
			half, err := it.Next(nil, len(pts)/2)
			if err != nil {
				t.Fatal(err)
			}
			mark := it.AppendMark(nil)
			var again ChunkIter
			if err := again.Resume(chunk, mark); err != nil {
				t.Fatal(err)
			}
			rest, err := again.Next(nil, len(pts))
			if err != nil {
				t.Fatal(err)
			}
			if len(half)+len(rest) != len(pts) || (len(rest) > 0 && rest[0].Step != pts[len(half)].Step) {
				t.Fatalf("resumed: %d + %d points, want %d", len(half), len(rest), len(pts))
			}
			// Downsampling keeps the first and last (most negative, last) steps.
			kept := MinMaxBuckets(nil, pts, 8)
			if kept[0].Step != pts[0].Step || kept[len(kept)-1].Step != pts[len(pts)-1].Step {
				t.Fatalf("MinMaxBuckets: steps %d..%d, want %d..%d", kept[0].Step, kept[len(kept)-1].Step, pts[0].Step, pts[len(pts)-1].Step)
			}
			steps := make([]int64, len(pts))
			for i, p := range pts {
				steps[i] = p.Step
			}
			steps = UnionSteps(nil, steps)
			if got := SampleSteps(steps, 10); got[len(got)-1] != steps[len(steps)-1] || got[0] != steps[0] {
				t.Fatalf("SampleSteps: %v, want it to start at %d and end at %d", got, steps[0], steps[len(steps)-1])
			}
		})
	}
}
