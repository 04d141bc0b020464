package runeventstest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
)

// Harness is a store under test with the means to manage its runs.
type Harness struct {
	Store runevents.Store
	// NewRun creates an active run and returns its id.
	NewRun func(t *testing.T) string
	// SetDeleted deletes (soft) or restores a run.
	SetDeleted func(t *testing.T, id string, deleted bool)
	// Purge removes a run for good.
	Purge func(t *testing.T, id string)
}

// MemHarness returns a Harness over a fresh MemStore.
func MemHarness(t *testing.T) Harness {
	m := NewMemStore()
	n := 0
	return Harness{
		Store: m,
		NewRun: func(t *testing.T) string {
			n++
			id := fmt.Sprintf("%032x", n)
			m.AddRun(id)
			return id
		},
		SetDeleted: func(t *testing.T, id string, deleted bool) { m.SetDeleted(id, deleted) },
		Purge:      func(t *testing.T, id string) { m.Purge(id) },
	}
}

// RunStoreTests runs the conformance suite against stores made by open.
func RunStoreTests(t *testing.T, open func(t *testing.T) Harness) {
	t.Run("AppendAndList", func(t *testing.T) { testAppendAndList(t, open(t)) })
	t.Run("ReplaceByKey", func(t *testing.T) { testReplace(t, open(t)) })
	t.Run("Filters", func(t *testing.T) { testFilters(t, open(t)) })
	t.Run("Paging", func(t *testing.T) { testPaging(t, open(t)) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open(t)) })
	t.Run("Limit", func(t *testing.T) { testLimit(t, open(t)) })
	t.Run("RunsApart", func(t *testing.T) { testRunsApart(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
}

const t0 = int64(1_800_000_000_000)

// Sample returns events of every shape: a checkpoint span, an open span,
// an instant with attributes, one on a GPU.
func Sample() []runevents.Event {
	return []runevents.Event{
		{Key: "ckpt-1", Kind: runevents.KindCheckpointSave, Severity: runevents.SeverityInfo, TimeMs: t0, EndMs: t0 + 5000, GPU: -1, Step: 100,
			Message: "saved step 100", Checkpoint: &runevents.Checkpoint{Path: "/Volumes/a/b/c/run/step_100", Outcome: runevents.OutcomeComplete,
				Bytes: 1 << 30, Files: 8, Ranks: 2, Mode: "process", BlockedMs: 812, Staging: "shared"}},
		{Key: "idle-1", Kind: runevents.KindIdle, Severity: runevents.SeverityWarning, TimeMs: t0 + 1000, Open: true, GPU: -1, Step: -1,
			Message: "GPUs idle for 10m0s", Attrs: map[string]string{"threshold": "5"}},
		{Key: "xid-1", Kind: runevents.KindGPUXid, Severity: runevents.SeverityError, TimeMs: t0 + 2000, Node: "gpu-07", GPU: 3, Step: -1,
			Message: "Xid 79 ünï", Attrs: map[string]string{"xid": "79", "uuid": "GPU-1"}},
		{Key: "fail", Kind: runevents.KindCheckpointSave, Severity: runevents.SeverityError, TimeMs: t0 + 3000, EndMs: t0 + 3500, GPU: -1, Step: 200,
			Checkpoint: &runevents.Checkpoint{Path: "/Volumes/a/b/c/run/step_200", Outcome: runevents.OutcomeFailed, Error: "shard did not land", BlockedMs: -1}},
	}
}

func mustAppend(t *testing.T, s runevents.Store, run string, evs ...runevents.Event) []int64 {
	t.Helper()
	seqs, err := s.AppendEvents(context.Background(), run, evs, 1000)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if len(seqs) != len(evs) {
		t.Fatalf("append returned %d seqs for %d events", len(seqs), len(evs))
	}
	return seqs
}

func mustList(t *testing.T, s runevents.Store, q runevents.Query) runevents.Page {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 1000
	}
	p, err := s.ListEvents(context.Background(), q, t0+10_000)
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	return p
}

func keys(evs []runevents.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Key)
	}
	return out
}

