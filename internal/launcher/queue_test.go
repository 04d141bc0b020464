package launcher

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
)

func pushN(q *queue, from, n int) {
	for i := from; i < from+n; i++ {
		q.push([]byte(fmt.Sprintf("line %d", i)), int64(i), runlogs.Stdout, 0, 1, 2)
	}
}

// drain peeks and acks until the queue is empty, checking sequence
// numbers, and returns the texts.
func drain(t *testing.T, q *queue, next *int64, maxLines int) []string {
	t.Helper()
	var out []string
	for {
		first, lines, err := q.peek(nil, maxLines, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			return out
		}
		if first != *next {
			t.Fatalf("batch starts at seq %d, want %d", first, *next)
		}
		for _, l := range lines {
			out = append(out, l.Text)
			if l.Node != 1 || l.LocalRank != 2 || l.Stream != runlogs.Stdout && !strings.HasPrefix(l.Text, "[sextant]") {
				t.Fatalf("line %+v", l)
			}
		}
		q.ack()
		*next += int64(len(lines))
	}
}

func TestQueueSpillsInOrder(t *testing.T) {
	q := newQueue(queueOptions{MemBytes: 200, SpoolDir: t.TempDir(), SpoolBytes: 1 << 20, BatchLines: 10, BatchBytes: 1 << 20})
	defer q.remove()
	var next int64
	rng := rand.New(rand.NewPCG(5, 6))
	var got []string
	pushed := 0
	for round := 0; round < 200; round++ {
		n := rng.IntN(30)
		pushN(q, pushed, n)
		pushed += n
		// Peek a batch, push more (which may spill the batch in flight to
		// the spool), then ack it: nothing is lost or repeated.
		first, lines, err := q.peek(nil, 1+rng.IntN(15), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		m := rng.IntN(30)
		pushN(q, pushed, m)
		pushed += m
		if len(lines) == 0 {
			continue
		}
		if first != next {
			t.Fatalf("round %d: batch at seq %d, want %d", round, first, next)
		}
		// A retry peeks the same batch again.
		if first2, lines2, _ := q.peek(nil, len(lines), 1<<20); first2 != first || lines2[0].Text != lines[0].Text || len(lines2) != len(lines) {
			t.Fatalf("round %d: the batch changed between peeks", round)
		}
		for _, l := range lines {
			got = append(got, l.Text)
		}
		q.ack()
		next += int64(len(lines))
	}
	got = append(got, drain(t, q, &next, 7)...)
	if len(got) != pushed {
		t.Fatalf("%d lines out, %d in", len(got), pushed)
	}
	for i, s := range got {
		if s != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, s)
		}
	}
	if st := q.statsNow(); st.Spooled == 0 || st.Dropped != 0 || st.Captured != int64(pushed) {
		t.Fatalf("stats %+v", st)
	}
}

func TestQueueDropsWhenFull(t *testing.T) {
	q := newQueue(queueOptions{MemBytes: 100, SpoolDir: t.TempDir(), SpoolBytes: 300, BatchLines: 10, BatchBytes: 1 << 20})
	defer q.remove()
	pushN(q, 0, 100)
	st := q.statsNow()
	if st.Dropped == 0 {
		t.Fatalf("nothing dropped: %+v", st)
	}
	var next int64
	got := drain(t, q, &next, 5)
	// Room again: the marker comes first, then the new line.
	pushN(q, 100, 1)
	got = append(got, drain(t, q, &next, 5)...)
	if !strings.Contains(got[len(got)-2], fmt.Sprintf("%d lines of output were not stored", st.Dropped)) || got[len(got)-1] != "line 100" {
		t.Fatalf("tail %q", got[len(got)-2:])
	}
	if got[0] != "line 0" {
		t.Fatalf("head %q", got[0])
	}
}

func TestQueueNoSpool(t *testing.T) {
	q := newQueue(queueOptions{MemBytes: 100, SpoolBytes: -1, BatchLines: 10, BatchBytes: 1 << 20})
	pushN(q, 0, 50)
	q.close(1, 2)
	var next int64
	got := drain(t, q, &next, 100)
	if !strings.Contains(got[len(got)-1], "lines of output were not stored") || len(got) > 20 {
		t.Fatalf("got %d lines, last %q", len(got), got[len(got)-1])
	}
}

func TestQueueDisable(t *testing.T) {
	q := newQueue(queueOptions{MemBytes: 1 << 20, BatchLines: 10, BatchBytes: 1 << 20})
	pushN(q, 0, 5)
	q.disable()
	pushN(q, 5, 5)
	if n, _ := q.pending(); n != 0 {
		t.Fatalf("%d pending after disable", n)
	}
	if st := q.statsNow(); st.Discarded != 10 || st.Captured != 10 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := []runlogs.Line{
		{TimestampMs: 1_700_000_000_000, Stream: runlogs.Stderr, Flags: runlogs.FlagCR, Node: 3, LocalRank: -1, Text: "a\x00\r"},
		{TimestampMs: -5, Stream: runlogs.Stdout, Flags: runlogs.FlagPartial, Node: 0, LocalRank: 7, Text: ""},
	}
	var b []byte
	for i := range in {
		b = appendRecord(b, &in[i])
	}
	out, err := decodeRecords(nil, b, 2)
	if err != nil || fmt.Sprint(out) != fmt.Sprint(in) {
		t.Fatalf("got %+v, %v", out, err)
	}
	if _, err := decodeRecords(nil, b[:len(b)-1], 2); err == nil {
		t.Fatal("a cut record decoded")
	}
}

func TestBurstDetector(t *testing.T) {
	var n int64
	now := time.Unix(0, 0)
	busy := burstDetector(func() int64 { return n }, func() time.Time { return now })
	step := func(d time.Duration, bytes int64) bool {
		now = now.Add(d)
		n += bytes
		return busy()
	}
	if step(10*time.Millisecond, 10_000) { // 1 MB/s: chatty, not a burst
		t.Fatal("1 MB/s taken for a burst")
	}
	if !step(10*time.Millisecond, 2<<20) { // 200 MB/s
		t.Fatal("200 MB/s not taken for a burst")
	}
	if !step(time.Millisecond, 0) { // too soon to look again: same answer
		t.Fatal("answer changed within quietFor")
	}
	if step(20*time.Millisecond, 0) {
		t.Fatal("a pause taken for a burst")
	}
}
