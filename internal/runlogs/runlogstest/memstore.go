// Package runlogstest holds test helpers for run logs: an in-memory Store
// and the conformance suite every runlogs.Store implementation must pass.
package runlogstest

import (
	"context"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// MemStore is an in-memory runlogs.Store. Runs must be added with AddRun
// before lines are appended to them. It encodes its chunks with the real
// chunk format, one or more chunks per append, as the SQLite store does
// before compaction.
type MemStore struct {
	mu     sync.Mutex
	limits runlogs.Limits
	runs   map[string]*memRun
	// AppendHook, when set, runs before every append (tests use it to make
	// appends fail or block).
	AppendHook func(runID string, b runlogs.Batch) error
}

type memRun struct {
	status  tracking.RunStatus
	deleted bool
	next    int64
	bytes   int64
	seqs    map[string]int64
	chunks  []runlogs.Chunk
}

var _ runlogs.Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore enforcing limits.
func NewMemStore(limits runlogs.Limits) *MemStore {
	return &MemStore{limits: limits.WithDefaults(), runs: map[string]*memRun{}}
}

// AddRun adds a RUNNING run.
func (m *MemStore) AddRun(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[id] = &memRun{status: tracking.StatusRunning, next: 1, seqs: map[string]int64{}}
}

// SetStatus sets a run's status.
func (m *MemStore) SetStatus(id string, st tracking.RunStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[id].status = st
}

// SetDeleted deletes or restores a run.
func (m *MemStore) SetDeleted(id string, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[id].deleted = deleted
}

// Purge removes a run and its log.
func (m *MemStore) Purge(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, id)
}

func (m *MemStore) run(id string) (*memRun, error) {
	r := m.runs[id]
	if r == nil {
		return nil, errs.Errorf(errs.NotFound, "Run with id=%s not found", id)
	}
	return r, nil
}

// AppendLines implements runlogs.Store.
func (m *MemStore) AppendLines(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error) {
	if m.AppendHook != nil {
		if err := m.AppendHook(runID, b); err != nil {
			return runlogs.AppendResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return runlogs.AppendResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return runlogs.AppendResult{}, err
	}
	if r.deleted {
		return runlogs.AppendResult{}, errs.Errorf(errs.Invalid, "The run %s must be in the 'active' state. Current state is deleted.", runID)
	}
	next := r.seqs[b.Source]
	skip := int(min(max(next-b.FirstSeq, 0), int64(len(b.Lines))))
	lines := b.Lines[skip:]
	res := runlogs.AppendResult{Duplicates: skip, NextSeq: max(next, b.FirstSeq+int64(len(b.Lines)))}
	if len(lines) == 0 {
		return res, nil
	}
	var add int64
	for i := range lines {
		add += int64(len(lines[i].Text))
	}
	if have := r.next - 1; have+int64(len(lines)) > m.limits.LinesPerRun {
		return runlogs.AppendResult{}, runlogs.LimitError("log lines per run", have, int64(len(lines)), m.limits.LinesPerRun)
	}
	if r.bytes+add > m.limits.BytesPerRun {
		return runlogs.AppendResult{}, runlogs.LimitError("log bytes per run", r.bytes, add, m.limits.BytesPerRun)
	}
	res.FirstLine, res.Stored = r.next, len(lines)
	for _, part := range runlogs.CutChunks(lines) {
		c := runlogs.ChunkOf(part, r.next, runlogs.CompressFast)
		r.chunks = append(r.chunks, c)
		r.next += int64(c.Count)
	}
	r.bytes += add
	r.seqs[b.Source] = res.NextSeq
	return res, nil
}

// ReadChunks implements runlogs.Store.
// Spans implements runlogs.Store.
func (m *MemStore) Spans(ctx context.Context, runID string) (runlogs.Head, []runlogs.ChunkSpan, error) {
	head, cs, err := m.ReadChunks(ctx, runID, runlogs.ChunkQuery{FromLine: 1, MaxChunks: 1 << 30})
	if err != nil {
		return head, nil, err
	}
	out := make([]runlogs.ChunkSpan, len(cs))
	for i, c := range cs {
		out[i] = runlogs.ChunkSpan{FirstLine: c.FirstLine, Count: c.Count, MinTimestampMs: c.MinTimestampMs, MaxTimestampMs: c.MaxTimestampMs}
	}
	return head, out, nil
}

func (m *MemStore) ReadChunks(ctx context.Context, runID string, q runlogs.ChunkQuery) (runlogs.Head, []runlogs.Chunk, error) {
	if err := ctx.Err(); err != nil {
		return runlogs.Head{}, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.run(runID)
	if err != nil {
		return runlogs.Head{}, nil, err
	}
	if r.deleted {
		return runlogs.Head{}, nil, errs.Errorf(errs.NotFound, "Run with id=%s is deleted: its logs cannot be read", runID)
	}
	head := runlogs.Head{NextLine: r.next, Bytes: r.bytes, RunStatus: r.status}
	var out []runlogs.Chunk
	for _, c := range r.chunks {
		if c.FirstLine+int64(c.Count) <= q.FromLine {
			continue
		}
		if !q.Matches(&c) {
			continue
		}
		c.Data = append([]byte(nil), c.Data...)
		out = append(out, c)
		if len(out) == max(q.MaxChunks, 1) {
			break
		}
	}
	return head, out, nil
}
