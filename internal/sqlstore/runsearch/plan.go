package runsearch

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
	"github.com/sextant/sextant/internal/tracking/search"
)

// A runs search has two ways to find its first page:
//
//   - ordered: walk the runs in the order of the first order key (the index
//     on a metric's latest values, or on start times), test every run
//     against the filter, stop when the page is full. It reads about
//     page/s runs, s being the share of runs that pass the filter: cheap
//     for broad filters however large the experiment.
//   - driven: start from the runs one indexed filter clause selects (an
//     equality on a param or tag, a comparison of a metric's latest value,
//     a run's ID or IDs, a run's name, a comparison of its start time),
//     test the other clauses, sort what passes. It reads as many runs as
//     the clause selects: cheap for a selective clause however large the
//     experiment.
//
// The planner counts, up to a cap, the runs each indexable clause selects
// (an index range count each), estimates s from those counts and the
// number of runs of the experiments, and takes the cheaper way, driving
// from the most selective clause. Both are bounded by the page and the
// clauses, not by the experiment's size, except for a filter no index can
// narrow that few runs pass (then every run is read either way).

// driverCap is how many runs a clause's count goes up to, per run of the
// page: counting stops there, and a clause selecting more never drives.
const driverCap = 8

// maxDriverIDs is the longest run_id IN list that drives a search: the
// driven query binds the list twice (the driver, the clause), and a
// longer one would leave too few of the database's bound parameters
// (SQLite's 32,766) for the list itself.
const maxDriverIDs = 10_000

// searchDriver is an indexed filter clause that can drive a search: a subquery
// selecting the run_pk of the runs it selects.
type searchDriver struct {
	clause int    // index in the filter's clauses
	sel    string // SELECT run_pk FROM ... WHERE ...
	args   []any
	name   string // for plans and tests: the index it uses
}

// clauseDriver returns the driver of clause c, or false when no index
// serves it: how its operator selects runs (driveOf, from its description
// in ops.go) and an index of its target that selects them so.
func clauseDriver(i int, c search.Comparison, exps []any) (searchDriver, bool) {
	k := driveOf(c)
	switch c.Entity {
	case search.Param, search.Tag:
		table, index := "params", "params_key_value"
		if c.Entity == search.Tag {
			table, index = "tags", "tags_key_value"
		}
		if k == driveValue {
			return searchDriver{i, "SELECT run_pk FROM " + table + " WHERE key = ? AND value = ?", []any{c.Key, c.Value.Str}, index}, true
		}
	case search.Metric:
		if k == driveRange {
			// NaN latest values are NULL: no comparison selects them, as
			// in the scalar subquery the clause otherwise becomes.
			w, a, err := NumberCompare("value", c)
			if err != nil {
				return searchDriver{}, false
			}
			args := append(append(append([]any{}, exps...), c.Key), a...)
			return searchDriver{i, "SELECT run_pk FROM metric_series WHERE experiment_id IN (" + sqlrow.Placeholders(len(exps)) + ") AND key = ? AND " + w, args, "metric_series_exp_key_value"}, true
		}
	case search.Attribute:
		switch {
		case c.Key == search.AttrRunID && (k == driveValue || k == driveValues && len(c.Value.List) <= maxDriverIDs):
			w, args, err := StringCompare("run_id", c)
			if err != nil {
				return searchDriver{}, false
			}
			return searchDriver{i, "SELECT run_pk FROM runs WHERE " + w, args, "runs.run_id"}, true
		case c.Key == search.AttrRunName && k == driveValue:
			args := append(append([]any{}, exps...), c.Value.Str)
			return searchDriver{i, "SELECT run_pk FROM runs WHERE experiment_id IN (" + sqlrow.Placeholders(len(exps)) + ") AND name = ?", args, "runs_experiment_name"}, true
		case c.Key == search.AttrStartTime && k == driveRange:
			// A window of start times (the runs of one day, of a sweep
			// that ran last night) from the index that also orders by
			// start time.
			w, a, err := intCompare("start_time", c)
			if err != nil {
				return searchDriver{}, false
			}
			args := append(append([]any{}, exps...), a...)
			return searchDriver{i, "SELECT run_pk FROM runs WHERE experiment_id IN (" + sqlrow.Placeholders(len(exps)) + ") AND " + w, args, "runs_experiment_start"}, true
		}
	}
	return searchDriver{}, false
}

