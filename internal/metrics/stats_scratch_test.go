package metrics

import (
	"math"
	"math/bits"
	"testing"
)

type strat struct {
	name   string
	w      uint // 64 or 32
	leads  []uint // allowed lead values (rounded down to one); len must be power of 2
	sigB   uint
	margin int // reuse if sig <= s + hdr + margin; -1000 means prom (always reuse if fits)
}

func simCost(vals []uint64, s strat) float64 {
	lb := uint(bits.Len(uint(len(s.leads) - 1)))
	hdr := lb + s.sigB
	var total float64
	var lead, trail, sig uint
	prev := vals[0]
	for _, v := range vals[1:] {
		x := v ^ prev
		prev = v
		if x == 0 { total += 1; continue }
		var l uint
		if s.w == 64 { l = uint(bits.LeadingZeros64(x)) } else { l = uint(bits.LeadingZeros64(x)) - 32 }
		t := uint(bits.TrailingZeros64(x))
		// round lead down
		rl := uint(0)
		for _, c := range s.leads { if c <= l { rl = c } }
		l = rl
		sg := s.w - l - t
		if sig != 0 && l >= lead && t >= trail && (s.margin == -1000 || int(sig) <= int(sg)+int(hdr)+s.margin) {
			total += float64(2 + sig)
			continue
		}
		lead, trail, sig = l, t, sg
		total += float64(2 + hdr + sg)
	}
	return total / float64(len(vals))
}

func seq(n uint) []uint { r := make([]uint, n); for i := range r { r[i] = uint(i) }; return r }

func TestScratchStats(t *testing.T) {
	chimp := []uint{0, 8, 12, 16, 18, 20, 22, 24}
	for _, kind := range []string{"float32", "float64", "const"} {
		pts := genSeries(kind, 4096, 42)
		v64 := make([]uint64, len(pts))
		v32 := make([]uint64, len(pts))
		r64 := make([]uint64, len(pts))
		r32 := make([]uint64, len(pts))
		for i, p := range pts { v64[i] = math.Float64bits(p.Value); v32[i] = uint64(math.Float32bits(float32(p.Value)))
			r64[i] = bits.RotateLeft64(v64[i], 1); r32[i] = uint64(bits.RotateLeft32(uint32(v32[i]), 1)) }
		for _, s := range []strat{
			{"prom64", 64, seq(32), 6, -1000},
			{"cheaper64", 64, seq(32), 6, 0},
			{"cheaper64+4", 64, seq(32), 6, 4},
			{"cheaper64-4", 64, seq(32), 6, -4},
			{"chimp64", 64, chimp, 6, 0},
			{"lead4x64", 64, []uint{0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30}, 6, 0},
			{"prom32", 32, seq(32), 5, -1000},
			{"cheaper32", 32, seq(32), 5, 0},
			{"cheaper32+3", 32, seq(32), 5, 3},
			{"lead3x32", 32, []uint{0,2,4,6,8,10,12,14}, 5, 0},
			{"lead2x32", 32, []uint{0,4,8,12}, 5, 0},
			{"lead1x32", 32, []uint{0,8}, 5, 0},
		} {
			vals, rv := v64, r64
			if s.w == 32 { vals, rv = v32, r32 }
			t.Logf("%s %-12s %.2f bits  rotated %.2f", kind, s.name, simCost(vals, s), simCost(rv, s))
		}
	}
}
