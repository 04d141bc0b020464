package sqlstore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// quietStore opens a store whose background compaction never runs on its
// own (no threshold is reached, the sweep waits an hour), with a run to
// log to.
func quietStore(t *testing.T) (*Store, *tracking.Service, string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL", ChunkPoints: 64, CompactAfter: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	s.c.stop()
	s.c = newCompactor(s.db, s.log)
	s.c.interval = time.Hour
	s.c.start()
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	return s, tr, run.Info.RunID
}

// logTen logs steps [from, from+10) of each key in one request: one small
// chunk per key.
func logTen(t *testing.T, tr *tracking.Service, runID string, from int64, keys ...string) {
	t.Helper()
	var b tracking.Batch
	for _, k := range keys {
		for step := from; step < from+10; step++ {
			b.Metrics = append(b.Metrics, tracking.Metric{Key: k, Point: metrics.Point{Step: step, TimestampMs: step, Value: float64(step)}})
		}
	}
	if err := tr.LogBatch(context.Background(), runID, b); err != nil {
		t.Fatal(err)
	}
}

func seriesOf(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	var id int64
	if err := s.rdb.QueryRow(`SELECT series_id FROM metric_series WHERE key = ?`, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func chunksOf(t *testing.T, s *Store, seriesID int64) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(`SELECT COUNT(*) FROM metric_chunks WHERE series_id = ?`, seriesID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkSteps reads a series' history and checks it holds steps 0 to n-1.
func checkSteps(t *testing.T, tr *tracking.Service, runID, key string, n int) {
	t.Helper()
	page, err := tr.MetricHistory(context.Background(), runID, key, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Points) != n {
		t.Fatalf("%s: %d points, want %d", key, len(page.Points), n)
	}
	for i, p := range page.Points {
		if p.Step != int64(i) {
			t.Fatalf("%s: point %d has step %d", key, i, p.Step)
		}
	}
}

// TestCompactSwapsSeriesInOneWrite: the series compacted together go into
// one write, so that the small chunks a request wrote side by side leave
// the table in the same transaction (their pages freed whole, not
// rewritten once per series).
func TestCompactSwapsSeriesInOneWrite(t *testing.T) {
	s, tr, runID := quietStore(t)
	keys := []string{"a", "b", "c", "d", "e"}
	for i := range 6 {
		logTen(t, tr, runID, int64(i*10), keys...)
	}
	before := s.w.groups.Load()
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if writes := s.w.groups.Load() - before; writes != 1 {
		t.Fatalf("compacting %d series took %d writes, want 1", len(keys), writes)
	}
	for _, k := range keys {
		if n := chunksOf(t, s, seriesOf(t, s, k)); n != 1 {
			t.Fatalf("%s: %d chunks after compaction, want 1 (60 points, chunks of 64)", k, n)
		}
		checkSteps(t, tr, runID, k, 60)
	}
}

// TestWaveLeavesRacedSeries: a series another compaction swapped after the
// wave read it is left alone by the wave, which still swaps the others.
func TestWaveLeavesRacedSeries(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	for i := range 4 {
		logTen(t, tr, runID, int64(i*10), "a", "b")
	}
	a, b := seriesOf(t, s, "a"), seriesOf(t, s, "b")
	plan := func(id int64) *swapPlan {
		t.Helper()
		groups, smallSeen, _, err := s.readCompactGroups(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.planSwap(id, groups, smallSeen)
		if err != nil || p == nil {
			t.Fatalf("plan of series %d: %v, %v", id, p, err)
		}
		return p
	}
	stale := plan(a) // chunks 1 to 4 of a
	for i := 4; i < 8; i++ {
		logTen(t, tr, runID, int64(i*10), "a")
	}
	if err := s.compactSeries(ctx, a); err != nil { // swaps all 8 of a's chunks
		t.Fatal(err)
	}
	raced, err := s.swapWave(ctx, []*swapPlan{stale, plan(b)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(raced, []int64{a}) {
		t.Fatalf("raced %v, want [%d]", raced, a)
	}
	if n := chunksOf(t, s, b); n != 1 {
		t.Fatalf("b: %d chunks after the wave, want 1", n)
	}
	checkSteps(t, tr, runID, "a", 80)
	checkSteps(t, tr, runID, "b", 40)
}

func TestCompactDue(t *testing.T) {
	o := Options{ChunkPoints: 4096, CompactAfter: 16}
	for _, tc := range []struct {
		small, last int64
		want        bool
	}{
		{15, 1000, false}, // too few chunks, however full
		{16, 1000, true},
		{16, 100, false}, // 1,600 points: the last chunk would be rewritten for them
		{40, 100, false},
		{41, 100, true},
		{255, 1, false},
		{256, 1, true}, // enough chunks, whatever they hold
		{16, 0, true},  // the request wrote a full chunk: the count decides
		{15, 0, false},
	} {
		if got := o.compactDue(tc.small, tc.last); got != tc.want {
			t.Errorf("compactDue(%d small chunks, last of %d points) = %v, want %v", tc.small, tc.last, got, tc.want)
		}
	}
}

// TestSweepQueuesQuietSeries: the sweep queues series with small chunks
// that wrote none since the sweep before; one still logging reaches the
// threshold on its own.
func TestSweepQueuesQuietSeries(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	for i := range 3 {
		logTen(t, tr, runID, int64(i*10), "quiet", "busy")
	}
	c := newCompactor(s.db, s.log) // not started: the test takes its queue
	if err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := c.take(); len(ids) != 0 {
		t.Fatalf("the first sweep queued %v: it cannot tell which series are quiet yet", ids)
	}
	logTen(t, tr, runID, 30, "busy")
	if err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := c.take(); !slices.Equal(ids, []int64{seriesOf(t, s, "quiet")}) {
		t.Fatalf("the second sweep queued %v, want only the quiet series %d", ids, seriesOf(t, s, "quiet"))
	}
	if err := c.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := c.take(); len(ids) != 2 {
		t.Fatalf("the third sweep queued %v, want both series, neither wrote since", ids)
	}
}

// TestCompactMergesFullChunkItOverlaps: a full chunk that a small one
// overlaps is merged with it. The listing leaves full chunks' data out;
// this one's is read on its own, and its points come back in order
// with the others'.
func TestCompactMergesFullChunkItOverlaps(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	log := func(from, n, tsShift int64) {
		t.Helper()
		var b tracking.Batch
		for step := from; step < from+n; step++ {
			b.Metrics = append(b.Metrics, tracking.Metric{Key: "k", Point: metrics.Point{Step: step, TimestampMs: step + tsShift, Value: float64(step)}})
		}
		if err := tr.LogBatch(ctx, runID, b); err != nil {
			t.Fatal(err)
		}
	}
	log(0, 64, 0)     // one full chunk (ChunkPoints is 64)
	log(64, 10, 0)    // a small chunk after it
	log(10, 10, 1000) // a small chunk inside it: the same steps, later
	id := seriesOf(t, s, "k")
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := tr.MetricHistory(ctx, runID, "k", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Points) != 84 || !slices.IsSortedFunc(page.Points, func(a, b tracking.HistoryPoint) int { return metrics.Compare(a.Point, b.Point) }) {
		t.Fatalf("history after compaction: %d points (want 84), sorted %v", len(page.Points), page.Points)
	}
	// 84 points in chunks of 64: the full chunk was rewritten with the
	// others, not left beside them.
	if n := chunksOf(t, s, id); n != 2 {
		t.Fatalf("%d chunks after compaction, want 2", n)
	}
}
