package launcher_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runevents/runeventstest"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/runlogs/runlogstest"
	"github.com/sextant/sextant/internal/tracking"
)

// fakeServer is an in-memory tracking server for the launcher: the
// tracking calls it needs, and a real runlogs.Service over a MemStore for
// the log, so deduplication works as on the server.
type fakeServer struct {
	mu    sync.Mutex
	exps  map[string]*tracking.Experiment
	runs  map[string]*tracking.Run
	order []string
	n     int
	mem   *runlogstest.MemStore
	logs  *runlogs.Service
	// AppendHook, when set, runs before each append; an error it returns
	// is the append's answer. stored says whether to store the batch first
	// (an answer lost after the server stored it).
	AppendHook func(b runlogs.Batch) (stored bool, err error)
	appends    int
	// events are the runs' events; complete the checkpoint paths that
	// have their .metadata.
	evmem    *runeventstest.MemStore
	events   *runevents.Service
	complete map[string]bool
}

func newFakeServer() *fakeServer {
	f := &fakeServer{exps: map[string]*tracking.Experiment{}, runs: map[string]*tracking.Run{}, mem: runlogstest.NewMemStore(runlogs.Limits{})}
	f.logs = runlogs.NewService(f.mem, runlogs.Options{})
	f.evmem = runeventstest.NewMemStore()
	f.events = runevents.NewService(f.evmem, runevents.Options{})
	f.complete = map[string]bool{}
	return f
}

func (f *fakeServer) GetExperimentByName(ctx context.Context, name string) (*tracking.Experiment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.exps {
		if e.Name == name {
			c := *e
			return &c, nil
		}
	}
	return nil, errs.Errorf(errs.NotFound, "Could not find experiment with name %s", name)
}

func (f *fakeServer) GetExperiment(ctx context.Context, id string) (*tracking.Experiment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.exps[id]
	if e == nil {
		return nil, errs.Errorf(errs.NotFound, "No Experiment with id=%s exists", id)
	}
	c := *e
	return &c, nil
}

func (f *fakeServer) CreateExperiment(ctx context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.exps {
		if e.Name == name {
			return "", errs.Errorf(errs.AlreadyExists, "Experiment '%s' already exists.", name)
		}
	}
	f.n++
	id := fmt.Sprint(f.n)
	f.exps[id] = &tracking.Experiment{ID: id, Name: name, LifecycleStage: tracking.Active, ArtifactLocation: "mlflow-artifacts:/" + id}
	return id, nil
}

func (f *fakeServer) CreateRun(ctx context.Context, req tracking.CreateRunRequest) (*tracking.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("%032x", f.n)
	r := &tracking.Run{Info: tracking.RunInfo{RunID: id, RunName: req.RunName, ExperimentID: req.ExperimentID, UserID: req.UserID,
		Status: tracking.StatusRunning, StartTimeMs: req.StartTimeMs, LifecycleStage: tracking.Active}}
	r.Data.Tags = append(r.Data.Tags, req.Tags...)
	f.runs[id] = r
	f.order = append(f.order, id)
	f.mem.AddRun(id)
	f.evmem.AddRun(id)
	c := *r
	return &c, nil
}

func (f *fakeServer) GetRun(ctx context.Context, id string) (*tracking.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	if r == nil {
		return nil, errs.Errorf(errs.NotFound, "Run with id=%s not found", id)
	}
	c := *r
	c.Data.Tags = slices.Clone(r.Data.Tags)
	return &c, nil
}

func (f *fakeServer) UpdateRun(ctx context.Context, id string, u tracking.RunUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	if r == nil {
		return errs.Errorf(errs.NotFound, "Run with id=%s not found", id)
	}
	if u.Status != nil {
		r.Info.Status = *u.Status
		f.mem.SetStatus(id, *u.Status)
	}
	if u.EndTimeMs != nil {
		r.Info.EndTimeMs = *u.EndTimeMs
	}
	if u.Name != nil {
		r.Info.RunName = *u.Name
	}
	return nil
}

