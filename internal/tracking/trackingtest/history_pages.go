package trackingtest

import (
	"encoding/base64"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// cursorTokenLen is the length of a history page token that holds the
// cursor alone ("h2" and 24 bytes in base64): a longer one resumes inside
// a chunk.
const cursorTokenLen = 2 + 32

// logRandom logs n points of key with steps from, from+1, ... in
// 1000-point batches: timestamps 7 ms apart with jitter, random values.
func (e *env) logRandom(runID, key string, from, n int, seed uint64) []metrics.Point {
	e.t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var pts []metrics.Point
	var batch []tracking.Metric
	for i := range n {
		st := int64(from + i)
		p := metrics.Point{Step: st, TimestampMs: 1_700_000_000_000 + st*7 + r.Int64N(3), Value: r.Float64()}
		pts = append(pts, p)
		batch = append(batch, tracking.Metric{Key: key, Point: p})
		if len(batch) == 1000 || i == n-1 {
			e.mustLog(runID, tracking.Batch{Metrics: batch})
			batch = batch[:0]
		}
	}
	return pts
}

// page reads one history page or stops the test.
func (e *env) page(runID, key string, max int, tok string) tracking.HistoryPage {
	e.t.Helper()
	p, err := e.svc.MetricHistory(e.ctx, runID, key, max, tok)
	if err != nil {
		e.t.Fatalf("history page of %d after %q: %v", max, tok, err)
	}
	return p
}

// rest reads every page after tok, pageSize points at a time.
func (e *env) rest(runID, key string, pageSize int, tok string) []metrics.Point {
	e.t.Helper()
	var out []metrics.Point
	for {
		p := e.page(runID, key, pageSize, tok)
		for _, hp := range p.Points {
			out = append(out, hp.Point)
		}
		if p.NextPageToken == "" {
			return out
		}
		tok = p.NextPageToken
	}
}

func plain(pts []tracking.HistoryPoint) []metrics.Point {
	out := make([]metrics.Point, len(pts))
	for i, p := range pts {
		out[i] = p.Point
	}
	return out
}

func samePoints(a, b []metrics.Point) bool {
	return slices.EqualFunc(a, b, metrics.Equal)
}

// testHistoryPagesInsideChunks checks page tokens that end inside a
// compacted chunk: a page may end after any point of a chunk and the next
// one resumes right after it, also when points were logged, chunks were
// compacted or the token was damaged in between.
func testHistoryPagesInsideChunks(t *testing.T, e *env) {
	c, ok := e.store.(Compactor)
	if !ok {
		t.Skip("store does not compact on demand")
	}
	id := e.mustRun("0", "pages").Info.RunID
	want := e.logRandom(id, "loss", 0, 5000, 1)
	if err := c.Compact(e.ctx); err != nil {
		t.Fatal(err)
	}
	chunks, err := e.store.SeriesChunks(e.ctx, id, "loss", math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 2 || chunks[0].Count < 2 {
		t.Fatalf("want several compacted chunks, got %d", len(chunks))
	}
	first := chunks[0].Count

	t.Run("EveryOffset", func(t *testing.T) {
		// A first page ending after each point of the first chunk, and at
		// its end; then a page that crosses into the next chunk.
		for off := 1; off <= first+1; off++ {
			p1 := e.page(id, "loss", off, "")
			if !samePoints(plain(p1.Points), want[:off]) {
				t.Fatalf("first page of %d differs", off)
			}
			if off < first && len(p1.NextPageToken) <= cursorTokenLen {
				t.Fatalf("page of %d ends inside a chunk, but its token %q holds no position in it", off, p1.NextPageToken)
			}
			p2 := e.page(id, "loss", first, p1.NextPageToken)
			if !samePoints(plain(p2.Points), want[off:off+first]) {
				t.Fatalf("page after %d points differs: %d points", off, len(p2.Points))
			}
		}
	})

	t.Run("PointsAddedBetweenPages", func(t *testing.T) {
		run := e.mustRun("0", "pages-added").Info.RunID
		base := e.logRandom(run, "m", 0, 3000, 2)
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		p1 := e.page(run, "m", 300, "")
		if len(p1.NextPageToken) <= cursorTokenLen {
			t.Fatalf("token %q holds no position in the chunk", p1.NextPageToken)
		}
		cur := p1.Points[len(p1.Points)-1].Point
		added := []metrics.Point{
			{Step: 5000, TimestampMs: 1, Value: 42},      // after everything
			{Step: 400, TimestampMs: 2, Value: -1},       // inside the unread part of the chunk
			{Step: 10, TimestampMs: 3, Value: 7},         // before the cursor: not seen
			{Step: cur.Step, TimestampMs: 0, Value: 1e9}, // the cursor's step, sorting before it
		}
		var b []tracking.Metric
		for _, p := range added {
			b = append(b, tracking.Metric{Key: "m", Point: p})
		}
		e.mustLog(run, tracking.Batch{Metrics: b})
		all := append(slices.Clone(base), added...)
		metrics.SortPoints(all)
		var after []metrics.Point
		for _, p := range all {
			if metrics.Compare(p, cur) > 0 {
				after = append(after, p)
			}
		}
		if got := e.rest(run, "m", 700, p1.NextPageToken); !samePoints(got, after) {
			t.Fatalf("after points were added: %d points, want %d", len(got), len(after))
		}

		// Compaction between two pages replaces the chunk a token points
		// into.
		p1 = e.page(run, "m", 1234, "")
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		cur = p1.Points[len(p1.Points)-1].Point
		after = after[:0]
		for _, p := range all {
			if metrics.Compare(p, cur) > 0 {
				after = append(after, p)
			}
		}
		if got := e.rest(run, "m", 500, p1.NextPageToken); !samePoints(got, after) {
			t.Fatalf("after compaction: %d points, want %d", len(got), len(after))
		}
	})

	t.Run("DamagedToken", func(t *testing.T) {
		p1 := e.page(id, "loss", 100, "")
		raw, err := base64.RawURLEncoding.DecodeString(p1.NextPageToken[2:])
		if err != nil || len(raw) < 30 {
			t.Fatalf("token %q: %v", p1.NextPageToken, err)
		}
		// Every byte after the cursor damaged in turn: the cursor alone
		// still leads to the right points.
		for i := 24; i < len(raw); i++ {
			bad := slices.Clone(raw)
			bad[i] ^= 0x5a
			tok := "h2" + base64.RawURLEncoding.EncodeToString(bad)
			p2 := e.page(id, "loss", 1000, tok)
			if !samePoints(plain(p2.Points), want[100:1100]) {
				t.Fatalf("damaged byte %d: page differs", i)
			}
		}
	})
}

// testSampledReads checks get-history-bulk-interval where it samples from
// chunk summaries (ranges holding more points than ExactSampleLimit) and
// where it samples every point: both keep each run's last step and the
// spikes.
func testSampledReads(t *testing.T, open Opener) {
	for _, exact := range []bool{true, false} {
		name := "FromSummaries"
		if exact {
			name = "Exact"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open, tracking.DefaultLimits())
			if !exact {
				e.svc = tracking.NewService(e.store, tracking.Options{Now: e.clock, ExactSampleLimit: 1000})
			}
			c, ok := e.store.(Compactor)
			if !ok {
				t.Skip("store does not compact on demand")
			}
			id := e.mustRun("0", "sampled").Info.RunID
			const n = 20_000
			r := rand.New(rand.NewPCG(3, 4))
			var b []tracking.Metric
			for i := range n {
				v := 1 + 0.01*r.Float64()
				switch i {
				case 12_345:
					v = 1e6 // a spike
				case 6_789:
					v = -1e6 // a dip
				}
				b = append(b, metric("m", int64(i), int64(i), v))
				if len(b) == 1000 {
					e.mustLog(id, tracking.Batch{Metrics: b})
					b = b[:0]
				}
			}
			if err := c.Compact(e.ctx); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []tracking.SampleMode{tracking.SampleSteps, tracking.SampleMinMax} {
				for _, max := range []int{20, 1000} {
					series, err := e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", MaxResults: max, Mode: mode})
					if err != nil {
						t.Fatal(err)
					}
					pts := series[0].Points
					least := max / 2
					if !exact {
						least = 10 // four points a chunk at most
					}
					if len(pts) < least || len(pts) > max+2 {
						t.Fatalf("mode %d, max %d: %d points", mode, max, len(pts))
					}
					if !slices.IsSortedFunc(pts, func(a, b tracking.HistoryPoint) int { return metrics.Compare(a.Point, b.Point) }) {
						t.Fatalf("mode %d, max %d: not sorted", mode, max)
					}
					if pts[0].Step != 0 || pts[len(pts)-1].Step != n-1 {
						t.Fatalf("mode %d, max %d: steps %d..%d, want 0..%d", mode, max, pts[0].Step, pts[len(pts)-1].Step, n-1)
					}
					spike := slices.ContainsFunc(pts, func(p tracking.HistoryPoint) bool { return p.Step == 12_345 && p.Value == 1e6 })
					dip := slices.ContainsFunc(pts, func(p tracking.HistoryPoint) bool { return p.Step == 6_789 && p.Value == -1e6 })
					// MLflow's step sampling keeps evenly spaced steps and
					// nothing else; every other way keeps the extremes.
					if (mode == tracking.SampleMinMax || !exact) && (!spike || !dip) {
						t.Fatalf("mode %d, max %d: spike kept %v, dip kept %v", mode, max, spike, dip)
					}
				}
			}
			// A zoomed range keeps its own last step.
			lo, hi := int64(5000), int64(5999)
			series, err := e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", MaxResults: 100, StartStep: &lo, EndStep: &hi})
			if err != nil {
				t.Fatal(err)
			}
			pts := series[0].Points
			if len(pts) == 0 || pts[0].Step != lo || pts[len(pts)-1].Step != hi {
				t.Fatalf("zoom: %d points", len(pts))
			}
		})
	}
}
