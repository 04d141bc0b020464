package sqlstore

import (
	"context"
	"database/sql"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestWriterKeepsTempInMemory checks that the write connection keeps its
// savepoint journals in memory (see writerDriver): on a file, every
// request of a group wrote the pages it changed to /var/tmp.
func TestWriterKeepsTempInMemory(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var mode int
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("temp_store %d on the write connection, want 2 (MEMORY)", mode)
	}
}

// TestWriterKeepsStatements: the statements a group meets are prepared on
// the write connection after it and reused by later groups, through an
// op that fails and rolls back to its savepoint, and the points of every
// group that succeeded are there.
func TestWriterKeepsStatements(t *testing.T) {
	s, tr, runID := quietStore(t)
	ctx := context.Background()
	kept := func() map[string]*sql.Stmt {
		t.Helper()
		out := map[string]*sql.Stmt{}
		// The loop goroutine owns the map: read it there.
		if err := s.w.exclusive(ctx, func() error {
			maps.Copy(out, s.w.stmts)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	logTen(t, tr, runID, 0, "a", "b")
	first := kept()
	var insert string
	for q := range first {
		if strings.HasPrefix(q, "INSERT INTO metric_chunks") {
			insert = q
		}
	}
	if insert == "" || len(first) < 5 {
		t.Fatalf("after one group, %d statements kept, none inserting chunks: %v", len(first), slices.Collect(maps.Keys(first)))
	}
	// A request that fails inside its savepoint, then more points.
	bad := tracking.Batch{Metrics: []tracking.Metric{{Key: "a", Point: metrics.Point{Step: 100}}}}
	if err := tr.LogBatch(ctx, "ffffffffffffffffffffffffffffffff", bad); err == nil {
		t.Fatal("a batch to a run that does not exist was accepted")
	}
	logTen(t, tr, runID, 10, "a", "b")
	logTen(t, tr, runID, 20, "a", "b")
	after := kept()
	if after[insert] != first[insert] {
		t.Fatal("the chunk insert was prepared again instead of reused")
	}
	checkSteps(t, tr, runID, "a", 30)
	checkSteps(t, tr, runID, "b", 30)
}
