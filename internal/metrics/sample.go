package metrics

import (
	"math"
	"math/bits"
	"slices"
)

// SampleSteps chooses the steps MLflow's get-history-bulk-interval returns.
// steps must be sorted and unique. If len(steps) <= maxResults, all of them
// are returned. Otherwise, with n = len(steps), it takes steps[floor(i*n/
// maxResults)] for i in 0..maxResults-1 and always adds the last step, so
// up to maxResults+1 steps come back, as MLflow does. The result is sorted
// and unique, and never shares memory with steps. A maxResults below 1
// returns nil.
//
// The index is computed in float64 exactly as MLflow computes it,
// int(i * (n / maxResults)), not in exact integer arithmetic: the two
// disagree when the float product lands just below a whole number (n = 30,
// maxResults = 22, i = 11 gives index 14, not 15), and clients compare
// against MLflow.
func SampleSteps(steps []int64, maxResults int) []int64 {
	n := len(steps)
	if maxResults < 1 || n == 0 {
		return nil
	}
	if n <= maxResults {
		return slices.Clone(steps)
	}
	interval := float64(n) / float64(maxResults)
	out := make([]int64, 0, maxResults+1)
	prev := -1
	for i := range maxResults {
		idx := int(float64(i) * interval)
		// MLflow collects the steps in a set; skipping repeats and the
		// last index, which is added below, keeps out sorted and unique.
		if idx <= prev || idx >= n-1 {
			continue
		}
		out = append(out, steps[idx])
		prev = idx
	}
	return append(out, steps[n-1])
}

// UnionSteps appends to dst the sorted union, without repeats, of lists,
// each of which must be sorted. Steps already in dst are not compared.
func UnionSteps(dst []int64, lists ...[]int64) []int64 {
	start := len(dst)
	push := func(s int64) {
		if len(dst) == start || dst[len(dst)-1] != s {
			dst = append(dst, s)
		}
	}
	// h is a min-heap of the non-empty lists, ordered by their heads.
	h := make([][]int64, 0, len(lists))
	longest := 0
	for _, l := range lists {
		if len(l) > 0 {
			h = append(h, l)
			longest = max(longest, len(l))
		}
	}
	dst = slices.Grow(dst, longest)
	if len(h) == 1 {
		for _, s := range h[0] {
			push(s)
		}
		return dst
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for len(h) > 0 {
		l := h[0]
		// Take the head list's run of steps up to the next list's head in
		// one go, so long non-overlapping runs cost no heap operations.
		bound := int64(math.MaxInt64)
		if len(h) > 1 {
			bound = h[1][0]
			if len(h) > 2 {
				bound = min(bound, h[2][0])
			}
		}
		k := 0
		for k < len(l) && l[k] <= bound {
			push(l[k])
			k++
		}
		if k == len(l) {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		} else {
			h[0] = l[k:]
		}
		if len(h) > 0 {
			siftDown(h, 0)
		}
	}
	return dst
}

// siftDown restores the heap order of h below i.
func siftDown(h [][]int64, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1][0] < h[c][0] {
			c++
		}
		if h[i][0] <= h[c][0] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// MinMaxBuckets downsamples pts, which must be sorted by Compare, for charts
// that must not hide spikes, and appends the kept points to dst. The step
// range [pts[0].Step, pts[len(pts)-1].Step] is cut into buckets equal-width
// step buckets. For each non-empty bucket it keeps the point with the
// minimum value and the point with the maximum value (the first of equals),
// ignoring NaN, and the first point whose value is NaN, if any, so that a
// NaN spike stays visible. It always keeps the first and the last point.
// The points appended are sorted by Compare and have no duplicates; there
// are at most 3*buckets+2 of them. A buckets below 1 counts as 1.
func MinMaxBuckets(dst, pts []Point, buckets int) []Point {
	if len(pts) == 0 {
		return dst
	}
	nb := uint64(max(buckets, 1))
	first := uint64(pts[0].Step)
	// The span is spanM1+1 steps, which is 2^64 when the steps cover all
	// of int64: all bucket arithmetic is on 128-bit products.
	spanM1 := uint64(pts[len(pts)-1].Step) - first
	offset := func(p Point) uint64 {
		// The clamp only matters for unsorted input, which must not
		// make Div64 panic.
		return min(uint64(p.Step)-first, spanM1)
	}
	start := len(dst)
	emit := func(p Point) {
		if len(dst) == start || !Equal(dst[len(dst)-1], p) {
			dst = append(dst, p)
		}
	}
	for i := 0; i < len(pts); {
		// Bucket b holds offsets d with floor(d*nb/span) == b, that is
		// d < end = ceil((b+1)*span/nb). Dividing once per bucket rather
		// than once per point keeps the scan cheap.
		d := offset(pts[i])
		hi, lo := bits.Mul64(d, nb)
		b := hi
		if spanM1 != math.MaxUint64 {
			b, _ = bits.Div64(hi, lo, spanM1+1)
		}
		end := uint64(math.MaxUint64)
		lastBucket := b+1 >= nb
		if !lastBucket {
			hi, lo := bits.Mul64(b+1, spanM1)
			var carry uint64
			lo, carry = bits.Add64(lo, b+1, 0)
			q, r := bits.Div64(hi+carry, lo, nb)
			if r != 0 {
				q++
			}
			end = q
		}
		// Every non-NaN key lies strictly between the initial lowKey and
		// highKey, and the comparisons are strict, so the first of equal
		// values wins.
		lowI, highI, nanI := -1, -1, -1
		lowKey, highKey := uint64(math.MaxUint64), uint64(0)
		j := i
		for ; j < len(pts) && (lastBucket || offset(pts[j]) < end); j++ {
			v := pts[j].Value
			if v != v {
				if nanI < 0 {
					nanI = j
				}
				continue
			}
			k := valueKey(v)
			if k < lowKey {
				lowI, lowKey = j, k
			}
			if k > highKey {
				highI, highKey = j, k
			}
		}
		keep := [5]int{lowI, highI, nanI, -1, -1}
		if i == 0 {
			keep[3] = 0
		}
		if j == len(pts) {
			keep[4] = j - 1
		}
		slices.Sort(keep[:])
		prev := -1
		for _, k := range keep {
			if k > prev {
				emit(pts[k])
				prev = k
			}
		}
		i = j
	}
	return dst
}
