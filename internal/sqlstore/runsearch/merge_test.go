package runsearch_test

import (
	"strconv"
	"testing"

	"github.com/sextant/sextant/internal/sqlstore"
)

// TestSearchMergedMatchesSQL checks that a search of several experiments,
// answered as one search of each, merged, returns what one SQL query of
// them all returns: the same runs in the same order, the same data, the
// same page tokens, through every page, with writes between pages. Each
// experiment's search comes from the search index, or from SQL (the index
// off, as on PostgreSQL), and on PostgreSQL.
func TestSearchMergedMatchesSQL(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) *sqlstore.Store
	}{
		{"SQLiteIndex", func(t *testing.T) *sqlstore.Store {
			s := MustOpen(t, sqlstore.Options{Synchronous: "NORMAL"})
			s.RunSearch().WaitForIndex()
			return s
		}},
		{"SQLite", func(t *testing.T) *sqlstore.Store {
			return MustOpen(t, sqlstore.Options{Synchronous: "NORMAL", SearchIndexBytes: -1})
		}},
		{"PostgreSQL", func(t *testing.T) *sqlstore.Store { return MustOpenPostgres(t, sqlstore.Options{}) }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for seed := range uint64(2) {
				t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
					e := newSearchEnv(t, st.open(t), seed)
					exps := []string{e.experiment("a"), e.experiment("b"), e.experiment("c")}
					runs := make([][]string, len(exps))
					var all []string
					write := func() {
						i := e.rng.IntN(len(exps))
						n := len(runs[i])
						e.randomWrite(exps[i], &runs[i])
						if len(runs[i]) > n {
							all = append(all, runs[i][n:]...)
						}
					}
					for range 120 {
						write()
					}
					// Two or three of the experiments, in any order, one of
					// them twice at times; an ID that is no experiment.
					pickExps := func() []string {
						ids := []string{exps[0], exps[1], exps[2]}
						e.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
						ids = ids[:2+e.rng.IntN(2)]
						switch e.rng.IntN(6) {
						case 0:
							ids = append(ids, ids[0])
						case 1:
							ids = append(ids, "999999")
						}
						return ids
					}
					pages := 0
					for range 25 {
						for range e.rng.IntN(8) {
							write()
						}
						for range 5 {
							q := e.randomSearch(exps[0], all)
							q.ExperimentIDs = pickExps()
							pages += e.sameAllPages(q, false, nil)
						}
						q := e.randomSearch(exps[0], all)
						q.ExperimentIDs = pickExps()
						q.MaxResults = 1 + e.rng.IntN(3)
						pages += e.sameAllPages(q, false, func() {
							for range e.rng.IntN(3) {
								write()
							}
						})
					}
					t.Logf("%d runs; %d runs returned", len(all), pages)
				})
			}
		})
	}
}
