package runsearch_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/sqlstore/runsearch"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/tracking/search"
	"github.com/sextant/sextant/internal/wire"
)

// indexEnv is a SQLite store whose searches wait for the search index, with
// a service over it, for the search index's tests.
type indexEnv struct {
	t   *testing.T
	ctx context.Context
	s   *sqlstore.Store
	svc *tracking.Service
	rng *rand.Rand
}

func newIndexEnv(t *testing.T, opts sqlstore.Options, seed uint64) *indexEnv {
	t.Helper()
	opts.Synchronous = "NORMAL"
	s := MustOpen(t, opts)
	s.RunSearch().WaitForIndex()
	return newSearchEnv(t, s, seed)
}

// newSearchEnv returns the environment of the search tests over s.
func newSearchEnv(t *testing.T, s *sqlstore.Store, seed uint64) *indexEnv {
	t.Helper()
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &indexEnv{t: t, ctx: t.Context(), s: s, svc: svc, rng: rand.New(rand.NewPCG(seed, 17))}
}

func (e *indexEnv) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *indexEnv) experiment(name string) string {
	e.t.Helper()
	id, err := e.svc.CreateExperiment(e.ctx, name, "", nil)
	e.must(err)
	return id
}

// query parses a search as the service does.
func (e *indexEnv) query(exps []string, filter string, orderBy []string, view tracking.ViewType, max int, token string) tracking.RunQuery {
	e.t.Helper()
	f, err := search.ParseRunFilter(filter)
	if err != nil {
		e.t.Fatalf("parse %q: %v", filter, err)
	}
	o, err := search.ParseRunOrderBy(orderBy)
	if err != nil {
		e.t.Fatalf("parse %q: %v", orderBy, err)
	}
	return tracking.RunQuery{ExperimentIDs: exps, Filter: f, OrderBy: o, ViewType: view, MaxResults: max, PageToken: token}
}

// pageText renders a page in full, NaN and -0 included, for comparisons.
func pageText(p tracking.RunPage) string {
	var b strings.Builder
	for _, r := range p.Runs {
		c := *r
		c.Memo = nil
		fmt.Fprintf(&b, "%+v\n", c)
	}
	fmt.Fprintf(&b, "token %q\n", p.NextPageToken)
	// The JSON too, encoded twice: the index's runs keep theirs once
	// encoded (tracking.Memo), and must never answer with a stale one.
	b.Write(wire.AppendRuns(nil, p))
	if j := wire.AppendRuns(nil, p); !strings.HasSuffix(b.String(), string(j)) {
		fmt.Fprintf(&b, "\nencoded again: %s", j)
	}
	return b.String()
}

// same searches q from the index and with SQL and fails unless both
// answer the same runs, data and token, or the same error. It returns the
// page, and whether the index answered (inMemory: it must have, unless
// the index cannot evaluate one of q's clauses, when it must not have).
func (e *indexEnv) same(q tracking.RunQuery, inMemory bool) (tracking.RunPage, error) {
	e.t.Helper()
	m0, _, _ := e.s.RunSearch().SearchIndexCounts()
	got, gerr := e.s.Tracking().SearchRuns(e.ctx, q)
	m1, _, _ := e.s.RunSearch().SearchIndexCounts()
	want, werr := e.s.RunSearch().SearchRunsSQL(e.ctx, q)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		e.t.Fatalf("search %+v: index error %v, SQL error %v", q, gerr, werr)
	}
	if gerr == nil && inMemory {
		// Unless the index cannot evaluate a clause (its operator's
		// description has no test for it): then it must leave the search
		// to SQL, never answer it some other way.
		evaluates := true
		for _, c := range q.Filter.Clauses {
			evaluates = evaluates && runsearch.IndexEvaluates(c)
		}
		if answered := m1 == m0+1; answered != evaluates {
			e.t.Fatalf("search %+v: answered from the index: %t, the index evaluates its clauses: %t", q, answered, evaluates)
		}
	}
	if g, w := pageText(got), pageText(want); g != w {
		e.t.Fatalf("search %+v:\nindex:\n%s\nSQL:\n%s", q, g, w)
	}
	return got, gerr
}

// sameAllPages follows the page tokens of q to the end, comparing each page.
func (e *indexEnv) sameAllPages(q tracking.RunQuery, inMemory bool, between func()) int {
	e.t.Helper()
	n := 0
	for pages := 0; ; pages++ {
		p, err := e.same(q, inMemory)
		if err != nil || p.NextPageToken == "" {
			return n + len(p.Runs)
		}
		if pages > 10_000 {
			e.t.Fatal("pages never end")
		}
		n += len(p.Runs)
		q.PageToken = p.NextPageToken
		if between != nil {
			between()
		}
	}
}

