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
// candidates (ranges holding more points than ExactSampleLimit: overviews,
// chunk summaries and sketches) and where it samples every point: both
// keep each run's first and last step and, but for MLflow's exact step
// sampling, the spikes; a spike logged out of order into a compacted range
// shows at once and after the next compaction; points keep their context.
func testSampledReads(t *testing.T, open Opener) {
	for _, exact := range []bool{true, false} {
		name := "FromCandidates"
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
			// Steps 15,000 to 15,999 are evaluations: another context.
			eval := tracking.MetricContext{DatasetName: "eval", DatasetDigest: "e1"}
			isEval := func(step int64) bool { return step >= 15_000 && step < 16_000 }
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
				m := metric("m", int64(i), int64(i), v)
				if isEval(int64(i)) {
					m.MetricContext = eval
				}
				b = append(b, m)
				// 250-point requests make small chunks for compaction to merge.
				if len(b) == 250 {
					e.mustLog(id, tracking.Batch{Metrics: b})
					b = b[:0]
				}
			}
			if err := c.Compact(e.ctx); err != nil {
				t.Fatal(err)
			}
			sample := func(mode tracking.SampleMode, max int, lo, hi *int64) []tracking.HistoryPoint {
				t.Helper()
				series, err := e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{id}, Key: "m", MaxResults: max, Mode: mode, StartStep: lo, EndStep: hi})
				if err != nil {
					t.Fatal(err)
				}
				pts := series[0].Points
				if !slices.IsSortedFunc(pts, func(a, b tracking.HistoryPoint) int { return metrics.Compare(a.Point, b.Point) }) {
					t.Fatalf("mode %d, max %d: not sorted", mode, max)
				}
				for _, p := range pts {
					if want := isEval(p.Step); want != (p.Context != nil && *p.Context == eval) {
						t.Fatalf("mode %d, max %d: step %d has context %+v", mode, max, p.Step, p.Context)
					}
				}
				return pts
			}
			has := func(pts []tracking.HistoryPoint, step int64, v float64) bool {
				return slices.ContainsFunc(pts, func(p tracking.HistoryPoint) bool { return p.Step == step && p.Value == v })
			}
			check := func(what string, spikes map[int64]float64) {
				t.Helper()
				for _, mode := range []tracking.SampleMode{tracking.SampleSteps, tracking.SampleMinMax} {
					for _, max := range []int{20, 1000} {
						pts := sample(mode, max, nil, nil)
						least := max / 2
						if !exact {
							least = 10
						}
						// Min-max buckets keep two points each, and the first and last.
						most := max + 2
						if mode == tracking.SampleMinMax {
							most = 2*(max/2) + 2
						}
						if len(pts) < least || len(pts) > most {
							t.Fatalf("%s: mode %d, max %d: %d points", what, mode, max, len(pts))
						}
						if pts[0].Step != 0 || pts[len(pts)-1].Step != n-1 {
							t.Fatalf("%s: mode %d, max %d: steps %d..%d, want 0..%d", what, mode, max, pts[0].Step, pts[len(pts)-1].Step, n-1)
						}
						// MLflow's step sampling keeps evenly spaced steps and
						// nothing else; every other way keeps the extremes.
						if mode == tracking.SampleMinMax || !exact {
							for step, v := range spikes {
								if !has(pts, step, v) {
									t.Fatalf("%s: mode %d, max %d: the point (%d, %g) is missing", what, mode, max, step, v)
								}
							}
						}
					}
				}
				// A zoomed range keeps its own first and last step, also
				// when it cuts chunks and overviews.
				for _, z := range [][2]int64{{5000, 5999}, {1, n - 2}, {14_999, 16_000}} {
					for _, max := range []int{20, 100} {
						pts := sample(tracking.SampleSteps, max, &z[0], &z[1])
						if len(pts) == 0 || pts[0].Step != z[0] || pts[len(pts)-1].Step != z[1] {
							t.Fatalf("%s: zoom %v, max %d: %d points", what, z, max, len(pts))
						}
					}
				}
			}
			spikes := map[int64]float64{12_345: 1e6, 6_789: -1e6}
			check("logged in order", spikes)

			// A spike logged late among compacted steps (a point of step
			// 3,000 at a later time) shows at once, and after the next
			// compaction merges it.
			e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("m", 3000, 3001, 5e6)}})
			spikes[3000] = 5e6
			check("a late spike", spikes)
			if err := c.Compact(e.ctx); err != nil {
				t.Fatal(err)
			}
			check("a late spike, compacted", spikes)
		})
	}
}

// testCompactionDisjoint logs batches out of order, as several writers or
// a retried request do, compacting in between: compaction must leave
// chunks whose step ranges do not overlap, so that reads decode them in
// turn instead of merging them, and lose no point.
func testCompactionDisjoint(t *testing.T, e *env) {
	c, ok := e.store.(Compactor)
	if !ok {
		t.Skip("store does not compact on demand")
	}
	id := e.mustRun("0", "disjoint").Info.RunID
	const batch, batches = 300, 40
	order := rand.New(rand.NewPCG(5, 6)).Perm(batches)
	var want []metrics.Point
	for k, b := range order {
		want = append(want, e.logRandom(id, "m", b*batch, batch, uint64(b))...)
		if k%7 == 6 {
			if err := c.Compact(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Compact(e.ctx); err != nil {
		t.Fatal(err)
	}
	metrics.SortPoints(want)
	chunks, err := e.store.SeriesChunks(e.ctx, id, "m", math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(chunks); i++ {
		if chunks[i].MinStep <= chunks[i-1].MaxStep {
			t.Fatalf("chunks %d [%d, %d] and %d [%d, %d] overlap", i-1, chunks[i-1].MinStep, chunks[i-1].MaxStep, i, chunks[i].MinStep, chunks[i].MaxStep)
		}
	}
	if got := e.rest(id, "m", 1000, ""); !samePoints(got, want) {
		t.Fatalf("history after compaction: %d points, want %d", len(got), len(want))
	}
}
