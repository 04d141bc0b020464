package runlogstest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// Harness is a store under test with the means to manage its runs.
type Harness struct {
	Store runlogs.Store
	// NewRun creates an active, RUNNING run and returns its id.
	NewRun func(t *testing.T) string
	// SetStatus sets a run's status.
	SetStatus func(t *testing.T, id string, st tracking.RunStatus)
	// SetDeleted deletes (soft) or restores a run.
	SetDeleted func(t *testing.T, id string, deleted bool)
	// Purge removes a run for good; nil when the store cannot.
	Purge func(t *testing.T, id string)
}

// MemHarness returns a Harness over a fresh MemStore.
func MemHarness(t *testing.T, limits runlogs.Limits) Harness {
	m := NewMemStore(limits)
	n := 0
	return Harness{
		Store: m,
		NewRun: func(t *testing.T) string {
			n++
			id := fmt.Sprintf("%032x", n)
			m.AddRun(id)
			return id
		},
		SetStatus:  func(t *testing.T, id string, st tracking.RunStatus) { m.SetStatus(id, st) },
		SetDeleted: func(t *testing.T, id string, deleted bool) { m.SetDeleted(id, deleted) },
		Purge:      func(t *testing.T, id string) { m.Purge(id) },
	}
}

// RunStoreTests runs the conformance suite against stores made by open.
func RunStoreTests(t *testing.T, open func(t *testing.T, limits runlogs.Limits) Harness) {
	t.Run("AppendAndRead", func(t *testing.T) { testAppendAndRead(t, open(t, runlogs.Limits{})) })
	t.Run("NumberingAcrossSources", func(t *testing.T) { testNumbering(t, open(t, runlogs.Limits{})) })
	t.Run("DedupRetriedBatches", func(t *testing.T) { testDedup(t, open(t, runlogs.Limits{})) })
	t.Run("ChunkBoundaries", func(t *testing.T) { testChunkBoundaries(t, open(t, runlogs.Limits{})) })
	t.Run("ChunkSets", func(t *testing.T) { testChunkSets(t, open(t, runlogs.Limits{})) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open(t, runlogs.Limits{})) })
	t.Run("Limits", func(t *testing.T) {
		testLimits(t, open(t, runlogs.Limits{LinesPerRun: 100, BytesPerRun: 10_000}))
	})
	t.Run("ConcurrentSources", func(t *testing.T) { testConcurrent(t, open(t, runlogs.Limits{})) })
	t.Run("SpansAndDensity", func(t *testing.T) { testSpans(t, open(t, runlogs.Limits{})) })
}

// Lines returns n lines with varied fields; text i is prefix + i.
func Lines(n int, prefix string) []runlogs.Line {
	out := make([]runlogs.Line, n)
	for i := range out {
		out[i] = runlogs.Line{
			TimestampMs: 1_700_000_000_000 + int64(i)*3,
			Stream:      runlogs.Stream(1 + i%2),
			Node:        int32(i % 3),
			LocalRank:   int32(i%5) - 1,
			Text:        fmt.Sprintf("%s%d ünï \x1b[32mok\x1b[0m", prefix, i),
		}
		if i%7 == 3 {
			out[i].Flags = runlogs.FlagCR
		}
		if i%11 == 5 {
			out[i].Flags = runlogs.FlagPartial
			out[i].Text = ""
		}
	}
	return out
}

