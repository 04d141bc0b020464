package runlogs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/runlogs/runlogstest"
	"github.com/sextant/sextant/internal/tracking"
)

const runID = "0123456789abcdef0123456789abcdef"

func TestMemStoreConformance(t *testing.T) {
	runlogstest.RunStoreTests(t, runlogstest.MemHarness)
}

// MustService returns a Service over a MemStore holding one empty run.
func MustService(tb testing.TB, opts runlogs.Options) (*runlogs.Service, *runlogstest.MemStore) {
	tb.Helper()
	m := runlogstest.NewMemStore(opts.Limits)
	m.AddRun(runID)
	return runlogs.NewService(m, opts), m
}

func appendText(tb testing.TB, s *runlogs.Service, source string, seq int64, node int32, stream runlogs.Stream, texts ...string) {
	tb.Helper()
	lines := make([]runlogs.Line, len(texts))
	for i, tx := range texts {
		lines[i] = runlogs.Line{TimestampMs: 1000 + seq + int64(i), Stream: stream, Node: node, LocalRank: runlogs.UnknownRank, Text: tx}
	}
	if _, err := s.Append(context.Background(), runID, runlogs.Batch{Source: source, FirstSeq: seq, Lines: lines}); err != nil {
		tb.Fatal(err)
	}
}

func texts(ls []runlogs.Line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Text
	}
	return out
}

func TestAppendValidation(t *testing.T) {
	s, _ := MustService(t, runlogs.Options{Limits: runlogs.Limits{LineBytes: 10, BatchLines: 3}})
	ok := runlogs.Line{Stream: runlogs.Stdout, LocalRank: -1, Text: "ok"}
	for name, tc := range map[string]struct {
		run  string
		b    runlogs.Batch
		code errs.Code
	}{
		"ErrRunID":      {"../x", runlogs.Batch{Source: "s"}, errs.Invalid},
		"ErrNoSource":   {runID, runlogs.Batch{}, errs.Invalid},
		"ErrSourceByte": {runID, runlogs.Batch{Source: "a b"}, errs.Invalid},
		"ErrSeq":        {runID, runlogs.Batch{Source: "s", FirstSeq: -1}, errs.Invalid},
		"ErrBatchLines": {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{ok, ok, ok, ok}}, errs.LimitExceeded},
		"ErrStream":     {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 3}}}, errs.Invalid},
		"ErrNode":       {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, Node: -1}}}, errs.Invalid},
		"ErrRank":       {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, LocalRank: -2}}}, errs.Invalid},
		"ErrFlags":      {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, Flags: 8}}}, errs.Invalid},
		"ErrTime":       {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, TimestampMs: -5}}}, errs.Invalid},
		"ErrUTF8":       {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, Text: "\xff"}}}, errs.Invalid},
		"ErrLineBytes":  {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: 1, Text: "01234567890"}}}, errs.LimitExceeded},
		"ErrMissingRun": {"ffffffffffffffffffffffffffffffff", runlogs.Batch{Source: "s", Lines: []runlogs.Line{ok}}, errs.NotFound},
		"OK":            {runID, runlogs.Batch{Source: "s", Lines: []runlogs.Line{ok, ok, ok}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Append(context.Background(), tc.run, tc.b)
			if errs.CodeOf(err) != tc.code {
				t.Fatalf("got %v (code %q), want code %q", err, errs.CodeOf(err), tc.code)
			}
		})
	}
}

