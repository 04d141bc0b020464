package sqlstore

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// HoldCompaction keeps the background compactor from compacting until
// release is called; Compact still runs.
func (s *Store) HoldCompaction() (release func()) {
	s.c.hold.Lock()
	return s.c.hold.Unlock
}

// CheckOverviews checks the overviews of the series (runID, key) against
// its chunks: the chunks that meet an overview's steps are as many as it
// says, hold as many points, are of its context, and their first, lowest,
// highest and last points are its points. It returns the overviews.
func (s *Store) CheckOverviews(ctx context.Context, runID, key string) ([]tracking.Overview, error) {
	var ovs []tracking.Overview
	err := s.Tracking().ReadSeriesCoarse(ctx, runID, key, math.MinInt64, math.MaxInt64, func(o []tracking.Overview, _ tracking.SeriesSnapshot) error {
		ovs = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, o := range ovs {
		chunks, err := s.Tracking().SeriesChunks(ctx, runID, key, o.MinStep, o.MaxStep)
		if err != nil {
			return nil, err
		}
		count := 0
		var want []metrics.Point
		for _, c := range chunks {
			if c.MinStep < o.MinStep || c.MaxStep > o.MaxStep || c.Context != o.Context {
				return nil, fmt.Errorf("overview of steps %d to %d: chunk %d of steps %d to %d, context %+v, meets it", o.MinStep, o.MaxStep, c.ID, c.MinStep, c.MaxStep, c.Context)
			}
			count += c.Count
			want = append(want, c.First, c.Low, c.High, c.Last)
		}
		if len(chunks) != o.Chunks || count != o.Count {
			return nil, fmt.Errorf("overview of steps %d to %d: %d chunks of %d points, want %d of %d", o.MinStep, o.MaxStep, len(chunks), count, o.Chunks, o.Count)
		}
		metrics.SortPoints(want)
		want = metrics.DedupSorted(want)
		got, err := metrics.DecodeChunk(nil, o.Data)
		if err != nil {
			return nil, err
		}
		if !slices.EqualFunc(got, want, metrics.Equal) {
			return nil, fmt.Errorf("overview of steps %d to %d: points %v, want %v", o.MinStep, o.MaxStep, got, want)
		}
	}
	return ovs, nil
}