func testAppendAndList(t *testing.T, h Harness) {
	run := h.NewRun(t)
	in := Sample()
	seqs := mustAppend(t, h.Store, run, in...)
	for i := range seqs {
		if i > 0 && seqs[i] <= seqs[i-1] {
			t.Fatalf("seqs %v are not increasing", seqs)
		}
	}
	p := mustList(t, h.Store, runevents.Query{RunID: run})
	if len(p.Events) != len(in) || p.NextSeq != 0 {
		t.Fatalf("listed %d events (next %d), want %d", len(p.Events), p.NextSeq, len(in))
	}
	for i, got := range p.Events {
		want := in[i]
		want.Seq = seqs[i]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d:\n got %+v %+v\nwant %+v %+v", i, got, got.Checkpoint, want, want.Checkpoint)
		}
	}
	// An empty key gets one of the store's.
	auto := mustAppend(t, h.Store, run, runevents.Event{Kind: runevents.KindNote, Severity: runevents.SeverityInfo, TimeMs: t0, GPU: -1, Step: -1, Message: "a"},
		runevents.Event{Kind: runevents.KindNote, Severity: runevents.SeverityInfo, TimeMs: t0, GPU: -1, Step: -1, Message: "b"})
	p = mustList(t, h.Store, runevents.Query{RunID: run, AfterSeq: seqs[len(seqs)-1]})
	if got := keys(p.Events); !reflect.DeepEqual(got, []string{fmt.Sprintf("seq-%d", auto[0]), fmt.Sprintf("seq-%d", auto[1])}) {
		t.Errorf("keys of events appended without one: %v (seqs %v)", got, auto)
	}
}

func testReplace(t *testing.T, h Harness) {
	run := h.NewRun(t)
	first := mustAppend(t, h.Store, run, Sample()...)
	upd := Sample()[0]
	upd.Checkpoint.Outcome = runevents.OutcomeFailed
	upd.Checkpoint.Error = "late failure"
	upd.Message = "replaced"
	seq := mustAppend(t, h.Store, run, upd)[0]
	if seq <= first[len(first)-1] {
		t.Fatalf("the replacement got seq %d, not above %d", seq, first[len(first)-1])
	}
	p := mustList(t, h.Store, runevents.Query{RunID: run})
	if got := keys(p.Events); !reflect.DeepEqual(got, []string{"idle-1", "xid-1", "fail", "ckpt-1"}) {
		t.Fatalf("after replacing ckpt-1: %v", got)
	}
	if last := p.Events[3]; last.Message != "replaced" || last.Checkpoint.Error != "late failure" || last.Seq != seq {
		t.Errorf("replacement stored as %+v %+v", last, last.Checkpoint)
	}
	// A reader continuing after the first append sees the change.
	if got := keys(mustList(t, h.Store, runevents.Query{RunID: run, AfterSeq: first[len(first)-1]}).Events); !reflect.DeepEqual(got, []string{"ckpt-1"}) {
		t.Errorf("changes after seq %d: %v", first[len(first)-1], got)
	}
	// Two events of one request with one key: the later wins.
	a := runevents.Event{Key: "k", Kind: runevents.KindNote, Severity: runevents.SeverityInfo, TimeMs: t0, GPU: -1, Step: -1, Message: "one"}
	b := a
	b.Message = "two"
	mustAppend(t, h.Store, run, a, b)
	evs := mustList(t, h.Store, runevents.Query{RunID: run, Kinds: []runevents.Kind{runevents.KindNote}}).Events
	if len(evs) != 1 || evs[0].Message != "two" {
		t.Errorf("one key twice in a request: %+v", evs)
	}
	// Closing an open span.
	closed := Sample()[1]
	closed.Open, closed.EndMs = false, t0+9000
	mustAppend(t, h.Store, run, closed)
	if evs := mustList(t, h.Store, runevents.Query{RunID: run, OpenOnly: true}).Events; len(evs) != 0 {
		t.Errorf("open spans after closing the only one: %v", keys(evs))
	}
}