func TestSearch(t *testing.T) {
	s, _ := MustService(t, runlogs.Options{})
	var seq int64
	for i := range 10_000 {
		node := int32(i % 2)
		stream := runlogs.Stdout
		text := fmt.Sprintf("step %d loss=%d", i, i%97)
		if i%1000 == 999 {
			stream, text = runlogs.Stderr, fmt.Sprintf("WARNING: NaN at step %d", i)
		}
		appendText(t, s, fmt.Sprintf("node%d", node), seq, node, stream, text)
		if node == 1 {
			seq++
		}
	}
	ctx := context.Background()
	node1 := int32(1)
	for name, tc := range map[string]struct {
		q    runlogs.Query
		want []string
	}{
		"Substring":     {runlogs.Query{Contains: "NaN at step 1999"}, []string{"WARNING: NaN at step 1999"}},
		"Regexp":        {runlogs.Query{Regexp: `^WARNING: NaN at step [2-3]\d{3}$`}, []string{"WARNING: NaN at step 2999", "WARNING: NaN at step 3999"}},
		"RegexpAnyCase": {runlogs.Query{Regexp: `(?i)warning.*step 999$`}, []string{"WARNING: NaN at step 999"}},
		"Stream":        {runlogs.Query{Stream: runlogs.Stderr, Limit: 3}, []string{"WARNING: NaN at step 999", "WARNING: NaN at step 1999", "WARNING: NaN at step 2999"}},
		"Node":          {runlogs.Query{Node: &node1, Limit: 2}, []string{"step 1 loss=1", "step 3 loss=3"}},
		"NodeAndText":   {runlogs.Query{Node: &node1, Contains: "step 99 "}, []string{"step 99 loss=2"}},
		"Since":         {runlogs.Query{SinceMs: 1000 + 4998, Node: &node1, Limit: 2}, []string{"step 9997 loss=6", "WARNING: NaN at step 9999"}},
		"NoMatch":       {runlogs.Query{Contains: "nothing like this"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			q := tc.q
			q.RunID = runID
			page, err := s.Read(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(page.Lines); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			for i := 1; i < len(page.Lines); i++ {
				if page.Lines[i].Number <= page.Lines[i-1].Number {
					t.Fatal("lines out of order")
				}
			}
		})
	}
	for name, q := range map[string]runlogs.Query{
		"ErrBadRegexp":   {Regexp: "("},
		"ErrBoth":        {Regexp: "a", Contains: "b"},
		"ErrLimit":       {Limit: 100_000},
		"ErrLongPattern": {Contains: strings.Repeat("x", 2000)},
		"ErrStream":      {Stream: 9},
	} {
		t.Run(name, func(t *testing.T) {
			q.RunID = runID
			if _, err := s.Read(ctx, q); errs.CodeOf(err) != errs.Invalid {
				t.Fatalf("got %v, want Invalid", err)
			}
		})
	}
}

// TestSearchWorkBound checks that a search scans a bounded amount of text
// per call and that following NextLine finds every match exactly once.
func TestSearchWorkBound(t *testing.T) {
	s, _ := MustService(t, runlogs.Options{Limits: runlogs.Limits{ScanBytes: 50_000}})
	const n = 30_000
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %05d %s", i, strings.Repeat("-", 20))
		if i%1000 == 0 {
			lines[i] = fmt.Sprintf("MATCH %d", i)
		}
	}
	for i := 0; i < n; i += 5000 {
		appendText(t, s, "s", int64(i), 0, runlogs.Stdout, lines[i:i+5000]...)
	}
	var found []string
	calls := 0
	for from := int64(1); ; {
		calls++
		page, err := s.Read(context.Background(), runlogs.Query{RunID: runID, FromLine: from, Contains: "MATCH"})
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, texts(page.Lines)...)
		if page.Done() {
			break
		}
		if page.NextLine <= from {
			t.Fatalf("no progress at line %d", from)
		}
		from = page.NextLine
	}
	if len(found) != n/1000 || calls < 2 {
		t.Fatalf("%d matches in %d calls, want %d in several", len(found), calls, n/1000)
	}
}

