package runsearch

import (
	"context"
	"fmt"
	"strings"

	"github.com/sextant/sextant/internal/tracking"
)

// MaxDriverIDs is maxDriverIDs, for the tests.
const MaxDriverIDs = maxDriverIDs

// MergeMaxExperiments is mergeMaxExperiments, for the tests.
const MergeMaxExperiments = mergeMaxExperiments

// ExplainRunSearch plans a runs search as SearchRuns does and returns the
// planner's choice and the database's own plan of the search's first
// query: EXPLAIN QUERY PLAN's details (SQLite) or EXPLAIN's lines
// (PostgreSQL), one string a line.
func (s *Searcher) ExplainRunSearch(ctx context.Context, q tracking.RunQuery) (plan string, lines []string, err error) {
	prep, err := s.prepareRunSearch(ctx, q)
	if err != nil {
		return "", nil, err
	}
	sqlText, args := prep.rq.build(prep.phases[0], false)
	explain := "EXPLAIN QUERY PLAN "
	if s.pg {
		explain = "EXPLAIN "
	}
	rows, err := s.rdb.QueryContext(ctx, explain+sqlText, args...)
	if err != nil {
		return "", nil, fmt.Errorf("explain %s: %w", sqlText, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", nil, err
		}
		// The detail is the last column of SQLite's plan, the only one of
		// PostgreSQL's.
		lines = append(lines, strings.TrimSpace(fmt.Sprint(asText(vals[len(vals)-1]))))
	}
	return prep.plan.String(), lines, rows.Err()
}

func asText(v any) any {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v
}
