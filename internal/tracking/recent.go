package tracking

import (
	"context"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
)

// MaxRecentSteps caps the lastSteps of RecentPoints.
const MaxRecentSteps = 4096

// RecentPoints calls fn once for each series (runID, key), key in keys,
// that has points at one of its newest lastSteps steps (a step above its
// largest minus lastSteps) with a timestamp at sinceMs or later, with
// those points, in no particular order. pts is only valid until fn
// returns. Keys the run does not have are skipped; an unknown run gives
// errs.NotFound. It is for internal checks over many series of one run
// (the straggler check), read in one pass (Store.ReadRecent).
func (s *Service) RecentPoints(ctx context.Context, runID string, keys []string, lastSteps int, sinceMs int64, fn func(key string, pts []metrics.Point) error) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if lastSteps < 1 || lastSteps > MaxRecentSteps {
		return invalidf("last steps must be between 1 and %d, got %d", MaxRecentSteps, lastSteps)
	}
	if len(keys) == 0 {
		return nil
	}
	var (
		cur          string
		pts, scratch []metrics.Point
	)
	flush := func() error {
		if len(pts) == 0 {
			return nil
		}
		err := fn(cur, pts)
		pts = pts[:0]
		return err
	}
	err := s.store.ReadRecent(ctx, runID, keys, int64(lastSteps), sinceMs, func(c RecentChunk) error {
		if c.Key != cur {
			if err := flush(); err != nil {
				return err
			}
			cur = c.Key
		}
		var err error
		if scratch, err = metrics.DecodeChunk(scratch[:0], c.Data); err != nil {
			return errs.Wrap(errs.Internal, fmt.Errorf("run %s, metric %q: %w", runID, c.Key, err), "stored metric data is corrupt")
		}
		lo := c.MaxStep - int64(lastSteps)
		for _, p := range scratch {
			if p.Step > lo && p.TimestampMs >= sinceMs {
				pts = append(pts, p)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