func (f *fakeServer) SetTags(ctx context.Context, runID string, tags ...tracking.Tag) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[runID]
	if r == nil {
		return errs.Errorf(errs.NotFound, "Run with id=%s not found", runID)
	}
	for _, t := range tags {
		i := slices.IndexFunc(r.Data.Tags, func(x tracking.Tag) bool { return x.Key == t.Key })
		if i >= 0 {
			r.Data.Tags[i] = t
		} else {
			r.Data.Tags = append(r.Data.Tags, t)
		}
	}
	return nil
}

var tagFilter = regexp.MustCompile("^tags\\.`([^`]+)` = '([^']*)'$")

var tagSet = regexp.MustCompile("^tags\\.`([^`]+)` IS NOT NULL$")

func (f *fakeServer) SearchRuns(ctx context.Context, experimentIDs []string, filter string, orderBy []string, max int) ([]*tracking.Run, error) {
	if m := tagSet.FindStringSubmatch(filter); m != nil && slices.Equal(orderBy, []string{"attributes.start_time DESC"}) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []*tracking.Run
		for i := len(f.order) - 1; i >= 0 && len(out) < max; i-- {
			r := f.runs[f.order[i]]
			if slices.Contains(experimentIDs, r.Info.ExperimentID) && slices.ContainsFunc(r.Data.Tags, func(t tracking.Tag) bool { return t.Key == m[1] }) {
				c := *r
				out = append(out, &c)
			}
		}
		return out, nil
	}
	m := tagFilter.FindStringSubmatch(filter)
	if m == nil {
		return nil, errs.Errorf(errs.Invalid, "fake: unsupported filter %q", filter)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*tracking.Run
	for _, id := range f.order {
		r := f.runs[id]
		if !slices.Contains(experimentIDs, r.Info.ExperimentID) || tagOf(r, m[1]) != m[2] {
			continue
		}
		c := *r
		out = append(out, &c)
		if len(out) == max {
			break
		}
	}
	return out, nil
}

func (f *fakeServer) AppendLogs(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error) {
	f.mu.Lock()
	hook := f.AppendHook
	f.appends++
	f.mu.Unlock()
	if hook != nil {
		stored, err := hook(b)
		if err != nil {
			if stored {
				_, _ = f.logs.Append(ctx, runID, b)
			}
			return runlogs.AppendResult{}, err
		}
	}
	return f.logs.Append(ctx, runID, b)
}

func (f *fakeServer) AppendEvents(ctx context.Context, runID string, evs []runevents.Event) ([]int64, error) {
	return f.events.Append(ctx, runID, evs)
}

func (f *fakeServer) ListEvents(ctx context.Context, q runevents.Query) (runevents.Page, error) {
	return f.events.List(ctx, q)
}

func (f *fakeServer) CheckpointComplete(ctx context.Context, path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.complete[path], nil
}

// setComplete marks checkpoint paths complete (their .metadata landed).
func (f *fakeServer) setComplete(paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range paths {
		f.complete[p] = true
	}
}

// setMetrics sets the latest points of a run's metrics.
func (f *fakeServer) setMetrics(id string, ms ...tracking.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[id].Data.Metrics = ms
}

func tagOf(r *tracking.Run, key string) string {
	for _, t := range r.Data.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}

// run returns a copy of a run.
func (f *fakeServer) run(tb testing.TB, id string) *tracking.Run {
	tb.Helper()
	r, err := f.GetRun(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// lines returns a run's stored log.
func (f *fakeServer) lines(tb testing.TB, runID string) []runlogs.Line {
	tb.Helper()
	_, ls := runlogstest.ReadAll(tb, f.mem, runID)
	return ls
}

// firstRun returns the id of the first run created.
func (f *fakeServer) firstRun() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.order[0]
}
