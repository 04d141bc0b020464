package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/runlogs/runlogstest"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// MustOpenLogs opens a store and its log part on a fresh SQLite database
// and closes both when the test ends.
func MustOpenLogs(tb testing.TB, opts sqlstore.LogOptions) (*sqlstore.Store, *sqlstore.LogStore, *tracking.Service) {
	tb.Helper()
	return mustOpenLogsOn(tb, MustOpen, opts)
}

func mustOpenLogsOn(tb testing.TB, open func(testing.TB, sqlstore.Options) *sqlstore.Store, opts sqlstore.LogOptions) (*sqlstore.Store, *sqlstore.LogStore, *tracking.Service) {
	tb.Helper()
	s := open(tb, sqlstore.Options{Synchronous: "NORMAL"})
	l, err := sqlstore.OpenLogs(context.Background(), s, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			tb.Errorf("close log store: %v", err)
		}
	})
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s, l, tr
}

func logHarness(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store, opts sqlstore.LogOptions) runlogstest.Harness {
	s, l, tr := mustOpenLogsOn(t, open, opts)
	ctx := context.Background()
	return runlogstest.Harness{
		Store: l,
		NewRun: func(t *testing.T) string {
			r, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
			if err != nil {
				t.Fatal(err)
			}
			return r.Info.RunID
		},
		SetStatus: func(t *testing.T, id string, st tracking.RunStatus) {
			if _, err := tr.UpdateRun(ctx, id, tracking.RunUpdate{Status: &st}); err != nil {
				t.Fatal(err)
			}
		},
		SetDeleted: func(t *testing.T, id string, deleted bool) {
			var err error
			if deleted {
				err = tr.DeleteRun(ctx, id)
			} else {
				err = tr.RestoreRun(ctx, id)
			}
			if err != nil {
				t.Fatal(err)
			}
		},
		Purge: func(t *testing.T, id string) {
			if err := s.PurgeRun(ctx, id); err != nil {
				t.Fatal(err)
			}
		},
	}
}

func TestLogConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			runlogstest.RunStoreTests(t, func(t *testing.T, limits runlogs.Limits) runlogstest.Harness {
				// An eager compaction threshold, so the suite compacts while it runs.
				return logHarness(t, b.open, sqlstore.LogOptions{Limits: limits, CompactAfter: 4, SweepEvery: 50 * time.Millisecond, QuietAfter: time.Millisecond})
			})
		})
	}
}

// TestLogCompaction appends many small batches and checks that compaction
// merges them into full chunks without changing a line.
func TestLogCompaction(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { testLogCompaction(t, b.open) })
	}
}

