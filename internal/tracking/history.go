package tracking

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
)

// HistoryPage is one page of a metric's history, in step order.
type HistoryPage struct {
	Key           string
	Points        []HistoryPoint
	NextPageToken string
}

// HistoryBuffer holds one page of a metric's history as MetricHistoryInto
// fills it: the points, and the contexts of runs of them. Reuse one across
// requests: MetricHistoryInto resets it and keeps its memory, so that a page
// costs no allocations proportional to its size.
type HistoryBuffer struct {
	Points []metrics.Point
	// Contexts gives the points' contexts: Contexts[i].Context applies
	// to Points[Contexts[i].Start:] up to the next entry's Start. Empty
	// when no point has a context.
	Contexts      []ContextRun
	NextPageToken string

	scratch []metrics.Point
	pending []HistoryPoint
}

// ContextRun is the context of the points from Start on, nil for none.
type ContextRun struct {
	Start   int
	Context *MetricContext
}

// ContextAt returns the context of Points[i]; j, the index of the run that
// holds it, lets a caller walking the points forward skip the search: pass
// the previous result back (0 at first).
func (b *HistoryBuffer) ContextAt(i, j int) (*MetricContext, int) {
	if len(b.Contexts) == 0 {
		return nil, 0
	}
	for j+1 < len(b.Contexts) && b.Contexts[j+1].Start <= i {
		j++
	}
	if b.Contexts[j].Start > i {
		return nil, j
	}
	return b.Contexts[j].Context, j
}

func (b *HistoryBuffer) reset() {
	b.Points, b.Contexts, b.NextPageToken = b.Points[:0], b.Contexts[:0], ""
}

// setContext makes c the context of the points appended from now on.
func (b *HistoryBuffer) setContext(c *MetricContext) {
	cur := (*MetricContext)(nil)
	if n := len(b.Contexts); n > 0 {
		cur = b.Contexts[n-1].Context
	}
	if c == cur || (c != nil && cur != nil && *c == *cur) {
		return
	}
	if n := len(b.Contexts); n > 0 && b.Contexts[n-1].Start == len(b.Points) {
		b.Contexts[n-1].Context = c
		return
	}
	b.Contexts = append(b.Contexts, ContextRun{Start: len(b.Points), Context: c})
}

// MetricHistory returns the points of one metric of a run in the order
// (step, timestamp, value), at most maxResults of them (0 means the
// HistoryMaxResults limit), continuing after pageToken. It is
// MetricHistoryInto with a page of its own.
func (s *Service) MetricHistory(ctx context.Context, runID, key string, maxResults int, pageToken string) (HistoryPage, error) {
	var b HistoryBuffer
	if err := s.MetricHistoryInto(ctx, runID, key, maxResults, pageToken, &b); err != nil {
		return HistoryPage{}, err
	}
	page := HistoryPage{Key: key, Points: make([]HistoryPoint, len(b.Points)), NextPageToken: b.NextPageToken}
	j := 0
	for i, p := range b.Points {
		page.Points[i].Point = p
		page.Points[i].Context, j = b.ContextAt(i, j)
	}
	return page, nil
}

// MetricHistoryInto is MetricHistory into b, which it resets first.
//
// Page tokens are cursors: the last point returned and, when the page ended
// inside a chunk, that chunk's id and the decoder's position in it (a
// metrics.ChunkIter mark), so that the next page resumes decoding where
// this one stopped instead of decoding the chunk's first points again. A
// token whose chunk was replaced meanwhile (compaction) falls back to the
// cursor, which stays correct: points logged between two pages at later
// steps still appear. Every page reads one consistent snapshot.
func (s *Service) MetricHistoryInto(ctx context.Context, runID, key string, maxResults int, pageToken string, b *HistoryBuffer) error {
	b.reset()
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if key == "" {
		return invalidf("Missing value for required parameter 'metric_key'. See the API docs for more information about request parameters.")
	}
	if maxResults < 0 {
		return invalidf("Invalid value %d for parameter 'max_results' supplied. It must be a positive integer.", maxResults)
	}
	if maxResults == 0 || maxResults > s.limits.HistoryMaxResults {
		maxResults = s.limits.HistoryMaxResults
	}
	tok, err := decodeHistoryToken(pageToken)
	if err != nil {
		return err
	}
	from := int64(math.MinInt64)
	if tok.cursor {
		from = tok.last.Step
	}
	read := func(useMark bool) error {
		b.reset()
		return s.store.ReadSeries(ctx, runID, key, from, math.MaxInt64, func(ss SeriesSnapshot) error {
			if disjoint(ss.Chunks) {
				return b.readDisjoint(ss.Chunks, ss.Read, maxResults, tok, useMark)
			}
			return b.readMerged(ss.Chunks, ss.Read, maxResults, tok)
		})
	}
	err = read(tok.chunkID != 0)
	if errors.Is(err, errResumeFailed) {
		// The mark decoded to something the chunk does not end with: it
		// was not made for this chunk. Go by the cursor alone.
		err = read(false)
	}
	return err
}

