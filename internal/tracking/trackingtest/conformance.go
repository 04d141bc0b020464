// Package trackingtest holds the conformance suite that every
// tracking.Store implementation must pass. Backends call RunStoreTests from
// their own tests with a function that opens a fresh, empty store.
package trackingtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// Opener opens a fresh, empty store enforcing limits. The store is closed
// by the opener's own t.Cleanup.
type Opener func(t *testing.T, limits tracking.Limits) tracking.Store

// Compactor is implemented by stores that can compact on demand; the suite
// uses it to check that compaction changes nothing observable.
type Compactor interface {
	Compact(ctx context.Context) error
}

// env is one test's service over a fresh store, with a controllable clock.
type env struct {
	t     *testing.T
	ctx   context.Context
	store tracking.Store
	svc   *tracking.Service
	mu    sync.Mutex
	now   time.Time
}

func newEnv(t *testing.T, open Opener, limits tracking.Limits) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), now: time.UnixMilli(1_700_000_000_000)}
	e.store = open(t, limits)
	e.svc = tracking.NewService(e.store, tracking.Options{Limits: limits, Now: e.clock})
	if err := e.svc.Init(e.ctx); err != nil {
		t.Fatalf("init: %v", err)
	}
	return e
}

// clock advances by one millisecond per call, so creation times are
// distinct and ordered.
func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(time.Millisecond)
	return e.now
}

func (e *env) mustExperiment(name string) string {
	e.t.Helper()
	id, err := e.svc.CreateExperiment(e.ctx, name, "", nil)
	if err != nil {
		e.t.Fatalf("create experiment %q: %v", name, err)
	}
	return id
}

func (e *env) mustRun(expID, name string, tags ...tracking.Tag) *tracking.Run {
	e.t.Helper()
	r, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: expID, RunName: name, Tags: tags})
	if err != nil {
		e.t.Fatalf("create run %q: %v", name, err)
	}
	return r
}

func (e *env) mustLog(runID string, b tracking.Batch) {
	e.t.Helper()
	if err := e.svc.LogBatch(e.ctx, runID, b); err != nil {
		e.t.Fatalf("log batch: %v", err)
	}
}

func (e *env) mustGetRun(id string) *tracking.Run {
	e.t.Helper()
	r, err := e.svc.GetRun(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get run %s: %v", id, err)
	}
	return r
}

func metric(key string, step, ts int64, v float64) tracking.Metric {
	return tracking.Metric{Key: key, Point: metrics.Point{Step: step, TimestampMs: ts, Value: v}}
}

func wantCode(t *testing.T, err error, code errs.Code, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", code)
	}
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("want code %s, got %s (%v)", code, got, err)
	}
	msg := errs.MessageOf(err)
	for _, c := range contains {
		if !strings.Contains(msg, c) {
			t.Fatalf("message %q does not contain %q", msg, c)
		}
	}
}

// history reads the whole history through the service, page by page.
func (e *env) history(runID, key string, pageSize int) []tracking.HistoryPoint {
	e.t.Helper()
	var all []tracking.HistoryPoint
	tok := ""
	for {
		page, err := e.svc.MetricHistory(e.ctx, runID, key, pageSize, tok)
		if err != nil {
			e.t.Fatalf("history: %v", err)
		}
		all = append(all, page.Points...)
		if page.NextPageToken == "" {
			return all
		}
		tok = page.NextPageToken
	}
}

// RunStoreTests runs the conformance suite against stores from open.
func RunStoreTests(t *testing.T, open Opener) {
	limits := tracking.DefaultLimits()
	t.Run("Experiments", func(t *testing.T) { testExperiments(t, newEnv(t, open, limits)) })
	t.Run("ExperimentSearch", func(t *testing.T) { testExperimentSearch(t, newEnv(t, open, limits)) })
	t.Run("KeptIDs", func(t *testing.T) { testKeptIDs(t, newEnv(t, open, limits)) })
	t.Run("Runs", func(t *testing.T) { testRuns(t, newEnv(t, open, limits)) })
	t.Run("RunLifecycle", func(t *testing.T) { testRunLifecycle(t, newEnv(t, open, limits)) })
	t.Run("Params", func(t *testing.T) { testParams(t, newEnv(t, open, limits)) })
	t.Run("LatestMetric", func(t *testing.T) { testLatestMetric(t, newEnv(t, open, limits)) })
	t.Run("MetricHistory", func(t *testing.T) { testMetricHistory(t, newEnv(t, open, limits)) })
	t.Run("DuplicatePoints", func(t *testing.T) { testDuplicatePoints(t, newEnv(t, open, limits)) })
	t.Run("DuplicatesInEveryChunkShape", func(t *testing.T) {
		// The run may store its distinct points and no more: a re-sent
		// point taken for a new one fails its request (reads drop repeats,
		// so the history alone would not tell).
		l := limits
		l.MetricStepsPerRun = shapesPoints
		testDuplicatesInEveryChunkShape(t, newEnv(t, open, l))
	})
	t.Run("MetricContext", func(t *testing.T) { testMetricContext(t, newEnv(t, open, limits)) })
	t.Run("InterleavedBatch", func(t *testing.T) { testInterleavedBatch(t, newEnv(t, open, limits)) })
	t.Run("BulkInterval", func(t *testing.T) { testBulkInterval(t, newEnv(t, open, limits)) })
	t.Run("NegativeSteps", func(t *testing.T) { testNegativeSteps(t, newEnv(t, open, limits)) })
	t.Run("ReadRecent", func(t *testing.T) { testReadRecent(t, newEnv(t, open, limits)) })
	t.Run("SampledReads", func(t *testing.T) { testSampledReads(t, open) })
	t.Run("HistoryPagesInsideChunks", func(t *testing.T) { testHistoryPagesInsideChunks(t, newEnv(t, open, limits)) })
	t.Run("Compaction", func(t *testing.T) { testCompaction(t, newEnv(t, open, limits)) })
	t.Run("CompactionDisjoint", func(t *testing.T) { testCompactionDisjoint(t, newEnv(t, open, limits)) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, newEnv(t, open, limits)) })
	t.Run("Inputs", func(t *testing.T) { testInputs(t, newEnv(t, open, limits)) })
	t.Run("RunSearch", func(t *testing.T) { testRunSearch(t, newEnv(t, open, limits)) })
	t.Run("RunSearchPaging", func(t *testing.T) { testRunSearchPaging(t, newEnv(t, open, limits)) })
	t.Run("SearchPageData", func(t *testing.T) { testSearchPageData(t, newEnv(t, open, limits)) })
	t.Run("LoggedModels", func(t *testing.T) { testLoggedModels(t, newEnv(t, open, limits)) })
	t.Run("LoggedModelDatasets", func(t *testing.T) { testLoggedModelDatasets(t, newEnv(t, open, limits)) })
	t.Run("Registry", func(t *testing.T) { testRegistry(t, newEnv(t, open, limits)) })
	t.Run("VersionSources", func(t *testing.T) { testVersionSources(t, newEnv(t, open, limits)) })
	small := limits
	small.MetricStepsPerRun = 100
	small.ParamsPerRun = 3
	small.TagsPerRun = 6
	small.MetricKeysPerRun = 4
	t.Run("Limits", func(t *testing.T) { testLimits(t, newEnv(t, open, small)) })
}