// Vocabularies of the random runs and searches: few values each, so that
// filters match some runs and orders tie.
var (
	metricKeys  = []string{"loss", "acc", "m"}
	paramKeys   = []string{"lr", "opt", "p"}
	tagKeys     = []string{"team", "sweep", "t"}
	strValues   = []string{"", "a", "A", "ab", "Ab", "a_b", "a%b", "b", "é", "É", "ẞx", "x\x00y", "it's", "0.1", "10"}
	likeValues  = []string{"%", "_", "a%", "A%", "%b", "%a%", "_b", "a_", "%\x00%", "x", "é%", "%É", "%_%", "__", ""}
	metricVals  = []float64{0, 0.5, 1, -1, 2, math.Inf(1), math.Inf(-1), math.NaN(), 1e-300}
	startTimes  = []int64{1000, 1000, 2000, 3000, 1 << 53, 1<<53 + 1}
	numbers     = []string{"0", "0.5", "1", "-1", "2", "1000", "1500.5", "9007199254740992", "1e300", "-1e300", ".5"}
	orderFields = []string{"metrics.loss", "metrics.acc", "metrics.m", "metrics.none", "params.lr", "params.opt", "tags.team", "tags.none",
		"attributes.start_time", "attributes.end_time", "attributes.run_name", "attributes.run_id", "attributes.status",
		"attributes.user_id", "attributes.artifact_uri"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// runTargets are what runs filters compare, with the operators each
// takes: the grammar's own tables, so that every operator is drawn where
// the grammar accepts it, one added included.
var runTargets = search.RunFilterTargets()

// targetValues are the string values drawn for an attribute or a dataset
// field, beside strValues and likeValues: values its runs have.
var targetValues = map[string][]string{
	search.AttrStatus:         {"RUNNING", "FINISHED", "FAILED", "KILLED", "SCHEDULED"},
	search.AttrLifecycleStage: {"active", "deleted"},
	search.AttrUserID:         {"ann", "bob", "Ann"},
	search.AttrRunName:        {"a", "b", "É", "run"},
	search.DatasetName:        {"mnist", "cifar"},
	search.DatasetDigest:      {"d1"},
	search.DatasetContext:     {"train", "eval"},
}

// randomClause returns one comparison of the filter grammar: a target of
// runTargets (a metric, param or tag of the few keys the random runs
// have, or none; an attribute; rarely a dataset field, which the index
// leaves to SQL), one of the operators the grammar accepts for it, and a
// value of the kind the operator takes.
func (e *indexEnv) randomClause(runIDs []string) string {
	rng := e.rng
	// Metrics and attributes 3 times in 10, params and tags 2, datasets
	// 1 in 21.
	ent := search.Dataset
	switch n := rng.IntN(21); {
	case n < 6:
		ent = search.Metric
	case n < 10:
		ent = search.Param
	case n < 14:
		ent = search.Tag
	case n < 20:
		ent = search.Attribute
	}
	var of []search.FilterTarget
	for _, t := range runTargets {
		if t.Entity == ent {
			of = append(of, t)
		}
	}
	t := pick(rng, of)
	c := search.Comparison{Entity: t.Entity, Key: t.Key, Op: pick(rng, t.Ops)}
	switch t.Entity {
	case search.Metric:
		c.Key = pick(rng, append(metricKeys, "none"))
	case search.Param:
		c.Key = pick(rng, append(paramKeys, "none"))
	case search.Tag:
		c.Key = pick(rng, append(tagKeys, "none"))
	}
	str := func() string {
		switch {
		case t.Key == search.AttrRunID && len(runIDs) > 0 && rng.IntN(4) > 0:
			return pick(rng, runIDs)
		case len(targetValues[t.Key]) > 0 && rng.IntN(2) == 0:
			return pick(rng, targetValues[t.Key])
		case rng.IntN(2) == 0:
			return pick(rng, likeValues)
		}
		return pick(rng, strValues)
	}
	switch t.ValueKind(c.Op) {
	case search.Number:
		f, err := strconv.ParseFloat(pick(rng, numbers), 64)
		e.must(err)
		c.Value = search.Value{Kind: search.Number, Num: f}
	case search.String:
		c.Value = search.Value{Kind: search.String, Str: str()}
	case search.List:
		c.Value = search.Value{Kind: search.List, List: []string{str()}}
		for range rng.IntN(3) {
			v := str()
			if rng.IntN(3) == 0 {
				v = c.Value.List[0] // a value listed twice: its run still comes once
			}
			c.Value.List = append(c.Value.List, v)
		}
	}
	return c.String()
}

func (e *indexEnv) randomSearch(exp string, runIDs []string) tracking.RunQuery {
	rng := e.rng
	var clauses []string
	for range rng.IntN(4) {
		clauses = append(clauses, e.randomClause(runIDs))
	}
	var order []string
	seen := map[string]bool{}
	for range rng.IntN(3) {
		if f := pick(rng, orderFields); !seen[f] {
			seen[f] = true
			order = append(order, f+pick(rng, []string{"", " ASC", " DESC"}))
		}
	}
	view := pick(rng, []tracking.ViewType{tracking.ActiveOnly, tracking.DeletedOnly, tracking.AllViews})
	return e.query([]string{exp}, strings.Join(clauses, " AND "), order, view, pick(rng, []int{1, 2, 3, 7, 50, 1000}), "")
}

// randomWrite makes one random change to the experiment's runs.
func (e *indexEnv) randomWrite(exp string, runIDs *[]string) {
	rng := e.rng
	metric := func() tracking.Metric {
		return tracking.Metric{Key: pick(rng, metricKeys), Point: metricPoint(rng)}
	}
	if len(*runIDs) == 0 || rng.IntN(8) == 0 {
		req := tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: pick(rng, startTimes), UserID: pick(rng, []string{"ann", "bob", "Ann"})}
		if rng.IntN(2) == 0 {
			req.Tags = []tracking.Tag{{Key: pick(rng, tagKeys), Value: pick(rng, strValues)}}
		}
		r, err := e.svc.CreateRun(e.ctx, req)
		if errs.CodeOf(err) == errs.Invalid {
			return // PostgreSQL: a tag value with a NUL
		}
		e.must(err)
		*runIDs = append(*runIDs, r.Info.RunID)
		return
	}
	id := pick(rng, *runIDs)
	var err error
	switch rng.IntN(11) {
	case 0, 1, 2:
		b := tracking.Batch{}
		for range rng.IntN(4) {
			b.Metrics = append(b.Metrics, metric())
		}
		if rng.IntN(3) == 0 {
			// A param logged again must have its value: give a new key a value.
			b.Params = []tracking.Param{{Key: pick(rng, paramKeys) + strconv.Itoa(rng.IntN(2)), Value: pick(rng, strValues)}}
			if rng.IntN(2) == 0 {
				b.Params[0].Key = pick(rng, paramKeys)
			}
		}
		if rng.IntN(3) == 0 {
			b.Tags = []tracking.Tag{{Key: pick(rng, tagKeys), Value: pick(rng, strValues)}}
		}
		err = e.svc.LogBatch(e.ctx, id, b)
	case 3:
		err = e.svc.SetTag(e.ctx, id, tracking.Tag{Key: pick(rng, tagKeys), Value: pick(rng, strValues)})
	case 4:
		err = e.svc.DeleteTag(e.ctx, id, pick(rng, tagKeys))
	case 5:
		err = e.svc.DeleteRun(e.ctx, id)
	case 6:
		err = e.svc.RestoreRun(e.ctx, id)
	case 7:
		st := pick(rng, []tracking.RunStatus{tracking.StatusRunning, tracking.StatusFinished, tracking.StatusFailed, tracking.StatusKilled})
		end := pick(rng, []int64{0, 1500, 2000, 2500})
		u := tracking.RunUpdate{Status: &st, EndTimeMs: &end}
		if rng.IntN(3) == 0 {
			name := pick(rng, []string{"a", "b", "É", "run"})
			u.Name = &name
		}
		_, err = e.svc.UpdateRun(e.ctx, id, u)
	case 8:
		err = e.svc.LogInputs(e.ctx, id, []tracking.DatasetInput{{
			Dataset: tracking.Dataset{Name: pick(rng, []string{"mnist", "cifar"}), Digest: "d1", SourceType: "local", Source: "s"},
			Tags:    []tracking.Tag{{Key: tracking.TagDataContext, Value: pick(rng, []string{"train", "eval"})}},
		}}, nil)
	case 9:
		if rng.IntN(4) == 0 {
			e.must(execSQL(e.ctx, e.s, `DELETE FROM runs WHERE run_id = '`+id+`'`)) // a purge, as sqlstore's PurgeRun does
			return
		}
		err = e.svc.LogParam(e.ctx, id, tracking.Param{Key: pick(rng, paramKeys), Value: pick(rng, strValues)})
	case 10:
		err = e.svc.LogMetric(e.ctx, id, metric())
	}
	if err != nil && errs.CodeOf(err) != errs.Internal {
		return // a deleted run, a param logged again with another value, ...
	}
	e.must(err)
}

func metricPoint(rng *rand.Rand) (p metrics.Point) {
	p.Step, p.TimestampMs = rng.Int64N(4), 1+rng.Int64N(3)
	p.Value = pick(rng, metricVals)
	if rng.IntN(4) == 0 {
		p.Value = rng.Float64()
	}
	return p
}

// TestSearchIndexMatchesSQL checks that searches answered from the search
// index return what the SQL path returns: random runs (random params, tags
// and latest metrics, NaN and infinities among them, missing keys, deleted
// and purged runs, ties), random writes between searches and between the
// pages of one search, random filters, orders, views and page sizes, each
// followed through its page tokens to the end.
func TestSearchIndexMatchesSQL(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			e := newIndexEnv(t, sqlstore.Options{}, seed)
			// Every page is also found with each other plan the search
			// could take: plans rarely chosen here (led orders pay off on
			// thousands of runs) are still compared.
			e.s.RunSearch().CheckSearchIndexPlans()
			if seed%2 == 0 {
				// Leave every change to a catch-up in the background:
				// a copy with the changes, or a full build.
				e.s.RunSearch().SetSearchIndexInline(0)
			}
			exp := e.experiment("diff")
			other := e.experiment("other")
			var runs, otherRuns []string
			for range 40 {
				e.randomWrite(exp, &runs)
				e.randomWrite(other, &otherRuns)
			}
			rounds := 60
			if testing.Short() {
				rounds = 20
			}
			for round := range rounds {
				for range e.rng.IntN(12) {
					e.randomWrite(exp, &runs)
				}
				if round%5 == 0 {
					e.randomWrite(other, &otherRuns)
				}
				for range 6 {
					q := e.randomSearch(exp, runs)
					// Every clause the grammar makes has SQL.
					if _, err := e.s.RunSearch().SearchRunsSQL(e.ctx, q); err != nil {
						t.Fatalf("search %+v: %v", q, err)
					}
					e.sameAllPages(q, true, nil)
				}
				// Writes between the pages of one search: each page is the
				// same both ways, and a token survives a refresh.
				q := e.randomSearch(exp, runs)
				q.MaxResults = 1 + e.rng.IntN(3)
				e.sameAllPages(q, true, func() {
					for range e.rng.IntN(3) {
						e.randomWrite(exp, &runs)
					}
				})
			}
			memory, sql, loads := e.s.RunSearch().SearchIndexCounts()
			walk, drive, led := e.s.RunSearch().SearchIndexPlans()
			t.Logf("%d runs; searches: %d from the index (%d walks, %d driven, %d led), %d with SQL; %d loads, %d full builds",
				len(runs), memory, walk, drive, led, sql, loads, e.s.RunSearch().SearchIndexBuilds())
			cw, cd, cl, mismatches := e.s.RunSearch().SearchIndexPlanChecks()
			t.Logf("pages found again with another plan: %d walks, %d driven, %d led; %d differed", cw, cd, cl, mismatches)
			if walk+cw == 0 || drive+cd == 0 || led+cl == 0 {
				t.Errorf("a plan was never used: %d+%d walks, %d+%d driven, %d+%d led (taken+checked)", walk, cw, drive, cd, led, cl)
			}
			if walk == 0 || drive == 0 {
				t.Errorf("a plan was never chosen: %d walks, %d driven", walk, drive)
			}
			if mismatches > 0 {
				t.Errorf("%d pages differed between the plans a search could take", mismatches)
			}
		})
	}
}

