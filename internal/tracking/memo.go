package tracking

import "sync/atomic"

// Memo keeps the runs/search JSON of one exact version of a run, made the
// first time the run is encoded, so that a store that holds runs unchanged
// in memory (SQLite's search index) has each one encoded once rather than
// on every search that returns it: encoding was half of a search's time.
//
// A run with a Memo must not be changed: a store that gives runs a Memo
// replaces a changed run with a new Run and a new Memo, and a copy that is
// changed (inputs added to it) must drop it. Only the JSON encoder of run
// pages (package wire) reads and fills it.
type Memo struct {
	b    atomic.Pointer[[]byte]
	held *MemoBytes
}

// MemoBytes counts the bytes that the memos of one holder (the runs of one
// experiment's index) keep, so that it can count them in its budget, and
// bounds them: a memo over the bound keeps nothing.
type MemoBytes struct {
	used  atomic.Int64
	limit int64
}

// NewMemoBytes returns a count of memo bytes bounded by limit.
func NewMemoBytes(limit int64) *MemoBytes { return &MemoBytes{limit: limit} }

// Used returns the bytes kept.
func (h *MemoBytes) Used() int64 { return h.used.Load() }

// retired marks a memo whose run is gone: nothing is kept in it anymore.
var retired = new([]byte)

// NewMemo returns an empty memo whose kept bytes count in held (nil: not
// counted, not bounded).
func NewMemo(held *MemoBytes) *Memo { return &Memo{held: held} }

// Load returns the kept encoding, or nil.
func (m *Memo) Load() []byte {
	if p := m.b.Load(); p != nil && p != retired {
		return *p
	}
	return nil
}

// Store keeps b (not copied: the caller gives it up) unless the memo holds
// an encoding already, is retired, or its holder's bound is reached.
func (m *Memo) Store(b []byte) {
	n := int64(len(b))
	if m.held != nil && m.held.used.Add(n) > m.held.limit {
		m.held.used.Add(-n)
		return
	}
	if !m.b.CompareAndSwap(nil, &b) && m.held != nil {
		m.held.used.Add(-n)
	}
}

// Retire drops what the memo keeps, and keeps nothing after: its run was
// replaced. A search that still encodes the old run encodes it anew.
func (m *Memo) Retire() {
	if p := m.b.Swap(retired); p != nil && p != retired && m.held != nil {
		m.held.used.Add(-int64(len(*p)))
	}
}