func testLogCompaction(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	_, l, tr := mustOpenLogsOn(t, open, sqlstore.LogOptions{SweepEvery: -1})
	ctx := context.Background()
	r, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	run := r.Info.RunID
	in := runlogstest.Lines(10_000, "compact ")
	seq := 0
	for i := 0; seq < len(in); i++ {
		n := min(1+i%50, len(in)-seq)
		if _, err := l.AppendLines(ctx, run, runlogs.Batch{Source: "s", FirstSeq: int64(seq), Lines: in[seq : seq+n]}); err != nil {
			t.Fatal(err)
		}
		seq += n
		if i == 100 {
			// A full-sized batch in the middle: compaction merges around it.
			big := runlogstest.Lines(runlogs.ChunkLines, "big ")
			if _, err := l.AppendLines(ctx, run, runlogs.Batch{Source: "big", Lines: big}); err != nil {
				t.Fatal(err)
			}
			in = append(in[:seq], append(big, in[seq:]...)...)
			seq += len(big)
		}
	}
	_, before := runlogstest.ReadAll(t, l, run)
	chunks, small, err := l.LogChunkStats(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CompactLogs(ctx); err != nil {
		t.Fatal(err)
	}
	chunks2, small2, err := l.LogChunkStats(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chunks %d (small %d) -> %d (small %d)", chunks, small, chunks2, small2)
	if chunks2 > 6 || small2 > 2 || chunks2 >= chunks {
		t.Fatalf("after compaction: %d chunks, %d small", chunks2, small2)
	}
	head, after := runlogstest.ReadAll(t, l, run)
	if !reflect.DeepEqual(before, after) || head.NextLine != int64(len(in))+1 {
		t.Fatalf("compaction changed the log (%d lines before, %d after)", len(before), len(after))
	}
	for i := range after {
		if after[i].Text != in[i].Text {
			t.Fatalf("line %d: %q, want %q", i+1, after[i].Text, in[i].Text)
		}
	}
	// Appends after compaction continue the numbering.
	res, err := l.AppendLines(ctx, run, runlogs.Batch{Source: "s", FirstSeq: int64(seq), Lines: runlogstest.Lines(3, "more")})
	if err != nil || res.FirstLine != int64(len(in))+1 {
		t.Fatalf("append after compaction: %+v, %v", res, err)
	}
}

// TestLogCompactionInBackground checks that the background loop compacts a
// run that crossed CompactAfter while reads go on.
func TestLogCompactionInBackground(t *testing.T) {
	_, l, tr := MustOpenLogs(t, sqlstore.LogOptions{CompactAfter: 8, SweepEvery: 20 * time.Millisecond, QuietAfter: 10 * time.Millisecond})
	ctx := context.Background()
	r, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	run := r.Info.RunID
	svc := runlogs.NewService(l, runlogs.Options{})
	for i := range 200 {
		if _, err := svc.Append(ctx, run, runlogs.Batch{Source: "s", FirstSeq: int64(i * 10), Lines: runlogstest.Lines(10, fmt.Sprintf("b%d-", i))}); err != nil {
			t.Fatal(err)
		}
		page, err := svc.Read(ctx, runlogs.Query{RunID: run, FromLine: 1, Limit: 10_000})
		if err != nil || len(page.Lines) != (i+1)*10 {
			t.Fatalf("read during compaction: %d lines, %v", len(page.Lines), err)
		}
	}
	// Compaction takes milliseconds; the bound only turns one that never
	// comes into a failure, on however slow a machine.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, small, err := l.LogChunkStats(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if small <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d small chunks left", small)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLogsSurviveReopen checks that the log and the sources' sequence
// numbers are durable: a batch retried after a restart is stored once.
func TestLogsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sextant.db")
	ctx := context.Background()
	open := func() (*sqlstore.Store, *sqlstore.LogStore) {
		s, err := sqlstore.Open(ctx, path, sqlstore.Options{Synchronous: "NORMAL"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := sqlstore.OpenLogs(ctx, s, sqlstore.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s, l
	}
	s, l := open()
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	b := runlogs.Batch{Source: "s", Lines: runlogstest.Lines(100, "x")}
	if _, err := l.AppendLines(ctx, r.Info.RunID, b); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s, l = open()
	defer s.Close(ctx)
	defer l.Close(ctx)
	res, err := l.AppendLines(ctx, r.Info.RunID, b)
	if err != nil || res.Stored != 0 || res.Duplicates != 100 {
		t.Fatalf("retry after reopen: %+v, %v", res, err)
	}
	if head, lines := runlogstest.ReadAll(t, l, r.Info.RunID); head.NextLine != 101 || len(lines) != 100 {
		t.Fatalf("after reopen: head %+v", head)
	}
}

// BenchmarkLogAppend measures appending typical output in launcher-sized
// batches.
//
//	go test -run '^$' -bench LogAppend -count 6 ./internal/sqlstore/
func BenchmarkLogAppend(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			_, l, tr := MustOpenLogs(b, sqlstore.LogOptions{})
			ctx := context.Background()
			r, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
			lines := runlogstest.Lines(n, "2026-01-02 10:00:00 INFO step=")
			b.ReportAllocs()
			seq := int64(0)
			for b.Loop() {
				if _, err := l.AppendLines(ctx, r.Info.RunID, runlogs.Batch{Source: "s", FirstSeq: seq, Lines: lines}); err != nil {
					b.Fatal(err)
				}
				seq += int64(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/line")
		})
	}
}
