package sqlstore

import (
	"context"
	"errors"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestCompactionRaceKeepsPoints: two compactions of one series at once
// (the background one and Compact, or two replicas) lose no point. The
// first read four small chunks; the second, reading all eight, swapped
// them for four new chunks before the first swapped its own. SQLite used
// to number the new chunks with the ids just deleted (one past the largest
// id left), so the first found its four ids all there, deleted the second's
// chunks (all 240 points) and put back its 120: TestConformance/SQLite/
// Compaction saw "points before 9001 after 8161" under load.
func TestCompactionRaceKeepsPoints(t *testing.T) {
	ctx := context.Background()
	// No background compaction: the test runs the two compactions itself,
	// in the order that lost points.
	s, tr, id := quietStore(t)
	logSteps := func(from int64) {
		t.Helper()
		var b tracking.Batch
		for step := from; step < from+30; step++ {
			b.Metrics = append(b.Metrics, tracking.Metric{Key: "k", Point: metrics.Point{Step: step, TimestampMs: step, Value: float64(step)}})
		}
		if err := tr.LogBatch(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		logSteps(int64(i * 30))
	}
	var seriesID int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT series_id FROM metric_series WHERE key = 'k'`).Scan(&seriesID); err != nil {
		t.Fatal(err)
	}
	first, smallSeen, _, err := s.readCompactGroups(ctx, seriesID) // reads chunks 1 to 4
	if err != nil || len(first) != 1 || len(first[0].ids) != 4 {
		t.Fatalf("first plan: %+v, %v", first, err)
	}
	for i := 4; i < 8; i++ {
		logSteps(int64(i * 30))
	}
	if err := s.compactSeries(ctx, seriesID); err != nil { // 8 chunks of 30 become 64, 64, 64, 48
		t.Fatal(err)
	}
	if err := s.swapCompacted(ctx, seriesID, first, smallSeen); !errors.Is(err, errCompactionRace) {
		t.Fatalf("the first swap after the second: %v, want errCompactionRace", err)
	}
	page, err := tr.MetricHistory(ctx, id, "k", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Points) != 240 {
		t.Fatalf("%d points after the two compactions, want 240", len(page.Points))
	}
	for i, p := range page.Points {
		if p.Step != int64(i) {
			t.Fatalf("point %d has step %d", i, p.Step)
		}
	}
}