func testExperiments(t *testing.T, e *env) {
	def, err := e.svc.GetExperiment(e.ctx, "0")
	if err != nil || def.Name != tracking.DefaultExperimentName || def.LifecycleStage != tracking.Active {
		t.Fatalf("default experiment: %+v, %v", def, err)
	}
	id, err := e.svc.CreateExperiment(e.ctx, "/Users/a@example.com/exp", "", []tracking.Tag{{Key: "k", Value: "v"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.GetExperimentByName(e.ctx, "/Users/a@example.com/exp")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.ArtifactLocation != "mlflow-artifacts:/"+id || len(got.Tags) != 1 || got.Tags[0].Value != "v" {
		t.Fatalf("got %+v", got)
	}
	_, err = e.svc.CreateExperiment(e.ctx, "/Users/a@example.com/exp", "", nil)
	wantCode(t, err, errs.AlreadyExists, "already exists")

	_, err = e.svc.GetExperiment(e.ctx, "987654")
	wantCode(t, err, errs.NotFound, "987654")
	_, err = e.svc.GetExperimentByName(e.ctx, "nope")
	wantCode(t, err, errs.NotFound, "nope")
	_, err = e.svc.GetExperiment(e.ctx, "../x")
	wantCode(t, err, errs.Invalid)
	_, err = e.svc.CreateExperiment(e.ctx, "", "", nil)
	wantCode(t, err, errs.Invalid, "name")

	if err := e.svc.RenameExperiment(e.ctx, id, "/Shared/renamed"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.svc.GetExperiment(e.ctx, id); got.Name != "/Shared/renamed" {
		t.Fatalf("rename: %+v", got)
	}
	if err := e.svc.SetExperimentTag(e.ctx, id, tracking.Tag{Key: "k", Value: "v2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetExperimentTag(e.ctx, id, tracking.Tag{Key: "k2", Value: ""}); err != nil {
		t.Fatal(err)
	}
	got, _ = e.svc.GetExperiment(e.ctx, id)
	if len(got.Tags) != 2 || got.Tags[0] != (tracking.Tag{Key: "k", Value: "v2"}) {
		t.Fatalf("tags: %+v", got.Tags)
	}
	if err := e.svc.DeleteExperimentTag(e.ctx, id, "k2"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.DeleteExperimentTag(e.ctx, id, "k2"), errs.NotFound)

	// Deleting an experiment deletes its runs; restoring restores them.
	run := e.mustRun(id, "r1")
	if err := e.svc.DeleteExperiment(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGetRun(run.Info.RunID); got.Info.LifecycleStage != tracking.Deleted {
		t.Fatalf("run of deleted experiment is %s", got.Info.LifecycleStage)
	}
	_, err = e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: id})
	wantCode(t, err, errs.Invalid, "active")
	wantCode(t, e.svc.RenameExperiment(e.ctx, id, "x"), errs.Invalid)
	_, err = e.svc.CreateExperiment(e.ctx, "/Shared/renamed", "", nil)
	wantCode(t, err, errs.AlreadyExists, "deleted")
	if err := e.svc.RestoreExperiment(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGetRun(run.Info.RunID); got.Info.LifecycleStage != tracking.Active {
		t.Fatalf("run of restored experiment is %s", got.Info.LifecycleStage)
	}
	wantCode(t, e.svc.RestoreExperiment(e.ctx, id), errs.Invalid)
}

// testKeptIDs: an importer creates experiments and runs with the source's
// ids; ids assigned afterwards never collide with them.
func testKeptIDs(t *testing.T, e *env) {
	loc := func(id string) string { return "mlflow-artifacts:/" + id }
	imported := &tracking.Experiment{ID: "41", Name: "imported", LifecycleStage: tracking.Active, CreationTimeMs: 5, LastUpdateTimeMs: 6,
		Tags: []tracking.Tag{{Key: "team", Value: "vision"}}}
	if err := e.store.CreateExperiment(e.ctx, imported, loc); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.GetExperiment(e.ctx, "41")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "imported" || got.ArtifactLocation != "mlflow-artifacts:/41" || got.CreationTimeMs != 5 || len(got.Tags) != 1 {
		t.Fatalf("imported experiment: %+v", got)
	}
	err = e.store.CreateExperiment(e.ctx, &tracking.Experiment{ID: "41", Name: "other", LifecycleStage: tracking.Active}, loc)
	wantCode(t, err, errs.AlreadyExists, "41")
	err = e.store.CreateExperiment(e.ctx, &tracking.Experiment{ID: "0", Name: "zero", LifecycleStage: tracking.Active}, loc)
	wantCode(t, err, errs.AlreadyExists, "0")
	next, err := e.svc.CreateExperiment(e.ctx, "after import", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(next, &n); err != nil || n <= 41 {
		t.Fatalf("experiment created after an import got id %q, want one above 41", next)
	}

	// A run keeps its id, times, status and user.
	const runID = "0123456789abcdef0123456789abcdef"
	r := &tracking.Run{Info: tracking.RunInfo{RunID: runID, RunName: "old", ExperimentID: "41", UserID: "ann",
		Status: tracking.StatusFailed, StartTimeMs: 1000, EndTimeMs: 2000, ArtifactURI: "mlflow-artifacts:/41/" + runID + "/artifacts",
		LifecycleStage: tracking.Active}, Data: tracking.RunData{Tags: []tracking.Tag{{Key: tracking.TagRunName, Value: "old"}}}}
	if err := e.store.CreateRun(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	gotRun := e.mustGetRun(runID)
	if gotRun.Info != r.Info {
		t.Fatalf("imported run info %+v, want %+v", gotRun.Info, r.Info)
	}
	wantCode(t, e.store.CreateRun(e.ctx, r), errs.AlreadyExists, runID)
}

func testExperimentSearch(t *testing.T, e *env) {
	var ids []string
	for i := range 25 {
		ids = append(ids, e.mustExperiment(fmt.Sprintf("/Users/u%d@x.io/exp-%02d", i%3, i)))
	}
	if err := e.svc.SetExperimentTag(e.ctx, ids[4], tracking.Tag{Key: "team", Value: "vision"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteExperiment(e.ctx, ids[7]); err != nil {
		t.Fatal(err)
	}
	collect := func(q tracking.ExperimentSearch) []string {
		var names []string
		for {
			page, err := e.svc.SearchExperiments(e.ctx, q)
			if err != nil {
				t.Fatalf("search %+v: %v", q, err)
			}
			for _, x := range page.Experiments {
				names = append(names, x.Name)
			}
			if page.NextPageToken == "" {
				return names
			}
			q.PageToken = page.NextPageToken
		}
	}
	all := collect(tracking.ExperimentSearch{MaxResults: 4})
	if len(all) != 25 { // 24 active + Default
		t.Fatalf("active experiments: %d %v", len(all), all)
	}
	// Default order: newest first.
	if all[0] != "/Users/u0@x.io/exp-24" || all[len(all)-1] != "Default" {
		t.Fatalf("order: first %q last %q", all[0], all[len(all)-1])
	}
	if got := collect(tracking.ExperimentSearch{ViewType: tracking.DeletedOnly}); len(got) != 1 || got[0] != "/Users/u1@x.io/exp-07" {
		t.Fatalf("deleted only: %v", got)
	}
	if got := collect(tracking.ExperimentSearch{ViewType: tracking.AllViews}); len(got) != 26 {
		t.Fatalf("all: %d", len(got))
	}
	if got := collect(tracking.ExperimentSearch{Filter: "name LIKE '/Users/u2@%'", OrderBy: []string{"name ASC"}}); len(got) != 8 || got[0] != "/Users/u2@x.io/exp-02" {
		t.Fatalf("like: %v", got)
	}
	if got := collect(tracking.ExperimentSearch{Filter: "tags.team = 'vision'"}); len(got) != 1 || got[0] != "/Users/u1@x.io/exp-04" {
		t.Fatalf("tag filter: %v", got)
	}
	if got := collect(tracking.ExperimentSearch{Filter: "name ILIKE '%EXP-1%'", OrderBy: []string{"name DESC"}}); len(got) != 10 || got[0] != "/Users/u2@x.io/exp-17" {
		t.Fatalf("ilike: %v", got)
	}
	_, err := e.svc.SearchExperiments(e.ctx, tracking.ExperimentSearch{Filter: "name = "})
	wantCode(t, err, errs.Invalid)
	_, err = e.svc.SearchExperiments(e.ctx, tracking.ExperimentSearch{PageToken: "garbage!"})
	wantCode(t, err, errs.Invalid, "page_token")
	_, err = e.svc.SearchExperiments(e.ctx, tracking.ExperimentSearch{MaxResults: 50001})
	wantCode(t, err, errs.Invalid, "max_results")
}

func testRuns(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/runs")
	r := e.mustRun(exp, "named", tracking.Tag{Key: "mlflow.user", Value: "alice"})
	if r.Info.RunName != "named" || r.Info.Status != tracking.StatusRunning || r.Info.UserID != "alice" ||
		r.Info.ArtifactURI != "mlflow-artifacts:/"+exp+"/"+r.Info.RunID+"/artifacts" || len(r.Info.RunID) != 32 {
		t.Fatalf("created: %+v", r.Info)
	}
	got := e.mustGetRun(r.Info.RunID)
	if got.Info != r.Info {
		t.Fatalf("get: %+v != %+v", got.Info, r.Info)
	}
	if tagOf(got.Data.Tags, tracking.TagRunName) != "named" {
		t.Fatalf("runName tag: %+v", got.Data.Tags)
	}
	// No name: generated, and stored as the tag.
	anon := e.mustRun(exp, "")
	if anon.Info.RunName == "" || tagOf(e.mustGetRun(anon.Info.RunID).Data.Tags, tracking.TagRunName) != anon.Info.RunName {
		t.Fatalf("generated name: %+v", anon.Info)
	}
	// Name given twice must agree.
	_, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: exp, RunName: "a", Tags: []tracking.Tag{{Key: tracking.TagRunName, Value: "b"}}})
	wantCode(t, err, errs.Invalid, "mlflow.runName")
	// Empty experiment id means the Default experiment.
	if d, err := e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{}); err != nil || d.Info.ExperimentID != "0" {
		t.Fatalf("default experiment run: %+v %v", d, err)
	}
	_, err = e.svc.CreateRun(e.ctx, tracking.CreateRunRequest{ExperimentID: "424242"})
	wantCode(t, err, errs.NotFound)
	_, err = e.svc.GetRun(e.ctx, strings.Repeat("ab", 16))
	wantCode(t, err, errs.NotFound)

	// Finish, then resume: RUNNING again, end time kept unless given.
	fin := tracking.StatusFinished
	end := int64(1_700_000_100_000)
	info, err := e.svc.UpdateRun(e.ctx, r.Info.RunID, tracking.RunUpdate{Status: &fin, EndTimeMs: &end})
	if err != nil || info.Status != fin || info.EndTimeMs != end {
		t.Fatalf("finish: %+v %v", info, err)
	}
	// Writes to finished runs are accepted.
	e.mustLog(r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("late", 0, 1, 1)}})
	running := tracking.StatusRunning
	info, err = e.svc.UpdateRun(e.ctx, r.Info.RunID, tracking.RunUpdate{Status: &running})
	if err != nil || info.Status != running || info.EndTimeMs != end {
		t.Fatalf("resume: %+v %v", info, err)
	}
	name := "renamed"
	info, err = e.svc.UpdateRun(e.ctx, r.Info.RunID, tracking.RunUpdate{Name: &name})
	if err != nil || info.RunName != "renamed" || tagOf(e.mustGetRun(r.Info.RunID).Data.Tags, tracking.TagRunName) != "renamed" {
		t.Fatalf("rename: %+v %v", info, err)
	}
	// Setting the tag renames too.
	e.mustLog(r.Info.RunID, tracking.Batch{Tags: []tracking.Tag{{Key: tracking.TagRunName, Value: "via-tag"}}})
	if got := e.mustGetRun(r.Info.RunID); got.Info.RunName != "via-tag" {
		t.Fatalf("tag rename: %s", got.Info.RunName)
	}
	// Tags upsert and delete.
	e.mustLog(r.Info.RunID, tracking.Batch{Tags: []tracking.Tag{{Key: "t", Value: "1"}}})
	e.mustLog(r.Info.RunID, tracking.Batch{Tags: []tracking.Tag{{Key: "t", Value: "2"}, {Key: "empty", Value: ""}}})
	got = e.mustGetRun(r.Info.RunID)
	if tagOf(got.Data.Tags, "t") != "2" || !hasTag(got.Data.Tags, "empty") {
		t.Fatalf("tags: %+v", got.Data.Tags)
	}
	if err := e.svc.DeleteTag(e.ctx, r.Info.RunID, "t"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.DeleteTag(e.ctx, r.Info.RunID, "t"), errs.NotFound)
	if hasTag(e.mustGetRun(r.Info.RunID).Data.Tags, "t") {
		t.Fatal("deleted tag still present")
	}
	// Invalid keys.
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("a//b", 0, 0, 1)}})
	wantCode(t, err, errs.Invalid, "a//b")
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("ok", -(1 << 53), 0, 1)}})
	wantCode(t, err, errs.Invalid, "outside the accepted range")
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("ok", 1<<53, 0, 1)}})
	wantCode(t, err, errs.Invalid, "step")
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("ok", 1, -5, 1)}})
	wantCode(t, err, errs.Invalid, "timestamp")
}

