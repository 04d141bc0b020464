package metrics

import (
	"math"
	"slices"
)

// Summary describes a sorted slice of points, typically one chunk, so that
// indexes can skip chunks and coarse downsampling can work without decoding
// them.
type Summary struct {
	// Count is the number of points. The other fields are zero when it is 0.
	Count            int
	MinStep, MaxStep int64
	// MinTimestampMs and MaxTimestampMs bound the timestamps, which need
	// not increase with the step.
	MinTimestampMs, MaxTimestampMs int64
	// MinValue and MaxValue ignore NaN; both are NaN when every value is NaN.
	// -0 counts as less than +0, as in Compare.
	MinValue, MaxValue float64
	// First and Last are the first and last points in Compare order.
	First, Last Point
	// Low and High are the first points, in Compare order, whose values are
	// MinValue and MaxValue. Both are First when every value is NaN.
	Low, High Point
}

// Summarize returns the summary of pts, which must be sorted by Compare.
// For an empty slice it returns the zero Summary.
func Summarize(pts []Point) Summary {
	if len(pts) == 0 {
		return Summary{}
	}
	s := Summary{
		Count:          len(pts),
		MinStep:        pts[0].Step,
		MaxStep:        pts[0].Step,
		MinTimestampMs: pts[0].TimestampMs,
		MaxTimestampMs: pts[0].TimestampMs,
		First:          pts[0],
		Last:           pts[len(pts)-1],
	}
	low, high := -1, -1
	var lowKey, highKey uint64
	for i, p := range pts {
		s.MinStep = min(s.MinStep, p.Step)
		s.MaxStep = max(s.MaxStep, p.Step)
		s.MinTimestampMs = min(s.MinTimestampMs, p.TimestampMs)
		s.MaxTimestampMs = max(s.MaxTimestampMs, p.TimestampMs)
		if p.Value != p.Value {
			continue
		}
		// valueKey orders -0 below +0, which the float operators do not.
		k := valueKey(p.Value)
		if low < 0 || k < lowKey {
			low, lowKey = i, k
		}
		if high < 0 || k > highKey {
			high, highKey = i, k
		}
	}
	if low < 0 {
		s.MinValue, s.MaxValue = math.NaN(), math.NaN()
		s.Low, s.High = s.First, s.First
		return s
	}
	s.Low, s.High = pts[low], pts[high]
	s.MinValue, s.MaxValue = s.Low.Value, s.High.Value
	return s
}

// Sketch appends to dst a sample of pts, which must be sorted by Compare,
// that keeps its shape for charts: pts is cut into blocks of equal rank
// (blocks of them, fewer for fewer points), and each block gives its point
// with the lowest value and its point with the highest (the first of
// equals, ignoring NaN) and its first NaN; the first and the last point are
// always kept. The points appended are sorted and unique, at most
// 3*blocks+2 of them. Stored with a chunk, a sketch lets a downsampled read
// of a long series read a few dozen points a chunk instead of decoding it.
func Sketch(dst, pts []Point, blocks int) []Point {
	n := len(pts)
	if n == 0 {
		return dst
	}
	blocks = max(1, min(blocks, n))
	start := len(dst)
	emit := func(p Point) {
		if len(dst) == start || !Equal(dst[len(dst)-1], p) {
			dst = append(dst, p)
		}
	}
	for b := range blocks {
		lo, hi := b*n/blocks, (b+1)*n/blocks
		lowI, highI, nanI := -1, -1, -1
		var lowKey, highKey uint64
		for i := lo; i < hi; i++ {
			v := pts[i].Value
			if v != v {
				if nanI < 0 {
					nanI = i
				}
				continue
			}
			k := valueKey(v)
			if lowI < 0 || k < lowKey {
				lowI, lowKey = i, k
			}
			if highI < 0 || k > highKey {
				highI, highKey = i, k
			}
		}
		keep := [5]int{lowI, highI, nanI, -1, -1}
		if b == 0 {
			keep[3] = 0
		}
		if b == blocks-1 {
			keep[4] = n - 1
		}
		slices.Sort(keep[:])
		prev := -1
		for _, k := range keep {
			if k > prev {
				emit(pts[k])
				prev = k
			}
		}
	}
	return dst
}
