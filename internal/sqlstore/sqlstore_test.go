package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/trackingtest"
)

// MustOpen opens a store on a fresh database file in a temporary directory
// and closes it when the test ends.
func MustOpen(tb testing.TB, opts sqlstore.Options) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(context.Background(), filepath.Join(tb.TempDir(), "sextant.db"), opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	trackingtest.RunStoreTests(t, func(t *testing.T, limits tracking.Limits) tracking.Store {
		// Small chunks and an eager compaction threshold, so the suite
		// crosses chunk boundaries and compacts while it runs.
		return MustOpen(t, sqlstore.Options{Limits: limits, Synchronous: "NORMAL", ChunkPoints: 512, CompactAfter: 4})
	})
}