func testRunLifecycle(t *testing.T, e *env) {
	r := e.mustRun("0", "doomed")
	if err := e.svc.DeleteRun(e.ctx, r.Info.RunID); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGetRun(r.Info.RunID); got.Info.LifecycleStage != tracking.Deleted {
		t.Fatalf("stage %s", got.Info.LifecycleStage)
	}
	// Writes to deleted runs are refused, and leave nothing behind.
	err := e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{metric("m", 0, 0, 1)}, Params: []tracking.Param{{Key: "p", Value: "1"}}})
	wantCode(t, err, errs.Invalid, "active")
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{})
	wantCode(t, err, errs.Invalid, "active")
	fin := tracking.StatusFinished
	_, err = e.svc.UpdateRun(e.ctx, r.Info.RunID, tracking.RunUpdate{Status: &fin})
	wantCode(t, err, errs.Invalid, "active")
	if err := e.svc.RestoreRun(e.ctx, r.Info.RunID); err != nil {
		t.Fatal(err)
	}
	got := e.mustGetRun(r.Info.RunID)
	if got.Info.LifecycleStage != tracking.Active || len(got.Data.Params) != 0 || len(got.Data.Metrics) != 0 {
		t.Fatalf("restored: %+v", got)
	}
	wantCode(t, e.svc.DeleteRun(e.ctx, strings.Repeat("0", 32)), errs.NotFound)
}

func testParams(t *testing.T, e *env) {
	r := e.mustRun("0", "p")
	e.mustLog(r.Info.RunID, tracking.Batch{Params: []tracking.Param{{Key: "lr", Value: "0.1"}, {Key: "empty", Value: ""}}})
	// Same value again: a no-op.
	e.mustLog(r.Info.RunID, tracking.Batch{Params: []tracking.Param{{Key: "lr", Value: "0.1"}}})
	err := e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{
		Params:  []tracking.Param{{Key: "new", Value: "x"}, {Key: "lr", Value: "0.2"}},
		Metrics: []tracking.Metric{metric("m", 0, 0, 1)},
	})
	wantCode(t, err, errs.Invalid, "Changing param values is not allowed", "lr", "0.1", "0.2")
	got := e.mustGetRun(r.Info.RunID)
	// All or nothing: neither "new" nor the metric were stored.
	if len(got.Data.Params) != 2 || paramOf(got.Data.Params, "lr") != "0.1" || len(got.Data.Metrics) != 0 {
		t.Fatalf("after refused batch: %+v", got.Data)
	}
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Params: []tracking.Param{{Key: "d", Value: "1"}, {Key: "d", Value: "2"}}})
	wantCode(t, err, errs.Invalid, "Duplicate")
	long := strings.Repeat("x", 6001)
	err = e.svc.LogBatch(e.ctx, r.Info.RunID, tracking.Batch{Params: []tracking.Param{{Key: "long", Value: long}}})
	wantCode(t, err, errs.Invalid, "6000")
}

