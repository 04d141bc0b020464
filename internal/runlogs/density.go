package runlogs

import (
	"context"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Density is how many lines a log has over time: the lines of each bucket
// of BucketMs from FromMs, and the number of the first line of each (0
// for an empty bucket), so that a time can be turned into a line to open
// the log at.
type Density struct {
	FromMs, ToMs, BucketMs int64
	Lines                  []int64
	FirstLine              []int64
	TotalLines             int64
}

// MaxDensityBuckets caps the buckets of one density.
const MaxDensityBuckets = 10_000

// Density returns the run's log lines over [fromMs, toMs) in buckets
// (fromMs and toMs 0: the log's first and last line's times; buckets 0:
// 500). It reads where each chunk is, not the lines: a chunk's lines count
// as spread evenly over its time range, exact to a chunk (4096 lines).
func (s *Service) Density(ctx context.Context, runID string, fromMs, toMs int64, buckets int) (Density, error) {
	if err := tracking.ValidateRunID(runID); err != nil {
		return Density{}, err
	}
	switch {
	case buckets < 0 || buckets > MaxDensityBuckets:
		return Density{}, errs.Errorf(errs.Invalid, "buckets must be between 1 and %d, got %d", MaxDensityBuckets, buckets)
	case fromMs < 0 || toMs < 0 || (toMs != 0 && fromMs >= toMs):
		return Density{}, errs.Errorf(errs.Invalid, "from_ms and to_ms must make a range (from before to), got %d and %d", fromMs, toMs)
	}
	if buckets == 0 {
		buckets = 500
	}
	head, spans, err := s.store.Spans(ctx, runID)
	if err != nil {
		return Density{}, err
	}
	d := Density{TotalLines: head.Lines()}
	if fromMs == 0 || toMs == 0 {
		lo, hi := int64(0), int64(0)
		for i, c := range spans {
			if i == 0 || c.MinTimestampMs < lo {
				lo = c.MinTimestampMs
			}
			hi = max(hi, c.MaxTimestampMs)
		}
		if fromMs == 0 {
			fromMs = lo
		}
		if toMs == 0 {
			toMs = hi + 1
		}
	}
	if toMs <= fromMs {
		toMs = fromMs + 1
	}
	d.FromMs, d.ToMs = fromMs, toMs
	d.BucketMs = max((toMs-fromMs+int64(buckets)-1)/int64(buckets), 1)
	n := int((toMs - fromMs + d.BucketMs - 1) / d.BucketMs)
	d.Lines, d.FirstLine = make([]int64, n), make([]int64, n)
	for _, c := range spans {
		if c.Count <= 0 || c.MaxTimestampMs < fromMs || c.MinTimestampMs >= toMs {
			continue
		}
		dur := c.MaxTimestampMs - c.MinTimestampMs + 1
		for b := max((c.MinTimestampMs-fromMs)/d.BucketMs, 0); b < int64(n); b++ {
			bs := fromMs + b*d.BucketMs
			if bs > c.MaxTimestampMs {
				break
			}
			lo, hi := max(bs, c.MinTimestampMs), min(bs+d.BucketMs, c.MaxTimestampMs+1)
			if hi <= lo {
				continue
			}
			first := c.FirstLine + int64(c.Count)*(lo-c.MinTimestampMs)/dur
			last := c.FirstLine + int64(c.Count)*(hi-c.MinTimestampMs)/dur // exclusive
			if last > first {
				d.Lines[b] += last - first
				if d.FirstLine[b] == 0 || first < d.FirstLine[b] {
					d.FirstLine[b] = first
				}
			}
		}
	}
	return d, nil
}
