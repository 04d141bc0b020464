package sqlstore_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// TestOverviews checks the stored coarse level of long series: compaction
// builds overviews that agree with the chunks they cover, a coarse listing
// of a series four times longer lists no more chunks, a point logged late
// among covered steps drops the overview it meets at once, and the next
// compaction builds it again. Background compaction is held, so that each
// step sees only what the test did.
func TestOverviews(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			const chunk, per = 512, 4 // points a chunk, chunks an overview
			s := b.open(t, sqlstore.Options{Synchronous: "NORMAL", ChunkPoints: chunk, CompactAfter: 4, OverviewChunks: per})
			release := s.HoldCompaction()
			defer release()
			ctx := t.Context()
			svc := tracking.NewService(s.Tracking(), tracking.Options{})
			if err := svc.Init(ctx); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 8))
			logSeries := func(n int) string {
				run, err := svc.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", StartTimeMs: 1})
				if err != nil {
					t.Fatal(err)
				}
				var batch []tracking.Metric
				for i := range n {
					batch = append(batch, tracking.Metric{Key: "m", Point: metrics.Point{Step: int64(i), TimestampMs: int64(i), Value: r.Float64()}})
					if len(batch) == 300 || i == n-1 {
						if err := svc.LogBatch(ctx, run.Info.RunID, tracking.Batch{Metrics: batch}); err != nil {
							t.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				return run.Info.RunID
			}
			// coarse checks the overviews and returns how many there are
			// and how many chunks the coarse listing lists besides.
			coarse := func(what, id string, points int) (ovs, chunks int) {
				t.Helper()
				got, err := s.CheckOverviews(ctx, id, "m")
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				err = s.Tracking().ReadSeriesCoarse(ctx, id, "m", math.MinInt64, math.MaxInt64, func(o []tracking.Overview, ss tracking.SeriesSnapshot) error {
					n := 0
					for _, o := range o {
						n += o.Count
					}
					for _, c := range ss.Chunks {
						n += c.Count
						for _, o := range o {
							if c.MinStep <= o.MaxStep && c.MaxStep >= o.MinStep {
								t.Fatalf("%s: chunk of steps %d to %d listed beside the overview of %d to %d", what, c.MinStep, c.MaxStep, o.MinStep, o.MaxStep)
							}
						}
					}
					if n != points {
						t.Fatalf("%s: the coarse listing holds %d points, want %d", what, n, points)
					}
					chunks = len(ss.Chunks)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return len(got), chunks
			}
			short, long := logSeries(20_000), logSeries(80_000)
			if err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			// Overviews cover all but the last few chunks (fewer than an
			// overview's worth, and the last one), however long the series.
			ovShort, chShort := coarse("short", short, 20_000)
			ovLong, chLong := coarse("long", long, 80_000)
			if ovShort < 20_000/(chunk*per)-1 || ovLong < 80_000/(chunk*per)-1 || chShort > per+1 || chLong > per+1 {
				t.Fatalf("coarse listings: %d overviews and %d chunks of 20,000 points, %d and %d of 80,000", ovShort, chShort, ovLong, chLong)
			}
			// A point logged late, at a step an overview covers.
			late := metrics.Point{Step: 3000, TimestampMs: 3001, Value: 5e6}
			if err := svc.LogBatch(ctx, long, tracking.Batch{Metrics: []tracking.Metric{{Key: "m", Point: late}}}); err != nil {
				t.Fatal(err)
			}
			if ov, _ := coarse("late point", long, 80_001); ov != ovLong-1 {
				t.Fatalf("after a late point: %d overviews, want %d", ov, ovLong-1)
			}
			if err := s.Compact(ctx); err != nil {
				t.Fatal(err)
			}
			if ov, ch := coarse("late point compacted", long, 80_001); ov < ovLong-1 || ch > per+2 {
				t.Fatalf("after compaction: %d overviews and %d chunks, want %d and at most %d", ov, ch, ovLong, per+2)
			}
		})
	}
}
