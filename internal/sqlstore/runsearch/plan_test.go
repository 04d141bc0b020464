package runsearch_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/sqlstore/runsearch"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// planRuns is the number of runs of the query-plan test: enough that a
// plan that scans shows against one that does not, also to PostgreSQL's
// cost-based planner.
const planRuns = 20_000

// fillPlanExperiment adds experiment 1 with planRuns runs, and experiment
// 2 with as many again (runs a search of experiment 1 must not step over),
// started at the same times (run i of each at 1700000000000 + i ms, as
// experiments run side by side), straight in SQL: the API would take a
// minute. Run i has params lr (one
// of 4 values), optimizer (one of 3) and group (1,000 runs each), tags team
// (one of 3) and sweep (200 runs each), and latest values of loss, accuracy and val_loss spread
// evenly over [0, 1).
func fillPlanExperiment(t *testing.T, s *sqlstore.Store) {
	t.Helper()
	seq := `WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < ` + strconv.Itoa(2*planRuns-1) + `)`
	exp := `(CASE WHEN i < ` + strconv.Itoa(planRuns) + ` THEN 1 ELSE 2 END)`
	stmts := []string{
		`INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time)
			VALUES (1, 'plan-1', 'a', 'active', 0, 0), (2, 'plan-2', 'a', 'active', 0, 0)`,
		seq + ` INSERT INTO runs (run_pk, run_id, experiment_id, name, user_id, status, start_time, artifact_uri, lifecycle_stage)
			SELECT i + 1, 'run' || i, ` + exp + `, 'run-' || i, 'u', 3, 1700000000000 + i % ` + strconv.Itoa(planRuns) + `, 'a', 'active' FROM seq`,
		seq + ` INSERT INTO params (run_pk, key, value) SELECT i + 1, 'lr', '0.' || (i % 4) FROM seq`,
		seq + ` INSERT INTO params (run_pk, key, value) SELECT i + 1, 'optimizer', (CASE i % 3 WHEN 0 THEN 'adam' WHEN 1 THEN 'sgd' ELSE 'adamw' END) FROM seq`,
		seq + ` INSERT INTO params (run_pk, key, value) SELECT i + 1, 'group', 'g-' || (i / 1000) FROM seq`,
		seq + ` INSERT INTO tags (run_pk, key, value) SELECT i + 1, 'team', (CASE i % 3 WHEN 0 THEN 'vision' WHEN 1 THEN 'nlp' ELSE 'rl' END) FROM seq`,
		seq + ` INSERT INTO tags (run_pk, key, value) SELECT i + 1, 'sweep', 'sweep-' || (i / 200) FROM seq`,
	}
	for k, key := range []string{"loss", "accuracy", "val_loss"} {
		// A different permutation of [0, 1) for each key.
		v := `(((i * ` + strconv.Itoa(7919+2*k) + `) % 10007) * 1.0 / 10007)`
		stmts = append(stmts, seq+` INSERT INTO metric_series (run_pk, experiment_id, key, step, timestamp, value, is_nan, max_step, point_count, small_chunks)
			SELECT i + 1, `+exp+`, '`+key+`', 10, 1, `+v+`, 0, 10, 1, 0 FROM seq`)
	}
	if err := execSQL(t.Context(), s, stmts...); err != nil {
		t.Fatal(err)
	}
}

