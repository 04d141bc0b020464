// Package progress holds the per-rank progress of training runs: what a
// training loop reports once a step (the step, its time, the time it
// waited for data, the samples and tokens it processed), per rank.
//
// Reports are stored as metrics of the run under reserved keys, through
// the tracking service, so that history, sampling and charts work as for
// any metric:
//
//	sextant/progress/rank_<r>/step_time_s   seconds of the step, data wait included
//	sextant/progress/rank_<r>/data_wait_s   seconds of it spent waiting for the batch
//	sextant/progress/rank_<r>/samples       samples the step processed
//	sextant/progress/rank_<r>/tokens        tokens the step processed
//
// at the training step, stamped with the report's time. Where a rank runs
// is kept in the run tags sextant.progress.rank_<r>.node and .gpu. The
// Service also reads the step times back per rank (Series, for the run
// page) and for the watcher's straggler check (RecentStepTimes implements
// runevents.StepTimes). It imports no HTTP or SQL package.
package progress

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// KeyPrefix starts every progress metric key.
const KeyPrefix = "sextant/progress/"

// The fields of a report, as the last segment of its metric keys.
const (
	FieldStepTime = "step_time_s"
	FieldDataWait = "data_wait_s"
	FieldSamples  = "samples"
	FieldTokens   = "tokens"
)

// Limits of a report.
const (
	// MaxRank is the highest rank accepted.
	MaxRank = 1 << 20
	// MaxStep is the highest step accepted (JavaScript's exact integers).
	MaxStep = 1 << 53
	// MaxReports caps the reports of one request.
	MaxReports = 1000
	// MaxSeconds caps step and data-wait times: a day.
	MaxSeconds = 86400
	// MaxNodeBytes caps a node name.
	MaxNodeBytes = 256
)

// Key returns the metric key of field for rank.
func Key(rank int, field string) string {
	return KeyPrefix + "rank_" + strconv.Itoa(rank) + "/" + field
}

// ParseKey returns the rank and field of a progress metric key, or false.
func ParseKey(key string) (rank int, field string, ok bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix+"rank_")
	if !ok {
		return 0, "", false
	}
	r, f, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 0 || n > MaxRank || strconv.Itoa(n) != r {
		return 0, "", false
	}
	return n, f, true
}

// NodeTag and GPUTag return the run tags that say where rank runs.
func NodeTag(rank int) string { return "sextant.progress.rank_" + strconv.Itoa(rank) + ".node" }

// GPUTag returns the run tag holding rank's GPU index.
func GPUTag(rank int) string { return "sextant.progress.rank_" + strconv.Itoa(rank) + ".gpu" }

// Report is one step of one rank. Optional values are negative when not
// reported.
type Report struct {
	Rank int
	// GPU is the index of the rank's GPU on its node; -1 when unknown.
	GPU  int
	Step int64
	// TimeMs is when the step ended, in Unix milliseconds; 0 means when
	// the server received it.
	TimeMs int64
	// StepTimeS is the step's wall time, in seconds; required.
	StepTimeS float64
	// DataWaitS is the part of it spent waiting for data; negative when
	// not reported.
	DataWaitS float64
	// Samples and Tokens are what the step processed; negative when not
	// reported.
	Samples, Tokens float64
}

// Batch is what one request carries: reports of one node.
type Batch struct {
	RunID string
	// Node is the host the ranks run on; empty when unknown.
	Node    string
	Reports []Report
}

// Tracker is what the Service needs of the tracking service; *tracking.Service
// implements it.
type Tracker interface {
	LogBatch(ctx context.Context, runID string, b tracking.Batch) error
	GetRun(ctx context.Context, id string) (*tracking.Run, error)
	MetricHistoryBulkInterval(ctx context.Context, q tracking.BulkIntervalQuery) ([]tracking.RunSeries, error)
	RecentPoints(ctx context.Context, runID string, keys []string, lastSteps int, sinceMs int64, fn func(key string, pts []metrics.Point) error) error
}

// Service ingests progress reports and reads them back. It is safe for
// concurrent use; the only state it keeps is which ranks' places it has
// written (to write the tags once), so replicas answer alike.
type Service struct {
	tr  Tracker
	now func() time.Time

	mu     sync.Mutex
	placed map[rankOf]place // where each rank was last written to be, as tags
}

