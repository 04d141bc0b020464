package tracking

import (
	"context"
	"encoding/base64"
	"encoding/binary"
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

// MetricHistory returns the points of one metric of a run in the order
// (step, timestamp, value), at most maxResults of them (0 means the
// HistoryMaxResults limit), continuing after pageToken.
//
// Page tokens are cursors (the last point returned), so a page is cheap
// however deep it lies, and points logged between two pages at later steps
// still appear.
func (s *Service) MetricHistory(ctx context.Context, runID, key string, maxResults int, pageToken string) (HistoryPage, error) {
	var page HistoryPage
	err := retryReads(func() error {
		var err error
		page, err = s.metricHistory(ctx, runID, key, maxResults, pageToken)
		return err
	})
	return page, err
}

// retryReads retries a read that lost a race with compaction: the chunk
// list it read was replaced before it read the chunks. Compaction is rare
// per series, so a few tries always succeed in practice.
func retryReads(read func() error) error {
	var err error
	for range 5 {
		err = read()
		if !errs.Is(err, errs.Unavailable) {
			return err
		}
	}
	return err
}

func (s *Service) metricHistory(ctx context.Context, runID, key string, maxResults int, pageToken string) (HistoryPage, error) {
	if err := ValidateRunID(runID); err != nil {
		return HistoryPage{}, err
	}
	if key == "" {
		return HistoryPage{}, invalidf("Missing value for required parameter 'metric_key'")
	}
	if maxResults < 0 {
		return HistoryPage{}, invalidf("max_results must be positive, got %d", maxResults)
	}
	if maxResults == 0 || maxResults > s.limits.HistoryMaxResults {
		maxResults = s.limits.HistoryMaxResults
	}
	cur, hasCursor, err := decodeHistoryToken(pageToken)
	if err != nil {
		return HistoryPage{}, err
	}
	from := int64(math.MinInt64)
	if hasCursor {
		from = cur.Step
	}
	chunks, err := s.store.SeriesChunks(ctx, runID, key, from, math.MaxInt64)
	if err != nil {
		return HistoryPage{}, err
	}
	if disjoint(chunks) {
		return s.historyDisjoint(ctx, key, chunks, maxResults, cur, hasCursor)
	}
	out := make([]HistoryPoint, 0, min(maxResults, countPoints(chunks)))
	var pending, buf []HistoryPoint
	next := 0  // next unread chunk
	group := 1 // chunks read per round; doubles, so small pages read little and large ones few times
	for {
		// Points before the next unread chunk's first step are final: no
		// unread chunk can hold a point that sorts before them.
		boundary := int64(math.MaxInt64)
		final := len(pending)
		if next < len(chunks) {
			boundary = chunks[next].MinStep
			final, _ = slices.BinarySearchFunc(pending, boundary, func(p HistoryPoint, step int64) int {
				if p.Step < step {
					return -1
				}
				return 1
			})
		}
		take := min(final, maxResults-len(out))
		out = append(out, pending[:take]...)
		pending = pending[take:]
		if len(out) == maxResults || next == len(chunks) {
			break
		}
		end := min(next+group, len(chunks))
		group *= 2
		buf, err = s.store.ReadChunks(ctx, chunks[next:end], buf[:0])
		if err != nil {
			return HistoryPage{}, err
		}
		next = end
		for _, p := range buf {
			if !hasCursor || metrics.Compare(p.Point, cur) > 0 {
				pending = append(pending, p)
			}
		}
		sortHistory(pending)
		pending = dedupHistory(pending)
	}
	page := HistoryPage{Key: key, Points: out}
	if len(out) == maxResults && (len(pending) > 0 || next < len(chunks)) {
		page.NextPageToken = encodeHistoryToken(out[len(out)-1].Point)
	}
	return page, nil
}

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

// historyDisjoint is MetricHistory for disjoint chunks: it decodes chunk
// after chunk straight into the page.
func (s *Service) historyDisjoint(ctx context.Context, key string, chunks []ChunkInfo, maxResults int, cur metrics.Point, hasCursor bool) (HistoryPage, error) {
	out := make([]HistoryPoint, 0, min(maxResults, countPoints(chunks)))
	next, group := 0, 1
	var buf []HistoryPoint
	for next < len(chunks) && len(out) < maxResults {
		end := min(next+group, len(chunks))
		group *= 2
		var err error
		buf, err = s.store.ReadChunks(ctx, chunks[next:end], buf[:0])
		if err != nil {
			return HistoryPage{}, err
		}
		next = end
		pts := buf
		if hasCursor {
			i := 0
			for i < len(pts) && metrics.Compare(pts[i].Point, cur) <= 0 {
				i++
			}
			pts = pts[i:]
		}
		out = append(out, pts[:min(len(pts), maxResults-len(out))]...)
	}
	page := HistoryPage{Key: key, Points: out}
	if len(out) == maxResults && moreAfter(chunks, out[len(out)-1].Point) {
		page.NextPageToken = encodeHistoryToken(out[len(out)-1].Point)
	}
	return page, nil
}

// moreAfter reports whether the chunks may hold a point after last.
func moreAfter(chunks []ChunkInfo, last metrics.Point) bool {
	for i := len(chunks) - 1; i >= 0; i-- {
		if metrics.Compare(chunks[i].Last, last) > 0 {
			return true
		}
	}
	return false
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

// History page tokens: "h1" + base64url(step, timestamp, value bits), 24
// bytes big-endian. The prefix lets us change the format later.
func encodeHistoryToken(p metrics.Point) string {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], uint64(p.Step))
	binary.BigEndian.PutUint64(b[8:], uint64(p.TimestampMs))
	binary.BigEndian.PutUint64(b[16:], math.Float64bits(p.Value))
	return "h1" + base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeHistoryToken(tok string) (metrics.Point, bool, error) {
	if tok == "" {
		return metrics.Point{}, false, nil
	}
	bad := errs.Errorf(errs.Invalid, "invalid page_token %q for get-history: pass back the next_page_token of the previous page unchanged", errs.Truncate(tok, 40))
	if len(tok) < 2 || tok[:2] != "h1" {
		return metrics.Point{}, false, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[2:])
	if err != nil || len(b) != 24 {
		return metrics.Point{}, false, bad
	}
	return metrics.Point{
		Step:        int64(binary.BigEndian.Uint64(b[0:])),
		TimestampMs: int64(binary.BigEndian.Uint64(b[8:])),
		Value:       math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
	}, true, nil
}