// ReadAll decodes every stored line of a run.
func ReadAll(t testing.TB, s runlogs.Store, runID string) (runlogs.Head, []runlogs.Line) {
	t.Helper()
	head, chunks, err := s.ReadChunks(context.Background(), runID, runlogs.ChunkQuery{FromLine: 1, MaxChunks: 1 << 30})
	if err != nil {
		t.Fatalf("read chunks: %v", err)
	}
	var out []runlogs.Line
	next := int64(1)
	for _, c := range chunks {
		if c.FirstLine != next {
			t.Fatalf("chunk starts at line %d, want %d (chunks must tile the log)", c.FirstLine, next)
		}
		if n, err := runlogs.ChunkLen(c.Data); err != nil || n != c.Count {
			t.Fatalf("chunk at %d: header says %d lines (err %v), metadata %d", c.FirstLine, n, err, c.Count)
		}
		out, err = runlogs.DecodeChunk(out, c.Data, c.FirstLine)
		if err != nil {
			t.Fatalf("decode chunk at %d: %v", c.FirstLine, err)
		}
		next += int64(c.Count)
	}
	if next != head.NextLine {
		t.Fatalf("chunks end before line %d, head says %d", next, head.NextLine)
	}
	return head, out
}

func mustAppend(t testing.TB, s runlogs.Store, runID string, b runlogs.Batch) runlogs.AppendResult {
	t.Helper()
	res, err := s.AppendLines(context.Background(), runID, b)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func numbered(lines []runlogs.Line, first int64) []runlogs.Line {
	out := append([]runlogs.Line(nil), lines...)
	for i := range out {
		out[i].Number = first + int64(i)
	}
	return out
}

func testAppendAndRead(t *testing.T, h Harness) {
	run := h.NewRun(t)
	head, got := ReadAll(t, h.Store, run)
	if head.NextLine != 1 || len(got) != 0 || head.RunStatus != tracking.StatusRunning {
		t.Fatalf("empty log: head %+v, %d lines", head, len(got))
	}
	in := Lines(100, "a")
	in[0].Text = ""
	in[1].Text = string(make([]byte, 5000)) // NULs are valid UTF-8
	res := mustAppend(t, h.Store, run, runlogs.Batch{Source: "s1", FirstSeq: 0, Lines: in})
	if want := (runlogs.AppendResult{FirstLine: 1, Stored: 100, NextSeq: 100}); res != want {
		t.Fatalf("append: %+v, want %+v", res, want)
	}
	head, got = ReadAll(t, h.Store, run)
	if head.NextLine != 101 {
		t.Fatalf("head %+v", head)
	}
	if want := numbered(in, 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("lines differ:\n got %+v\nwant %+v", got[:3], want[:3])
	}
	var bytes int64
	for _, l := range in {
		bytes += int64(len(l.Text))
	}
	if head.Bytes != bytes {
		t.Fatalf("head bytes %d, want %d", head.Bytes, bytes)
	}
}

func testNumbering(t *testing.T, h Harness) {
	run := h.NewRun(t)
	other := h.NewRun(t)
	a, b := Lines(10, "a"), Lines(5, "b")
	mustAppend(t, h.Store, run, runlogs.Batch{Source: "A", Lines: a[:4]})
	mustAppend(t, h.Store, other, runlogs.Batch{Source: "A", Lines: b})
	r := mustAppend(t, h.Store, run, runlogs.Batch{Source: "B", Lines: b})
	if r.FirstLine != 5 || r.NextSeq != 5 {
		t.Fatalf("second source: %+v", r)
	}
	r = mustAppend(t, h.Store, run, runlogs.Batch{Source: "A", FirstSeq: 4, Lines: a[4:]})
	if r.FirstLine != 10 || r.Stored != 6 || r.NextSeq != 10 {
		t.Fatalf("first source again: %+v", r)
	}
	_, got := ReadAll(t, h.Store, run)
	want := numbered(append(append(append([]runlogs.Line(nil), a[:4]...), b...), a[4:]...), 1)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("interleaved sources: got %d lines, want %d", len(got), len(want))
	}
	if _, got := ReadAll(t, h.Store, other); len(got) != 5 || got[0].Number != 1 {
		t.Fatalf("other run: %d lines", len(got))
	}
}

