package sqlstore_test

import (
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// TestResentPointsOfOneStep logs a series the way log_metric without a
// step does (one point a request, every one at step 0, each its own
// chunk) beside a chunk of several steps that starts at 0, then sends
// every point again, alone and together. The run may store its distinct
// points and no more, so a re-sent point taken for a new one fails its
// request. Compaction is held: merged, the chunks of one step would be
// found as chunks of several.
func TestResentPointsOfOneStep(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			const alone, stepped = 40, 10
			limits := tracking.DefaultLimits()
			limits.MetricStepsPerRun = alone + stepped
			s := b.open(t, sqlstore.Options{Limits: limits, Synchronous: "NORMAL", ChunkPoints: 512, CompactAfter: 4})
			release := s.HoldCompaction()
			defer release()
			ctx := t.Context()
			svc := tracking.NewService(s.Tracking(), tracking.Options{Limits: limits})
			if err := svc.Init(ctx); err != nil {
				t.Fatal(err)
			}
			run, err := svc.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", StartTimeMs: 1})
			if err != nil {
				t.Fatal(err)
			}
			id := run.Info.RunID
			m := func(step, ts int64) tracking.Metric {
				return tracking.Metric{Key: "loss", Point: metrics.Point{Step: step, TimestampMs: ts, Value: float64(ts) / 4}}
			}
			var several, each []tracking.Metric
			for i := range int64(stepped) {
				several = append(several, m(i, 100+i))
			}
			for i := range int64(alone) {
				each = append(each, m(0, 1000+i))
			}
			log := func(what string, ms ...tracking.Metric) {
				t.Helper()
				if err := svc.LogBatch(ctx, id, tracking.Batch{Metrics: ms}); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			log("steps 0-9", several...)
			for _, p := range each {
				log("step 0 alone", p)
			}
			for _, p := range each {
				log("step 0 alone, again", p)
			}
			log("steps 0-9 again", several...)
			log("everything again", append(append([]tracking.Metric{}, each...), several...)...)
			log("some of both again", each[3], each[alone-1], several[0], several[5])
			h, err := svc.MetricHistory(ctx, id, "loss", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Points) != alone+stepped {
				t.Errorf("history: %d points, want %d", len(h.Points), alone+stepped)
			}
		})
	}
}
