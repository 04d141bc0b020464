package launcher

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
)

// chunkOutput is an output that hands the capture the chunks a test
// sends, one per Read. Read first says on asked that the capture wants
// more, so by the time a test receives from asked, the capture has dealt
// with the previous chunk.
type chunkOutput struct {
	chunks chan string
	asked  chan struct{}
}

func (o *chunkOutput) Read(p []byte) (int, error) {
	o.asked <- struct{}{}
	s, ok := <-o.chunks
	if !ok {
		return 0, io.EOF
	}
	return copy(p, s), nil
}

func (o *chunkOutput) finish(time.Time, func() bool) {}
func (o *chunkOutput) unread() bool                  { return false }
func (o *chunkOutput) Close() error                  { return nil }

// TestCapturePartialWaitsFromTheLineStart: an unfinished line is sent as a
// partial record once it has waited PartialAfter since its own first
// bytes arrived, not since an earlier line's. A job writing in blocks
// (a C program's stdio, sed) ends nearly every read in the middle of a
// line, each time a new one; the wait used to run from the first of them
// as long as every read ended mid-line, so after PartialAfter of steady
// output the next short pause between two blocks cut a line in two.
func TestCapturePartialWaitsFromTheLineStart(t *testing.T) {
	const after = 2 * time.Second
	now := time.Unix(1_700_000_000, 0)
	q := newQueue(queueOptions{MemBytes: 1 << 20, BatchLines: 100, BatchBytes: 1 << 20})
	defer q.remove()
	o := &chunkOutput{chunks: make(chan string), asked: make(chan struct{})}
	c := newCapture(runlogs.Stdout, o, nil, q, 0, 0, false, 0, func() time.Time { return now })
	done := make(chan struct{})
	go func() { defer close(done); c.run() }()
	<-o.asked
	// send hands the capture s and returns once it has split it: only then
	// does the test move the clock.
	send := func(s string) { o.chunks <- s; <-o.asked }

	send("one\ntw")
	now = now.Add(after * 3 / 4)
	send("o\nthr") // "two" ends; "thr" starts now
	now = now.Add(after * 3 / 4)
	c.flushPartial(after) // "thr" has waited 3/4 of PartialAfter: kept whole
	send("ee\nfou")
	now = now.Add(after)
	c.flushPartial(after) // "fou" has waited PartialAfter: sent as it is
	send("r\n")
	close(o.chunks)
	<-done

	_, lines, err := q.peek(nil, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		text    string
		partial bool
	}
	var got []rec
	for _, l := range lines {
		got = append(got, rec{l.Text, l.Flags&runlogs.FlagPartial != 0})
	}
	want := []rec{{"one", false}, {"two", false}, {"three", false}, {"fou", true}, {"r", false}}
	if !slices.Equal(got, want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
}