func testDedup(t *testing.T, h Harness) {
	run := h.NewRun(t)
	in := Lines(30, "d")
	f := func(first int64, lines []runlogs.Line, want runlogs.AppendResult) {
		t.Helper()
		if got := mustAppend(t, h.Store, run, runlogs.Batch{Source: "src", FirstSeq: first, Lines: lines}); got != want {
			t.Fatalf("append seq %d+%d: %+v, want %+v", first, len(lines), got, want)
		}
	}
	f(0, in[:10], runlogs.AppendResult{FirstLine: 1, Stored: 10, NextSeq: 10})
	// The same request again (its answer was lost): nothing stored.
	f(0, in[:10], runlogs.AppendResult{Duplicates: 10, NextSeq: 10})
	// Overlapping: the first five were stored.
	f(5, in[5:15], runlogs.AppendResult{FirstLine: 11, Stored: 5, Duplicates: 5, NextSeq: 15})
	// A gap (the source dropped lines 15 to 19) is accepted.
	f(20, in[20:25], runlogs.AppendResult{FirstLine: 16, Stored: 5, NextSeq: 25})
	// Lines from before the gap arriving late count as duplicates.
	f(15, in[15:20], runlogs.AppendResult{Duplicates: 5, NextSeq: 25})
	f(25, nil, runlogs.AppendResult{NextSeq: 25})
	_, got := ReadAll(t, h.Store, run)
	want := numbered(append(append([]runlogs.Line(nil), in[:15]...), in[20:25]...), 1)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after retries: %d lines, want %d", len(got), len(want))
	}
}

