package runevents_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runevents/runeventstest"
)

// fakeRuns is one running run whose activity and GPU utilisation the test
// sets.
type fakeRuns struct {
	mu   sync.Mutex
	run  runevents.RunActivity
	util []runevents.UtilPoint
	tags map[string]string
	sent []runevents.Notification
	// failDeletes makes the next DeleteRunTag calls fail.
	failDeletes int
}

func (f *fakeRuns) RunningRuns(ctx context.Context) ([]runevents.RunActivity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []runevents.RunActivity{f.run}, nil
}

func (f *fakeRuns) RunUtilization(ctx context.Context, runID string, from, to int64) ([]runevents.UtilPoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []runevents.UtilPoint
	for _, p := range f.util {
		if p.TimeMs >= from && p.TimeMs < to {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeRuns) SetRunTag(ctx context.Context, runID, k, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tags[k] = v
	return nil
}

func (f *fakeRuns) DeleteRunTag(ctx context.Context, runID, k string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDeletes > 0 {
		f.failDeletes--
		return errors.New("database is busy")
	}
	delete(f.tags, k)
	return nil
}

func (f *fakeRuns) Notify(n runevents.Notification) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, n)
}

// watchedRun is a run of a fresh in-memory event store, named name and
// started at t0, and the fake that reports it running; the store's
// service is what the watcher writes its spans to.
func watchedRun(t *testing.T, name string) (*runevents.Service, *fakeRuns, int64) {
	h := runeventstest.MemHarness(t)
	id := h.NewRun(t)
	t0 := int64(1_800_000_000_000)
	f := &fakeRuns{run: runevents.RunActivity{RunID: id, RunName: name, ExperimentID: "1", StartMs: t0, LastMetricMs: t0}, tags: map[string]string{}}
	return runevents.NewService(h.Store, runevents.Options{}), f, t0
}

