package tracking

import (
	"context"
	"math"
	"slices"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
)

// SampleMode selects how get-history-bulk-interval thins a series.
type SampleMode int

const (
	// SampleSteps is MLflow's behaviour: evenly spaced steps from the union
	// of the runs' steps, plus each run's first and last step, and every
	// point at the chosen steps.
	SampleSteps SampleMode = iota
	// SampleMinMax keeps spikes: the step range is cut into buckets and each
	// bucket keeps its lowest and highest point.
	SampleMinMax
)

// BulkIntervalQuery is a get-history-bulk-interval request.
type BulkIntervalQuery struct {
	RunIDs    []string
	Key       string
	StartStep *int64
	EndStep   *int64
	// MaxResults is the number of steps (SampleSteps) or twice the number of
	// buckets (SampleMinMax); 0 means the limit.
	MaxResults int
	Mode       SampleMode
}

// RunSeries is the sampled series of one run.
type RunSeries struct {
	RunID  string
	Points []HistoryPoint
}

// exactSampleLimit is the default of Options.ExactSampleLimit: the number
// of stored points in range up to which sampling decodes every point and is
// exact. Above it, sampling works from the chunk summaries alone (each
// chunk's first, last, lowest and highest point), read from the listing
// without the chunks' data.
const exactSampleLimit = 256 * 1024

