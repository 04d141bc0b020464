package metrics

import "math"

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