// chunkReadFunc is SeriesSnapshot.Read.
type chunkReadFunc = func(first int, fn func(i int, data []byte) (bool, error)) error

// errResumeFailed says that decoding a chunk resumed from a page token's
// mark failed, and the page must be read again without the mark.
var errResumeFailed = errors.New("tracking: resuming from the page token's mark failed")

// disjoint reports whether the chunks, ordered by MinStep, cover strictly
// increasing step ranges: then their points are already in order, chunk
// after chunk, and need no merging. After compaction this is the usual
// case.
func disjoint(chunks []ChunkInfo) bool {
	for i := 1; i < len(chunks); i++ {
		if chunks[i].MinStep <= chunks[i-1].MaxStep {
			return false
		}
	}
	return true
}

func corruptChunk(c *ChunkInfo, err error) error {
	return errs.Wrap(errs.Internal, fmt.Errorf("chunk %d: %w", c.ID, err), "stored metric data is corrupt")
}

// contextOf returns a chunk's context, nil when it has none.
func contextOf(c *ChunkInfo) *MetricContext {
	if c.Context.IsZero() {
		return nil
	}
	return &c.Context
}

// readDisjoint fills b from disjoint chunks, decoding straight into
// b.Points.
func (b *HistoryBuffer) readDisjoint(chunks []ChunkInfo, read chunkReadFunc, maxResults int, tok historyToken, useMark bool) error {
	var it metrics.ChunkIter
	positioned := !tok.cursor
	resumed := false
	err := read(0, func(i int, data []byte) (bool, error) {
		c := &chunks[i]
		if !positioned {
			// The first chunk holding points after the cursor.
			ok, err := b.position(&it, c, data, tok, useMark)
			if err != nil {
				return false, err
			}
			resumed = ok && useMark && tok.chunkID == c.ID
			if it.Index() == it.Len() {
				return true, nil // every point of this chunk precedes the cursor
			}
			positioned = true
		} else if err := it.Reset(data); err != nil {
			return false, corruptChunk(c, err)
		}
		b.setContext(contextOf(c))
		n := min(maxResults-len(b.Points), it.Len()-it.Index())
		var err error
		if b.Points, err = it.Next(b.Points, n); err != nil {
			if resumed {
				return false, errResumeFailed
			}
			return false, corruptChunk(c, err)
		}
		resumed = false
		if len(b.Points) < maxResults {
			return true, nil
		}
		last := b.Points[len(b.Points)-1]
		switch {
		case it.Index() < it.Len():
			b.NextPageToken = encodeHistoryToken(last, c.ID, it.AppendMark(nil))
		case i+1 < len(chunks):
			b.NextPageToken = encodeHistoryToken(last, 0, nil)
		}
		return false, nil
	})
	return err
}

// position sets it to the first point of the chunk after the token's
// cursor: from the token's mark when it has one for this chunk and it
// checks out, else by decoding and comparing. It reports whether it used
// the mark.
func (b *HistoryBuffer) position(it *metrics.ChunkIter, c *ChunkInfo, data []byte, tok historyToken, useMark bool) (bool, error) {
	if useMark && tok.chunkID == c.ID {
		if err := it.Resume(data, tok.mark); err == nil {
			if last, ok := it.Last(); ok && metrics.Equal(last, tok.last) {
				return true, nil
			}
		}
	}
	if err := it.Reset(data); err != nil {
		return false, corruptChunk(c, err)
	}
	// Count the points up to the cursor, then skip that many.
	var err error
	if b.scratch, err = it.Next(b.scratch[:0], it.Len()); err != nil {
		return false, corruptChunk(c, err)
	}
	k, _ := slices.BinarySearchFunc(b.scratch, tok.last, func(p, cur metrics.Point) int {
		if metrics.Compare(p, cur) <= 0 {
			return -1
		}
		return 1
	})
	if err := it.Reset(data); err != nil {
		return false, corruptChunk(c, err)
	}
	b.scratch, err = it.Skip(k, b.scratch)
	return false, err
}

