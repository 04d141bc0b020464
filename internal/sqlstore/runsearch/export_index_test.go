package runsearch

import (
	"context"
	"database/sql"

	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// SetSearchIndexInline sets the number of changed runs above which a
// search leaves them to a catch-up in the background.
func (s *Searcher) SetSearchIndexInline(n int) {
	s.index.mu.Lock()
	s.index.inlineMax = n
	s.index.mu.Unlock()
}

// HasSearchIndex reports whether the store has a search index.
func (s *Searcher) HasSearchIndex() bool { return s.index != nil }

// IndexEvaluates reports whether the search index evaluates clause c (a
// clause runs are searched by), or leaves the search to SQL.
func IndexEvaluates(c search.Comparison) bool {
	_, ok := memClause(c)
	return ok
}

// SearchRunsSQL answers a runs search with SQL, never from the index.
func (s *Searcher) SearchRunsSQL(ctx context.Context, q tracking.RunQuery) (tracking.RunPage, error) {
	return s.searchSQL(ctx, q, nil)
}

// SearchIndexCounts returns the number of runs searches answered from the
// index and with SQL, and the loads (builds and catch-ups) it started.
func (s *Searcher) SearchIndexCounts() (memory, sql, loads int64) {
	if s.index == nil {
		return 0, 0, 0
	}
	return s.index.memory.Load(), s.index.sql.Load(), s.index.loads.Load()
}

// SearchIndexPlans returns the number of the index's searches that walked
// the runs in order, sorted the runs a clause selects, and walked a led
// order.
func (s *Searcher) SearchIndexPlans() (walk, drive, led int64) {
	if s.index == nil {
		return 0, 0, 0
	}
	p := &s.index.plans
	return p[planWalk].Load(), p[planDrive].Load(), p[planLed].Load()
}

// CheckSearchIndexPlans makes every search of the index also find its
// page with each other plan it could take.
func (s *Searcher) CheckSearchIndexPlans() { s.index.checkPlans = true }

// SearchIndexPlanChecks returns the number of pages found again with each
// plan other than the one a search took (walk, drive, led), and of those
// that differed from the search's.
func (s *Searcher) SearchIndexPlanChecks() (walk, drive, led, mismatches int64) {
	c := &s.index.checked
	return c[planWalk].Load(), c[planDrive].Load(), c[planLed].Load(), s.index.planMismatches.Load()
}

// SearchIndexBuilds returns the number of full builds of experiments the
// search index made.
func (s *Searcher) SearchIndexBuilds() int64 { return s.index.builds.Load() }

// SearchIndexBytes returns the index's estimate of the memory it holds.
func (s *Searcher) SearchIndexBytes() int64 {
	if s.index == nil {
		return 0
	}
	return s.index.usedBytes()
}

// explainQueryer records SQLite's plan of each query instead of running it.
type explainQueryer struct {
	db    *sql.DB
	plans map[string][]string
}

func (q explainQueryer) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := q.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			rows.Close()
			return nil, err
		}
		lines = append(lines, detail)
	}
	rows.Close()
	q.plans[query] = lines
	return q.db.QueryContext(ctx, "SELECT 1 WHERE 0")
}

// ExplainSearchIndexReads returns SQLite's plans of the search index's
// reads of an experiment's runs, whole and changed since a number, by
// query.
func (s *Searcher) ExplainSearchIndexReads(ctx context.Context) (map[string][]string, error) {
	q := explainQueryer{db: s.rdb, plans: map[string][]string{}}
	for _, sel := range []runSelect{experimentRuns(1), changedRuns(1, 0)} {
		for _, p := range runParts {
			if err := p(s, ctx, q, sel, &runSet{}, nil); err != nil {
				return nil, err
			}
		}
	}
	return q.plans, nil
}
