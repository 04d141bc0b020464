package metrics

import (
	"math"
	"slices"
)

// Point is one metric observation.
type Point struct {
	Step        int64
	TimestampMs int64
	Value       float64
}

// canonicalNaN is the one NaN bit pattern the chunk encoding stores. It is
// the pattern math.NaN returns.
const canonicalNaN = 0x7FF8000000000001

// valueKey maps a value to an unsigned integer whose natural order is the
// value order of Compare: -Inf < finite < +Inf < NaN, with -0 just below +0
// and every NaN mapped to the same, largest key.
func valueKey(v float64) uint64 {
	if v != v {
		return math.MaxUint64
	}
	// Flip every bit of a negative number, which reverses the order of
	// negatives and puts them below all positives, and only the sign bit
	// of a positive one. Branch-free: signs in noisy data are random.
	b := math.Float64bits(v)
	return b ^ (uint64(int64(b)>>63) | 1<<63)
}

// Compare orders points by (Step, TimestampMs, Value) and returns -1, 0 or
// +1. Values are ordered -Inf < finite < +Inf < NaN, and all NaNs are equal
// to each other. Unlike the float comparison operators, Compare puts -0
// before +0: that makes Compare(a, b) == 0 exactly when Equal(a, b), so that
// sorting and then dropping adjacent Equal points removes every duplicate.
func Compare(a, b Point) int {
	switch {
	case a.Step < b.Step:
		return -1
	case a.Step > b.Step:
		return +1
	case a.TimestampMs < b.TimestampMs:
		return -1
	case a.TimestampMs > b.TimestampMs:
		return +1
	}
	ka, kb := valueKey(a.Value), valueKey(b.Value)
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return +1
	}
	return 0
}

// Equal reports whether a and b are the same observation: same step, same
// timestamp and the same value bits, except that all NaNs are equal to each
// other. +0 and -0 are different values.
func Equal(a, b Point) bool {
	return a.Step == b.Step && a.TimestampMs == b.TimestampMs &&
		valueKey(a.Value) == valueKey(b.Value)
}

// SortPoints sorts pts in place by Compare. The sort is not stable, which
// only matters for points that are Equal but differ in their NaN payload.
func SortPoints(pts []Point) {
	// Points mostly come in order (compaction concatenates chunks in the
	// order they were written): checking costs a fraction of sorting.
	if slices.IsSortedFunc(pts, Compare) {
		return
	}
	slices.SortFunc(pts, Compare)
}

// DedupSorted removes exact duplicates (Equal) from pts, which must be sorted
// by Compare, in place, and returns the shortened slice. Elements past the
// new length are left as they were.
func DedupSorted(pts []Point) []Point {
	if len(pts) < 2 {
		return pts
	}
	w := 1
	for i := 1; i < len(pts); i++ {
		if !Equal(pts[i], pts[w-1]) {
			pts[w] = pts[i]
			w++
		}
	}
	return pts[:w]
}

// MergeSorted appends to dst the sorted merge of a and b, which must each be
// sorted by Compare, dropping exact duplicates both across and within them.
// Points already in dst are neither compared nor de-duplicated. dst must not
// overlap a or b.
func MergeSorted(dst, a, b []Point) []Point {
	dst = slices.Grow(dst, len(a)+len(b))
	start := len(dst)
	push := func(p Point) {
		if len(dst) == start || !Equal(dst[len(dst)-1], p) {
			dst = append(dst, p)
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if Compare(a[i], b[j]) <= 0 {
			push(a[i])
			i++
		} else {
			push(b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		push(a[i])
	}
	for ; j < len(b); j++ {
		push(b[j])
	}
	return dst
}