// TestSearchIndexLedOrder checks searches whose page is found by walking
// a led order (an equality on a param or a tag, then the search's order):
// enough runs that the plan is taken, tags that move runs from one value
// to another, metrics, deletions and new runs between the pages, with the
// changes applied by the search or by a catch-up (a new copy of the runs,
// which sorts the led order again).
func TestSearchIndexLedOrder(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%t", inline), func(t *testing.T) {
			e := newIndexEnv(t, sqlstore.Options{}, 23)
			if !inline {
				e.s.RunSearch().SetSearchIndexInline(0)
			}
			exp := e.experiment("led")
			rng := e.rng
			var runs []string
			newRun := func() {
				r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: pick(rng, startTimes)})
				e.must(err)
				runs = append(runs, r.Info.RunID)
				b := tracking.Batch{Metrics: []tracking.Metric{{Key: "loss", Point: metricPoint(rng)}}}
				if rng.IntN(8) > 0 {
					b.Params = []tracking.Param{{Key: "lr", Value: pick(rng, []string{"a", "b", "c", "d"})}}
				}
				if rng.IntN(8) > 0 {
					b.Tags = []tracking.Tag{{Key: "team", Value: pick(rng, []string{"x", "y", "z"})}}
				}
				// Nine runs in ten have opt=adam: an equality most runs pass.
				opt := "adam"
				if rng.IntN(10) == 0 {
					opt = "sgd"
				}
				b.Params = append(b.Params, tracking.Param{Key: "opt", Value: opt})
				e.must(e.svc.LogBatch(e.ctx, r.Info.RunID, b))
			}
			for range 300 {
				newRun()
			}
			write := func() {
				id := pick(rng, runs)
				var err error
				switch rng.IntN(6) {
				case 0:
					newRun()
				case 1, 2:
					err = e.svc.SetTag(e.ctx, id, tracking.Tag{Key: "team", Value: pick(rng, []string{"x", "y", "z"})})
				case 3:
					err = e.svc.LogMetric(e.ctx, id, tracking.Metric{Key: "loss", Point: metricPoint(rng)})
				case 4:
					err = e.svc.DeleteRun(e.ctx, id)
				case 5:
					err = e.svc.DeleteTag(e.ctx, id, "team")
				}
				if err != nil && errs.CodeOf(err) == errs.Internal {
					t.Fatal(err) // not a deleted run or a missing tag
				}
			}
			filters := []string{
				"params.lr = 'b' AND metrics.loss < 0.5",
				"tags.team = 'y' AND metrics.loss >= 0",
				"params.lr = 'a' AND tags.team = 'x'",
				"params.lr = 'c'",
				"tags.team = 'z' AND attributes.status = 'RUNNING'",
				// With a page of 1,000: a walk of every run (the equality
				// does not halve it), and a driven search (few runs pass).
				"params.opt = 'adam' AND metrics.loss < 0.5",
				"params.opt = 'sgd'",
			}
			_, _, led0 := e.s.RunSearch().SearchIndexPlans()
			for round := range 42 {
				order := []string{pick(rng, []string{"metrics.loss", "metrics.loss DESC", "attributes.start_time", "tags.team DESC", "params.lr"})}
				f := filters[round%len(filters)]
				max := 1 + rng.IntN(5)
				if strings.HasPrefix(f, "params.opt") {
					max = 1000
				}
				q := e.query([]string{exp}, f, order, pick(rng, []tracking.ViewType{tracking.ActiveOnly, tracking.AllViews}), max, "")
				e.sameAllPages(q, true, func() {
					for range rng.IntN(3) {
						write()
					}
				})
			}
			walk, drive, led := e.s.RunSearch().SearchIndexPlans()
			t.Logf("%d runs; %d walks, %d driven, %d led", len(runs), walk, drive, led-led0)
			if led-led0 < 100 || walk == 0 || drive == 0 {
				t.Fatalf("%d walks, %d driven, %d led: want most led, and some of each", walk, drive, led-led0)
			}
		})
	}
}