func testFilters(t *testing.T, h Harness) {
	run := h.NewRun(t)
	mustAppend(t, h.Store, run, Sample()...)
	f := func(q runevents.Query, want ...string) {
		t.Helper()
		q.RunID = run
		if want == nil {
			want = []string{}
		}
		if got := keys(mustList(t, h.Store, q).Events); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: %v, want %v", q, got, want)
		}
	}
	f(runevents.Query{Kinds: []runevents.Kind{runevents.KindCheckpointSave}}, "ckpt-1", "fail")
	f(runevents.Query{Kinds: []runevents.Kind{runevents.KindGPUXid, runevents.KindIdle}}, "idle-1", "xid-1")
	f(runevents.Query{Kinds: []runevents.Kind{runevents.KindStalled}})
	f(runevents.Query{OpenOnly: true}, "idle-1")
	// Time ranges keep what overlaps them: the save's span reaches to
	// t0+5000, the open span to now (t0+10000).
	f(runevents.Query{FromMs: t0 + 4000}, "ckpt-1", "idle-1")
	f(runevents.Query{FromMs: t0 + 9999, ToMs: t0 + 20_000}, "idle-1")
	f(runevents.Query{ToMs: t0 + 1000}, "ckpt-1")
	f(runevents.Query{FromMs: t0 + 1500, ToMs: t0 + 2500}, "ckpt-1", "idle-1", "xid-1")
	f(runevents.Query{FromMs: t0 + 3200, ToMs: t0 + 3300, Kinds: []runevents.Kind{runevents.KindCheckpointSave}}, "ckpt-1", "fail")
}

func testPaging(t *testing.T, h Harness) {
	run := h.NewRun(t)
	var evs []runevents.Event
	for i := range 25 {
		evs = append(evs, runevents.Event{Key: fmt.Sprintf("e%02d", i), Kind: runevents.Kind([]runevents.Kind{runevents.KindNote, runevents.KindGPUECC}[i%2]),
			Severity: runevents.SeverityInfo, TimeMs: t0 + int64(i), GPU: -1, Step: -1})
	}
	mustAppend(t, h.Store, run, evs...)
	var got []string
	q := runevents.Query{RunID: run, Kinds: []runevents.Kind{runevents.KindNote}, Limit: 5}
	for pages := 0; ; pages++ {
		p := mustList(t, h.Store, q)
		got = append(got, keys(p.Events)...)
		if p.NextSeq == 0 {
			if pages != 2 {
				t.Errorf("13 events in pages of 5 took %d pages", pages+1)
			}
			break
		}
		if len(p.Events) != 5 || p.NextSeq != p.Events[4].Seq {
			t.Fatalf("page of %d events, next %d", len(p.Events), p.NextSeq)
		}
		q.AfterSeq = p.NextSeq
	}
	var want []string
	for i := 0; i < 25; i += 2 {
		want = append(want, fmt.Sprintf("e%02d", i))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paged: %v, want %v", got, want)
	}
}