func testLatestMetric(t *testing.T, e *env) {
	r := e.mustRun("0", "latest")
	id := r.Info.RunID
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{
		metric("m", 5, 100, 0.5), metric("m", 9, 50, 0.9), metric("m", 2, 999, 0.2),
	}})
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("m", 9, 50, 0.1), metric("m", 3, 5000, 7)}})
	// Highest step, then timestamp, then value: (9, 50, 0.9).
	m := metricOf(e.mustGetRun(id).Data.Metrics, "m")
	if m == nil || m.Step != 9 || m.TimestampMs != 50 || m.Value != 0.9 {
		t.Fatalf("latest: %+v", m)
	}
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("m", 9, 51, math.NaN())}})
	m = metricOf(e.mustGetRun(id).Data.Metrics, "m")
	if m == nil || !math.IsNaN(m.Value) || m.TimestampMs != 51 {
		t.Fatalf("latest NaN: %+v", m)
	}
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("inf", 0, 1, math.Inf(1)), metric("inf", 1, 1, math.Inf(-1))}})
	h := e.history(id, "inf", 0)
	if len(h) != 2 || !math.IsInf(h[0].Value, 1) || !math.IsInf(h[1].Value, -1) {
		t.Fatalf("inf history: %+v", h)
	}
}

func testMetricHistory(t *testing.T, e *env) {
	r := e.mustRun("0", "hist")
	id := r.Info.RunID
	const n = 25_000
	var want []metrics.Point
	batch := make([]tracking.Metric, 0, 1000)
	for i := range n {
		// Log out of order within each batch to exercise sorting.
		step := int64(i)
		if i%1000 < 500 {
			step = int64(i/1000*1000 + 499 - i%1000)
		}
		p := metrics.Point{Step: step, TimestampMs: 1_700_000_000_000 + step*10, Value: 1 / float64(step+1)}
		want = append(want, p)
		batch = append(batch, tracking.Metric{Key: "loss", Point: p})
		if len(batch) == 1000 {
			e.mustLog(id, tracking.Batch{Metrics: batch})
			batch = batch[:0]
		}
	}
	metrics.SortPoints(want)
	for _, size := range []int{0, 1, 99, 7000, n} {
		if size == 1 {
			// Page by page through a prefix only: 25,000 requests would
			// test patience, not paging.
			tok := ""
			for i := range 300 {
				page, err := e.svc.MetricHistory(e.ctx, id, "loss", 1, tok)
				if err != nil || len(page.Points) != 1 || !metrics.Equal(page.Points[0].Point, want[i]) {
					t.Fatalf("page %d of size 1: %+v %v", i, page.Points, err)
				}
				tok = page.NextPageToken
			}
			continue
		}
		got := e.history(id, "loss", size)
		if len(got) != n {
			t.Fatalf("page size %d: %d points, want %d", size, len(got), n)
		}
		for i := range got {
			if !metrics.Equal(got[i].Point, want[i]) {
				t.Fatalf("page size %d: point %d = %+v, want %+v", size, i, got[i].Point, want[i])
			}
		}
	}
	// Unknown key: empty; unknown run: not found.
	page, err := e.svc.MetricHistory(e.ctx, id, "nope", 0, "")
	if err != nil || len(page.Points) != 0 {
		t.Fatalf("unknown key: %v %v", page, err)
	}
	_, err = e.svc.MetricHistory(e.ctx, strings.Repeat("f", 32), "loss", 0, "")
	wantCode(t, err, errs.NotFound)
	_, err = e.svc.MetricHistory(e.ctx, id, "loss", 10, "not-a-token")
	wantCode(t, err, errs.Invalid, "page_token")

	// Points appended at later steps between pages still appear.
	p1, err := e.svc.MetricHistory(e.ctx, id, "loss", 20_000, "")
	if err != nil || p1.NextPageToken == "" {
		t.Fatalf("first page: %v", err)
	}
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("loss", n+5, 1, 42)}})
	p2, err := e.svc.MetricHistory(e.ctx, id, "loss", 20_000, p1.NextPageToken)
	if err != nil || len(p2.Points) != n-20_000+1 || p2.Points[len(p2.Points)-1].Value != 42 || p2.NextPageToken != "" {
		t.Fatalf("second page: %d points, tok %q, %v", len(p2.Points), p2.NextPageToken, err)
	}
}

func testDuplicatePoints(t *testing.T, e *env) {
	r := e.mustRun("0", "dups")
	id := r.Info.RunID
	b := tracking.Batch{Metrics: []tracking.Metric{metric("m", 1, 10, 0.5), metric("m", 2, 20, 0.25), metric("m", 2, 20, 0.25)}}
	e.mustLog(id, b)
	e.mustLog(id, b) // a client retry
	// Same step, other timestamp or value: distinct points.
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("m", 2, 21, 0.25), metric("m", 2, 20, 0.3), metric("m", 3, 30, math.NaN()), metric("m", 3, 30, math.NaN())}})
	h := e.history(id, "m", 0)
	if len(h) != 5 {
		t.Fatalf("history: %d points, want 5: %+v", len(h), h)
	}
	// Dedup survives compaction.
	if c, ok := e.store.(Compactor); ok {
		for range 20 {
			e.mustLog(id, b)
		}
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		if h := e.history(id, "m", 0); len(h) != 5 {
			t.Fatalf("after compaction: %d points", len(h))
		}
	}
}

// testDuplicatesInEveryChunkShape re-sends points that lie in chunks of
// every shape a store may look in apart: a chunk that starts before the
// request's first step and reaches it, one that starts at it and goes on,
// ones that start inside the request's steps, and chunks of the first
// step alone (as series logged without steps write). Every re-sent point
// must be recognised, before and after compaction.
const shapesPoints = 10 + 11 + 3 + 10

func testDuplicatesInEveryChunkShape(t *testing.T, e *env) {
	id := e.mustRun("0", "shapes").Info.RunID
	steps := func(from, to, ts0 int64) []tracking.Metric {
		var ms []tracking.Metric
		for st := from; st <= to; st++ {
			ms = append(ms, metric("m", st, ts0+st, float64(st)/8))
		}
		return ms
	}
	a := steps(0, 9, 1000)   // [0, 9]
	b := steps(10, 20, 1000) // [10, 20], step 20 at 1020
	d := steps(20, 29, 3000) // [20, 29], step 20 at 3020
	var c [3]tracking.Metric // step 20 alone, at 2000, 2001, 2002
	for i := range c {
		c[i] = metric("m", 20, 2000+int64(i), float64(i))
	}
	batches := [][]tracking.Metric{a, b, c[:1], c[1:2], c[2:], d}
	for _, ms := range batches {
		e.mustLog(id, tracking.Batch{Metrics: ms})
	}
	resend := func(when string) {
		t.Helper()
		for _, ms := range batches {
			e.mustLog(id, tracking.Batch{Metrics: ms})
		}
		// Step 20 alone, from the chunk that reaches it, the one that
		// starts at it and the ones that hold nothing else.
		e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{b[len(b)-1], c[1], d[0]}})
		// Steps 5 to 25: a chunk that starts before them, and chunks that
		// start inside.
		var mid []tracking.Metric
		for _, m := range slices.Concat(a, b, c[:], d) {
			if m.Step >= 5 && m.Step <= 25 {
				mid = append(mid, m)
			}
		}
		e.mustLog(id, tracking.Batch{Metrics: mid})
		if h := e.history(id, "m", 0); len(h) != shapesPoints {
			t.Fatalf("%s: %d points, want %d", when, len(h), shapesPoints)
		}
	}
	resend("re-sent")
	if c, ok := e.store.(Compactor); ok {
		if err := c.Compact(e.ctx); err != nil {
			t.Fatal(err)
		}
		resend("re-sent after compaction")
	}
}