// TestTail runs each case in a synctest bubble: the clock moves only
// when every goroutine waits, so the times checked are exact, not
// margins a loaded machine could miss.
func TestTail(t *testing.T) {
	ctx := context.Background()
	t.Run("WakesOnAppend", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// A long poll interval: only the append's wake-up can answer
			// before the wait runs out.
			s, _ := MustService(t, runlogs.Options{PollInterval: time.Hour})
			appendText(t, s, "s", 0, 0, runlogs.Stdout, "old")
			done := make(chan runlogs.Page, 1)
			go func() {
				p, err := s.Tail(ctx, runlogs.Query{RunID: runID, FromLine: 2}, 10*time.Second)
				if err != nil {
					t.Error(err)
				}
				done <- p
			}()
			synctest.Wait() // the tail is waiting
			start := time.Now()
			appendText(t, s, "s", 1, 0, runlogs.Stdout, "new")
			p := <-done
			if got := texts(p.Lines); len(got) != 1 || got[0] != "new" || p.NextLine != 3 {
				t.Fatalf("tail: %q next %d", got, p.NextLine)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("woke after %v, want at once", d)
			}
		})
	})
	t.Run("PollsTheStore", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Lines written by another replica reach the store, not this
			// Service: the tail finds them by polling.
			s, m := MustService(t, runlogs.Options{PollInterval: 20 * time.Millisecond})
			other := runlogs.NewService(m, runlogs.Options{})
			start := time.Now()
			go func() {
				time.Sleep(100 * time.Millisecond)
				appendText(t, other, "s", 0, 0, runlogs.Stdout, "from elsewhere")
			}()
			p, err := s.Tail(ctx, runlogs.Query{RunID: runID}, 5*time.Second)
			if err != nil || len(p.Lines) != 1 {
				t.Fatalf("tail: %v, %d lines", err, len(p.Lines))
			}
			if d := time.Since(start); d < 100*time.Millisecond || d > 120*time.Millisecond {
				t.Fatalf("found after %v, want at the first poll after 100ms", d)
			}
		})
	})
	t.Run("TimesOut", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := MustService(t, runlogs.Options{PollInterval: 10 * time.Millisecond})
			start := time.Now()
			p, err := s.Tail(ctx, runlogs.Query{RunID: runID}, 150*time.Millisecond)
			if err != nil || len(p.Lines) != 0 || p.NextLine != 1 {
				t.Fatalf("tail: %v, %+v", err, p)
			}
			if d := time.Since(start); d != 150*time.Millisecond {
				t.Fatalf("returned after %v, want 150ms", d)
			}
		})
	})
	t.Run("EndedRunReturnsAtOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, m := MustService(t, runlogs.Options{})
			m.SetStatus(runID, tracking.StatusFinished)
			start := time.Now()
			p, err := s.Tail(ctx, runlogs.Query{RunID: runID}, 10*time.Second)
			if err != nil || len(p.Lines) != 0 || time.Since(start) != 0 {
				t.Fatalf("tail of an ended run: %v, %+v after %v", err, p, time.Since(start))
			}
		})
	})
	t.Run("FilterSkipsAhead", func(t *testing.T) {
		s, _ := MustService(t, runlogs.Options{PollInterval: 10 * time.Millisecond})
		appendText(t, s, "s", 0, 0, runlogs.Stdout, "a", "b", "c")
		p, err := s.Tail(ctx, runlogs.Query{RunID: runID, Contains: "zzz"}, 50*time.Millisecond)
		if err != nil || len(p.Lines) != 0 || p.NextLine != 4 {
			t.Fatalf("filtered tail: %v, next %d", err, p.NextLine)
		}
	})
	t.Run("CloseEndsWaits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := MustService(t, runlogs.Options{PollInterval: time.Hour})
			go func() {
				time.Sleep(50 * time.Millisecond)
				s.Close()
			}()
			start := time.Now()
			if _, err := s.Tail(ctx, runlogs.Query{RunID: runID}, 10*time.Second); err != nil || time.Since(start) != 50*time.Millisecond {
				t.Fatalf("tail after close: %v after %v, want 50ms", err, time.Since(start))
			}
		})
	})
	t.Run("ContextCancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, _ := MustService(t, runlogs.Options{PollInterval: time.Hour})
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			if _, err := s.Tail(cctx, runlogs.Query{RunID: runID}, 10*time.Second); time.Since(start) != 50*time.Millisecond {
				t.Fatalf("tail ignored its context: %v after %v", err, time.Since(start))
			}
		})
	})
}
