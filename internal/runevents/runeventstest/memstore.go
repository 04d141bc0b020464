// Package runeventstest holds the conformance suite every runevents.Store
// passes (RunStoreTests) and an in-memory Store for tests of the code
// above it.
package runeventstest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
)

// MemStore is an in-memory runevents.Store. Its runs are made with AddRun.
type MemStore struct {
	mu   sync.Mutex
	runs map[string]*memRun
}

type memRun struct {
	deleted bool
	next    int64
	events  []runevents.Event // by Seq
}

var _ runevents.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{runs: map[string]*memRun{}} }

// AddRun makes an active run.
func (m *MemStore) AddRun(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[id] = &memRun{next: 1}
}

// SetDeleted deletes (soft) or restores a run.
func (m *MemStore) SetDeleted(id string, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[id]; r != nil {
		r.deleted = deleted
	}
}

// Purge removes a run and its events.
func (m *MemStore) Purge(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, id)
}

func (m *MemStore) run(id string) (*memRun, error) {
	r := m.runs[id]
	switch {
	case r == nil:
		return nil, errs.Errorf(errs.NotFound, "Run with id=%s not found", id)
	case r.deleted:
		return nil, runevents.RunDeleted(id)
	}
	return r, nil
}

// AppendEvents implements runevents.Store.
func (m *MemStore) AppendEvents(ctx context.Context, runID string, evs []runevents.Event, maxEvents int) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for _, ev := range r.events {
		keys[ev.Key] = true
	}
	adding := 0
	for _, ev := range evs {
		if ev.Key == "" || !keys[ev.Key] {
			adding++
			if ev.Key != "" {
				keys[ev.Key] = true
			}
		}
	}
	if len(r.events)+adding > maxEvents {
		return nil, runevents.LimitError(len(r.events), adding, maxEvents)
	}
	seqs := make([]int64, len(evs))
	for i, ev := range evs {
		ev.Seq = r.next
		r.next++
		if ev.Key == "" {
			ev.Key = fmt.Sprintf("seq-%d", ev.Seq)
		}
		r.events = slices.DeleteFunc(r.events, func(o runevents.Event) bool { return o.Key == ev.Key })
		ev.Attrs = cloneMap(ev.Attrs)
		if ev.Checkpoint != nil {
			c := *ev.Checkpoint
			ev.Checkpoint = &c
		}
		r.events = append(r.events, ev)
		seqs[i] = ev.Seq
	}
	return seqs, nil
}

// ListEvents implements runevents.Store.
func (m *MemStore) ListEvents(ctx context.Context, q runevents.Query, nowMs int64) (runevents.Page, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(q.RunID)
	if err != nil {
		return runevents.Page{}, err
	}
	var p runevents.Page
	for _, ev := range r.events {
		if !Selects(q, &ev, nowMs) {
			continue
		}
		if q.Limit > 0 && len(p.Events) == q.Limit {
			p.NextSeq = p.Events[len(p.Events)-1].Seq
			break
		}
		ev.Attrs = cloneMap(ev.Attrs)
		if ev.Checkpoint != nil {
			c := *ev.Checkpoint
			ev.Checkpoint = &c
		}
		p.Events = append(p.Events, ev)
	}
	return p, nil
}

// Selects reports whether q selects ev (at time nowMs): the rule every
// store implements.
func Selects(q runevents.Query, ev *runevents.Event, nowMs int64) bool {
	if ev.Seq <= q.AfterSeq || q.OpenOnly && !ev.Open {
		return false
	}
	if len(q.Kinds) > 0 && !slices.Contains(q.Kinds, ev.Kind) {
		return false
	}
	end := ev.TimeMs
	switch {
	case ev.Open:
		end = max(nowMs, ev.TimeMs)
	case ev.EndMs > 0:
		end = ev.EndMs
	}
	if q.ToMs > 0 && ev.TimeMs >= q.ToMs {
		return false
	}
	return q.FromMs <= 0 || end >= q.FromMs
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
