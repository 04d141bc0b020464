package launcher

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
)

// shipper sends the queue's lines to the server in order, one request at
// a time: a batch is sent FlushInterval after its first line was captured,
// or at once when it is full. A batch that fails transiently (the server
// is down, restarting or busy) is sent again, unchanged, until it gets
// through; the server's deduplication by (source, sequence) makes the
// repeats harmless. A batch the server refuses for good (the run was
// deleted, the log limit was reached) stops the shipping: the launcher
// warns once and keeps teeing the output.
type shipper struct {
	q        *queue
	sink     LogSink
	runID    string
	source   string
	flush    time.Duration
	maxLines int
	maxBytes int
	warn     func(format string, args ...any)
	// busy reports whether the job is writing a burst; nil means never.
	busy atomic.Pointer[func() bool]
	// highWater is how much may wait during a burst (7/8 of the memory
	// bound, so that a burst spills to the spool only when it must).
	highWater int64

	delivered atomic.Int64
}

// sendIn returns how long to wait before sending the n lines waiting, the
// oldest for age; 0 means now. A batch goes once it is full or FlushInterval
// old, except during a burst (the job writing faster than burstRate): then
// the launcher holds its own work back, for the job's sake, until the
// burst ends, the batch has waited maxHold, or highWater bytes are
// waiting. Ordinary logging, even chatty, is far below burstRate; a burst
// of a few hundred megabytes (a model summary, a dump) costs the job
// nothing while the launcher holds back, and reaches the server within
// maxHold plus the time to send it.
func (s *shipper) sendIn(n int, age time.Duration) time.Duration {
	if s.q.isClosed() {
		return 0
	}
	bytes := s.q.pendingBytes()
	full := n >= s.maxLines || bytes >= int64(s.maxBytes)
	if !full && age < s.flush {
		return s.flush - age
	}
	busy := s.busy.Load()
	if busy == nil || !(*busy)() || age >= maxHold || bytes >= s.highWater {
		return 0
	}
	return min(quietFor, maxHold-age)
}

// The burst policy of sendIn.
const (
	quietFor  = 5 * time.Millisecond // how often a held batch looks again
	maxHold   = 2 * time.Second
	burstRate = 16 << 20 // bytes per second
)

// burstDetector returns a function that reports whether the job has been
// writing faster than burstRate since it was last called (at least
// quietFor apart; sooner calls get the last answer). read returns the
// bytes read so far. It is for one goroutine.
func burstDetector(read func() int64, now func() time.Time) func() bool {
	lastT, lastN, busy := now(), read(), false
	return func() bool {
		t := now()
		dt := t.Sub(lastT)
		if dt < quietFor {
			return busy
		}
		n := read()
		busy = float64(n-lastN) > burstRate*dt.Seconds()
		lastT, lastN = t, n
		return busy
	}
}

// setBusy sets the function that tells whether the job is writing.
func (s *shipper) setBusy(f func() bool) { s.busy.Store(&f) }

// run ships until the queue is closed and empty, or ctx ends.
func (s *shipper) run(ctx context.Context) {
	var buf []runlogs.Line
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	down := false
	for {
		n, oldest := s.q.pending()
		if n == 0 {
			if s.q.isClosed() || !s.waitChanged(ctx) {
				return
			}
			continue
		}
		if wait := s.sendIn(n, time.Since(oldest)); wait > 0 {
			if !s.waitFor(ctx, timer, wait) {
				return
			}
			continue
		}
		first, lines, err := s.q.peek(buf[:0], s.maxLines, s.maxBytes)
		if err != nil {
			s.warn("the output spool is unreadable (%v); output from here on is not stored", err)
			s.q.disable()
			continue
		}
		buf = lines[:0]
		if len(lines) == 0 {
			continue
		}
		if !s.send(ctx, first, lines, &down) {
			return
		}
	}
}

// waitChanged waits for the queue to change; false when ctx ended first.
func (s *shipper) waitChanged(ctx context.Context) bool {
	select {
	case <-s.q.changed:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitFor waits, on timer, for d or until the queue changes (a change may
// fill the batch, or close the queue: then the batch goes at once);
// false when ctx ended first.
func (s *shipper) waitFor(ctx context.Context, timer *time.Timer, d time.Duration) bool {
	timer.Reset(d)
	select {
	case <-timer.C:
	case <-s.q.changed:
		timer.Stop()
	case <-ctx.Done():
		return false
	}
	return true
}

// send delivers one batch, the lines from sequence number first, and
// acknowledges it in the queue. A transient failure is retried, with
// backoff up to 2 s, until the batch gets through or ctx ends (then send
// returns false); a refusal for good disables the queue. down tracks
// whether the server is unreachable, so that the user is told once when
// it goes and once when it comes back, not at each retry.
func (s *shipper) send(ctx context.Context, first int64, lines []runlogs.Line, down *bool) bool {
	backoff := 100 * time.Millisecond
	for {
		_, err := s.sink.AppendLogs(ctx, s.runID, runlogs.Batch{Source: s.source, FirstSeq: first, Lines: lines})
		if err == nil {
			s.q.ack()
			s.delivered.Add(int64(len(lines)))
			if *down {
				s.warn("the server is reachable again; sending the output kept meanwhile")
				*down = false
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		// A full disk on the server (507) is kept and retried too:
		// the server writes again once space is freed.
		if !errs.Transient(err) && errs.CodeOf(err) != errs.Internal && errs.CodeOf(err) != errs.InsufficientStorage {
			s.warn("the server refused the output (%s); it is still shown here but no longer stored", errs.MessageOf(err))
			s.q.disable()
			return true
		}
		if !*down {
			s.warn("cannot send output to the server (%v); keeping it (in memory, then on disk) and retrying", err)
			*down = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