// TestSearchIndexFallsBack checks the searches the index leaves to SQL:
// they are answered the same, and with SQL.
func TestSearchIndexFallsBack(t *testing.T) {
	e := newIndexEnv(t, sqlstore.Options{}, 9)
	exp := e.experiment("fallback")
	exp2 := e.experiment("fallback-2")
	var runs, runs2 []string
	for range 30 {
		e.randomWrite(exp, &runs)
		e.randomWrite(exp2, &runs2)
	}
	for _, r := range runs {
		// Some runs were deleted or purged.
		e.svc.LogInputs(e.ctx, r, []tracking.DatasetInput{{Dataset: tracking.Dataset{Name: "mnist", Digest: "d", SourceType: "local", Source: "s"}}}, nil) //nolint:errcheck
	}
	// Searches of several experiments are each experiment's, merged
	// (TestSearchMergedMatchesSQL), up to mergeMaxExperiments of them.
	many := []string{exp, exp2}
	for i := range runsearch.MergeMaxExperiments - 1 {
		many = append(many, strconv.Itoa(1000+i))
	}
	tests := map[string]tracking.RunQuery{
		"ManyExperiments": e.query(many, "metrics.loss < 1", []string{"metrics.loss"}, tracking.AllViews, 7, ""),
		"Datasets":        e.query([]string{exp}, "datasets.name = 'mnist'", nil, tracking.AllViews, 3, ""),
		"LongPattern":     e.query([]string{exp}, "params.lr LIKE '"+strings.Repeat("%", 50_001)+"'", nil, tracking.AllViews, 3, ""),
	}
	for name, q := range tests {
		t.Run(name, func(t *testing.T) {
			_, sql0, _ := e.s.RunSearch().SearchIndexCounts()
			e.sameAllPages(q, false, nil)
			if _, sql1, _ := e.s.RunSearch().SearchIndexCounts(); sql1 == sql0 {
				t.Fatal("answered from the index")
			}
		})
	}
	// One experiment twice is one experiment; a bad id matches nothing.
	e.sameAllPages(e.query([]string{exp, exp, "x"}, "", nil, tracking.AllViews, 4, ""), true, nil)
}

