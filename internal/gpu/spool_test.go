package gpu_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/gpu"
)

// MustOpenSpool opens a spool in dir and closes it when the test ends.
func MustOpenSpool(tb testing.TB, dir string, opts gpu.SpoolOptions) *gpu.Spool {
	tb.Helper()
	sp, err := gpu.OpenSpool(dir, opts)
	if err != nil {
		tb.Fatalf("open spool: %v", err)
	}
	tb.Cleanup(func() { sp.Close() })
	return sp
}

func record(ts int64) *gpu.SpoolRecord {
	s := testSample()
	s.TimestampMs = ts
	return &gpu.SpoolRecord{Labels: gpu.Labels{Node: "node-a", RunID: "r1", NodeRank: 1, NumNodes: 2}, Sample: s}
}

func appendN(tb testing.TB, sp *gpu.Spool, from, n int) {
	tb.Helper()
	for i := from; i < from+n; i++ {
		if err := sp.Append(record(int64(i))); err != nil {
			tb.Fatal(err)
		}
	}
}

// peekAll returns the timestamps of everything waiting, acknowledging
// nothing.
func peekAll(tb testing.TB, sp *gpu.Spool) []int64 {
	tb.Helper()
	recs, err := sp.Peek(1 << 20)
	if err != nil {
		tb.Fatal(err)
	}
	var ts []int64
	for _, r := range recs {
		ts = append(ts, r.Sample.TimestampMs)
	}
	return ts
}

func consecutive(ts []int64, from int64) bool {
	for i, v := range ts {
		if v != from+int64(i) {
			return false
		}
	}
	return true
}

func TestSpoolOrderAndAck(t *testing.T) {
	dir := t.TempDir()
	sp := MustOpenSpool(t, dir, gpu.SpoolOptions{SegmentBytes: 4096})
	appendN(t, sp, 0, 40) // several segments
	recs, err := sp.Peek(15)
	if err != nil || len(recs) != 15 || recs[0].Sample.TimestampMs != 0 || recs[14].Sample.TimestampMs != 14 {
		t.Fatalf("peek 15: %d records, %v", len(recs), err)
	}
	want := record(3)
	if got := recs[3]; got.Labels != want.Labels || len(got.Sample.GPUs) != 3 || got.Sample.GPUs[0].UUID != "GPU-aa" || len(got.Sample.Processes) != 2 {
		t.Fatalf("record 3 = %+v", got)
	}
	if err := sp.Ack(15); err != nil {
		t.Fatal(err)
	}
	if sp.Len() != 25 {
		t.Fatalf("len %d after acking 15 of 40", sp.Len())
	}
	if ts := peekAll(t, sp); len(ts) != 25 || !consecutive(ts, 15) {
		t.Fatalf("after ack: %v", ts)
	}
	if err := sp.Ack(25); err != nil {
		t.Fatal(err)
	}
	if sp.Len() != 0 || sp.Bytes() != 0 {
		t.Fatalf("empty spool holds %d records, %d bytes", sp.Len(), sp.Bytes())
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*"))
	if len(segs) != 1 {
		t.Fatalf("%d segment files left after everything was sent: %v", len(segs), segs)
	}
	if err := sp.Ack(1); err == nil {
		t.Fatal("acked more than peeked")
	}
}

func TestSpoolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	sp, err := gpu.OpenSpool(dir, gpu.SpoolOptions{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, sp, 100, 30)
	if _, err := sp.Peek(10); err != nil {
		t.Fatal(err)
	}
	sp.Ack(10)
	sp.Close()
	sp = MustOpenSpool(t, dir, gpu.SpoolOptions{SegmentBytes: 4096})
	ts := peekAll(t, sp)
	// Acknowledged records of a segment not yet deleted come back (the
	// server stores them once); nothing unacknowledged is lost, and the
	// order holds.
	if len(ts) < 20 || ts[len(ts)-1] != 129 || !consecutive(ts, ts[0]) || ts[0] > 110 {
		t.Fatalf("after restart: %v", ts)
	}
}

func TestSpoolBoundDropsOldest(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	const max = 64 << 10
	sp := MustOpenSpool(t, dir, gpu.SpoolOptions{MaxBytes: max, SegmentBytes: 8 << 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	appendN(t, sp, 0, 2000)
	if sp.Bytes() > max {
		t.Fatalf("spool holds %d bytes, bound %d", sp.Bytes(), max)
	}
	ts := peekAll(t, sp)
	if int64(len(ts))+sp.Dropped() != 2000 || sp.Dropped() == 0 {
		t.Fatalf("%d kept + %d dropped, want 2000 with some dropped", len(ts), sp.Dropped())
	}
	if ts[len(ts)-1] != 1999 || !consecutive(ts, ts[0]) {
		t.Fatalf("kept %d..%d, not the newest in order", ts[0], ts[len(ts)-1])
	}
	if !strings.Contains(logs.String(), "dropped the oldest samples") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

func TestSpoolCutsTornRecord(t *testing.T) {
	dir := t.TempDir()
	sp, err := gpu.OpenSpool(dir, gpu.SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, sp, 0, 3)
	sp.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 1, 0, 9, 9}) // a header cut short by a crash
	f.Close()
	sp = MustOpenSpool(t, dir, gpu.SpoolOptions{})
	appendN(t, sp, 3, 2)
	if ts := peekAll(t, sp); len(ts) != 5 || !consecutive(ts, 0) {
		t.Fatalf("after a torn record: %v", ts)
	}
}

func TestSpoolIsLocked(t *testing.T) {
	dir := t.TempDir()
	MustOpenSpool(t, dir, gpu.SpoolOptions{})
	if _, err := gpu.OpenSpool(dir, gpu.SpoolOptions{}); !errors.Is(err, gpu.ErrSpoolLocked) {
		t.Fatalf("second open: %v, want ErrSpoolLocked", err)
	}
}

// FuzzSpoolRecord checks that the spool record decoder never panics.
func FuzzSpoolRecord(f *testing.F) {
	f.Add([]byte{1, 1, 'a', 0, 1, 0, 2, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rec gpu.SpoolRecord
		_ = gpu.DecodeSpoolRecord(b, &rec)
	})
}
