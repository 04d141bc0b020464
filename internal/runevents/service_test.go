package runevents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runevents/runeventstest"
)

func TestMemStoreConformance(t *testing.T) {
	runeventstest.RunStoreTests(t, runeventstest.MemHarness)
}

func TestAppendValidates(t *testing.T) {
	h := runeventstest.MemHarness(t)
	run := h.NewRun(t)
	svc := runevents.NewService(h.Store, runevents.Options{Limits: runevents.Limits{BatchEvents: 3, MessageBytes: 10}})
	ok := runevents.Event{Kind: runevents.KindNote, TimeMs: 1_800_000_000_000, GPU: -1, Step: -1}
	ckpt := func(c *runevents.Checkpoint) runevents.Event {
		e := ok
		e.Kind, e.Checkpoint = runevents.KindCheckpointSave, c
		return e
	}
	tests := map[string]struct {
		ev   runevents.Event
		want string
	}{
		"ErrKind":          {runevents.Event{Kind: 99, TimeMs: 1, GPU: -1, Step: -1}, "unknown kind 99"},
		"ErrTime":          {runevents.Event{Kind: runevents.KindNote, GPU: -1, Step: -1}, "time_ms 0 is not a time"},
		"ErrEndBeforeTime": {func() runevents.Event { e := ok; e.EndMs = e.TimeMs - 1; return e }(), "is before time_ms"},
		"ErrOpenWithEnd":   {func() runevents.Event { e := ok; e.Open, e.EndMs = true, e.TimeMs+1; return e }(), "open span has no end_ms"},
		"ErrGPU":           {func() runevents.Event { e := ok; e.GPU = -2; return e }(), "gpu -2 is out of range"},
		"ErrStoreKey":      {func() runevents.Event { e := ok; e.Key = "seq-4"; return e }(), `keys starting with "seq-"`},
		"ErrControlKey":    {func() runevents.Event { e := ok; e.Key = "a\nb"; return e }(), "control characters"},
		"ErrNoCheckpoint":  {func() runevents.Event { e := ok; e.Kind = runevents.KindCheckpointSave; return e }(), "needs its checkpoint"},
		"ErrStrayCheckpoint": {func() runevents.Event {
			e := ok
			e.Checkpoint = &runevents.Checkpoint{Path: "/Volumes/a/b/c/d"}
			return e
		}(), "has no checkpoint"},
		"ErrNoPath":   {ckpt(&runevents.Checkpoint{}), "checkpoint.path"},
		"ErrMode":     {ckpt(&runevents.Checkpoint{Path: "/Volumes/a/b/c/d", Mode: "fast"}), "checkpoint.mode"},
		"ErrNegBytes": {ckpt(&runevents.Checkpoint{Path: "/Volumes/a/b/c/d", Bytes: -1}), "0 or more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := svc.Append(context.Background(), run, []runevents.Event{ok, tc.ev})
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "events[1]") {
				t.Fatalf("got %v, want Invalid naming events[1] and %q", err, tc.want)
			}
		})
	}
	if _, err := svc.Append(context.Background(), run, []runevents.Event{ok, ok, ok, ok}); !errs.Is(err, errs.LimitExceeded) {
		t.Errorf("4 events over a batch limit of 3: %v", err)
	}
	if _, err := svc.Append(context.Background(), run, nil); !errs.Is(err, errs.Invalid) {
		t.Errorf("no events: %v", err)
	}
	long := ok
	long.Message = "ünïcödé and more"
	long.Key = "long"
	if _, err := svc.Append(context.Background(), run, []runevents.Event{long}); err != nil {
		t.Fatal(err)
	}
	evs, err := svc.All(context.Background(), runevents.Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Message != "ünïcöd" || evs[0].Severity != runevents.SeverityInfo {
		t.Errorf("stored %+v: want the message cut to 10 bytes on a rune boundary and severity info", evs)
	}
}

func TestLatestComplete(t *testing.T) {
	save := func(seq, step int64, end int64, o runevents.Outcome) runevents.Event {
		return runevents.Event{Seq: seq, Kind: runevents.KindCheckpointSave, TimeMs: end - 10, EndMs: end, Step: step, Checkpoint: &runevents.Checkpoint{Path: "p", Outcome: o}}
	}
	evs := []runevents.Event{
		save(1, 100, 1000, runevents.OutcomeComplete),
		save(2, 300, 3000, runevents.OutcomeIncomplete),
		save(3, 200, 2000, runevents.OutcomeComplete),
		save(4, 400, 4000, runevents.OutcomeFailed),
		{Seq: 5, Kind: runevents.KindNote, TimeMs: 5000, Step: 900},
	}
	got, ok := runevents.LatestComplete(evs)
	if !ok || got.Seq != 3 {
		t.Errorf("latest complete: %+v %v, want the save of step 200", got, ok)
	}
	if _, ok := runevents.LatestComplete(evs[1:2]); ok {
		t.Error("an incomplete save counts as complete")
	}
	if cs := runevents.Checkpoints(evs); len(cs) != 4 || cs[0].Seq != 1 || cs[1].Seq != 3 {
		t.Errorf("checkpoints by time: %+v", cs)
	}
}