// TestSearchIndexSeesEveryWrite checks that each kind of write is seen by
// the very next search: the index never answers from before a write.
func TestSearchIndexSeesEveryWrite(t *testing.T) {
	e := newIndexEnv(t, sqlstore.Options{}, 5)
	exp := e.experiment("fresh")
	var ids []string
	for i := range 5 {
		r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: int64(1000 + i)})
		e.must(err)
		ids = append(ids, r.Info.RunID)
		e.must(e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{
			Metrics: []tracking.Metric{{Key: "loss", Point: metricAt(1, float64(i))}},
			Params:  []tracking.Param{{Key: "lr", Value: "0.1"}},
			Tags:    []tracking.Tag{{Key: "team", Value: "a"}},
		}))
	}
	byLoss := e.query([]string{exp}, "", []string{"metrics.loss DESC"}, tracking.ActiveOnly, 100, "")
	first := func() *tracking.Run {
		t.Helper()
		p, err := e.same(byLoss, true)
		e.must(err)
		return p.Runs[0]
	}
	if r := first(); r.Info.RunID != ids[4] {
		t.Fatalf("first run %s, want %s", r.Info.RunID, ids[4])
	}
	steps := []struct {
		name  string
		write func() error
		check func(p tracking.RunPage) bool
	}{
		{"LogMetric", func() error {
			return e.svc.LogMetric(e.ctx, ids[0], tracking.Metric{Key: "loss", Point: metricAt(2, 99)})
		},
			func(p tracking.RunPage) bool {
				return p.Runs[0].Info.RunID == ids[0] && p.Runs[0].Data.Metrics[0].Value == 99
			}},
		{"LogMetricNaN", func() error {
			return e.svc.LogMetric(e.ctx, ids[0], tracking.Metric{Key: "loss", Point: metricAt(3, math.NaN())})
		}, func(p tracking.RunPage) bool { return p.Runs[0].Info.RunID == ids[4] }},
		{"SetTag", func() error { return e.svc.SetTag(e.ctx, ids[4], tracking.Tag{Key: "team", Value: "b"}) },
			func(p tracking.RunPage) bool { return p.Runs[0].Data.Tags[1].Value == "b" }},
		{"DeleteTag", func() error { return e.svc.DeleteTag(e.ctx, ids[4], "team") },
			func(p tracking.RunPage) bool { return len(p.Runs[0].Data.Tags) == 1 }},
		{"LogParam", func() error { return e.svc.LogParam(e.ctx, ids[4], tracking.Param{Key: "opt", Value: "adam"}) },
			func(p tracking.RunPage) bool { return len(p.Runs[0].Data.Params) == 2 }},
		{"UpdateRun", func() error {
			st := tracking.StatusFinished
			_, err := e.svc.UpdateRun(e.ctx, ids[4], tracking.RunUpdate{Status: &st})
			return err
		}, func(p tracking.RunPage) bool { return p.Runs[0].Info.Status == tracking.StatusFinished }},
		{"Rename", func() error {
			name := "renamed"
			_, err := e.svc.UpdateRun(e.ctx, ids[4], tracking.RunUpdate{Name: &name})
			return err
		}, func(p tracking.RunPage) bool { return p.Runs[0].Info.RunName == "renamed" }},
		{"LogInputs", func() error {
			return e.svc.LogInputs(e.ctx, ids[4], []tracking.DatasetInput{{Dataset: tracking.Dataset{Name: "mnist", Digest: "d", SourceType: "local", Source: "s"}}}, nil)
		}, func(p tracking.RunPage) bool { return len(p.Runs[0].Inputs.Datasets) == 1 }},
		{"DeleteRun", func() error { return e.svc.DeleteRun(e.ctx, ids[4]) },
			func(p tracking.RunPage) bool { return p.Runs[0].Info.RunID == ids[3] && len(p.Runs) == 4 }},
		{"RestoreRun", func() error { return e.svc.RestoreRun(e.ctx, ids[4]) },
			func(p tracking.RunPage) bool { return p.Runs[0].Info.RunID == ids[4] && len(p.Runs) == 5 }},
		{"DeleteExperiment", func() error { return e.svc.DeleteExperiment(e.ctx, exp) },
			func(p tracking.RunPage) bool { return len(p.Runs) == 0 }},
		{"RestoreExperiment", func() error { return e.svc.RestoreExperiment(e.ctx, exp) },
			func(p tracking.RunPage) bool { return len(p.Runs) == 5 }},
		{"PurgeRun", func() error { return execSQL(e.ctx, e.s, `DELETE FROM runs WHERE run_id = '`+ids[4]+`'`) },
			func(p tracking.RunPage) bool { return len(p.Runs) == 4 && p.Runs[0].Info.RunID == ids[3] }},
		{"CreateRun", func() error {
			r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: 5000})
			if err == nil {
				err = e.svc.LogMetric(e.ctx, r.Info.RunID, tracking.Metric{Key: "loss", Point: metricAt(0, 1000)})
				ids = append(ids, r.Info.RunID)
			}
			return err
		}, func(p tracking.RunPage) bool { return len(p.Runs) == 5 && p.Runs[0].Info.RunID == ids[5] }},
	}
	for _, st := range steps {
		e.must(st.write())
		p, err := e.same(byLoss, true)
		e.must(err)
		if !st.check(p) {
			t.Fatalf("after %s the search answered:\n%s", st.name, pageText(p))
		}
	}
}