// MetricHistoryBulkInterval returns a downsampled view of one metric for up
// to BulkIntervalMaxRuns runs, in the order the run ids were given.
func (s *Service) MetricHistoryBulkInterval(ctx context.Context, q BulkIntervalQuery) ([]RunSeries, error) {
	l := s.limits
	if len(q.RunIDs) == 0 {
		return nil, invalidf("Missing value for required parameter 'run_ids'")
	}
	if len(q.RunIDs) > l.BulkIntervalMaxRuns {
		return nil, errs.Errorf(errs.LimitExceeded, "limit exceeded: GetMetricHistoryBulkInterval request must specify at most %d run_ids. Received %d run_ids.", l.BulkIntervalMaxRuns, len(q.RunIDs))
	}
	for _, id := range q.RunIDs {
		if err := ValidateRunID(id); err != nil {
			return nil, err
		}
	}
	if q.Key == "" {
		return nil, invalidf("Missing value for required parameter 'metric_key'")
	}
	if q.MaxResults == 0 {
		q.MaxResults = l.BulkIntervalMaxResults
	}
	if q.MaxResults < 1 || q.MaxResults > l.BulkIntervalMaxResults {
		return nil, invalidf("max_results must be between 1 and %d.", l.BulkIntervalMaxResults)
	}
	if (q.StartStep == nil) != (q.EndStep == nil) {
		return nil, invalidf("If either start step or end step are specified, both must be specified.")
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if q.StartStep != nil {
		lo, hi = *q.StartStep, *q.EndStep
		if lo > hi {
			return nil, invalidf("end_step must be greater than start_step. Found start_step=%d and end_step=%d.", lo, hi)
		}
	}

	runIDs := dedupStrings(q.RunIDs)
	// One snapshot per run: its listing, and when the range holds few
	// enough points in all, its points.
	listed := make([][]ChunkInfo, len(runIDs))
	total := 0
	for i, id := range runIDs {
		c, err := s.store.SeriesChunks(ctx, id, q.Key, lo, hi)
		if err != nil {
			return nil, err
		}
		listed[i] = c
		total += countPoints(c)
	}
	if total > s.exact {
		return sampleSummaries(runIDs, listed, lo, hi, q), nil
	}
	runs := make([]sampledRun, len(runIDs))
	for i, id := range runIDs {
		if err := s.readRange(ctx, id, q.Key, lo, hi, &runs[i]); err != nil {
			return nil, err
		}
	}
	return sampleExact(runIDs, runs, q), nil
}

// sampledRun is the points of one run in a step range, sorted and unique,
// with the contexts of runs of them.
type sampledRun struct {
	pts  []metrics.Point
	ctxs []ContextRun
}

// readRange reads the points of (runID, key) with steps in [lo, hi] into r
// from one snapshot. Disjoint chunks decode straight into r.pts; others
// are merged.
func (s *Service) readRange(ctx context.Context, runID, key string, lo, hi int64, r *sampledRun) error {
	return s.store.ReadSeries(ctx, runID, key, lo, hi, func(chunks []ChunkInfo, read ChunkReadFunc) error {
		r.pts = make([]metrics.Point, 0, countPoints(chunks))
		if disjoint(chunks) {
			var it metrics.ChunkIter
			return read(0, func(i int, data []byte) (bool, error) {
				c := &chunks[i]
				if err := it.Reset(data); err != nil {
					return false, corruptChunk(c, err)
				}
				start := len(r.pts)
				var err error
				if r.pts, err = it.Next(r.pts, it.Len()); err != nil {
					return false, corruptChunk(c, err)
				}
				// Only the first and last chunks can reach outside the
				// range.
				k := start
				for k < len(r.pts) && r.pts[k].Step < lo {
					k++
				}
				r.pts = append(r.pts[:start], r.pts[k:]...)
				for len(r.pts) > start && r.pts[len(r.pts)-1].Step > hi {
					r.pts = r.pts[:len(r.pts)-1]
				}
				if cp := contextOf(c); len(r.pts) > start && (cp != nil || len(r.ctxs) > 0) {
					r.ctxs = append(r.ctxs, ContextRun{Start: start, Context: cp})
				}
				return true, nil
			})
		}
		var all []HistoryPoint
		var scratch []metrics.Point
		err := read(0, func(i int, data []byte) (bool, error) {
			c := &chunks[i]
			var err error
			if scratch, err = metrics.DecodeChunk(scratch[:0], data); err != nil {
				return false, corruptChunk(c, err)
			}
			cp := contextOf(c)
			for _, p := range scratch {
				if p.Step >= lo && p.Step <= hi {
					all = append(all, HistoryPoint{Point: p, Context: cp})
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		sortHistory(all)
		all = dedupHistory(all)
		for _, p := range all {
			n := len(r.ctxs)
			if n == 0 && p.Context != nil || n > 0 && r.ctxs[n-1].Context != p.Context {
				r.ctxs = append(r.ctxs, ContextRun{Start: len(r.pts), Context: p.Context})
			}
			r.pts = append(r.pts, p.Point)
		}
		return nil
	})
}

func dedupStrings(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// sampleExact applies the sampling rule to every point in range.
func sampleExact(runIDs []string, runs []sampledRun, q BulkIntervalQuery) []RunSeries {
	series := make([]RunSeries, len(runIDs))
	if q.Mode == SampleMinMax {
		for i, r := range runs {
			kept := r.pts
			if len(kept) > q.MaxResults {
				kept = metrics.MinMaxBuckets(nil, r.pts, max(1, q.MaxResults/2))
			}
			series[i] = RunSeries{RunID: runIDs[i], Points: withContexts(r, kept)}
		}
		return series
	}
	// MLflow: sample the union of steps, then add back each run's first and
	// last step so every line starts and ends where its data does.
	lists := make([][]int64, len(runs))
	var ends []int64
	for i, r := range runs {
		steps := make([]int64, 0, len(r.pts))
		for _, p := range r.pts {
			if len(steps) == 0 || steps[len(steps)-1] != p.Step {
				steps = append(steps, p.Step)
			}
		}
		lists[i] = steps
		if len(steps) > 0 {
			ends = append(ends, steps[0], steps[len(steps)-1])
		}
	}
	union := lists[0]
	if len(lists) > 1 {
		union = metrics.UnionSteps(nil, lists...)
	}
	keep := metrics.SampleSteps(union, q.MaxResults)
	slices.Sort(ends)
	keep = metrics.UnionSteps(nil, keep, ends)
	for i, r := range runs {
		// Both are sorted: walk them together.
		var kept []metrics.Point
		k := 0
		for _, p := range r.pts {
			for k < len(keep) && keep[k] < p.Step {
				k++
			}
			if k < len(keep) && keep[k] == p.Step {
				kept = append(kept, p)
			}
		}
		series[i] = RunSeries{RunID: runIDs[i], Points: withContexts(r, kept)}
	}
	return series
}

// withContexts gives the points kept, a sorted subset of r.pts, their
// contexts.
func withContexts(r sampledRun, kept []metrics.Point) []HistoryPoint {
	out := make([]HistoryPoint, len(kept))
	j, c := 0, 0
	for i, p := range kept {
		out[i].Point = p
		if len(r.ctxs) == 0 {
			continue
		}
		for j < len(r.pts) && !metrics.Equal(r.pts[j], p) {
			j++
		}
		for c+1 < len(r.ctxs) && r.ctxs[c+1].Start <= j {
			c++
		}
		if r.ctxs[c].Start <= j {
			out[i].Context = r.ctxs[c].Context
		}
	}
	return out
}

// minMaxHistory applies metrics.MinMaxBuckets to points with contexts.
func minMaxHistory(pts []HistoryPoint, maxResults int) []HistoryPoint {
	if len(pts) <= maxResults {
		return pts
	}
	plain := make([]metrics.Point, len(pts))
	for i, p := range pts {
		plain[i] = p.Point
	}
	kept := metrics.MinMaxBuckets(nil, plain, max(1, maxResults/2))
	out := make([]HistoryPoint, 0, len(kept))
	j := 0
	for _, k := range kept {
		for j < len(pts) && !metrics.Equal(pts[j].Point, k) {
			j++
		}
		if j < len(pts) {
			out = append(out, pts[j])
			j++
		}
	}
	return out
}

// sampleSummaries samples from chunk summaries only. Each chunk offers its
// first, lowest, highest and last point. When that makes more points than
// wanted in SampleSteps mode, evenly spaced chunks offer their first point
// for half of the budget, and the lowest and highest points of as many
// groups of neighbouring chunks fill the other half, so that spikes stay;
// the series' last point is always kept.
func sampleSummaries(runIDs []string, chunks [][]ChunkInfo, lo, hi int64, q BulkIntervalQuery) []RunSeries {
	series := make([]RunSeries, len(runIDs))
	for i, id := range runIDs {
		var pts []HistoryPoint
		add := func(c *ChunkInfo, p metrics.Point) {
			if p.Step < lo || p.Step > hi {
				return
			}
			pts = append(pts, HistoryPoint{Point: p, Context: contextOf(c)})
		}
		cs := chunks[i]
		if 4*len(cs) > q.MaxResults+1 && q.Mode == SampleSteps {
			n := len(cs)
			firsts := min(n, max(1, q.MaxResults/2))
			for k := range firsts {
				c := &cs[k*n/firsts]
				add(c, c.First)
			}
			groups := min(n, max(1, (q.MaxResults-firsts)/2))
			for g := range groups {
				var low, high *ChunkInfo
				for k := g * n / groups; k < (g+1)*n/groups; k++ {
					c := &cs[k]
					if low == nil || lessValue(c.Low.Value, low.Low.Value) {
						low = c
					}
					if high == nil || lessValue(high.High.Value, c.High.Value) {
						high = c
					}
				}
				if low != nil {
					add(low, low.Low)
					add(high, high.High)
				}
			}
			last := lastChunk(cs)
			add(last, last.Last)
		} else {
			for k := range cs {
				c := &cs[k]
				add(c, c.First)
				add(c, c.Low)
				add(c, c.High)
				add(c, c.Last)
			}
		}
		sortHistory(pts)
		pts = dedupHistory(pts)
		if q.Mode == SampleMinMax {
			pts = minMaxHistory(pts, q.MaxResults)
		}
		series[i] = RunSeries{RunID: id, Points: pts}
	}
	return series
}

// lessValue orders values as summaries do: NaN above everything, so that
// a chunk of NaNs is never another's low.
func lessValue(a, b float64) bool {
	if a != a {
		return false
	}
	return b != b || a < b
}

// lastChunk returns the chunk holding the series' greatest point.
func lastChunk(cs []ChunkInfo) *ChunkInfo {
	best := &cs[0]
	for k := range cs {
		if metrics.Compare(cs[k].Last, best.Last) > 0 {
			best = &cs[k]
		}
	}
	return best
}