func testChunkBoundaries(t *testing.T, h Harness) {
	run := h.NewRun(t)
	const total = 20_000
	in := Lines(total, "c")
	// A mix of sizes: tiny batches, one of exactly a chunk, larger ones.
	sizes := []int{1, 7, runlogs.ChunkLines, 5000, 333, 1, 4095, 2}
	seq := 0
	for i := 0; seq < total; i++ {
		n := min(sizes[i%len(sizes)], total-seq)
		mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", FirstSeq: int64(seq), Lines: in[seq : seq+n]})
		seq += n
	}
	head, all := ReadAll(t, h.Store, run)
	if head.NextLine != total+1 || len(all) != total {
		t.Fatalf("head %+v, %d lines", head, len(all))
	}
	ctx := context.Background()
	for _, from := range []int64{1, 2, 4095, 4096, 4097, 8192, 8193, 12345, 19999, 20000} {
		_, cs, err := h.Store.ReadChunks(ctx, run, runlogs.ChunkQuery{FromLine: from, MaxChunks: 1})
		if err != nil || len(cs) != 1 {
			t.Fatalf("from %d: %d chunks, %v", from, len(cs), err)
		}
		if c := cs[0]; c.FirstLine > from || c.FirstLine+int64(c.Count) <= from {
			t.Fatalf("from %d: chunk holds lines %d to %d", from, c.FirstLine, c.FirstLine+int64(c.Count)-1)
		}
	}
	if _, cs, err := h.Store.ReadChunks(ctx, run, runlogs.ChunkQuery{FromLine: total + 1, MaxChunks: 4}); err != nil || len(cs) != 0 {
		t.Fatalf("past the end: %d chunks, %v", len(cs), err)
	}
	// Range reads through the service cross chunk boundaries exactly.
	svc := runlogs.NewService(h.Store, runlogs.Options{})
	for _, tc := range []struct {
		from  int64
		limit int
	}{{1, 1}, {4090, 20}, {4096, 4096}, {8000, 10_000}, {19_990, 100}, {12_000, 1}} {
		page, err := svc.Read(ctx, runlogs.Query{RunID: run, FromLine: tc.from, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		end := min(tc.from+int64(tc.limit), total+1)
		if want := all[tc.from-1 : end-1]; !reflect.DeepEqual(page.Lines, want) {
			t.Fatalf("read %d+%d: %d lines from %v, want %d", tc.from, tc.limit, len(page.Lines), firstNumber(page.Lines), len(want))
		}
		if page.NextLine != end {
			t.Fatalf("read %d+%d: next line %d, want %d", tc.from, tc.limit, page.NextLine, end)
		}
	}
}

func firstNumber(ls []runlogs.Line) any {
	if len(ls) == 0 {
		return "none"
	}
	return ls[0].Number
}

// testChunkSets: a read that names nodes, streams or a time skips the
// chunks holding none of those lines and keeps every chunk holding one.
// Which lines share a chunk is the store's business: compaction merges
// small chunks, in the background while this suite runs, and a chunk
// merged from several batches holds all their nodes and streams. Each
// batch here is therefore a full chunk, which compaction leaves as it is,
// so that the counts below hold whenever the store compacts; the checks
// of each chunk's sets against its lines hold for any layout.
func testChunkSets(t *testing.T, h Harness) {
	run := h.NewRun(t)
	const n = runlogs.ChunkLines
	mk := func(node int32, stream runlogs.Stream, ts int64) []runlogs.Line {
		ls := Lines(n, "m")
		for i := range ls {
			ls[i].Node, ls[i].Stream, ls[i].TimestampMs = node, stream, ts+int64(i)
		}
		return ls
	}
	batches := []runlogs.Batch{
		{Source: "n0", Lines: mk(0, runlogs.Stdout, 10_000)},
		{Source: "n1", Lines: mk(1, runlogs.Stderr, 20_000)},
		{Source: "n0", FirstSeq: n, Lines: mk(0, runlogs.Stdout, 30_000)},
	}
	var all []runlogs.Line
	for _, b := range batches {
		mustAppend(t, h.Store, run, b)
		all = append(all, b.Lines...)
	}
	all = numbered(all, 1)
	ctx := context.Background()
	// count returns the lines of the chunks q reads, after checking that
	// each chunk matches q, that its sets are those of its lines, and that
	// every line wanted (on or after q.FromLine) is in one of them.
	count := func(q runlogs.ChunkQuery, wanted func(l *runlogs.Line) bool) int {
		t.Helper()
		q.MaxChunks = 100
		_, cs, err := h.Store.ReadChunks(ctx, run, q)
		if err != nil {
			t.Fatal(err)
		}
		read := map[int64]bool{}
		for _, c := range cs {
			if !q.Matches(&c) {
				t.Fatalf("chunk at %d does not match %+v", c.FirstLine, q)
			}
			ls, err := runlogs.DecodeChunk(nil, c.Data, c.FirstLine)
			if err != nil {
				t.Fatalf("decode chunk at %d: %v", c.FirstLine, err)
			}
			sets := runlogs.ChunkOf(ls, c.FirstLine, runlogs.CompressFast)
			if sets.Nodes != c.Nodes || sets.Streams != c.Streams || sets.MinTimestampMs != c.MinTimestampMs || sets.MaxTimestampMs != c.MaxTimestampMs {
				t.Fatalf("chunk at %d: nodes %b, streams %b, times %d to %d; its lines have %b, %b, %d to %d", c.FirstLine,
					c.Nodes, c.Streams, c.MinTimestampMs, c.MaxTimestampMs, sets.Nodes, sets.Streams, sets.MinTimestampMs, sets.MaxTimestampMs)
			}
			for _, l := range ls {
				read[l.Number] = true
			}
		}
		for i := range all {
			if l := &all[i]; l.Number >= q.FromLine && wanted(l) && !read[l.Number] {
				t.Fatalf("%+v: line %d is in no chunk read", q, l.Number)
			}
		}
		return len(read)
	}
	if got := count(runlogs.ChunkQuery{Nodes: runlogs.NodeBit(1)}, func(l *runlogs.Line) bool { return l.Node == 1 }); got != n {
		t.Fatalf("node 1: %d lines in matching chunks, want %d", got, n)
	}
	if got := count(runlogs.ChunkQuery{Streams: runlogs.StreamBit(runlogs.Stdout)}, func(l *runlogs.Line) bool { return l.Stream == runlogs.Stdout }); got != 2*n {
		t.Fatalf("stdout: %d lines, want %d", got, 2*n)
	}
	if got := count(runlogs.ChunkQuery{SinceMs: 25_000}, func(l *runlogs.Line) bool { return l.TimestampMs >= 25_000 }); got != n {
		t.Fatalf("since: %d lines, want %d", got, n)
	}
	if got := count(runlogs.ChunkQuery{FromLine: n + 10, Nodes: runlogs.NodeBit(0)}, func(l *runlogs.Line) bool { return l.Node == 0 }); got != n {
		t.Fatalf("node 0 after line %d: %d lines, want %d", n+10, got, n)
	}
}

func testLifecycle(t *testing.T, h Harness) {
	ctx := context.Background()
	run := h.NewRun(t)
	mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", Lines: Lines(3, "l")})
	h.SetStatus(t, run, tracking.StatusFinished)
	head, _ := ReadAll(t, h.Store, run)
	if head.RunStatus != tracking.StatusFinished {
		t.Fatalf("status %v", head.RunStatus)
	}
	// A finished run still takes lines (another node may finish later).
	mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", FirstSeq: 3, Lines: Lines(1, "late")})

	h.SetDeleted(t, run, true)
	if _, err := h.Store.AppendLines(ctx, run, runlogs.Batch{Source: "s", FirstSeq: 4, Lines: Lines(1, "x")}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("append to a deleted run: %v", err)
	}
	if _, _, err := h.Store.ReadChunks(ctx, run, runlogs.ChunkQuery{FromLine: 1, MaxChunks: 1}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("read of a deleted run: %v", err)
	}
	h.SetDeleted(t, run, false)
	if _, got := ReadAll(t, h.Store, run); len(got) != 4 {
		t.Fatalf("restored run: %d lines", len(got))
	}

	missing := "ffffffffffffffffffffffffffffffff"
	if _, err := h.Store.AppendLines(ctx, missing, runlogs.Batch{Source: "s", Lines: Lines(1, "x")}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("append to a missing run: %v", err)
	}
	if _, _, err := h.Store.ReadChunks(ctx, missing, runlogs.ChunkQuery{FromLine: 1, MaxChunks: 1}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("read of a missing run: %v", err)
	}
	if h.Purge != nil {
		h.Purge(t, run)
		if _, _, err := h.Store.ReadChunks(ctx, run, runlogs.ChunkQuery{FromLine: 1, MaxChunks: 1}); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("read of a purged run: %v", err)
		}
	}
}

func testLimits(t *testing.T, h Harness) {
	ctx := context.Background()
	run := h.NewRun(t)
	mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", Lines: Lines(60, "x")})
	_, err := h.Store.AppendLines(ctx, run, runlogs.Batch{Source: "s", FirstSeq: 60, Lines: Lines(50, "y")})
	if errs.CodeOf(err) != errs.LimitExceeded {
		t.Fatalf("over the line limit: %v", err)
	}
	head, _ := ReadAll(t, h.Store, run)
	if head.NextLine != 61 {
		t.Fatalf("a refused batch stored lines: head %+v", head)
	}
	// The refused batch did not advance the source either.
	if r := mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", FirstSeq: 60, Lines: Lines(40, "z")}); r.Stored != 40 {
		t.Fatalf("append up to the limit: %+v", r)
	}
	big := h.NewRun(t)
	ls := Lines(3, "")
	for i := range ls {
		ls[i].Text = string(make([]byte, 4000))
	}
	if _, err := h.Store.AppendLines(ctx, big, runlogs.Batch{Source: "s", Lines: ls}); errs.CodeOf(err) != errs.LimitExceeded {
		t.Fatalf("over the byte limit: %v", err)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	run := h.NewRun(t)
	const sources, batches, per = 8, 25, 100
	var wg sync.WaitGroup
	errc := make(chan error, sources)
	for s := range sources {
		wg.Go(func() {
			src := fmt.Sprintf("src-%d", s)
			for b := range batches {
				ls := Lines(per, fmt.Sprintf("%s/%d/", src, b))
				batch := runlogs.Batch{Source: src, FirstSeq: int64(b * per), Lines: ls}
				if _, err := h.Store.AppendLines(context.Background(), run, batch); err != nil {
					errc <- err
					return
				}
				if b%5 == 0 { // a retry now and then
					if r, err := h.Store.AppendLines(context.Background(), run, batch); err != nil || r.Stored != 0 {
						errc <- fmt.Errorf("retry stored %d lines (err %v)", r.Stored, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	_, got := ReadAll(t, h.Store, run)
	if len(got) != sources*batches*per {
		t.Fatalf("%d lines, want %d", len(got), sources*batches*per)
	}
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l.Text] && l.Text != "" {
			t.Fatalf("line %q stored twice", l.Text)
		}
		seen[l.Text] = true
	}
}

// testSpans: the chunk spans tile the log in line order with the times of
// their lines, and the density over time counts every line once and
// opens each bucket at a line of that time.
func testSpans(t *testing.T, h Harness) {
	run := h.NewRun(t)
	ctx := context.Background()
	const total = 10_000
	in := make([]runlogs.Line, total)
	for i := range in {
		// 10 lines a second, with a quiet minute after line 6000.
		ts := int64(1_800_000_000_000) + int64(i)*100
		if i >= 6000 {
			ts += 60_000
		}
		in[i] = runlogs.Line{TimestampMs: ts, Stream: runlogs.Stdout, LocalRank: -1, Text: fmt.Sprint("l", i)}
	}
	for seq := 0; seq < total; seq += 2500 {
		mustAppend(t, h.Store, run, runlogs.Batch{Source: "s", FirstSeq: int64(seq), Lines: in[seq : seq+2500]})
	}
	head, spans, err := h.Store.Spans(ctx, run)
	if err != nil || head.NextLine != total+1 || len(spans) == 0 {
		t.Fatalf("spans: %+v %d %v", head, len(spans), err)
	}
	next := int64(1)
	for _, c := range spans {
		if c.FirstLine != next || c.MinTimestampMs != in[c.FirstLine-1].TimestampMs || c.MaxTimestampMs != in[c.FirstLine-1+int64(c.Count)-1].TimestampMs {
			t.Fatalf("span %+v after line %d", c, next-1)
		}
		next += int64(c.Count)
	}
	if next != total+1 {
		t.Fatalf("spans end at line %d", next-1)
	}
	svc := runlogs.NewService(h.Store, runlogs.Options{})
	d, err := svc.Density(ctx, run, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range d.Lines {
		sum += n
	}
	if sum != total || d.TotalLines != total || d.FromMs != in[0].TimestampMs {
		t.Fatalf("density counts %d of %d lines from %d", sum, d.TotalLines, d.FromMs)
	}
	for b, n := range d.Lines {
		// Lines are spread evenly over their chunk's time range (a chunk
		// that spans the quiet minute puts some in it): exact to a chunk.
		bs := d.FromMs + int64(b)*d.BucketMs
		if n > 0 {
			// The bucket opens at a line within a chunk of its time.
			l := d.FirstLine[b]
			if l < 1 || l > total || in[l-1].TimestampMs < bs-60_000-4096*100 || in[l-1].TimestampMs >= bs+d.BucketMs+60_000+4096*100 {
				t.Errorf("bucket %d (from %d) opens at line %d (time %d)", b, bs, l, in[l-1].TimestampMs)
			}
		}
	}
	if _, err := svc.Density(ctx, run, 0, 0, runlogs.MaxDensityBuckets+1); !errs.Is(err, errs.Invalid) {
		t.Errorf("too many buckets: %v", err)
	}
}