func metricAt(step int64, v float64) metrics.Point {
	return metrics.Point{Step: step, TimestampMs: 1, Value: v}
}

// TestSearchIndexTokenAcrossRefresh checks that a page token of the index
// continues after writes (the index refreshed in between), the same as
// with SQL, and that tokens of either path work in the other.
func TestSearchIndexTokenAcrossRefresh(t *testing.T) {
	e := newIndexEnv(t, sqlstore.Options{}, 6)
	exp := e.experiment("tokens")
	var ids []string
	for i := range 10 {
		r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: 1000})
		e.must(err)
		ids = append(ids, r.Info.RunID)
		e.must(e.svc.LogMetric(e.ctx, r.Info.RunID, tracking.Metric{Key: "loss", Point: metricAt(0, float64(i))}))
	}
	q := e.query([]string{exp}, "", []string{"metrics.loss ASC"}, tracking.ActiveOnly, 4, "")
	p1, err := e.s.Tracking().SearchRuns(e.ctx, q)
	e.must(err)
	// A run before the cursor, one after it, and one of the next page moved
	// to the end.
	e.must(e.svc.LogMetric(e.ctx, ids[9], tracking.Metric{Key: "loss", Point: metricAt(1, -5)}))
	r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: 1000})
	e.must(err)
	e.must(e.svc.LogMetric(e.ctx, r.Info.RunID, tracking.Metric{Key: "loss", Point: metricAt(0, 4.5)}))
	e.must(e.svc.LogMetric(e.ctx, ids[5], tracking.Metric{Key: "loss", Point: metricAt(1, 100)}))
	q.PageToken = p1.NextPageToken
	p2, err := e.same(q, true)
	e.must(err)
	if len(p2.Runs) != 4 || p2.Runs[0].Data.Metrics[0].Value != 4 || p2.Runs[1].Data.Metrics[0].Value != 4.5 {
		t.Fatalf("second page after writes:\n%s", pageText(p2))
	}
	// The SQL path's token, followed from the index, and the other way.
	sqlPage, err := e.s.RunSearch().SearchRunsSQL(e.ctx, q)
	e.must(err)
	q.PageToken = sqlPage.NextPageToken
	e.same(q, true)
}

