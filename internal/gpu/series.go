package gpu

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sextant/sextant/internal/errs"
)

// Agg selects what a downsampled point holds.
type Agg int

// The aggregations.
const (
	// AggAvg gives each bucket's mean.
	AggAvg Agg = iota
	// AggMin and AggMax give the bucket's lowest and highest reading.
	AggMin
	AggMax
	// AggMinAvgMax gives all three, so a chart can draw the mean with a
	// band that keeps spikes visible.
	AggMinAvgMax
)

// ParseAgg parses an aggregation name: avg, min, max or minavgmax.
func ParseAgg(s string) (Agg, bool) {
	switch s {
	case "", "avg":
		return AggAvg, true
	case "min":
		return AggMin, true
	case "max":
		return AggMax, true
	case "minavgmax":
		return AggMinAvgMax, true
	}
	return 0, false
}

// DefaultSeriesFields returns the fields a series query returns when it
// names none: what the GPU pane draws. The slice is the caller's.
func DefaultSeriesFields() []Field { return []Field{FieldUtil, FieldMemUsed, FieldTemp} }

// SeriesQuery asks for the history of some GPUs.
type SeriesQuery struct {
	Selection
	// FromMs and ToMs bound the samples' timestamps: [FromMs, ToMs). ToMs 0
	// means now; FromMs 0 means ToMs minus the retention window. FromMs is
	// raised to now minus the retention window, so history ends exactly
	// there whenever the last prune ran.
	FromMs, ToMs int64
	// Points is the most points each series may have. 0 returns every
	// sample (raw).
	Points int
	// Fields are the readings to return; empty means DefaultSeriesFields().
	Fields []Field
	// Agg says what each downsampled point holds.
	Agg Agg
}

// SeriesResult is the history of the selected GPUs.
type SeriesResult struct {
	// FromMs and ToMs are the range served, after defaults and clipping.
	FromMs, ToMs int64
	// BucketMs is the width of a downsampling bucket; 0 for raw samples.
	BucketMs int64
	Fields   []Field
	Agg      Agg
	GPUs     []GPUSeries
}

// GPUSeries is the history of one GPU.
type GPUSeries struct {
	Node string
	// RunID and NodeRank are the labels of the GPU's last sample in range.
	RunID    string
	NodeRank int
	Index    int
	UUID     string
	Name     string
	// Series[i] is the series of Fields[i], in time order. Buckets without
	// a reading (no sample, or only missing readings) have no point.
	Series [][]SeriesPoint
}

// SeriesPoint is one point of a series. Raw points and AggAvg, AggMin and
// AggMax points use Value; AggMinAvgMax points use Min, Value (the mean)
// and Max. TimestampMs is the sample's for raw points and the bucket's
// start for downsampled ones.
type SeriesPoint struct {
	TimestampMs int64
	Value       float64
	Min, Max    float64
	n           int64
}

// Series returns the history of the selected GPUs between two times,
// downsampled to at most q.Points points per series.
//
// Downsampling cuts time into buckets of equal width aligned to multiples
// of the width since the epoch, so a window that slides with the clock
// keeps its bucket boundaries and its older points do not move between
// refreshes. The width is (to-from)/q.Points rounded up, widened just
// enough for the aligned buckets overlapping [from, to) to be at most
// q.Points; the first bucket may start before from. Missing readings are
// left out of every aggregate.
func (s *Service) Series(ctx context.Context, q SeriesQuery) (*SeriesResult, error) {
	if err := validateSelection(q.Selection); err != nil {
		return nil, err
	}
	switch {
	case q.ToMs < 0 || q.FromMs < 0:
		return nil, invalidf("from_ms and to_ms must not be negative")
	case q.Points < 0:
		return nil, invalidf("points must not be negative, got %d", q.Points)
	case q.Points > s.opts.MaxPoints:
		return nil, errs.Errorf(errs.LimitExceeded, "limit exceeded: points is %d, the maximum is %d", q.Points, s.opts.MaxPoints)
	}
	now := s.now().UnixMilli()
	to := q.ToMs
	if to == 0 {
		to = now + 1
	}
	from := q.FromMs
	if from == 0 {
		from = to - s.opts.Retention.Milliseconds()
	}
	from = max(from, now-s.opts.Retention.Milliseconds())
	fields := q.Fields
	if len(fields) == 0 {
		fields = DefaultSeriesFields()
	}
	res := &SeriesResult{FromMs: from, ToMs: to, Fields: fields, Agg: q.Agg}
	if from >= to {
		return res, nil
	}
	var start int64
	if q.Points > 0 {
		res.BucketMs, start = bucketWidth(from, to, q.Points)
	}
	var buckets int
	if res.BucketMs > 0 {
		buckets = int((to-1-start)/res.BucketMs + 1)
	}
	// One query over every selected node: its rows come in (node, time)
	// order from one index range per node, on one connection whose page
	// cache stays warm between the pane's refreshes. (Scanning nodes side
	// by side on several connections measured slower: each one's cache is
	// cold.)
	var raw atomic.Int64
	sb := &seriesBuilder{fields: fields, bucketMs: res.BucketMs, start: start, buckets: buckets,
		idx: map[gpuKey]int{}, raw: &raw, maxRaw: int64(s.opts.MaxRawPoints)}
	if err := s.store.Scan(ctx, q.Selection, from, to, sb.add); err != nil {
		return nil, err
	}
	res.GPUs = sb.gpus
	for i := range res.GPUs {
		for _, pts := range res.GPUs[i].Series {
			for j := range pts {
				p := &pts[j]
				if res.BucketMs > 0 {
					p.Value /= float64(p.n) // Value held the sum
				}
				switch q.Agg {
				case AggMin:
					p.Value = p.Min
				case AggMax:
					p.Value = p.Max
				}
			}
		}
	}
	slices.SortStableFunc(res.GPUs, func(a, b GPUSeries) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return a.Index - b.Index
	})
	return res, nil
}

