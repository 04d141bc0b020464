// Package gputest has test helpers for GPU monitoring: a clock that tests
// move by hand, and a Sink whose behaviour a test sets.
package gputest

import (
	"context"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/gpu"
)

// ManualClock is a gpu.Clock that only moves when the test advances it,
// so that hours of sampling run in milliseconds. It is safe for
// concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ gpu.Clock = (*ManualClock)(nil)

// NewManualClock returns a clock that reads t until advanced.
func NewManualClock(t time.Time) *ManualClock {
	return &ManualClock{now: t, changed: make(chan struct{})}
}

// Now implements gpu.Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After implements gpu.Clock.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Waiters returns the number of pending After calls.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntil waits until n After calls are pending (every agent has
// finished its tick and sleeps), or ctx ends.
func (c *ManualClock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Advance moves the clock forward by d and wakes the waiters that are due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		keep = append(keep, w)
	}
	c.waiters = keep
}

// Sink is a gpu.Sink that records the batches it accepts. While Fail
// returns an error, Send returns it and records nothing.
type Sink struct {
	mu      sync.Mutex
	batches []gpu.Batch
	// Fail, when set, is asked before each send.
	Fail func(b *gpu.Batch) error
}

var _ gpu.Sink = (*Sink)(nil)

// Send implements gpu.Sink.
func (s *Sink) Send(ctx context.Context, b *gpu.Batch) (*gpu.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		if err := s.Fail(b); err != nil {
			return nil, err
		}
	}
	c := *b
	c.Samples = append([]gpu.Sample(nil), b.Samples...)
	s.batches = append(s.batches, c)
	return &gpu.SendResult{Accepted: len(b.Samples)}, nil
}

// Batches returns the batches accepted so far.
func (s *Sink) Batches() []gpu.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gpu.Batch(nil), s.batches...)
}

// Timestamps returns the timestamps of every accepted sample, in the
// order they were accepted.
func (s *Sink) Timestamps() []int64 {
	var out []int64
	for _, b := range s.Batches() {
		for _, smp := range b.Samples {
			out = append(out, smp.TimestampMs)
		}
	}
	return out
}