// TestSearchIndexBudget checks the memory budget: an experiment too large
// for it is searched with SQL, and the least recently searched experiment
// is dropped for another.
func TestSearchIndexBudget(t *testing.T) {
	fill := func(e *indexEnv, exp string, n int) {
		for i := range n {
			r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, StartTimeMs: int64(i + 1)})
			e.must(err)
			e.must(e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{
				Metrics: []tracking.Metric{{Key: "loss", Point: metricAt(0, float64(i))}},
				Params:  []tracking.Param{{Key: "lr", Value: strings.Repeat("x", 100)}},
			}))
		}
	}
	t.Run("TooLarge", func(t *testing.T) {
		e := newIndexEnv(t, sqlstore.Options{SearchIndexBytes: 20 << 10}, 7)
		exp := e.experiment("large")
		fill(e, exp, 200)
		q := e.query([]string{exp}, "", []string{"metrics.loss"}, tracking.ActiveOnly, 50, "")
		if n := e.sameAllPages(q, false, nil); n != 200 {
			t.Fatalf("%d runs", n)
		}
		if memory, _, _ := e.s.RunSearch().SearchIndexCounts(); memory != 0 {
			t.Fatalf("%d searches answered from an index over its budget", memory)
		}
		if b := e.s.RunSearch().SearchIndexBytes(); b > 20<<10 {
			t.Fatalf("the index holds %d bytes, over its budget", b)
		}
	})
	t.Run("LeastRecentDropped", func(t *testing.T) {
		e := newIndexEnv(t, sqlstore.Options{SearchIndexBytes: 250 << 10}, 8)
		a, b := e.experiment("a"), e.experiment("b")
		fill(e, a, 200)
		fill(e, b, 200)
		qa := e.query([]string{a}, "", []string{"metrics.loss"}, tracking.ActiveOnly, 10, "")
		qb := e.query([]string{b}, "", []string{"metrics.loss"}, tracking.ActiveOnly, 10, "")
		e.same(qa, true)
		e.same(qa, true)
		e.same(qb, true) // drops a
		e.same(qa, true) // builds a again, drops b
		if _, _, loads := e.s.RunSearch().SearchIndexCounts(); loads != 3 {
			t.Fatalf("%d loads, want 3", loads)
		}
		if used := e.s.RunSearch().SearchIndexBytes(); used > 250<<10 || used < 100<<10 {
			t.Fatalf("the index holds %d bytes", used)
		}
	})
	t.Run("MemosCounted", func(t *testing.T) {
		// The JSON each run keeps once encoded counts in the budget, and
		// stops counting when the run changes.
		e := newIndexEnv(t, sqlstore.Options{}, 11)
		exp := e.experiment("memo")
		fill(e, exp, 50)
		q := e.query([]string{exp}, "", []string{"metrics.loss"}, tracking.ActiveOnly, 50, "")
		search := func() tracking.RunPage {
			t.Helper()
			p, err := e.s.Tracking().SearchRuns(e.ctx, q)
			e.must(err)
			return p
		}
		p := search()
		b0 := e.s.RunSearch().SearchIndexBytes()
		kept := 0
		for _, r := range p.Runs {
			kept += len(wire.AppendRuns(nil, tracking.RunPage{Runs: []*tracking.Run{r}})) - len(`{"runs":[]}`)
		}
		p = search()
		if b1 := e.s.RunSearch().SearchIndexBytes(); b1-b0 != int64(kept) {
			t.Fatalf("the index holds %d bytes more after its runs were encoded (%d bytes of JSON)", b1-b0, kept)
		}
		for _, r := range p.Runs {
			e.must(e.svc.SetTag(e.ctx, r.Info.RunID, tracking.Tag{Key: "t", Value: "v"}))
		}
		search()
		if b2 := e.s.RunSearch().SearchIndexBytes(); b2-b0 > int64(kept)/2 {
			t.Fatalf("the index holds %d bytes more after its runs changed (%d bytes of JSON before)", b2-b0, kept)
		}
	})
	t.Run("Off", func(t *testing.T) {
		e := newIndexEnv(t, sqlstore.Options{SearchIndexBytes: -1}, 9)
		if e.s.RunSearch().HasSearchIndex() {
			t.Fatal("a negative budget left the index on")
		}
	})
}

