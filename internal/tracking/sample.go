package tracking

import (
	"context"
	"fmt"
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
// exact, as MLflow samples. Above it, sampling works from candidates whose
// number does not grow with the series (see candidates).
const exactSampleLimit = 64 * 1024

// MetricHistoryBulkInterval returns a downsampled view of one metric for up
// to BulkIntervalMaxRuns runs, in the order the run ids were given.
func (s *Service) MetricHistoryBulkInterval(ctx context.Context, q BulkIntervalQuery) ([]RunSeries, error) {
	l := s.limits
	if len(q.RunIDs) == 0 {
		return nil, invalidf("Missing value for required parameter 'run_ids'. See the API docs for more information about request parameters.")
	}
	if len(q.RunIDs) > l.BulkIntervalMaxRuns {
		return nil, invalidf("GetMetricHistoryBulkInterval request must specify at most %d run_ids. Received %d run_ids. See the API docs for more information about request parameters.", l.BulkIntervalMaxRuns, len(q.RunIDs))
	}
	for _, id := range q.RunIDs {
		if err := ValidateRunID(id); err != nil {
			return nil, err
		}
	}
	if q.Key == "" {
		return nil, invalidf("Missing value for required parameter 'metric_key'. See the API docs for more information about request parameters.")
	}
	if q.MaxResults == 0 {
		q.MaxResults = l.BulkIntervalMaxResults
	}
	if q.MaxResults < 1 || q.MaxResults > l.BulkIntervalMaxResults {
		return nil, invalidf("max_results must be between 1 and %d. See the API docs for more information about request parameters.", l.BulkIntervalMaxResults)
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
	// Each run's coarse listing counts the points in range; a run with more
	// than the limit is sampled from candidates in the same snapshot.
	series := make([]RunSeries, len(runIDs))
	sampled := make([]bool, len(runIDs))
	total := 0
	sample := func(i int, count bool) error {
		return s.store.ReadSeriesCoarse(ctx, runIDs[i], q.Key, lo, hi, func(ovs []Overview, ss SeriesSnapshot) error {
			if count {
				n := countPoints(ss.Chunks)
				for _, o := range ovs {
					n += o.Count
				}
				total += n
				if n <= s.exact {
					return nil
				}
			}
			cands, err := candidates(ovs, ss, lo, hi, q.MaxResults)
			if err != nil {
				return err
			}
			series[i] = RunSeries{RunID: runIDs[i], Points: thin(cands, q)}
			sampled[i] = true
			return nil
		})
	}
	for i := range runIDs {
		if err := sample(i, true); err != nil {
			return nil, err
		}
	}
	if total > s.exact {
		for i := range runIDs {
			if !sampled[i] {
				if err := sample(i, false); err != nil {
					return nil, err
				}
			}
		}
		return series, nil
	}
	runs := make([]sampledRun, len(runIDs))
	for i, id := range runIDs {
		if err := s.readRange(ctx, id, q.Key, lo, hi, &runs[i]); err != nil {
			return nil, err
		}
	}
	return sampleExact(runIDs, runs, q), nil
}

// A range with more points than Options.ExactSampleLimit is sampled from
// candidates whose number does not grow with the series:
//
//   - each overview's points (its chunks' first, lowest, highest and last
//     points; see Overview), one row for dozens of chunks;
//   - of the chunks no overview covers: every point of those the range
//     cuts, so that the range's first and last steps are there; then, when
//     the overviews and the chunks' summaries would give fewer than twice
//     the points wanted, each chunk's sketch (each sixteenth's lowest and
//     highest point), or all its points when it has no sketch and is
//     small; otherwise each chunk's summary (first, lowest, highest, last).
//
// A series of 10,000,000 points reads 38 overviews and at most 63 chunk
// summaries, one of 200,000 points 49 sketches: a few thousand candidates
// either way, which thin reduces to what was asked for.

// decodeWithoutSketch is the largest chunk without a sketch whose points
// become candidates; a larger one offers its summary.
const decodeWithoutSketch = 2048

// candidates returns the candidate points of one run in [lo, hi] from its
// coarse listing, sorted and unique.
func candidates(ovs []Overview, ss SeriesSnapshot, lo, hi int64, maxResults int) ([]HistoryPoint, error) {
	var out []HistoryPoint
	add := func(cp *MetricContext, p metrics.Point) {
		if p.Step >= lo && p.Step <= hi {
			out = append(out, HistoryPoint{Point: p, Context: cp})
		}
	}
	var pts []metrics.Point
	for k := range ovs {
		o := &ovs[k]
		var err error
		if pts, err = metrics.DecodeChunk(pts[:0], o.Data); err != nil {
			return nil, errs.Wrap(errs.Internal, fmt.Errorf("overview of steps %d to %d: %w", o.MinStep, o.MaxStep, err), "stored metric data is corrupt")
		}
		var cp *MetricContext
		if !o.Context.IsZero() {
			cp = &o.Context
		}
		for _, p := range pts {
			add(cp, p)
		}
	}
	cs := ss.Chunks
	useSketches := len(out)+4*len(cs) < 2*maxResults
	// What each chunk offers: its points, its sketch or its summary.
	decode := make([]bool, len(cs))
	for i := range cs {
		c := &cs[i]
		inside := c.MinStep >= lo && c.MaxStep <= hi
		switch {
		case !inside:
			decode[i] = true
		case useSketches && c.HasSketch:
		case useSketches && c.Count <= decodeWithoutSketch:
			decode[i] = true
		default:
			add(contextOf(c), c.First)
			add(contextOf(c), c.Low)
			add(contextOf(c), c.High)
			add(contextOf(c), c.Last)
		}
	}
	decodeInto := func(i int, data []byte) error {
		var err error
		if pts, err = metrics.DecodeChunk(pts[:0], data); err != nil {
			return corruptChunk(&cs[i], err)
		}
		for _, p := range pts {
			add(contextOf(&cs[i]), p)
		}
		return nil
	}
	if useSketches {
		err := ss.Sketches(func(i int, sketch []byte) error {
			if decode[i] {
				return nil // its points come below
			}
			return decodeInto(i, sketch)
		})
		if err != nil {
			return nil, err
		}
	}
	// Decode each run of chunks to decode with one read.
	for i := 0; i < len(cs); i++ {
		if !decode[i] {
			continue
		}
		err := ss.Read(i, func(j int, data []byte) (bool, error) {
			if !decode[j] {
				return false, nil
			}
			i = j
			return true, decodeInto(j, data)
		})
		if err != nil {
			return nil, err
		}
	}
	sortHistory(out)
	return dedupHistory(out), nil
}

// thin reduces sorted candidates to about what q asks for: the step range
// is cut into MaxResults/2 buckets, each keeping its lowest and highest
// candidate (metrics.MinMaxBuckets), so that spikes stay, and the last
// one. In SampleSteps mode, where MaxResults bounds the steps returned, a
// series whose NaNs would make more than MaxResults+2 points gets a third
// as many buckets instead.
func thin(cands []HistoryPoint, q BulkIntervalQuery) []HistoryPoint {
	if len(cands) <= q.MaxResults {
		return cands
	}
	out := minMaxHistory(cands, max(1, q.MaxResults/2))
	if q.Mode == SampleSteps && len(out) > q.MaxResults+2 {
		out = minMaxHistory(cands, max(1, q.MaxResults/3))
	}
	return out
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
	return s.store.ReadSeries(ctx, runID, key, lo, hi, func(ss SeriesSnapshot) error {
		chunks, read := ss.Chunks, ss.Read
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
func minMaxHistory(pts []HistoryPoint, buckets int) []HistoryPoint {
	plain := make([]metrics.Point, len(pts))
	for i, p := range pts {
		plain[i] = p.Point
	}
	kept := metrics.MinMaxBuckets(nil, plain, buckets)
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