// searchPlan is the planner's choice, for the search and for tests.
type searchPlan struct {
	// drive is the clause the search starts from; nil: ordered.
	drive *searchDriver
	// counts are the runs each indexable clause selects (up to the cap),
	// and runs the experiments' runs, as the planner saw them.
	counts map[int]int64
	runs   int64
	// metric marks the clauses on metrics (1), whose test costs more.
	metric map[int]int
}

// String describes the plan, for logs and tests.
func (p searchPlan) String() string {
	if p.drive == nil {
		return "ordered"
	}
	return fmt.Sprintf("driven by clause %d (%s)", p.drive.clause, p.drive.name)
}

// clauseOrder returns the indexes of n filter clauses, those that select
// the fewest runs first (by the planner's counts; a param or tag before a
// metric among equals, its test reads one index, a metric's two), those
// it could not count last, in their order.
func (p searchPlan) clauseOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	rank := func(i int) int64 {
		if m, ok := p.counts[i]; ok {
			return m
		}
		return math.MaxInt64
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return cmp.Compare(p.metric[a], p.metric[b])
	})
	return order
}

// planSearch chooses how to find a page of limit runs.
func (s *Searcher) planSearch(ctx context.Context, exps []any, clauses []search.Comparison, limit int) (searchPlan, error) {
	var drivers []searchDriver
	for i, c := range clauses {
		if d, ok := clauseDriver(i, c, exps); ok {
			drivers = append(drivers, d)
		}
	}
	plan := searchPlan{counts: map[int]int64{}, metric: map[int]int{}}
	for i, c := range clauses {
		if c.Entity == search.Metric {
			plan.metric[i] = 1
		}
	}
	if len(drivers) == 0 {
		return plan, nil
	}
	n, err := s.counts.runs(ctx, s, exps)
	if err != nil {
		return plan, err
	}
	plan.runs = n
	limitCap := int64(driverCap * max(limit, 128))
	share := 1.0 // the estimated share of runs that pass every indexed clause
	var best *searchDriver
	bestCount := int64(math.MaxInt64)
	for i := range drivers {
		d := &drivers[i]
		var m int64
		if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+d.sel+` LIMIT ?) c`, append(append([]any{}, d.args...), limitCap)...).Scan(&m); err != nil {
			return plan, s.sqlError(err, "plan search")
		}
		plan.counts[d.clause] = m
		share *= min(1, float64(m)/float64(max(n, 1)))
		if m < limitCap && m < bestCount {
			best, bestCount = d, m
		}
	}
	if best == nil {
		return plan, nil
	}
	// The ordered way reads about limit/share runs, never more than all.
	ordered := min(float64(n), float64(limit)/max(share, 1e-12))
	if float64(bestCount) < ordered {
		plan.drive = best
	}
	return plan, nil
}

// runCounts caches the number of runs of sets of experiments for the
// planner, which needs only their magnitude: counting 100,000 runs costs
// a few milliseconds, a search should not pay that each time.
type runCounts struct {
	mu sync.Mutex
	m  map[string]runCount
}

type runCount struct {
	n  int64
	at time.Time
}

// runCountTTL is how long a count is used before it is counted again.
const runCountTTL = 10 * time.Second

func (c *runCounts) runs(ctx context.Context, s *Searcher, exps []any) (int64, error) {
	key := fmt.Sprint(exps...)
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && time.Since(e.at) < runCountTTL {
		return e.n, nil
	}
	var n int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE experiment_id IN (`+sqlrow.Placeholders(len(exps))+`)`, exps...).Scan(&n); err != nil {
		return 0, s.sqlError(err, "plan search")
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 1024 {
		c.m = map[string]runCount{}
	}
	c.m[key] = runCount{n, time.Now()}
	c.mu.Unlock()
	return n, nil
}

// drivenPhase is the one phase of a search driven by d: the runs d selects
// (materialized first, so that both databases start from them), joined to
// their runs and to the order keys, sorted in full.
func (s *Searcher) drivenPhase(d *searchDriver, joins []string, joinArgs []any, terms []sortTerm) runPhase {
	join := s.joinInOrder()
	return runPhase{
		with:     "WITH drv AS MATERIALIZED (" + d.sel + ") ",
		withArgs: d.args,
		from:     "drv " + join + " runs r ON r.run_pk = drv.run_pk " + strings.Join(joins, " "),
		runKey:   "drv.run_pk",
		fromArgs: joinArgs,
		order:    terms,
	}
}
