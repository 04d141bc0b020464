package sqlstore

import (
	"context"
	"database/sql"
	"math"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// cachedSeries returns a copy of the writer's series cache, read in the
// loop goroutine that owns it.
func cachedSeries(t *testing.T, s *Store) map[seriesKey]seriesRow {
	t.Helper()
	out := map[seriesKey]seriesRow{}
	if err := s.w.exclusive(context.Background(), func() error {
		for k, r := range s.w.series.rows {
			out[k] = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCacheMatchesDB checks that every row the cache holds is the row
// the database holds.
func checkCacheMatchesDB(t *testing.T, s *Store) {
	t.Helper()
	for k, c := range cachedSeries(t, s) {
		var r seriesRow
		var v sql.NullFloat64
		var isNaN bool
		err := s.rdb.QueryRow(`SELECT series_id, step, timestamp, value, is_nan, max_step, point_count, small_chunks
			FROM metric_series WHERE run_pk = ? AND key = ?`, k.runPK, k.key).
			Scan(&r.id, &r.latest.Step, &r.latest.TimestampMs, &v, &isNaN, &r.maxStep, &r.pointCount, &r.smallChunks)
		if err != nil {
			t.Fatalf("cached series %v: %v", k, err)
		}
		r.latest.Value = v.Float64
		if isNaN {
			r.latest.Value = math.NaN()
		}
		if r.id != c.id || !metrics.Equal(r.latest, c.latest) || r.maxStep != c.maxStep || r.pointCount != c.pointCount || r.smallChunks != c.smallChunks {
			t.Fatalf("cached series %v: %+v, the database has %+v", k, c, r)
		}
	}
}

// TestSeriesCacheFollowsWrites logs, resends, compacts and fails requests,
// and checks after each step that the cached series rows are the
// database's and that no point is lost.
func TestSeriesCacheFollowsWrites(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	logTen(t, tr, runID, 0, "a", "b")
	if got := len(cachedSeries(t, s)); got != 2 {
		t.Fatalf("%d series cached after the first request, want 2", got)
	}
	checkCacheMatchesDB(t, s)
	logTen(t, tr, runID, 10, "a", "b")
	logTen(t, tr, runID, 10, "a") // a retry: every point already stored
	logTen(t, tr, runID, 20, "a", "b")
	checkCacheMatchesDB(t, s)
	// A compaction swap changes small_chunks behind the cache.
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	checkCacheMatchesDB(t, s)
	logTen(t, tr, runID, 30, "a", "b")
	checkCacheMatchesDB(t, s)
	// A new series and a param, then a request that fails inside the
	// writer (it changes the param): its point is neither stored nor
	// cached.
	b := tracking.Batch{
		Metrics: []tracking.Metric{
			{Key: "a", Point: metrics.Point{Step: 40, TimestampMs: 40}},
			{Key: "c", Point: metrics.Point{Step: 0, TimestampMs: 0}},
		},
		Params: []tracking.Param{{Key: "p", Value: "1"}},
	}
	if err := tr.LogBatch(ctx, runID, b); err != nil {
		t.Fatal(err)
	}
	b.Params[0].Value = "2"
	b.Metrics = []tracking.Metric{{Key: "a", Point: metrics.Point{Step: 41, TimestampMs: 41}}}
	if err := tr.LogBatch(ctx, runID, b); err == nil {
		t.Fatal("changing a param was accepted")
	}
	checkCacheMatchesDB(t, s)
	logTen(t, tr, runID, 41, "a")
	checkCacheMatchesDB(t, s)
	page, err := tr.MetricHistory(ctx, runID, "a", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Points) != 51 {
		t.Fatalf("a: %d points, want 51 (steps 0-40 and 41-50)", len(page.Points))
	}
	checkSteps(t, tr, runID, "b", 40)
}

// TestSeriesCacheDroppedOnOtherWrites: a commit by another connection (as
// another process on the file would make) drops the cache, and the next
// request builds on the row that connection wrote.
func TestSeriesCacheDroppedOnOtherWrites(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	logTen(t, tr, runID, 0, "a")
	other, err := sql.Open("sqlite3", s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, `UPDATE metric_series SET point_count = point_count + 1000 WHERE key = 'a'`); err != nil {
		t.Fatal(err)
	}
	logTen(t, tr, runID, 10, "a")
	var n int64
	if err := s.rdb.QueryRow(`SELECT point_count FROM metric_series WHERE key = 'a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1020 {
		t.Fatalf("point_count %d, want 1020: the request wrote over the other connection's row from the cache", n)
	}
	checkCacheMatchesDB(t, s)
}

// TestSeriesCacheStages checks the cache's bookkeeping of ops and
// transactions.
func TestSeriesCacheStages(t *testing.T) {
	c := newSeriesCache()
	c.begin(1)
	k := seriesKey{1, "loss"}
	put := func(points int64) { c.put(k, seriesRow{id: 7, pointCount: points, isNew: true, dirty: true}) }
	has := func(want int64) {
		t.Helper()
		r, ok := c.get(k)
		switch {
		case want < 0 && ok:
			t.Fatalf("cached %+v, want none", r)
		case want >= 0 && (!ok || r.pointCount != want):
			t.Fatalf("cached %+v (%v), want %d points", r, ok, want)
		case ok && (r.isNew || r.dirty):
			t.Fatalf("cached %+v: a request's marks kept", r)
		}
	}
	put(1)
	has(1) // the op sees its own row
	c.opDone(false, true)
	has(-1) // rolled back
	put(2)
	c.opDone(true, true)
	has(2) // later ops of the transaction see it
	c.groupDone(false)
	has(-1) // the commit failed
	put(3)
	c.opDone(true, true)
	c.groupDone(true)
	has(3)
	put(4)
	c.opDone(false, false) // its rollback failed: nothing is trusted
	has(-1)
	put(5)
	c.opDone(true, true)
	c.groupDone(true)
	c.forget(7)
	has(-1)
	put(6)
	c.opDone(true, true)
	c.groupDone(true)
	c.begin(1)
	has(6)
	c.begin(2) // another connection committed
	has(-1)
}