// TestSearchIndexConcurrent runs searches while runs are written, for the
// race detector, then checks that the index and SQL agree.
func TestSearchIndexConcurrent(t *testing.T) {
	e := newIndexEnv(t, sqlstore.Options{}, 10)
	e.s.RunSearch().SetSearchIndexInline(4)
	exp := e.experiment("concurrent")
	var runs []string
	for range 30 {
		e.randomWrite(exp, &runs)
	}
	queries := make([]tracking.RunQuery, 20)
	for i := range queries {
		queries[i] = e.randomSearch(exp, runs)
	}
	done := make(chan struct{})
	errc := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errc <- nil
					return
				default:
				}
				if _, err := e.s.Tracking().SearchRuns(e.ctx, queries[(i+w)%len(queries)]); err != nil && errs.CodeOf(err) == errs.Internal {
					errc <- err
					return
				}
			}
		}()
	}
	for range 300 {
		e.randomWrite(exp, &runs)
	}
	close(done)
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range queries {
		e.sameAllPages(q, true, nil)
	}
}

// TestSearchIndexPlans checks that the search index's reads look up an
// experiment's runs, and the runs changed since a number, by index and
// never scan a table.
func TestSearchIndexPlans(t *testing.T) {
	s := MustOpen(t, sqlstore.Options{Synchronous: "NORMAL"})
	fillPlanExperiment(t, s)
	plans, err := s.RunSearch().ExplainSearchIndexReads(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 8 {
		t.Fatalf("%d queries explained, want 8", len(plans))
	}
	for q, lines := range plans {
		for _, l := range lines {
			if !strings.HasPrefix(l, "SEARCH ") {
				t.Errorf("%s:\n%s", q, strings.Join(lines, "\n"))
				break
			}
		}
	}
}

// TestSearchIndexAttributeDrives checks that a search selecting a few runs
// by an attribute (their IDs, a name, a status, a start or end time) starts
// from those runs, as from a param, and returns what SQL returns while
// runs are renamed, finish and are deleted between searches.
func TestSearchIndexAttributeDrives(t *testing.T) {
	e := newIndexEnv(t, sqlstore.Options{}, 31)
	exp := e.experiment("attrs")
	rng := e.rng
	var runs []string
	for i := range 400 {
		r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, RunName: "run-" + strconv.Itoa(i%200), StartTimeMs: int64(1000 + i)})
		e.must(err)
		runs = append(runs, r.Info.RunID)
		e.must(e.svc.LogMetric(e.ctx, r.Info.RunID, tracking.Metric{Key: "loss", Point: metricPoint(rng)}))
		// Few runs with any one value of each attribute searched: few
		// enough (under ten) that starting from them is the cheaper plan.
		st, end := tracking.StatusFinished, int64(5000+i)
		if i%100 == 0 {
			st = tracking.StatusKilled
		}
		_, err = e.svc.UpdateRun(e.ctx, r.Info.RunID, tracking.RunUpdate{Status: &st, EndTimeMs: &end})
		e.must(err)
	}
	filters := func() []string {
		a, b, c := pick(rng, runs), pick(rng, runs), pick(rng, runs)
		return []string{
			"attributes.run_id = " + quote(a),
			"attributes.run_id IN (" + quote(a) + ", " + quote(b) + ", " + quote(a) + ") AND metrics.loss < 2",
			"metrics.loss >= -1 AND attributes.run_id IN (" + quote(c) + ")",
			"attributes.run_name = " + quote("run-"+strconv.Itoa(rng.IntN(200))),
			"attributes.status = 'KILLED'",
			"attributes.start_time >= 1397",
			"attributes.end_time < 5003 AND metrics.loss <= 1",
		}
	}
	for round := range 30 {
		for _, f := range filters() {
			order := pick(rng, [][]string{nil, {"metrics.loss DESC"}, {"attributes.run_name"}, {"attributes.end_time"}})
			_, drive0, _ := e.s.RunSearch().SearchIndexPlans()
			q := e.query([]string{exp}, f, order, pick(rng, []tracking.ViewType{tracking.ActiveOnly, tracking.AllViews}), 1+rng.IntN(3), "")
			e.sameAllPages(q, true, nil)
			if _, drive, _ := e.s.RunSearch().SearchIndexPlans(); drive == drive0 {
				t.Fatalf("round %d: %q (order %v) was not driven by its attribute", round, f, order)
			}
		}
		// Between rounds: a rename, a run finishing, a deletion.
		id := pick(rng, runs)
		name := "run-" + strconv.Itoa(rng.IntN(200))
		st := pick(rng, []tracking.RunStatus{tracking.StatusRunning, tracking.StatusFinished})
		_, err := e.svc.UpdateRun(e.ctx, id, tracking.RunUpdate{Name: &name, Status: &st})
		e.must(err)
		if round%3 == 0 {
			if err := e.svc.DeleteRun(e.ctx, pick(rng, runs)); err != nil && errs.CodeOf(err) == errs.Internal {
				t.Fatal(err)
			}
		}
	}
}