type gpuKey struct{ node, gpu string }

// seriesBuilder accumulates the series of the samples passed to add.
type seriesBuilder struct {
	fields   []Field
	bucketMs int64
	start    int64
	buckets  int
	idx      map[gpuKey]int
	// guess remembers where the previous row's GPUs went: rows come node
	// by node, each with the same GPUs in the same order, so the map is
	// consulted only when the guess is wrong.
	guess  []int
	gpus   []GPUSeries
	raw    *atomic.Int64
	maxRaw int64
}

func (sb *seriesBuilder) add(ns *NodeSample) error {
	for i := range ns.GPUs {
		g := &ns.GPUs[i]
		j := -1
		if i < len(sb.guess) {
			if c := &sb.gpus[sb.guess[i]]; c.Node == ns.Node && c.Index == g.Index && c.UUID == g.UUID {
				j = sb.guess[i]
			}
		}
		if j < 0 {
			k := gpuKey{ns.Node, g.Key()}
			var ok bool
			if j, ok = sb.idx[k]; !ok {
				j = len(sb.gpus)
				sb.idx[k] = j
				gs := GPUSeries{Node: ns.Node, Index: g.Index, UUID: g.UUID, Name: g.Name, Series: make([][]SeriesPoint, len(sb.fields))}
				for fi := range gs.Series {
					gs.Series[fi] = make([]SeriesPoint, 0, sb.buckets)
				}
				sb.gpus = append(sb.gpus, gs)
			}
			for len(sb.guess) <= i {
				sb.guess = append(sb.guess, 0)
			}
			sb.guess[i] = j
		}
		gs := &sb.gpus[j]
		gs.RunID, gs.NodeRank = ns.RunID, ns.NodeRank
		for fi, f := range sb.fields {
			v := g.Values[f]
			if IsMissing(v) {
				continue
			}
			if sb.bucketMs == 0 {
				if sb.raw.Add(1) > sb.maxRaw {
					return errs.Errorf(errs.LimitExceeded, "limit exceeded: the raw series hold more than %d points; ask for fewer with points=N or a shorter range", sb.maxRaw)
				}
				gs.Series[fi] = append(gs.Series[fi], SeriesPoint{TimestampMs: ns.TimestampMs, Value: v, Min: v, Max: v, n: 1})
				continue
			}
			b := (ns.TimestampMs - sb.start) / sb.bucketMs
			gs.Series[fi] = addToBucket(gs.Series[fi], sb.start+b*sb.bucketMs, v)
		}
	}
	return nil
}

// addToBucket adds v to the bucket starting at ts of a series whose
// points are in bucket order. Samples come in time order, so the bucket is
// almost always the last one or a new one after it.
func addToBucket(pts []SeriesPoint, ts int64, v float64) []SeriesPoint {
	i := len(pts)
	for i > 0 && pts[i-1].TimestampMs > ts {
		i--
	}
	if i > 0 && pts[i-1].TimestampMs == ts {
		p := &pts[i-1]
		p.Value += v
		p.Min = min(p.Min, v)
		p.Max = max(p.Max, v)
		p.n++
		return pts
	}
	return slices.Insert(pts, i, SeriesPoint{TimestampMs: ts, Value: v, Min: v, Max: v, n: 1})
}

// bucketWidth returns a bucket width (ms) of about (to-from)/points for
// which at most points buckets aligned to multiples of the width overlap
// [from, to), and the start of the first one.
func bucketWidth(from, to int64, points int) (width, start int64) {
	span := to - from
	p := int64(points)
	w := max(1, (span+p-1)/p)
	for {
		start = floorDiv(from, w) * w
		if (to-1-start)/w+1 <= p {
			return w, start
		}
		// Alignment added a partial bucket at each end; widen a little.
		w += max(1, w/p)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