// TestSearchPlans checks, with EXPLAIN QUERY PLAN on SQLite and EXPLAIN on
// PostgreSQL, that runs searches start from an index and never scan the
// runs or the latest values of a whole table: ordered by a metric with
// broad filters they walk the metric's index in order; with a selective
// filter they start from that filter's index.
func TestSearchPlans(t *testing.T) {
	type shape struct {
		filter  string
		orderBy string
		max     int
		plan    string // the planner's choice
		index   string // the index the first query must start from
	}
	shapes := map[string]shape{
		"BroadFiltersOrderedByMetric": {"metrics.loss < 0.5 AND params.lr = '0.1'", "metrics.accuracy DESC", 100,
			"ordered", "metric_series_exp_key_value"},
		"SelectiveTagDrives": {"tags.sweep = 'sweep-3' AND metrics.val_loss < 0.5", "metrics.loss ASC", 1000,
			"driven by clause 0 (tags_key_value)", "tags_key_value"},
		"SelectiveParamDrives": {"metrics.loss < 0.5 AND params.lr = '0.1' AND params.group = 'g-5'", "metrics.accuracy DESC", 1000,
			"driven by clause 2 (params_key_value)", "params_key_value"},
		"SelectiveMetricDrives": {"metrics.val_loss < 0.01 AND params.optimizer = 'adam'", "metrics.loss ASC", 1000,
			"driven by clause 0 (metric_series_exp_key_value)", "metric_series_exp_key_value"},
		"SelectiveTagDefaultOrder": {"params.lr = '0.1' AND tags.sweep = 'sweep-2'", "", 1000,
			"driven by clause 1 (tags_key_value)", "tags_key_value"},
		"NoFilterDefaultOrder": {"", "", 1000, "ordered", "runs_experiment_start"},
		// run_id's UNIQUE index: SQLite's and PostgreSQL's names for it.
		"RunIDsDrive": {"attributes.run_id IN ('run5', 'run17', 'run19999') AND metrics.loss < 0.9", "metrics.accuracy DESC", 1000,
			"driven by clause 0 (runs.run_id)", "sqlite_autoindex_runs_1|runs_run_id_key"},
		"RunIDDrives": {"metrics.loss < 0.9 AND attributes.run_id = 'run42'", "", 1000,
			"driven by clause 1 (runs.run_id)", "sqlite_autoindex_runs_1|runs_run_id_key"},
		"RunNameDrives": {"attributes.run_name = 'run-42' AND params.lr = '0.2'", "metrics.loss ASC", 100,
			"driven by clause 0 (runs_experiment_name)", "runs_experiment_name"},
		// Runs started in a window of 100 ms (100 runs): the window's
		// upper bound selects the fewest.
		"StartTimeWindowDrives": {"attributes.start_time >= 1700000000100 AND attributes.start_time < 1700000000200 AND metrics.loss < 0.5", "metrics.accuracy DESC", 1000,
			"driven by clause 1 (runs_experiment_start)", "runs_experiment_start"},
		"StartTimeAfterDrives": {"params.lr = '0.1' AND attributes.start_time > 1700000019900", "", 1000,
			"driven by clause 1 (runs_experiment_start)", "runs_experiment_start"},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
			fillPlanExperiment(t, s)
			ctx := context.Background()
			if b.name == "PostgreSQL" {
				// What autovacuum does after a bulk load.
				if err := execSQL(ctx, s, "ANALYZE"); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("LongRunIDListOrdered", func(t *testing.T) {
				// Longer than maxDriverIDs: tested, not driven, though a
				// page of 5,000 would count it whole (the database may
				// then scan the runs: PostgreSQL does).
				n := runsearch.MaxDriverIDs + 1
				f, err := search.ParseRunFilter("attributes.run_id IN (" + runIDList(n) + ") AND metrics.loss < 0.9")
				if err != nil {
					t.Fatal(err)
				}
				order, _ := search.ParseRunOrderBy([]string{"metrics.accuracy DESC"})
				q := tracking.RunQuery{ExperimentIDs: []string{"1"}, Filter: f, OrderBy: order, ViewType: tracking.ActiveOnly, MaxResults: 5000}
				if plan, _, err := s.RunSearch().ExplainRunSearch(ctx, q); err != nil || plan != "ordered" {
					t.Fatalf("plan %q (%v), want ordered", plan, err)
				}
				page, err := s.Tracking().SearchRuns(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Runs) != 5000 {
					t.Fatalf("%d runs, want 5000", len(page.Runs))
				}
				for _, r := range page.Runs {
					if i, err := strconv.Atoi(strings.TrimPrefix(r.Info.RunID, "run")); err != nil || i >= n {
						t.Fatalf("run %s is not in the list", r.Info.RunID)
					}
				}
			})
			for name, sh := range shapes {
				t.Run(name, func(t *testing.T) {
					f, err := search.ParseRunFilter(sh.filter)
					if err != nil {
						t.Fatal(err)
					}
					var order []search.OrderKey
					if sh.orderBy != "" {
						if order, err = search.ParseRunOrderBy([]string{sh.orderBy}); err != nil {
							t.Fatal(err)
						}
					}
					q := tracking.RunQuery{ExperimentIDs: []string{"1"}, Filter: f, OrderBy: order, ViewType: tracking.ActiveOnly, MaxResults: sh.max}
					plan, lines, err := s.RunSearch().ExplainRunSearch(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					text := strings.Join(lines, "\n")
					t.Logf("%s:\n%s", plan, text)
					if plan != sh.plan {
						t.Errorf("planner chose %q, want %q", plan, sh.plan)
					}
					if !slices.ContainsFunc(strings.Split(sh.index, "|"), func(ix string) bool { return strings.Contains(text, ix) }) {
						t.Errorf("the plan does not use %s:\n%s", sh.index, text)
					}
					for _, l := range lines {
						for _, table := range []string{"runs", "metric_series", "params", "tags"} {
							if scansTable(b.name, l, table) {
								t.Errorf("the plan scans %s:\n%s", table, text)
							}
						}
					}
					if t.Failed() {
						return
					}
					// And the search itself returns what the filter selects.
					page, err := s.Tracking().SearchRuns(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if len(page.Runs) == 0 {
						t.Fatal("no runs")
					}
					for _, r := range page.Runs {
						if r.Info.ExperimentID != "1" {
							t.Fatalf("run %s of experiment %s", r.Info.RunID, r.Info.ExperimentID)
						}
					}
				})
			}
		})
	}
}

// runIDList returns n quoted run ids of fillPlanExperiment, comma-separated.
func runIDList(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "'run" + strconv.Itoa(i) + "'"
	}
	return strings.Join(ids, ", ")
}

// scansTable reports whether a plan line reads a whole table (or a whole
// index of it without a key).
func scansTable(backend, line, table string) bool {
	if backend == "PostgreSQL" {
		return strings.Contains(line, "Seq Scan on "+table+" ")
	}
	// SQLite: "SCAN r", "SCAN o0", "SCAN runs", "SCAN tags USING ..."; the
	// aliases of the tables in the search's SQL.
	aliases := map[string][]string{"runs": {"runs", "r"}, "metric_series": {"metric_series", "o0", "o1", "m"}, "params": {"params", "p"}, "tags": {"tags", "t"}}
	for _, a := range aliases[table] {
		if line == "SCAN "+a || strings.HasPrefix(line, "SCAN "+a+" ") {
			return true
		}
	}
	return false
}