func testMetricContext(t *testing.T, e *env) {
	r := e.mustRun("0", "ctx")
	id := r.Info.RunID
	m := metric("acc", 1, 10, 0.5)
	m.ModelID = "m-123"
	m.DatasetName, m.DatasetDigest = "train", "abc"
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric("acc", 0, 5, 0.1), m}})
	h := e.history(id, "acc", 0)
	if len(h) != 2 || h[0].Context != nil || h[1].Context == nil || h[1].Context.ModelID != "m-123" || h[1].Context.DatasetDigest != "abc" {
		t.Fatalf("history contexts: %+v", h)
	}
	latest := metricOf(e.mustGetRun(id).Data.Metrics, "acc")
	if latest == nil || latest.ModelID != "m-123" || latest.DatasetName != "train" {
		t.Fatalf("latest context: %+v", latest)
	}
	// Re-sending the same point with a model id (log_model re-links
	// metrics) stores nothing new.
	again := metric("acc", 0, 5, 0.1)
	again.ModelID = "m-123"
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{again}})
	if h := e.history(id, "acc", 0); len(h) != 2 {
		t.Fatalf("re-linked point stored twice: %+v", h)
	}
}

// testInterleavedBatch logs batches whose keys and contexts alternate in
// every pattern (runs of one key, a key back after others, a context on
// some points of a key) with steps out of order: each point lands in its
// own key's history, with its context, whatever its neighbours.
func testInterleavedBatch(t *testing.T, e *env) {
	id := e.mustRun("0", "interleaved").Info.RunID
	keys := []string{"a", "b", "c"}
	want := map[string][]tracking.HistoryPoint{}
	rng := rand.New(rand.NewPCG(7, 11))
	step := int64(0)
	for range 3 {
		batch := make([]tracking.Metric, 0, 1000)
		for len(batch) < 1000 {
			key := keys[rng.IntN(len(keys))]
			for n := 1 + rng.IntN(4); n > 0 && len(batch) < 1000; n-- { // runs of one key
				m := metric(key, step, 1_700_000_000_000+step, float64(step)/3)
				step++
				var ctx *tracking.MetricContext
				if rng.IntN(5) == 0 {
					m.ModelID = "m-1"
					ctx = &tracking.MetricContext{ModelID: "m-1"}
				}
				batch = append(batch, m)
				want[key] = append(want[key], tracking.HistoryPoint{Point: m.Point, Context: ctx})
			}
		}
		rng.Shuffle(len(batch)/2, func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		e.mustLog(id, tracking.Batch{Metrics: batch})
	}
	for _, key := range keys {
		got := e.history(id, key, 0)
		w := want[key]
		slices.SortFunc(w, func(a, b tracking.HistoryPoint) int { return int(a.Step - b.Step) })
		if len(got) != len(w) {
			t.Fatalf("%s: %d points, want %d", key, len(got), len(w))
		}
		for i := range got {
			g := got[i]
			if !metrics.Equal(g.Point, w[i].Point) || (g.Context == nil) != (w[i].Context == nil) || (g.Context != nil && g.Context.ModelID != w[i].Context.ModelID) {
				t.Fatalf("%s: point %d = %+v %+v, want %+v %+v", key, i, g.Point, g.Context, w[i].Point, w[i].Context)
			}
		}
	}
}

func testBulkInterval(t *testing.T, e *env) {
	a, b := e.mustRun("0", "a").Info.RunID, e.mustRun("0", "b").Info.RunID
	var ba, bb []tracking.Metric
	for i := range 1000 {
		ba = append(ba, metric("m", int64(i), int64(i), float64(i)))
		if i%2 == 0 {
			bb = append(bb, metric("m", int64(i+1), int64(i), float64(-i)))
		}
	}
	ba[500].Value = 1e9 // a spike
	e.mustLog(a, tracking.Batch{Metrics: ba})
	e.mustLog(b, tracking.Batch{Metrics: bb})
	series, err := e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{b, a}, Key: "m", MaxResults: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 2 || series[0].RunID != b || series[1].RunID != a {
		t.Fatalf("series order: %+v", series)
	}
	for _, s := range series {
		pts := s.Points
		if len(pts) < 2 || len(pts) > 24 {
			t.Fatalf("run %s: %d points", s.RunID, len(pts))
		}
		if !slices.IsSortedFunc(pts, func(x, y tracking.HistoryPoint) int { return metrics.Compare(x.Point, y.Point) }) {
			t.Fatalf("not sorted")
		}
	}
	// Each run's first and last step is kept.
	pa := series[1].Points
	if pa[0].Step != 0 || pa[len(pa)-1].Step != 999 {
		t.Fatalf("run a ends: %d..%d", pa[0].Step, pa[len(pa)-1].Step)
	}
	pb := series[0].Points
	if pb[0].Step != 1 || pb[len(pb)-1].Step != 999 {
		t.Fatalf("run b ends: %d..%d", pb[0].Step, pb[len(pb)-1].Step)
	}
	// A step range.
	lo, hi := int64(100), int64(199)
	series, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{a}, Key: "m", StartStep: &lo, EndStep: &hi, MaxResults: 1000})
	if err != nil || len(series[0].Points) != 100 || series[0].Points[0].Step != 100 {
		t.Fatalf("range: %d points, %v", len(series[0].Points), err)
	}
	// Min/max sampling keeps the spike.
	series, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{a}, Key: "m", MaxResults: 20, Mode: tracking.SampleMinMax})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range series[0].Points {
		found = found || p.Value == 1e9
	}
	if !found || len(series[0].Points) > 22 {
		t.Fatalf("minmax lost the spike or returned too much: %d points", len(series[0].Points))
	}
	// Validation.
	_, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{a}, Key: "m", StartStep: &lo})
	wantCode(t, err, errs.Invalid, "both")
	_, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: []string{a}, Key: "m", MaxResults: 2501})
	wantCode(t, err, errs.Invalid, "max_results")
	many := make([]string, 101)
	for i := range many {
		many[i] = a
	}
	_, err = e.svc.MetricHistoryBulkInterval(e.ctx, tracking.BulkIntervalQuery{RunIDs: many, Key: "m"})
	wantCode(t, err, errs.Invalid, "GetMetricHistoryBulkInterval request must specify at most 100 run_ids. Received 101 run_ids.")
}

