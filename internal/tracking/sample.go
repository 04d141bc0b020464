package tracking

import (
	"context"
	"math"

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

// exactSampleLimit is the number of stored points in range up to which
// sampling decodes every point and is exact. Above it, sampling works from
// the chunk summaries alone (each chunk's first, last, lowest and highest
// point), which keeps a 10-million-point series to a few milliseconds.
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
	chunks := make([][]ChunkInfo, len(runIDs))
	total := 0
	for i, id := range runIDs {
		c, err := s.store.SeriesChunks(ctx, id, q.Key, lo, hi)
		if err != nil {
			return nil, err
		}
		chunks[i] = c
		total += countPoints(c)
	}
	if total <= exactSampleLimit {
		var out []RunSeries
		err := retryReads(func() error {
			var err error
			out, err = s.sampleExact(ctx, runIDs, chunks, lo, hi, q)
			if errs.Is(err, errs.Unavailable) {
				// Re-list the chunks: compaction replaced some.
				for i, id := range runIDs {
					if chunks[i], err = s.store.SeriesChunks(ctx, id, q.Key, lo, hi); err != nil {
						return err
					}
				}
				return errs.E(errs.Unavailable, "metric data changed while reading, retry")
			}
			return err
		})
		return out, err
	}
	return sampleSummaries(runIDs, chunks, lo, hi, q), nil
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

// sampleExact decodes every point in range and applies the sampling rule.
func (s *Service) sampleExact(ctx context.Context, runIDs []string, chunks [][]ChunkInfo, lo, hi int64, q BulkIntervalQuery) ([]RunSeries, error) {
	series := make([]RunSeries, len(runIDs))
	for i, id := range runIDs {
		pts, err := s.store.ReadChunks(ctx, chunks[i], nil)
		if err != nil {
			return nil, err
		}
		w := 0
		for _, p := range pts {
			if p.Step >= lo && p.Step <= hi {
				pts[w] = p
				w++
			}
		}
		pts = pts[:w]
		sortHistory(pts)
		series[i] = RunSeries{RunID: id, Points: dedupHistory(pts)}
	}
	if q.Mode == SampleMinMax {
		for i := range series {
			series[i].Points = minMaxHistory(series[i].Points, q.MaxResults)
		}
		return series, nil
	}
	// MLflow: sample the union of steps, then add back each run's first and
	// last step so every line starts and ends where its data does.
	lists := make([][]int64, len(series))
	keep := map[int64]bool{}
	for i, rs := range series {
		steps := make([]int64, 0, len(rs.Points))
		for _, p := range rs.Points {
			if len(steps) == 0 || steps[len(steps)-1] != p.Step {
				steps = append(steps, p.Step)
			}
		}
		lists[i] = steps
		if len(steps) > 0 {
			keep[steps[0]] = true
			keep[steps[len(steps)-1]] = true
		}
	}
	for _, st := range metrics.SampleSteps(metrics.UnionSteps(nil, lists...), q.MaxResults) {
		keep[st] = true
	}
	for i := range series {
		pts := series[i].Points
		w := 0
		for _, p := range pts {
			if keep[p.Step] {
				pts[w] = p
				w++
			}
		}
		series[i].Points = pts[:w]
	}
	return series, nil
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
// first, lowest, highest and last point; when there are more chunks than
// wanted, evenly spaced chunks offer their first point and the series' last
// point is always kept.
func sampleSummaries(runIDs []string, chunks [][]ChunkInfo, lo, hi int64, q BulkIntervalQuery) []RunSeries {
	series := make([]RunSeries, len(runIDs))
	for i, id := range runIDs {
		var pts []HistoryPoint
		add := func(c *ChunkInfo, p metrics.Point) {
			if p.Step < lo || p.Step > hi {
				return
			}
			hp := HistoryPoint{Point: p}
			if !c.Context.IsZero() {
				hp.Context = &c.Context
			}
			pts = append(pts, hp)
		}
		cs := chunks[i]
		if len(cs) > q.MaxResults && q.Mode == SampleSteps {
			n := len(cs)
			for k := 0; k < q.MaxResults; k++ {
				c := &cs[k*n/q.MaxResults]
				add(c, c.First)
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