// rankOf and place key and hold Service.placed: structs, not strings
// built for each request's lookup.
type rankOf struct {
	runID string
	rank  int
}

type place struct {
	node string
	gpu  int
}

// NewService returns a Service over tr; now nil means time.Now.
func NewService(tr Tracker, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{tr: tr, now: now, placed: map[rankOf]place{}}
}

func invalidf(format string, args ...any) error { return errs.Errorf(errs.Invalid, format, args...) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// validate checks b. It neither copies nor changes b's reports (a copy
// was a sixteenth of the server's allocations under go run ./bench
// progress): a report's time left at 0 is taken as now where it is used.
func validate(b *Batch) error {
	if err := tracking.ValidateRunID(b.RunID); err != nil {
		return err
	}
	switch {
	case len(b.Reports) == 0:
		return invalidf("Missing value for required parameter 'reports'")
	case len(b.Reports) > MaxReports:
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: a progress request can carry at most %d reports, got %d", MaxReports, len(b.Reports))
	case len(b.Node) > MaxNodeBytes || !utf8.ValidString(b.Node) || strings.IndexFunc(b.Node, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return invalidf("node must be at most %d printable bytes", MaxNodeBytes)
	}
	for i := range b.Reports {
		r := &b.Reports[i]
		at := func(format string, args ...any) error {
			return invalidf("reports[%d]: "+format, append([]any{i}, args...)...)
		}
		switch {
		case r.Rank < 0 || r.Rank > MaxRank:
			return at("rank %d is out of range: give 0 to %d (RANK of torchrun)", r.Rank, MaxRank)
		case r.GPU < -1 || r.GPU > 1<<16:
			return at("gpu %d is out of range (-1 for unknown)", r.GPU)
		case r.Step < 0 || r.Step > MaxStep:
			return at("step %d is out of range: give 0 to %d", r.Step, int64(MaxStep))
		case r.TimeMs < 0 || r.TimeMs > MaxStep:
			return at("time_ms %d is not a time: give milliseconds since the Unix epoch", r.TimeMs)
		case !finite(r.StepTimeS) || r.StepTimeS < 0 || r.StepTimeS > MaxSeconds:
			return at("step_time_s %v must be 0 to %d seconds", r.StepTimeS, MaxSeconds)
		case !finite(r.DataWaitS) || r.DataWaitS > MaxSeconds:
			return at("data_wait_s %v must be 0 to %d seconds", r.DataWaitS, MaxSeconds)
		case !finite(r.Samples) || !finite(r.Tokens):
			return at("samples and tokens must be finite numbers")
		}
	}
	return nil
}

// Ingest validates b and stores its reports as metrics of the run (and,
// the first time a rank is seen on a node and GPU, the rank's place as
// run tags). A bad report refuses the whole request with errs.Invalid
// naming it. Reports of more points than one metrics batch holds are
// stored in several; a request sent again stores nothing twice. b's
// reports are neither changed nor kept.
func (s *Service) Ingest(ctx context.Context, b Batch) error {
	if err := validate(&b); err != nil {
		return err
	}
	nowMs := s.now().UnixMilli()
	// The metrics go rank by rank and, within a rank, key by key: the
	// tracking service checks a key once for a run of points with it, and
	// the store groups points by key the same way, where one key per
	// report in turn made each point pay for both (a fifth of the
	// request's CPU before the store). Each key is built once.
	reps := b.Reports
	for i := 1; i < len(reps); i++ {
		if reps[i].Rank < reps[i-1].Rank { // a rank's sender sends its reports alone: rarely
			reps = slices.Clone(reps) // b's are not changed
			slices.SortStableFunc(reps, func(a, b Report) int { return cmp.Compare(a.Rank, b.Rank) })
			break
		}
	}
	// The metrics' slice is reused from request to request (the store
	// copies what it keeps): a new one per request was a sixth of the
	// server's allocations under go run ./bench progress.
	msp := metricSlices.Get().(*[]tracking.Metric)
	ms := slices.Grow((*msp)[:0], 4*len(b.Reports))
	all := ms[:0]
	defer func() {
		all = all[:cap(all)]
		clear(all) // drop the key strings
		*msp = all[:0]
		metricSlices.Put(msp)
	}()
	fields := [...]struct {
		name string
		v    func(r *Report) float64
	}{
		{FieldStepTime, func(r *Report) float64 { return r.StepTimeS }},
		{FieldDataWait, func(r *Report) float64 { return r.DataWaitS }},
		{FieldSamples, func(r *Report) float64 { return r.Samples }},
		{FieldTokens, func(r *Report) float64 { return r.Tokens }},
	}
	for lo := 0; lo < len(reps); {
		rank := reps[lo].Rank
		hi := lo + 1
		for hi < len(reps) && reps[hi].Rank == rank {
			hi++
		}
		for _, f := range fields {
			key := ""
			for i := lo; i < hi; i++ {
				r := &reps[i]
				v := f.v(r)
				if v < 0 { // not reported (step_time_s is never negative)
					continue
				}
				if key == "" {
					key = Key(rank, f.name)
				}
				ts := r.TimeMs
				if ts == 0 { // when the server received it
					ts = nowMs
				}
				ms = append(ms, tracking.Metric{Key: key, Point: metrics.Point{Step: r.Step, TimestampMs: ts, Value: v}})
			}
		}
		lo = hi
	}
	var tags []tracking.Tag
	type placing struct {
		k rankOf
		p place
	}
	var placed []placing
	for i := range b.Reports {
		r := &b.Reports[i]
		if b.Node == "" && r.GPU < 0 {
			continue
		}
		if i > 0 && r.Rank == b.Reports[i-1].Rank && r.GPU == b.Reports[i-1].GPU {
			continue // a rank's reports come together: its place was just looked at
		}
		k, p := rankOf{b.RunID, r.Rank}, place{b.Node, r.GPU}
		s.mu.Lock()
		known := s.placed[k] == p
		s.mu.Unlock()
		if !known && !slices.ContainsFunc(placed, func(o placing) bool { return o.k == k }) {
			placed = append(placed, placing{k, p})
			if b.Node != "" {
				tags = append(tags, tracking.Tag{Key: NodeTag(r.Rank), Value: b.Node})
			}
			if r.GPU >= 0 {
				tags = append(tags, tracking.Tag{Key: GPUTag(r.Rank), Value: strconv.Itoa(r.GPU)})
			}
		}
	}
	// Nobody waits on progress: the store may hold the write a few
	// milliseconds to commit it with other ranks' (tracking.Patient).
	ctx = tracking.Patient(ctx)
	// One metrics batch holds at most 1000 metrics: 250 reports of four.
	const perBatch = 1000
	for len(ms) > 0 || len(tags) > 0 {
		n := min(len(ms), perBatch-min(len(tags), 100))
		t := min(len(tags), 100)
		if err := s.tr.LogBatch(ctx, b.RunID, tracking.Batch{Metrics: ms[:n], Tags: tags[:t]}); err != nil {
			return err
		}
		ms, tags = ms[n:], tags[t:]
	}
	if len(placed) > 0 {
		s.mu.Lock()
		if len(s.placed) > 100_000 { // a bound, not a cache policy: forgetting costs a tag write
			clear(s.placed)
		}
		for _, o := range placed {
			s.placed[o.k] = o.p
		}
		s.mu.Unlock()
	}
	return nil
}

var metricSlices = sync.Pool{New: func() any { return new([]tracking.Metric) }}

// Rank is one rank of a run as Series returns it.
type Rank struct {
	Rank int
	// Node and GPU say where it runs: "" and -1 when unknown.
	Node string
	GPU  int
	// StepTimes and DataWaits are its step_time_s and data_wait_s series,
	// downsampled (the first and last step kept), in step order.
	StepTimes, DataWaits []metrics.Point
}

// ranks returns the run's ranks that reported progress, in rank order,
// with their places and the latest point of their step time.
func (s *Service) ranks(ctx context.Context, runID string) ([]Rank, map[int]metrics.Point, error) {
	run, err := s.tr.GetRun(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	latest := map[int]metrics.Point{}
	for _, m := range run.Data.Metrics {
		if rk, f, ok := ParseKey(m.Key); ok && f == FieldStepTime {
			latest[rk] = m.Point
		}
	}
	tags := map[string]string{}
	for _, t := range run.Data.Tags {
		if strings.HasPrefix(t.Key, "sextant.progress.rank_") {
			tags[t.Key] = t.Value
		}
	}
	out := make([]Rank, 0, len(latest))
	for rk := range latest {
		r := Rank{Rank: rk, Node: tags[NodeTag(rk)], GPU: -1}
		if g, err := strconv.Atoi(tags[GPUTag(rk)]); err == nil && g >= 0 {
			r.GPU = g
		}
		out = append(out, r)
	}
	sortRanks(out)
	return out, latest, nil
}

// sortRanks sorts rs by rank. (An insertion sort of the ranks, which come
// in a map's order, was a third of the straggler check's CPU at 1,000.)
func sortRanks(rs []Rank) {
	slices.SortFunc(rs, func(a, b Rank) int { return cmp.Compare(a.Rank, b.Rank) })
}

// MaxSeriesPoints caps the points per rank and series that Series returns.
const MaxSeriesPoints = 2500

// Series returns each rank's step and data-wait times, each series
// downsampled to at most maxPoints points (0 means 500), ranks in order.
func (s *Service) Series(ctx context.Context, runID string, maxPoints int) ([]Rank, error) {
	if err := tracking.ValidateRunID(runID); err != nil {
		return nil, err
	}
	switch {
	case maxPoints == 0:
		maxPoints = 500
	case maxPoints < 2 || maxPoints > MaxSeriesPoints:
		return nil, invalidf("max_points must be between 2 and %d, got %d", MaxSeriesPoints, maxPoints)
	}
	ranks, _, err := s.ranks(ctx, runID)
	if err != nil {
		return nil, err
	}
	read := func(key string) ([]metrics.Point, error) {
		rs, err := s.tr.MetricHistoryBulkInterval(ctx, tracking.BulkIntervalQuery{RunIDs: []string{runID}, Key: key, MaxResults: maxPoints})
		if err != nil || len(rs) == 0 {
			return nil, err
		}
		out := make([]metrics.Point, len(rs[0].Points))
		for i, p := range rs[0].Points {
			out[i] = p.Point
		}
		return out, nil
	}
	for i := range ranks {
		r := &ranks[i]
		if r.StepTimes, err = read(Key(r.Rank, FieldStepTime)); err != nil {
			return nil, err
		}
		if r.DataWaits, err = read(Key(r.Rank, FieldDataWait)); err != nil && errs.CodeOf(err) != errs.NotFound {
			return nil, err
		}
	}
	return ranks, nil
}

// recentSteps is how many of a rank's newest steps RecentStepTimes reads.
// The straggler check compares medians, and the median of 64 steps is
// already within about a sixth of a standard deviation of the step time's
// (its standard error, 1.25 sigma / sqrt(n)), far inside the 20% margin
// the check asks for; a rank slow for StragglerFor is slow in its newest
// 64 steps at every look. Reading 256 decoded and kept four times the
// points for nothing: at 1,000 ranks the check was a fifth of the
// server's allocations under go run ./bench progress.
const recentSteps = 64

var _ runevents.StepTimes = (*Service)(nil)

// RecentStepTimes implements runevents.StepTimes: each rank's step times
// reported at sinceMs or later, among its newest 64 steps. The ranks
// that reported nothing since sinceMs (by their latest point) are not
// read, and the others are read together, in one pass of the store.
func (s *Service) RecentStepTimes(ctx context.Context, runID string, sinceMs int64) ([]runevents.RankStepTimes, error) {
	ranks, latest, err := s.ranks(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]runevents.RankStepTimes, len(ranks))
	var keys []string
	at := map[string]int{} // key -> index into out
	for i, r := range ranks {
		out[i] = runevents.RankStepTimes{Rank: r.Rank, Node: r.Node, GPU: r.GPU}
		if latest[r.Rank].TimestampMs >= sinceMs {
			k := Key(r.Rank, FieldStepTime)
			keys = append(keys, k)
			at[k] = i
		}
	}
	err = s.tr.RecentPoints(ctx, runID, keys, recentSteps, sinceMs, func(key string, pts []metrics.Point) error {
		i, ok := at[key]
		if !ok {
			return nil
		}
		sec := make([]float64, len(pts))
		for j, p := range pts {
			sec[j] = p.Value
		}
		out[i].Seconds = sec
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