func testCompaction(t *testing.T, e *env) {
	c, ok := e.store.(Compactor)
	if !ok {
		t.Skip("store does not compact on demand")
	}
	r := e.mustRun("0", "compact")
	id := r.Info.RunID
	m := metric("k", 0, 0, 0)
	m.ModelID = "m-1"
	e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{m}})
	for i := range 300 {
		var b []tracking.Metric
		for j := range 30 {
			s := int64(i*30 + j + 1)
			b = append(b, metric("k", s, s*3, math.Sin(float64(s))))
		}
		e.mustLog(id, tracking.Batch{Metrics: b})
	}
	before := e.history(id, "k", 0)
	if err := c.Compact(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := e.history(id, "k", 0)
	if len(before) != 9001 || len(after) != len(before) {
		t.Fatalf("points before %d after %d", len(before), len(after))
	}
	for i := range before {
		if !metrics.Equal(before[i].Point, after[i].Point) || (before[i].Context == nil) != (after[i].Context == nil) {
			t.Fatalf("point %d changed: %+v -> %+v", i, before[i], after[i])
		}
	}
	chunks, err := e.store.SeriesChunks(e.ctx, id, "k", math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for _, c := range chunks {
		if c.Count < 100 {
			small++
		}
	}
	// One chunk holds the point with a model id; at most one more is a tail.
	if small > 2 {
		t.Fatalf("compaction left %d small chunks of %d", small, len(chunks))
	}
}

func testConcurrency(t *testing.T, e *env) {
	r := e.mustRun("0", "conc")
	id := r.Info.RunID
	const writers, batches, per = 8, 25, 40
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var ms []tracking.Metric
				for j := range per {
					step := int64((b*per+j)*writers + w)
					ms = append(ms, metric("shared", step, step, float64(w)), metric(fmt.Sprintf("own%d", w), step, step, 1))
				}
				if err := e.svc.LogBatch(e.ctx, id, tracking.Batch{Metrics: ms}); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if h := e.history(id, "shared", 0); len(h) != writers*batches*per {
		t.Fatalf("shared: %d points", len(h))
	}
	got := e.mustGetRun(id)
	if len(got.Data.Metrics) != writers+1 {
		t.Fatalf("keys: %d", len(got.Data.Metrics))
	}
}

func testInputs(t *testing.T, e *env) {
	r := e.mustRun("0", "inputs")
	id := r.Info.RunID
	ds := tracking.DatasetInput{
		Tags:    []tracking.Tag{{Key: tracking.TagDataContext, Value: "train"}},
		Dataset: tracking.Dataset{Name: "mnist", Digest: "d1", SourceType: "local", Source: "/data", Schema: "{}"},
	}
	if err := e.svc.LogInputs(e.ctx, id, []tracking.DatasetInput{ds, ds}, []tracking.ModelInput{{ModelID: "m-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.LogOutputs(e.ctx, id, []tracking.ModelOutput{{ModelID: "m-2", Step: 7}}); err != nil {
		t.Fatal(err)
	}
	got := e.mustGetRun(id)
	if len(got.Inputs.Datasets) != 1 || got.Inputs.Datasets[0].Dataset.Name != "mnist" || len(got.Inputs.Datasets[0].Tags) != 1 ||
		len(got.Inputs.Models) != 1 || len(got.Outputs.Models) != 1 || got.Outputs.Models[0].Step != 7 {
		t.Fatalf("inputs/outputs: %+v %+v", got.Inputs, got.Outputs)
	}
	err := e.svc.LogInputs(e.ctx, id, []tracking.DatasetInput{{Dataset: tracking.Dataset{Name: "x"}}}, nil)
	wantCode(t, err, errs.Invalid, "digest")
	page, err := e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{"0"}, Filter: "datasets.name = 'mnist' AND datasets.context = 'train'"})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Info.RunID != id {
		t.Fatalf("dataset search: %+v %v", page, err)
	}
}

// searchFixture creates runs with known data for the search tests.
type searchRun struct {
	id    string
	name  string
	lr    string
	team  string
	loss  float64 // NaN: logged as NaN; -1: not logged
	start int64
}

func testRunSearch(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/search")
	other := e.mustExperiment("/Shared/other")
	lrs := []string{"0.1", "0.01", "0.001"}
	var runs []searchRun
	for i := range 60 {
		sr := searchRun{name: fmt.Sprintf("run-%02d", i), lr: lrs[i%3], team: []string{"a", "b"}[i%2], loss: float64(i%17) / 16}
		switch i % 13 {
		case 5:
			sr.loss = math.NaN()
		case 7:
			sr.loss = -1
		}
		r := e.mustRun(exp, sr.name, tracking.Tag{Key: "team", Value: sr.team})
		sr.id, sr.start = r.Info.RunID, r.Info.StartTimeMs
		b := tracking.Batch{Params: []tracking.Param{{Key: "lr", Value: sr.lr}}}
		if sr.loss != -1 {
			b.Metrics = []tracking.Metric{metric("loss", 0, 1, 99), metric("loss", 1, 1, sr.loss)}
		}
		e.mustLog(sr.id, b)
		runs = append(runs, sr)
	}
	e.mustRun(other, "elsewhere")
	fin := tracking.StatusFinished
	if _, err := e.svc.UpdateRun(e.ctx, runs[3].id, tracking.RunUpdate{Status: &fin}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteRun(e.ctx, runs[4].id); err != nil {
		t.Fatal(err)
	}
	search := func(filter string, order []string, vt tracking.ViewType) []string {
		t.Helper()
		var ids []string
		q := tracking.RunSearch{ExperimentIDs: []string{exp}, Filter: filter, OrderBy: order, ViewType: vt, MaxResults: 7}
		for {
			page, err := e.svc.SearchRuns(e.ctx, q)
			if err != nil {
				t.Fatalf("search %q %v: %v", filter, order, err)
			}
			for _, r := range page.Runs {
				ids = append(ids, r.Info.RunID)
			}
			if page.NextPageToken == "" {
				return ids
			}
			q.PageToken = page.NextPageToken
		}
	}
	alive := func(sr searchRun) bool { return sr.id != runs[4].id }
	// expect computes the ids of runs matching pred, in default order
	// (start_time DESC, run_id ASC) unless less orders them.
	expect := func(pred func(searchRun) bool, less func(a, b searchRun) bool) []string {
		var sel []searchRun
		for _, sr := range runs {
			if alive(sr) && pred(sr) {
				sel = append(sel, sr)
			}
		}
		sort.SliceStable(sel, func(i, j int) bool {
			if less != nil {
				if less(sel[i], sel[j]) {
					return true
				}
				if less(sel[j], sel[i]) {
					return false
				}
			}
			if sel[i].start != sel[j].start {
				return sel[i].start > sel[j].start
			}
			return sel[i].id < sel[j].id
		})
		ids := make([]string, len(sel))
		for i, s := range sel {
			ids[i] = s.id
		}
		return ids
	}
	hasLoss := func(sr searchRun) bool { return sr.loss != -1 && !math.IsNaN(sr.loss) }
	cases := map[string]struct {
		filter string
		order  []string
		pred   func(searchRun) bool
		less   func(a, b searchRun) bool
	}{
		"All":                  {pred: func(searchRun) bool { return true }},
		"MetricLt":             {filter: "metrics.loss < 0.5", pred: func(s searchRun) bool { return hasLoss(s) && s.loss < 0.5 }},
		"MetricGeNe":           {filter: "metrics.`loss` >= 0.25 AND params.lr != '0.1'", pred: func(s searchRun) bool { return hasLoss(s) && s.loss >= 0.25 && s.lr != "0.1" }},
		"ParamEq":              {filter: "params.lr = '0.01'", pred: func(s searchRun) bool { return s.lr == "0.01" }},
		"ParamLike":            {filter: "params.lr LIKE '0.0%'", pred: func(s searchRun) bool { return strings.HasPrefix(s.lr, "0.0") }},
		"TagEq":                {filter: "tags.team = 'a'", pred: func(s searchRun) bool { return s.team == "a" }},
		"TagLikeCaseSensitive": {filter: "tags.team LIKE 'A'", pred: func(searchRun) bool { return false }},
		"RunNameILike":         {filter: "attributes.run_name ILIKE 'RUN-1%'", pred: func(s searchRun) bool { return strings.HasPrefix(s.name, "run-1") }},
		"Status":               {filter: "attributes.status = 'FINISHED'", pred: func(s searchRun) bool { return s.id == runs[3].id }},
		"RunIDIn": {filter: fmt.Sprintf("attributes.run_id IN ('%s', '%s')", runs[1].id, runs[2].id),
			pred: func(s searchRun) bool { return s.id == runs[1].id || s.id == runs[2].id }},
		"ParamIsNull": {filter: "params.missing IS NULL AND params.lr IS NOT NULL", pred: func(searchRun) bool { return true }},
		"LossDesc": {order: []string{"metrics.loss DESC"}, pred: func(searchRun) bool { return true },
			less: func(a, b searchRun) bool {
				return lossRank(a, true) < lossRank(b, true) || (lossRank(a, true) == lossRank(b, true) && hasLoss(a) && a.loss > b.loss)
			}},
		"LossAsc": {order: []string{"metrics.loss"}, pred: func(searchRun) bool { return true },
			less: func(a, b searchRun) bool {
				return lossRank(a, false) < lossRank(b, false) || (lossRank(a, false) == lossRank(b, false) && hasLoss(a) && a.loss < b.loss)
			}},
		"ParamThenName": {order: []string{"params.lr ASC", "attributes.run_name DESC"}, pred: func(searchRun) bool { return true },
			less: func(a, b searchRun) bool { return a.lr < b.lr || (a.lr == b.lr && a.name > b.name) }},
		"StartAsc": {order: []string{"attributes.start_time ASC"}, pred: func(searchRun) bool { return true },
			less: func(a, b searchRun) bool { return a.start < b.start }},
		// Times compared with numbers that are no int64: with a fraction,
		// beyond its range (PostgreSQL binds them as the column's type).
		"StartAfterFraction": {filter: fmt.Sprintf("attributes.start_time > %d.5", runs[29].start),
			pred: func(s searchRun) bool { return s.start > runs[29].start }},
		"StartAtMostFraction": {filter: fmt.Sprintf("attributes.start_time <= %d.5 AND attributes.start_time != 0.5", runs[29].start),
			pred: func(s searchRun) bool { return s.start <= runs[29].start }},
		"StartEqFraction":  {filter: fmt.Sprintf("attributes.start_time = %d.5", runs[29].start), pred: func(searchRun) bool { return false }},
		"StartBeyondInt64": {filter: "attributes.start_time < 1e300 AND attributes.start_time > -1e300", pred: func(searchRun) bool { return true }},
		// No run has ended: no end time compares.
		"EndNeBeyondInt64": {filter: "attributes.end_time != 1e300", pred: func(searchRun) bool { return false }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := search(c.filter, c.order, tracking.ActiveOnly)
			want := expect(c.pred, c.less)
			if !slices.Equal(got, want) {
				t.Fatalf("filter %q order %v:\n got %d %v\nwant %d %v", c.filter, c.order, len(got), got, len(want), want)
			}
		})
	}
	if got := search("", nil, tracking.DeletedOnly); len(got) != 1 || got[0] != runs[4].id {
		t.Fatalf("deleted only: %v", got)
	}
	if got := search("", nil, tracking.AllViews); len(got) != len(runs) {
		t.Fatalf("all views: %d", len(got))
	}
	// A search of two experiments, the other one's run among these in one
	// order, page by page.
	t.Run("TwoExperiments", func(t *testing.T) {
		var got []string
		q := tracking.RunSearch{ExperimentIDs: []string{other, exp}, OrderBy: []string{"attributes.run_name DESC"}, MaxResults: 7}
		for {
			page, err := e.svc.SearchRuns(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				got = append(got, r.Info.RunName)
			}
			if page.NextPageToken == "" {
				break
			}
			q.PageToken = page.NextPageToken
		}
		var want []string
		for i := len(runs) - 1; i >= 0; i-- {
			if alive(runs[i]) {
				want = append(want, runs[i].name)
			}
		}
		want = append(want, "elsewhere")
		if !slices.Equal(got, want) {
			t.Fatalf("got %v\nwant %v", got, want)
		}
	})
	for _, bad := range []string{"metrics.loss <", "params.lr = 1", "foo.bar = 'x'", "metrics.a = 1 OR metrics.b = 2"} {
		_, err := e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{exp}, Filter: bad})
		wantCode(t, err, errs.Invalid)
	}
	// A token replayed against another query is refused.
	page, err := e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{exp}, MaxResults: 3})
	if err != nil || page.NextPageToken == "" {
		t.Fatalf("first page: %v", err)
	}
	_, err = e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{exp}, MaxResults: 3, Filter: "params.lr = '0.1'", PageToken: page.NextPageToken})
	wantCode(t, err, errs.Invalid, "page_token")
}