func testLifecycle(t *testing.T, h Harness) {
	ctx := context.Background()
	missing := "0123456789abcdef0123456789abcdef"
	if _, err := h.Store.AppendEvents(ctx, missing, Sample(), 1000); !errs.Is(err, errs.NotFound) {
		t.Errorf("append to a missing run: %v", err)
	}
	if _, err := h.Store.ListEvents(ctx, runevents.Query{RunID: missing, Limit: 10}, t0); !errs.Is(err, errs.NotFound) {
		t.Errorf("list a missing run: %v", err)
	}
	run := h.NewRun(t)
	mustAppend(t, h.Store, run, Sample()...)
	h.SetDeleted(t, run, true)
	// The domain words the error, so that every store gives the same.
	deleted := errs.MessageOf(runevents.RunDeleted(run))
	if _, err := h.Store.AppendEvents(ctx, run, Sample(), 1000); !errs.Is(err, errs.NotFound) || errs.MessageOf(err) != deleted {
		t.Errorf("append to a deleted run: %v, want %q", err, deleted)
	}
	if _, err := h.Store.ListEvents(ctx, runevents.Query{RunID: run, Limit: 10}, t0); !errs.Is(err, errs.NotFound) || errs.MessageOf(err) != deleted {
		t.Errorf("list a deleted run: %v, want %q", err, deleted)
	}
	h.SetDeleted(t, run, false)
	if n := len(mustList(t, h.Store, runevents.Query{RunID: run}).Events); n != 4 {
		t.Errorf("restored run lists %d events, want 4", n)
	}
	h.Purge(t, run)
	if _, err := h.Store.ListEvents(ctx, runevents.Query{RunID: run, Limit: 10}, t0); !errs.Is(err, errs.NotFound) {
		t.Errorf("list a purged run: %v", err)
	}
}

func testLimit(t *testing.T, h Harness) {
	ctx := context.Background()
	run := h.NewRun(t)
	ev := func(k string) runevents.Event {
		return runevents.Event{Key: k, Kind: runevents.KindNote, Severity: runevents.SeverityInfo, TimeMs: t0, GPU: -1, Step: -1}
	}
	if _, err := h.Store.AppendEvents(ctx, run, []runevents.Event{ev("a"), ev("b"), ev("c")}, 4); err != nil {
		t.Fatal(err)
	}
	_, err := h.Store.AppendEvents(ctx, run, []runevents.Event{ev("d"), ev("e")}, 4)
	if !errs.Is(err, errs.LimitExceeded) {
		t.Fatalf("5 events with a limit of 4: %v", err)
	}
	if n := len(mustList(t, h.Store, runevents.Query{RunID: run}).Events); n != 3 {
		t.Errorf("a refused append stored something: %d events", n)
	}
	// Replacing counts nothing; one more new event fits.
	if _, err := h.Store.AppendEvents(ctx, run, []runevents.Event{ev("a"), ev("b"), ev("d")}, 4); err != nil {
		t.Errorf("replacing two and adding one at the limit: %v", err)
	}
}

func testRunsApart(t *testing.T, h Harness) {
	a, b := h.NewRun(t), h.NewRun(t)
	mustAppend(t, h.Store, a, Sample()...)
	mustAppend(t, h.Store, b, Sample()[2])
	if got := keys(mustList(t, h.Store, runevents.Query{RunID: b}).Events); !reflect.DeepEqual(got, []string{"xid-1"}) {
		t.Errorf("run b: %v", got)
	}
	if n := len(mustList(t, h.Store, runevents.Query{RunID: a}).Events); n != 4 {
		t.Errorf("run a: %d events (the same key on run b replaced one of a's?)", n)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	run := h.NewRun(t)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				ev := runevents.Event{Key: fmt.Sprintf("w%d-%d", w, i), Kind: runevents.KindNote, Severity: runevents.SeverityInfo, TimeMs: t0 + int64(i), GPU: -1, Step: -1}
				if _, err := h.Store.AppendEvents(context.Background(), run, []runevents.Event{ev, ev}, 1000); err != nil {
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
	evs := mustList(t, h.Store, runevents.Query{RunID: run}).Events
	seen := map[int64]bool{}
	for _, e := range evs {
		if seen[e.Seq] {
			t.Fatalf("seq %d given twice", e.Seq)
		}
		seen[e.Seq] = true
	}
	if len(evs) != 80 {
		t.Errorf("%d events, want 80", len(evs))
	}
}