// readMerged fills b from chunks that overlap: it reads chunk after chunk
// and merges them; points before the next unread chunk's first step are
// final, since no unread chunk can hold a point that sorts before them.
func (b *HistoryBuffer) readMerged(chunks []ChunkInfo, read chunkReadFunc, maxResults int, tok historyToken) error {
	pending := b.pending[:0]
	defer func() { b.pending = pending[:0] }()
	emitted := 0
	next := 0 // the next unread chunk
	flush := func() {
		boundary := int64(math.MaxInt64)
		if next < len(chunks) {
			boundary = chunks[next].MinStep
		}
		final, _ := slices.BinarySearchFunc(pending, boundary, func(p HistoryPoint, step int64) int {
			if p.Step < step {
				return -1
			}
			return 1
		})
		take := min(final, maxResults-emitted)
		for _, p := range pending[:take] {
			b.setContext(p.Context)
			b.Points = append(b.Points, p.Point)
		}
		emitted += take
		pending = pending[:copy(pending, pending[take:])]
	}
	err := read(0, func(i int, data []byte) (bool, error) {
		c := &chunks[i]
		var err error
		if b.scratch, err = metrics.DecodeChunk(b.scratch[:0], data); err != nil {
			return false, corruptChunk(c, err)
		}
		cp := contextOf(c)
		for _, p := range b.scratch {
			if !tok.cursor || metrics.Compare(p, tok.last) > 0 {
				pending = append(pending, HistoryPoint{Point: p, Context: cp})
			}
		}
		sortHistory(pending)
		pending = dedupHistory(pending)
		next = i + 1
		flush()
		return emitted < maxResults, nil
	})
	if err != nil {
		return err
	}
	if emitted == maxResults && (len(pending) > 0 || next < len(chunks)) {
		b.NextPageToken = encodeHistoryToken(b.Points[len(b.Points)-1], 0, nil)
	}
	return nil
}

func countPoints(chunks []ChunkInfo) int {
	n := 0
	for _, c := range chunks {
		n += c.Count
	}
	return n
}

func sortHistory(pts []HistoryPoint) {
	if slices.IsSortedFunc(pts, cmpHistory) {
		return
	}
	slices.SortFunc(pts, cmpHistory)
}

func cmpHistory(a, b HistoryPoint) int { return metrics.Compare(a.Point, b.Point) }

// dedupHistory drops exact repeats from sorted points.
func dedupHistory(pts []HistoryPoint) []HistoryPoint {
	if len(pts) < 2 {
		return pts
	}
	w := 1
	for i := 1; i < len(pts); i++ {
		if !metrics.Equal(pts[i].Point, pts[w-1].Point) {
			pts[w] = pts[i]
			w++
		}
	}
	return pts[:w]
}

// historyToken is a decoded page token of get-history.
type historyToken struct {
	cursor  bool          // false: the first page
	last    metrics.Point // the last point of the previous page
	chunkID int64         // the chunk the page ended inside, 0 for none
	mark    []byte        // the ChunkIter mark in that chunk
}

// History page tokens are "h2" + base64url(step, timestamp, value bits of
// the last point returned, 24 bytes big-endian; then, when the page ended
// inside a chunk, the chunk id as a uvarint, a metrics.ChunkIter mark and
// a CRC-32 (IEEE) of everything before it, big-endian). "h1" tokens, which
// older servers wrote, are the 24 bytes alone. A mark that fails its
// checksum is ignored: the cursor alone is always enough.
func encodeHistoryToken(p metrics.Point, chunkID int64, mark []byte) string {
	b := make([]byte, 24, 24+binary.MaxVarintLen64+len(mark)+4)
	binary.BigEndian.PutUint64(b[0:], uint64(p.Step))
	binary.BigEndian.PutUint64(b[8:], uint64(p.TimestampMs))
	binary.BigEndian.PutUint64(b[16:], math.Float64bits(p.Value))
	if chunkID != 0 {
		b = binary.AppendUvarint(b, uint64(chunkID))
		b = append(b, mark...)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	return "h2" + base64.RawURLEncoding.EncodeToString(b)
}

func decodeHistoryToken(tok string) (historyToken, error) {
	if tok == "" {
		return historyToken{}, nil
	}
	bad := errs.Errorf(errs.Invalid, "invalid page_token %q for get-history: pass back the next_page_token of the previous page unchanged", errs.Truncate(tok, 40))
	if len(tok) < 2 || (tok[:2] != "h1" && tok[:2] != "h2") {
		return historyToken{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[2:])
	if err != nil || len(b) < 24 || (tok[:2] == "h1" && len(b) != 24) {
		return historyToken{}, bad
	}
	t := historyToken{cursor: true, last: metrics.Point{
		Step:        int64(binary.BigEndian.Uint64(b[0:])),
		TimestampMs: int64(binary.BigEndian.Uint64(b[8:])),
		Value:       math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
	}}
	if rest := b[24:]; len(rest) > 0 {
		if len(rest) < 5 || crc32.ChecksumIEEE(b[:len(b)-4]) != binary.BigEndian.Uint32(b[len(b)-4:]) {
			return t, nil // go by the cursor
		}
		id, n := binary.Uvarint(rest)
		if n <= 0 || id == 0 || id > math.MaxInt64 || n > len(rest)-4 {
			return t, nil
		}
		t.chunkID, t.mark = int64(id), rest[n:len(rest)-4]
	}
	return t, nil
}
