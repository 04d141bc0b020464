package runsearch_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
)

// benchRuns is the number of runs of the runs search benchmark's experiment.
const benchRuns = 4000

// fillBenchExperiment adds experiment 1 with n runs straight in SQL, as
// fillPlanExperiment does: run i has params lr (one of 4 values) and
// optimizer (adam, sgd or adamw), tags team (one of 3) and sweep (200 runs
// each), status FAILED for one run in 5 and FINISHED for the others, and
// latest values of loss and accuracy spread evenly over [0, 1).
func fillBenchExperiment(tb testing.TB, s *sqlstore.Store, n int) {
	tb.Helper()
	seq := `WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < ` + strconv.Itoa(n-1) + `)`
	stmts := []string{
		`INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time)
			VALUES (1, 'bench', 'a', 'active', 0, 0)`,
		seq + ` INSERT INTO runs (run_pk, run_id, experiment_id, name, user_id, status, start_time, artifact_uri, lifecycle_stage)
			SELECT i + 1, 'run' || i, 1, 'run-' || i, 'u', (CASE WHEN i % 5 = 0 THEN 4 ELSE 3 END), 1700000000000 + i, 'a', 'active' FROM seq`,
		seq + ` INSERT INTO params (run_pk, key, value) SELECT i + 1, 'lr', '0.' || (i % 4) FROM seq`,
		seq + ` INSERT INTO params (run_pk, key, value) SELECT i + 1, 'optimizer', (CASE i % 3 WHEN 0 THEN 'adam' WHEN 1 THEN 'sgd' ELSE 'adamw' END) FROM seq`,
		seq + ` INSERT INTO tags (run_pk, key, value) SELECT i + 1, 'team', (CASE i % 3 WHEN 0 THEN 'vision' WHEN 1 THEN 'nlp' ELSE 'rl' END) FROM seq`,
		seq + ` INSERT INTO tags (run_pk, key, value) SELECT i + 1, 'sweep', 'sweep-' || (i / 200) FROM seq`,
	}
	for k, key := range []string{"loss", "accuracy"} {
		v := `(((i * ` + strconv.Itoa(7919+2*k) + `) % 10007) * 1.0 / 10007)`
		stmts = append(stmts, seq+` INSERT INTO metric_series (run_pk, experiment_id, key, step, timestamp, value, is_nan, max_step, point_count, small_chunks)
			SELECT i + 1, 1, '`+key+`', 10, 1, `+v+`, 0, 10, 1, 0 FROM seq`)
	}
	if err := execSQL(tb.Context(), s, stmts...); err != nil {
		tb.Fatal(err)
	}
}

// benchShapes are the searches of BenchmarkRunsSearch: a broad metric +
// param filter ordered by another metric (a walk, or a led order), a
// selective tag (driven), string tests on a column and an attribute
// (LIKE, ILIKE, !=, NOT IN) in the default order, and numeric tests of an
// attribute and a metric with a small page.
var benchShapes = []struct {
	name, filter string
	orderBy      []string
	max          int
}{
	{"metric_param", "metrics.loss < 0.5 AND params.lr = '0.1'", []string{"metrics.accuracy DESC"}, 1000},
	{"tag_driven", "tags.sweep = 'sweep-3' AND metrics.accuracy < 0.5", []string{"metrics.loss ASC"}, 1000},
	{"strings", "params.optimizer LIKE 'adam%' AND tags.team ILIKE 'V%' AND attributes.status != 'FAILED' AND attributes.run_id NOT IN ('run3', 'run6')", nil, 100},
	{"numbers", "attributes.start_time >= 1700000000100 AND metrics.accuracy > 0.25 AND metrics.loss <= 0.75 AND metrics.loss != 0.5", []string{"attributes.start_time DESC"}, 100},
}

// BenchmarkRunsSearch times the first page of a few runs searches of one
// experiment of benchRuns runs, answered from the search index and with
// SQL (SQLite). cpu-ns/op is the process's CPU time per search, which a
// busy machine's waits for a core leave out.
//
//	go test ./internal/sqlstore -run '^$' -bench RunsSearch -count 5 | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkRunsSearch(b *testing.B) {
	s := MustOpen(b, sqlstore.Options{Synchronous: "NORMAL"})
	s.RunSearch().WaitForIndex()
	fillBenchExperiment(b, s, benchRuns)
	for _, path := range []string{"index", "sql"} {
		for _, sh := range benchShapes {
			f, err := search.ParseRunFilter(sh.filter)
			if err != nil {
				b.Fatal(err)
			}
			o, err := search.ParseRunOrderBy(sh.orderBy)
			if err != nil {
				b.Fatal(err)
			}
			q := tracking.RunQuery{ExperimentIDs: []string{"1"}, Filter: f, OrderBy: o, ViewType: tracking.ActiveOnly, MaxResults: sh.max}
			b.Run("path="+path+"/shape="+sh.name, func(b *testing.B) {
				find := s.RunSearch().SearchRunsSQL
				if path == "index" {
					find = s.Tracking().SearchRuns
				}
				m0, _, _ := s.RunSearch().SearchIndexCounts()
				var runs int
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					p, err := find(b.Context(), q)
					if err != nil {
						b.Fatal(err)
					}
					runs = len(p.Runs)
				}
				if cpu := processCPU() - cpu0; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				}
				m1, _, _ := s.RunSearch().SearchIndexCounts()
				if answered := m1 > m0; answered != (path == "index") {
					b.Fatalf("answered from the index: %t", answered)
				}
				b.ReportMetric(float64(runs), "runs/op")
			})
		}
	}
}

// processCPU returns the CPU time the process has used, user and system:
// on a machine shared with other work it measures a benchmark's own work,
// where wall time also counts the waits for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
