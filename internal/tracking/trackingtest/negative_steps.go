package trackingtest

import (
	"math"
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// testNegativeSteps checks that negative steps, which MLflow accepts (a
// warm-up logged before step 0, for one), are stored and read back like
// any other: history and its pages, the latest value, sampled reads with a
// step range, compaction, and a run search on the latest value.
func testNegativeSteps(t *testing.T, e *env) {
	id := e.mustRun("0", "negative").Info.RunID
	var want []metrics.Point
	// Steps -1500 .. 1499, logged in batches out of order (the later steps
	// first), so that chunks overlap and the store merges them.
	const lo, n = -1500, 3000
	for _, start := range []int{1500, 0, 2500, 500, 1000, 2000} {
		var b []tracking.Metric
		for i := start; i < start+500; i++ {
			step := int64(lo + i)
			m := metric("m", step, 1_700_000_000_000+int64(i), math.Sin(float64(step)/100))
			b = append(b, m)
		}
		e.mustLog(id, tracking.Batch{Metrics: b})
	}
	for i := range n {
		step := int64(lo + i)
		want = append(want, metrics.Point{Step: step, TimestampMs: 1_700_000_000_000 + int64(i), Value: math.Sin(float64(step) / 100)})
	}
	check := func(what string) {
		t.Helper()
		for _, size := range []int{0, 7, 1000} {
			h := e.history(id, "m", size)
			if len(h) != len(want) {
				t.Fatalf("%s: page size %d: %d points, want %d", what, size, len(h), len(want))
			}
			for i, p := range h {
				if !metrics.Equal(p.Point, want[i]) {
					t.Fatalf("%s: page size %d: point %d = %+v, want %+v", what, size, i, p.Point, want[i])
				}
			}
		}
		// Sampled reads: each end kept, a step range below zero exact.
		series, err := e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", MaxResults: 50})
		if err != nil {
			t.Fatal(err)
		}
		pts := series[0].Points
		if len(pts) < 50 || pts[0].Step != lo || pts[len(pts)-1].Step != lo+n-1 {
			t.Fatalf("%s: sampled: %d points, steps %d..%d", what, len(pts), pts[0].Step, pts[len(pts)-1].Step)
		}
		from, to := int64(-1200), int64(-1001)
		series, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", StartStep: &from, EndStep: &to, MaxResults: 1000})
		if err != nil {
			t.Fatal(err)
		}
		pts = series[0].Points
		if len(pts) != 200 || pts[0].Step != from || pts[len(pts)-1].Step != to {
			t.Fatalf("%s: range %d..%d: %d points", what, from, to, len(pts))
		}
		for _, mode := range []tracking.SampleMode{tracking.SampleSteps, tracking.SampleMinMax} {
			series, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", StartStep: &from, EndStep: &to, MaxResults: 10, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			pts = series[0].Points
			if len(pts) == 0 || pts[0].Step != from || pts[len(pts)-1].Step != to ||
				!slices.IsSortedFunc(pts, func(x, y tracking.HistoryPoint) int { return metrics.Compare(x.Point, y.Point) }) {
				t.Fatalf("%s: mode %d: range %d..%d sampled to %d points", what, mode, from, to, len(pts))
			}
		}
	}
	check("logged")
	if c, ok := e.store.(Compactor); ok {
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		check("compacted")
	}

	// A run whose steps are all negative: its latest value is at the
	// highest (least negative) step.
	neg := e.mustRun("0", "all-negative").Info.RunID
	e.mustLog(neg, tracking.Batch{Metrics: []tracking.Metric{metric("loss", -3, 10, 3), metric("loss", -1, 5, -7), metric("loss", -2, 20, 2)}})
	m := metricOf(e.mustGetRun(neg).Data.Metrics, "loss")
	if m == nil || m.Step != -1 || m.Value != -7 {
		t.Fatalf("latest of negative steps: %+v", m)
	}
	page, err := e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{"0"}, Filter: "metrics.loss < 0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].Info.RunID != neg {
		t.Fatalf("search metrics.loss < 0: %d runs", len(page.Runs))
	}

	// The range is symmetric: -(MaxStep+1) is refused like MaxStep+1.
	lim := e.svc.Limits()
	for _, step := range []int64{-lim.MaxStep - 1, lim.MaxStep + 1, math.MinInt64} {
		err := e.svc.LogBatch(e.ctx, neg, tracking.Batch{Metrics: []tracking.Metric{metric("edge", step, 1, 1)}})
		wantCode(t, err, errs.Invalid, "outside the accepted range")
	}
	e.mustLog(neg, tracking.Batch{Metrics: []tracking.Metric{metric("edge", -lim.MaxStep, 1, 1), metric("edge", lim.MaxStep, 1, 2)}})
	if h := e.history(neg, "edge", 0); len(h) != 2 || h[0].Step != -lim.MaxStep || h[1].Step != lim.MaxStep {
		t.Fatalf("edge steps: %+v", h)
	}
}