// lossRank orders present values first, then NaN, then missing.
func lossRank(s searchRun, _ bool) int {
	switch {
	case s.loss == -1:
		return 2
	case math.IsNaN(s.loss):
		return 1
	}
	return 0
}

func testRunSearchPaging(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/paging")
	seen := map[string]int{}
	var original []string
	for i := range 40 {
		original = append(original, e.mustRun(exp, fmt.Sprintf("r%d", i)).Info.RunID)
	}
	q := tracking.RunSearch{ExperimentIDs: []string{exp}, MaxResults: 6}
	for {
		page, err := e.svc.SearchRuns(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			seen[r.Info.RunID]++
		}
		// New runs (newer start times, so they sort first) arrive while
		// the client pages.
		e.mustRun(exp, "late")
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	for _, id := range original {
		if seen[id] != 1 {
			t.Fatalf("run %s seen %d times", id, seen[id])
		}
	}
}

func testLimits(t *testing.T, e *env) {
	r := e.mustRun("0", "limits")
	id := r.Info.RunID
	var ms []tracking.Metric
	for i := range 60 {
		ms = append(ms, metric("a", int64(i), 0, 1))
	}
	e.mustLog(id, tracking.Batch{Metrics: ms})
	for i := range ms {
		ms[i].Step += 60
	}
	err := e.svc.LogBatch(e.ctx, id, tracking.Batch{Metrics: ms})
	wantCode(t, err, errs.LimitExceeded, "metric steps per run", "60", "100")
	if h := e.history(id, "a", 0); len(h) != 60 {
		t.Fatalf("refused batch left %d points", len(h))
	}
	// Duplicates of stored points do not count against the limit.
	e.mustLog(id, tracking.Batch{Metrics: ms[:10]})
	e.mustLog(id, tracking.Batch{Metrics: ms[:10]})
	e.mustLog(id, tracking.Batch{Params: []tracking.Param{{Key: "p1", Value: "1"}, {Key: "p2", Value: "1"}, {Key: "p3", Value: "1"}}})
	err = e.svc.LogBatch(e.ctx, id, tracking.Batch{Params: []tracking.Param{{Key: "p4", Value: "1"}}})
	wantCode(t, err, errs.LimitExceeded, "params per run", "3")
	for i := range 4 { // mlflow.runName is one of the 6 tags
		e.mustLog(id, tracking.Batch{Tags: []tracking.Tag{{Key: fmt.Sprintf("t%d", i), Value: "x"}}})
	}
	e.mustLog(id, tracking.Batch{Tags: []tracking.Tag{{Key: "t0", Value: "updated"}}}) // an update is not a new tag
	e.mustLog(id, tracking.Batch{Tags: []tracking.Tag{{Key: "t4", Value: "x"}}})
	err = e.svc.LogBatch(e.ctx, id, tracking.Batch{Tags: []tracking.Tag{{Key: "t5", Value: "x"}}})
	wantCode(t, err, errs.LimitExceeded, "tags per run", "6")
	for i := range 3 {
		e.mustLog(id, tracking.Batch{Metrics: []tracking.Metric{metric(fmt.Sprintf("k%d", i), 0, 0, 1)}})
	}
	err = e.svc.LogBatch(e.ctx, id, tracking.Batch{Metrics: []tracking.Metric{metric("k9", 0, 0, 1)}})
	wantCode(t, err, errs.LimitExceeded, "metric keys per run", "4")
	// Batch size limits.
	big := make([]tracking.Metric, 1001)
	for i := range big {
		big[i] = metric("a", 0, int64(i), 1)
	}
	err = e.svc.LogBatch(e.ctx, id, tracking.Batch{Metrics: big})
	wantCode(t, err, errs.LimitExceeded, "1000")
}

func testLoggedModels(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/models")
	run := e.mustRun(exp, "trainer")
	m, err := e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{
		ExperimentID: exp, Name: "model", SourceRunID: run.Info.RunID,
		Params: []tracking.Param{{Key: "lr", Value: "0.1"}}, Tags: []tracking.Tag{{Key: "mlflow.source.name", Value: "train.py"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "m-") || m.Status != tracking.ModelPending || m.ArtifactURI != "mlflow-artifacts:/"+exp+"/models/"+m.ID+"/artifacts" {
		t.Fatalf("created: %+v", m)
	}
	// Metrics logged with the model id are linked to it.
	mt := metric("val_loss", 3, 30, 0.25)
	mt.ModelID = m.ID
	e.mustLog(run.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{mt, metric("val_loss", 1, 10, 0.5)}})
	got, err := e.svc.FinalizeLoggedModel(e.ctx, m.ID, tracking.ModelReady)
	if err != nil || got.Status != tracking.ModelReady || len(got.Params) != 1 || len(got.Tags) != 1 {
		t.Fatalf("finalized: %+v %v", got, err)
	}
	if len(got.Metrics) != 1 || got.Metrics[0].Value != 0.25 || got.Metrics[0].RunID != run.Info.RunID {
		t.Fatalf("model metrics: %+v", got.Metrics)
	}
	if err := e.svc.SetLoggedModelTags(e.ctx, m.ID, []tracking.Tag{{Key: "stage", Value: "dev"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.LogLoggedModelParams(e.ctx, m.ID, []tracking.Param{{Key: "layers", Value: "2"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.LogLoggedModelParams(e.ctx, m.ID, []tracking.Param{{Key: "lr", Value: "0.2"}}), errs.Invalid, "lr")
	other, err := e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{ExperimentID: exp, Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{ExperimentID: exp, Name: "bad/name"})
	wantCode(t, err, errs.Invalid, "name")
	page, err := e.svc.SearchLoggedModels(e.ctx, tracking.LoggedModelSearch{ExperimentIDs: []string{exp}, Filter: "name = 'model' AND tags.stage = 'dev' AND metrics.val_loss < 0.3 AND params.layers = '2'"})
	if err != nil || len(page.Models) != 1 || page.Models[0].ID != m.ID {
		t.Fatalf("search: %+v %v", page, err)
	}
	page, err = e.svc.SearchLoggedModels(e.ctx, tracking.LoggedModelSearch{ExperimentIDs: []string{exp}, MaxResults: 1,
		OrderBy: []tracking.LoggedModelOrder{{Field: "name", Ascending: true}}})
	if err != nil || len(page.Models) != 1 || page.Models[0].ID != m.ID || page.NextPageToken == "" {
		t.Fatalf("search page 1: %+v %v", page, err)
	}
	page, err = e.svc.SearchLoggedModels(e.ctx, tracking.LoggedModelSearch{ExperimentIDs: []string{exp}, MaxResults: 1,
		OrderBy: []tracking.LoggedModelOrder{{Field: "name", Ascending: true}}, PageToken: page.NextPageToken})
	if err != nil || len(page.Models) != 1 || page.Models[0].ID != other.ID || page.NextPageToken != "" {
		t.Fatalf("search page 2: %+v %v", page, err)
	}
	if err := e.svc.DeleteLoggedModelTag(e.ctx, m.ID, "stage"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.DeleteLoggedModelTag(e.ctx, m.ID, "stage"), errs.NotFound)
	if err := e.svc.DeleteLoggedModel(e.ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetLoggedModel(e.ctx, other.ID, false)
	wantCode(t, err, errs.NotFound, other.ID)
	if d, err := e.svc.GetLoggedModel(e.ctx, other.ID, true); err != nil || d.LifecycleStage != tracking.Deleted {
		t.Fatalf("allow deleted: %+v %v", d, err)
	}
}

func testRegistry(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/registry")
	run := e.mustRun(exp, "r")
	m, err := e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{ExperimentID: exp, Name: "model", SourceRunID: run.Info.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateRegisteredModel(e.ctx, "bert", "a model", nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CreateRegisteredModel(e.ctx, "bert", "", nil)
	wantCode(t, err, errs.AlreadyExists, "bert")
	v1, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "bert", Source: "models:/" + m.ID, ModelID: m.ID})
	if err != nil || v1.Version != "1" || v1.StorageLocation != m.ArtifactURI || v1.RunID != run.Info.RunID || v1.ModelID != m.ID {
		t.Fatalf("v1: %+v %v", v1, err)
	}
	v2, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "bert", Source: "runs:/" + run.Info.RunID + "/model", RunID: run.Info.RunID})
	if err != nil || v2.Version != "2" || v2.StorageLocation != run.Info.ArtifactURI+"/model" {
		t.Fatalf("v2: %+v %v", v2, err)
	}
	uri, err := e.svc.ModelVersionDownloadURI(e.ctx, "bert", "1")
	if err != nil || uri != m.ArtifactURI {
		t.Fatalf("download uri: %q %v", uri, err)
	}
	if err := e.svc.SetModelAlias(e.ctx, "bert", "champion", "2"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.svc.SetModelAlias(e.ctx, "bert", "champion", "9"), errs.NotFound)
	wantCode(t, e.svc.SetModelAlias(e.ctx, "bert", "latest", "1"), errs.Invalid)
	byAlias, err := e.svc.GetModelVersionByAlias(e.ctx, "bert", "champion")
	if err != nil || byAlias.Version != "2" || len(byAlias.Aliases) != 1 {
		t.Fatalf("alias: %+v %v", byAlias, err)
	}
	if _, err := e.svc.TransitionModelVersionStage(e.ctx, "bert", "1", "production", false); err != nil {
		t.Fatal(err)
	}
	rm, err := e.svc.GetRegisteredModel(e.ctx, "bert")
	if err != nil || len(rm.LatestVersions) != 2 || len(rm.Aliases) != 1 || rm.Description != "a model" {
		t.Fatalf("registered: %+v %v", rm, err)
	}
	// The logged model knows its registrations.
	if lm, _ := e.svc.GetLoggedModel(e.ctx, m.ID, false); len(lm.Registrations) != 1 || lm.Registrations[0].Version != "1" {
		t.Fatalf("registrations: %+v", lm.Registrations)
	}
	versions, _, err := e.svc.SearchModelVersions(e.ctx, tracking.RegistrySearch{Filter: "name = 'bert' AND run_id = '" + run.Info.RunID + "'"})
	if err != nil || len(versions) != 2 || versions[0].Version != "2" {
		t.Fatalf("search versions: %+v %v", versions, err)
	}
	models, _, err := e.svc.SearchRegisteredModels(e.ctx, tracking.RegistrySearch{Filter: "name LIKE 'be%'"})
	if err != nil || len(models) != 1 {
		t.Fatalf("search models: %+v %v", models, err)
	}
	if err := e.svc.DeleteModelVersion(e.ctx, "bert", "2"); err != nil {
		t.Fatal(err)
	}
	// Version numbers are never reused.
	v3, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "bert", Source: "models:/" + m.ID, ModelID: m.ID})
	if err != nil || v3.Version != "3" {
		t.Fatalf("v3: %+v %v", v3, err)
	}
	if _, err := e.svc.RenameRegisteredModel(e.ctx, "bert", "bert-base"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GetModelVersion(e.ctx, "bert-base", "3"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteRegisteredModel(e.ctx, "bert-base"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetRegisteredModel(e.ctx, "bert-base")
	wantCode(t, err, errs.NotFound)
}

func tagOf(tags []tracking.Tag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}

func hasTag(tags []tracking.Tag, key string) bool {
	for _, t := range tags {
		if t.Key == key {
			return true
		}
	}
	return false
}

func paramOf(ps []tracking.Param, key string) string {
	for _, p := range ps {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

func metricOf(ms []tracking.Metric, key string) *tracking.Metric {
	for i := range ms {
		if ms[i].Key == key {
			return &ms[i]
		}
	}
	return nil
}
