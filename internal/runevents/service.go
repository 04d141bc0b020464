package runevents

import (
	"context"
	"log/slog"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Options configure a Service.
type Options struct {
	// Limits are the enforced caps; zero fields take their defaults.
	Limits Limits
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Service applies the run-event rules on top of a Store: what an append
// may hold and what a list may ask. It keeps no state, so replicas
// sharing a database answer alike, and is safe for concurrent use.
type Service struct {
	store  Store
	limits Limits
	now    func() time.Time
	log    *slog.Logger
}

// NewService returns a Service over store.
func NewService(store Store, opts Options) *Service {
	s := &Service{store: store, limits: opts.Limits.WithDefaults(), now: opts.Now, log: opts.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// Append validates evs and stores them on the run, replacing stored events
// with the same keys, and returns the Seq each got. Messages and texts
// over their limits are cut; anything else wrong refuses the whole request
// with errs.Invalid naming the event and the field.
func (s *Service) Append(ctx context.Context, runID string, evs []Event) ([]int64, error) {
	if err := tracking.ValidateRunID(runID); err != nil {
		return nil, err
	}
	switch {
	case len(evs) == 0:
		return nil, invalidf("Missing value for required parameter 'events'")
	case len(evs) > s.limits.BatchEvents:
		return nil, errs.Errorf(errs.LimitExceeded, "limit exceeded: a request can carry at most %d events, got %d", s.limits.BatchEvents, len(evs))
	}
	out := make([]Event, len(evs))
	for i := range evs {
		ev, err := normalize(evs[i], i, s.limits)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return s.store.AppendEvents(ctx, runID, out, s.limits.EventsPerRun)
}

// List returns a page of the run's events selected by q, ordered by Seq.
func (s *Service) List(ctx context.Context, q Query) (Page, error) {
	if err := tracking.ValidateRunID(q.RunID); err != nil {
		return Page{}, err
	}
	switch {
	case q.Limit < 0:
		return Page{}, invalidf("limit must be between 1 and %d, got %d", s.limits.PageEvents, q.Limit)
	case q.Limit == 0 || q.Limit > s.limits.PageEvents:
		q.Limit = s.limits.PageEvents
	}
	if q.AfterSeq < 0 || q.FromMs < 0 || q.ToMs < 0 {
		return Page{}, invalidf("after_seq, from_ms and to_ms must be 0 or more")
	}
	if q.ToMs != 0 && q.FromMs >= q.ToMs {
		return Page{}, invalidf("from_ms %d must be before to_ms %d", q.FromMs, q.ToMs)
	}
	for _, k := range q.Kinds {
		if _, ok := kindNames[k]; !ok {
			return Page{}, invalidf("unknown kind %d", k)
		}
	}
	return s.store.ListEvents(ctx, q, s.now().UnixMilli())
}

// All returns every event q selects, following pages (for small listings:
// a run's checkpoints, its open spans).
func (s *Service) All(ctx context.Context, q Query) ([]Event, error) {
	return ListAll(ctx, s.List, q)
}

// ListAll follows the pages of list from q.AfterSeq on and returns every
// event; clients that implement List pass theirs.
func ListAll(ctx context.Context, list func(context.Context, Query) (Page, error), q Query) ([]Event, error) {
	var out []Event
	for {
		p, err := list(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Events...)
		if p.NextSeq == 0 || len(p.Events) == 0 {
			return out, nil
		}
		q.AfterSeq = p.NextSeq
	}
}

// Checkpoints returns the run's checkpoint saves with the latest state of
// each (oldest first by start time).
func Checkpoints(evs []Event) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Kind == KindCheckpointSave && ev.Checkpoint != nil {
			out = append(out, ev)
		}
	}
	sortByTime(out)
	return out
}

// LatestComplete returns the newest complete save among evs (by step,
// then by the time it landed), or false.
func LatestComplete(evs []Event) (Event, bool) {
	var best Event
	found := false
	for _, ev := range evs {
		if ev.Kind != KindCheckpointSave || ev.Checkpoint == nil || ev.Checkpoint.Outcome != OutcomeComplete {
			continue
		}
		if !found || newer(ev, best) {
			best, found = ev, true
		}
	}
	return best, found
}

func newer(a, b Event) bool {
	if a.Step != b.Step && a.Step >= 0 && b.Step >= 0 {
		return a.Step > b.Step
	}
	ea, eb := max(a.EndMs, a.TimeMs), max(b.EndMs, b.TimeMs)
	if ea != eb {
		return ea > eb
	}
	return a.Seq > b.Seq
}

func sortByTime(evs []Event) {
	// Insertion sort: listings are small and nearly in order already.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && (evs[j].TimeMs < evs[j-1].TimeMs || evs[j].TimeMs == evs[j-1].TimeMs && evs[j].Seq < evs[j-1].Seq); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}
