package sqlstore

import (
	"context"

	"github.com/sextant/sextant/internal/tracking"
)

// WaitForSearchIndex makes searches wait for their experiment's search
// index to be built instead of using SQL meanwhile, so that a test knows
// which way a search is answered. A no-op without an index (PostgreSQL).
func (s *Store) WaitForSearchIndex() {
	if s.index == nil {
		return
	}
	s.index.mu.Lock()
	s.index.wait = true
	s.index.mu.Unlock()
}

// SetSearchIndexInline sets the number of changed runs above which a
// search leaves them to a catch-up in the background.
func (s *Store) SetSearchIndexInline(n int) {
	s.index.mu.Lock()
	s.index.inlineMax = n
	s.index.mu.Unlock()
}

// HasSearchIndex reports whether the store has a search index.
func (s *Store) HasSearchIndex() bool { return s.index != nil }

// SearchRunsSQL answers a runs search with SQL, never from the index.
func (s *Store) SearchRunsSQL(ctx context.Context, q tracking.RunQuery) (tracking.RunPage, error) {
	return s.searchSQL(ctx, q)
}

// SearchIndexCounts returns the number of runs searches answered from the
// index and with SQL, and the loads (builds and catch-ups) it started.
func (s *Store) SearchIndexCounts() (memory, sql, loads int64) {
	if s.index == nil {
		return 0, 0, 0
	}
	return s.index.memory.Load(), s.index.sql.Load(), s.index.loads.Load()
}

// SearchIndexBuilds returns the number of full builds of experiments the
// search index made.
func (s *Store) SearchIndexBuilds() int64 { return s.index.builds.Load() }

// SearchIndexBytes returns the index's estimate of the memory it holds.
func (s *Store) SearchIndexBytes() int64 {
	if s.index == nil {
		return 0
	}
	return s.index.usedBytes()
}
