package launcher

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
)

// capture reads one of the child's output streams: it writes every byte to
// the terminal as it arrives (the tee: colours, progress bars and partial
// lines unchanged), then cuts the bytes into line records and queues them.
// The tee comes first, so the terminal never waits for the splitting.
type capture struct {
	stream runlogs.Stream
	r      output
	tee    io.Writer
	q      *queue
	node   int32
	rank   int32
	prefix bool // read torchrun's "[rank3]:" prefixes for the local rank
	now    func() time.Time

	read atomic.Int64 // bytes read so far

	mu           sync.Mutex
	split        *runlogs.Splitter
	ts           int64     // timestamp of the bytes being split
	pendingSince time.Time // when the unfinished line started waiting
	records      int64     // records emitted so far
	busy         bool      // a chunk read is being teed and split
	teeErr       error
}

func newCapture(stream runlogs.Stream, r output, tee io.Writer, q *queue, node, rank int32, prefix bool, lineBytes int, now func() time.Time) *capture {
	c := &capture{stream: stream, r: r, tee: tee, q: q, node: node, rank: rank, prefix: prefix, now: now}
	c.split = runlogs.NewSplitter(lineBytes, c.emit)
	return c
}

func (c *capture) emit(text []byte, f runlogs.Flags) {
	c.records++
	rank := c.rank
	if c.prefix {
		if r := prefixRank(text); r >= 0 {
			rank = r
		}
	}
	c.q.push(text, c.ts, c.stream, f, c.node, rank)
}

// run reads until EOF or until the output's deadline passes (the launcher
// sets one when the child has exited; see Options.Drain), then
// queues what is left of an unfinished line.
func (c *capture) run() {
	// Large reads: few system calls when the job writes fast.
	buf := make([]byte, 1<<20)
	for {
		n, err := c.r.Read(buf)
		if n > 0 {
			// The line may go on in what was just read: no partial flush
			// until it is split, however long the tee takes.
			c.mu.Lock()
			c.busy = true
			c.mu.Unlock()
			if c.tee != nil && c.teeErr == nil {
				// A terminal that went away must not stop the capture.
				if _, werr := c.tee.Write(buf[:n]); werr != nil {
					c.teeErr = werr
				}
			}
			now := c.now()
			c.read.Add(int64(n))
			c.mu.Lock()
			c.ts = now.UnixMilli()
			before := c.records
			c.split.Write(buf[:n])
			switch {
			case c.split.Pending() == 0:
				c.pendingSince = time.Time{}
			case c.pendingSince.IsZero() || c.records != before:
				// The unfinished line started in these bytes: a job
				// writing in blocks ends most reads inside a new line,
				// and the wait starts again with each.
				c.pendingSince = now
			}
			c.busy = false
			c.mu.Unlock()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, os.ErrClosed) {
				c.q.push([]byte("[sextant] reading the output failed: "+err.Error()), c.now().UnixMilli(), runlogs.Stderr, 0, c.node, c.rank)
			}
			break
		}
	}
	c.mu.Lock()
	c.ts = c.now().UnixMilli()
	c.split.Flush()
	c.mu.Unlock()
}

// flushPartial queues an unfinished line that has waited longer than
// after for the job to go on (not for the launcher to read on), flagged
// partial, so that a line printed without its end (a prompt, "epoch 1:
// ...") reaches the server before the end does.
func (c *capture) flushPartial(after time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy || c.pendingSince.IsZero() || c.now().Sub(c.pendingSince) < after || c.r.unread() {
		return
	}
	c.ts = c.pendingSince.UnixMilli()
	if c.split.FlushPartial() {
		c.pendingSince = time.Time{}
		if c.split.Pending() > 0 {
			c.pendingSince = c.now()
		}
	}
}