// TestWatcherIdleAndStalled: with a 60 s idle time and a 90 s stall time,
// GPUs under 5% for 60 s open an idle span (tag, notification), a busy
// sample closes it; a run without metrics, output or events for 90 s
// opens a stalled span, which new output closes. A replica without the
// lease does nothing.
func TestWatcherIdleAndStalled(t *testing.T) {
	svc, f, t0 := watchedRun(t, "r")
	id := f.run.RunID
	now := t0
	leader := true
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{IdleFor: 60 * time.Second, StallFor: 90 * time.Second, Every: 10 * time.Second,
		GPUs: f, Tags: f, Notifier: f, Now: func() time.Time { return time.UnixMilli(now) }, Leader: func(context.Context) bool { return leader }})
	ctx := context.Background()
	step := func(util float64) {
		t.Helper()
		now += 10_000
		f.mu.Lock()
		f.util = append(f.util, runevents.UtilPoint{TimeMs: now, MaxUtil: util})
		f.run.LastMetricMs = now // metrics keep coming: not stalled
		f.mu.Unlock()
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spans := func(k runevents.Kind) []runevents.Event {
		evs, err := svc.All(ctx, runevents.Query{RunID: id, Kinds: []runevents.Kind{k}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	for range 3 {
		step(90)
	}
	busyUntil := now
	for i := range 5 { // 50 s under 5%: not yet idle
		step(2)
		if i == 4 && len(spans(runevents.KindIdle)) != 0 {
			t.Fatal("idle after 50 s of a 60 s threshold")
		}
	}
	step(3) // 60 s
	idle := spans(runevents.KindIdle)
	if len(idle) != 1 || !idle[0].Open || idle[0].TimeMs != busyUntil+10_000 || f.tags[runevents.TagAlert] == "" || len(f.sent) != 1 || f.sent[0].Closed {
		t.Fatalf("after 60 s idle: %+v, tags %v, sent %d", idle, f.tags, len(f.sent))
	}
	step(1)
	if got := spans(runevents.KindIdle); len(got) != 1 || len(f.sent) != 1 {
		t.Fatalf("idle is reported again: %+v, %d notifications", got, len(f.sent))
	}
	step(50) // busy again
	idle = spans(runevents.KindIdle)
	if len(idle) != 1 || idle[0].Open || idle[0].EndMs != now || f.tags[runevents.TagAlert] != "" || len(f.sent) != 2 || !f.sent[1].Closed {
		t.Fatalf("after a busy sample: %+v, tags %v, sent %+v", idle, f.tags, f.sent)
	}

	// Stalled: nothing new from the run for 90 s (GPUs busy throughout).
	f.mu.Lock()
	last := f.run.LastMetricMs
	f.mu.Unlock()
	for range 9 {
		now += 10_000
		f.mu.Lock()
		f.util = append(f.util, runevents.UtilPoint{TimeMs: now, MaxUtil: 80})
		f.mu.Unlock()
		leader = now%20_000 == 0 // half the looks happen on another replica
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	leader = true
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	st := spans(runevents.KindStalled)
	if len(st) != 1 || !st[0].Open || st[0].TimeMs != last || len(f.sent) != 3 {
		t.Fatalf("after 90 s without output: %+v, sent %d", st, len(f.sent))
	}
	now += 5_000
	f.mu.Lock()
	f.run.LastLogMs = now
	f.mu.Unlock()
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if st := spans(runevents.KindStalled); len(st) != 1 || st[0].Open || st[0].EndMs != now || len(f.sent) != 4 {
		t.Fatalf("after new output: %+v, sent %d", st, len(f.sent))
	}
	// Not the leader: nothing happens, however long the run stalls.
	leader = false
	now += 10 * 60_000
	if err := w.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if st := spans(runevents.KindStalled); len(st) != 1 {
		t.Fatalf("a replica without the lease watched: %+v", st)
	}
}

// TestWatcherAbandonedRuns: a run first seen silent for longer than
// AbandonedAfter (a job killed without ending its run, an imported run)
// gets no stalled span, tag or notification; once it moves it is watched
// again and stalls as any run. A run that stalled while watched keeps its
// span however long it stays silent.
func TestWatcherAbandonedRuns(t *testing.T) {
	svc, f, t0 := watchedRun(t, "old")
	id := f.run.RunID
	now := t0 + 3*24*3_600_000 // three days after the run last moved
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{StallFor: 15 * time.Minute, Every: 30 * time.Second,
		Tags: f, Notifier: f, Now: func() time.Time { return time.UnixMilli(now) }})
	ctx := context.Background()
	tick := func() []runevents.Event {
		t.Helper()
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := svc.All(ctx, runevents.Query{RunID: id, Kinds: []runevents.Kind{runevents.KindStalled}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	for range 3 {
		if st := tick(); len(st) != 0 || len(f.tags) != 0 || len(f.sent) != 0 {
			t.Fatalf("an abandoned run was alerted on: %+v, tags %v, sent %d", st, f.tags, len(f.sent))
		}
		now += 30_000
	}
	// It moves: watched again, and 15 minutes of silence stall it.
	f.mu.Lock()
	f.run.LastLogMs = now
	f.mu.Unlock()
	tick()
	now += 15*60_000 + 30_000
	st := tick()
	if len(st) != 1 || !st[0].Open || f.tags[runevents.TagAlert] == "" || len(f.sent) != 1 {
		t.Fatalf("after moving and 15 minutes of silence: %+v, tags %v, sent %d", st, f.tags, len(f.sent))
	}
	// Silent for days while its span is open: the span stays open.
	now += 5 * 24 * 3_600_000
	if st := tick(); len(st) != 1 || !st[0].Open || f.tags[runevents.TagAlert] == "" || len(f.sent) != 1 {
		t.Fatalf("a stalled run's span after days: %+v, tags %v, sent %d", st, f.tags, len(f.sent))
	}
}

// TestWatcherNotifiesHungSpans: a hung span a launcher appends is told to
// the notifier once when the watcher first sees it open, and once (with
// the launcher's closing message) after it closed; a span still open when
// the run stops running is told closed too.
func TestWatcherNotifiesHungSpans(t *testing.T) {
	svc, f, t0 := watchedRun(t, "r")
	id := f.run.RunID
	now := t0
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{IdleFor: -1, StallFor: -1, StragglerFor: -1, Every: 10 * time.Second,
		Tags: f, Notifier: f, Now: func() time.Time { return time.UnixMilli(now) }})
	ctx := context.Background()
	tick := func() {
		t.Helper()
		now += 10_000
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hung := runevents.Event{Key: "hung:n1:1", Kind: runevents.KindHung, Severity: runevents.SeverityWarning, TimeMs: t0, Open: true,
		Node: "n1", GPU: -1, Step: -1, Message: "rank 1 on node n1: no progress for 5s; rank 1: blocked in all_reduce (train.py:42)"}
	appendEv := func(ev runevents.Event) {
		t.Helper()
		if _, err := svc.Append(ctx, id, []runevents.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	if len(f.sent) != 0 {
		t.Fatalf("notified without a hung span: %+v", f.sent)
	}
	appendEv(hung)
	tick()
	tick()
	if len(f.sent) != 1 || f.sent[0].Closed || f.sent[0].Event.Kind != runevents.KindHung || f.sent[0].Event.Message != hung.Message || f.sent[0].Run.RunID != id {
		t.Fatalf("after the span opened: %+v", f.sent)
	}
	closed := hung
	closed.Open, closed.EndMs, closed.Message = false, now, hung.Message+" (it moved again)"
	appendEv(closed)
	tick()
	tick()
	if len(f.sent) != 2 || !f.sent[1].Closed || f.sent[1].Event.Message != closed.Message || f.sent[1].Event.EndMs != closed.EndMs {
		t.Fatalf("after the span closed: %+v", f.sent)
	}

	// A second hang, still open when the run ends.
	second := hung
	second.Key, second.TimeMs = "hung:n1:2", now
	appendEv(second)
	tick()
	if len(f.sent) != 3 || f.sent[2].Closed || f.sent[2].Event.Key != second.Key {
		t.Fatalf("after the second span opened: %+v", f.sent)
	}
	f.mu.Lock()
	f.run.RunID = "" // RunningRuns now lists no run of id
	f.mu.Unlock()
	tick()
	if len(f.sent) != 4 || !f.sent[3].Closed || f.sent[3].Event.Key != second.Key || f.sent[3].Event.EndMs != now {
		t.Fatalf("after the run ended: %+v", f.sent)
	}
	tick()
	if len(f.sent) != 4 {
		t.Fatalf("told again: %+v", f.sent)
	}
}

// TestAlertTagOutlivesOneOfTwoSpans: the alert tag is one per run while
// any idle, stalled or hung span is open. A stalled span that closes while
// a launcher's hung span is still open leaves the tag, holding the hung
// span's message; the tag goes when nothing alerting is open.
func TestAlertTagOutlivesOneOfTwoSpans(t *testing.T) {
	svc, f, t0 := watchedRun(t, "r")
	id := f.run.RunID
	now := t0
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{IdleFor: -1, StallFor: 60 * time.Second, StragglerFor: -1, Every: 10 * time.Second,
		Tags: f, Notifier: f, Now: func() time.Time { return time.UnixMilli(now) }})
	ctx := context.Background()
	tick := func() {
		t.Helper()
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tag := func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.tags[runevents.TagAlert]
	}
	now += 70_000
	tick()
	if tag() == "" {
		t.Fatal("no alert tag after 70 s of silence")
	}
	hung := runevents.Event{Key: "hung:n1:1", Kind: runevents.KindHung, Severity: runevents.SeverityWarning, TimeMs: now, Open: true,
		Node: "n1", GPU: -1, Step: -1, Message: "rank 1 on node n1: no progress for 5s"}
	if _, err := svc.Append(ctx, id, []runevents.Event{hung}); err != nil {
		t.Fatal(err)
	}
	// The run logs a metric: the stalled span closes, the hang stays.
	f.mu.Lock()
	f.run.LastMetricMs = now
	f.mu.Unlock()
	now += 10_000
	tick()
	if st, _ := svc.All(ctx, runevents.Query{RunID: id, Kinds: []runevents.Kind{runevents.KindStalled}, OpenOnly: true}); len(st) != 0 {
		t.Fatalf("the stalled span is still open: %+v", st)
	}
	if got := tag(); got != hung.Message {
		t.Fatalf("alert tag after the stalled span closed with a hang open: %q, want the hang's message", got)
	}
	if got := runevents.AlertAfterClose(nil); got != "" {
		t.Fatalf("AlertAfterClose(nothing open) = %q", got)
	}
}

// TestWatcherRetriesEndedRunCleanup: when clearing the alert of a run that
// ended fails (a busy database), the next look tries again; the tag is not
// left on the finished run for good.
func TestWatcherRetriesEndedRunCleanup(t *testing.T) {
	svc, f, t0 := watchedRun(t, "r")
	id := f.run.RunID
	now := t0
	w := runevents.NewWatcher(svc, f, runevents.WatchOptions{StallFor: 90 * time.Second, IdleFor: -1, Every: 10 * time.Second,
		Tags: f, Now: func() time.Time { return time.UnixMilli(now) }})
	ctx := context.Background()
	tick := func() {
		t.Helper()
		now += 10_000
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // 100 s without anything new: stalled
		tick()
	}
	if f.tags[runevents.TagAlert] == "" {
		t.Fatalf("not stalled after 100 s: tags %v", f.tags)
	}
	f.mu.Lock()
	f.run.RunID = "00000000000000000000000000000000" // the run ended
	f.failDeletes = 2                                // the span's close and the ended run's cleanup
	f.mu.Unlock()
	tick()
	st, err := svc.All(ctx, runevents.Query{RunID: id, Kinds: []runevents.Kind{runevents.KindStalled}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Open {
		t.Fatalf("the ended run's span: %+v", st)
	}
	if f.tags[runevents.TagAlert] == "" {
		t.Fatal("the test's premise: the failed deletes left the tag")
	}
	tick()
	if v, ok := f.tags[runevents.TagAlert]; ok {
		t.Fatalf("the alert tag %q stayed on the ended run after the next look", v)
	}
}
