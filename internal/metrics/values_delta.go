package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Delta coding of values, chunk version 2's second value codec. Each value
// becomes a monotone key (monoKey: the integer order of the keys is the
// order of the values), the key is predicted from the previous ones by a
// polynomial of the chunk's order,
//
//	order 1: k[i-1]
//	order 2: 2 k[i-1] - k[i-2]
//	order 3: 3 k[i-1] - 3 k[i-2] + k[i-3]
//
// (fewer previous keys near the start: the order is min(order, i)), and
// the difference, zigzag-mapped to an unsigned integer z, is written as
//
//	0                          z is 0: the prediction was exact
//	10 <len bits>              z fits the current window of len bits
//	11 <len-1:6> <len bits>    a new window of len bits, 1 to 64
//
// All arithmetic is on uint64 and wraps, so any keys round-trip. XOR coding
// stores about as many bits as a value's mantissa changes; on a smooth curve
// (a loss without noise, a cosine learning-rate schedule, a linear warm-up)
// consecutive values change in every mantissa bit while their differences
// change slowly, and a prediction of order 2 or 3 leaves a few bits, which
// TestChunkSize measures. The encoder picks the codec per chunk by sizing
// them all (chooseCodec), so noisy series keep XOR.

const (
	// maxDeltaOrder is the highest prediction order.
	maxDeltaOrder = 3
	// deltaLenBits is the width of a new window's length field.
	deltaLenBits = 6
)

// monoKey maps v to a key of width bits (64, or 32 for a float32 value)
// whose unsigned order is the order of values in Compare, all NaNs mapped
// to the largest key.
func monoKey(v float64, width uint) uint64 {
	if width == 64 {
		return valueKey(v)
	}
	if v != v {
		return math.MaxUint32
	}
	f := math.Float32bits(float32(v))
	return uint64(f ^ (uint32(int32(f)>>31) | 1<<31))
}

// monoValue is the inverse of monoKey. Keys that no value maps to (NaN
// patterns, or bits above width) decode to some value without failing.
func monoValue(k uint64, width uint) float64 {
	if width == 64 {
		if k == math.MaxUint64 {
			return math.NaN()
		}
		if k>>63 == 1 {
			return math.Float64frombits(k &^ (1 << 63))
		}
		return math.Float64frombits(^k)
	}
	f := uint32(k)
	if f == math.MaxUint32 {
		return math.NaN()
	}
	if f>>31 == 1 {
		f &^= 1 << 31
	} else {
		f = ^f
	}
	v := float64(math.Float32frombits(f))
	if v != v {
		return math.NaN()
	}
	return v
}

// predict returns the prediction of the next key of the given order from
// hist, the previous keys, latest first.
func predict(hist *[maxDeltaOrder]uint64, order int) uint64 {
	switch order {
	case 1:
		return hist[0]
	case 2:
		return 2*hist[0] - hist[1]
	default:
		return 3*hist[0] - 3*hist[1] + hist[2]
	}
}

func zigzag(d uint64) uint64   { return d<<1 ^ uint64(int64(d)>>63) }
func unzigzag(z uint64) uint64 { return z>>1 ^ -(z & 1) }

// deltaWindow is the encoder's choice of code for each nonzero z.
type deltaWindow struct {
	l uint // current window length; 0 before the first window
}

// code returns the length in bits of the code for z, which must not be 0,
// and whether it opens a new window, which is then w's.
func (w *deltaWindow) code(z uint64) (n uint, newWindow bool) {
	l := uint(64 - bits.LeadingZeros64(z))
	if w.l >= l && w.l <= l+deltaLenBits {
		return 2 + w.l, false
	}
	w.l = l
	return 2 + deltaLenBits + l, true
}

// deltaSizer sums the bits encodeDeltas spends on a sequence of
// differences, for chooseCodec.
type deltaSizer struct {
	win  deltaWindow
	bits uint
}

func (s *deltaSizer) add(d uint64) {
	z := zigzag(d)
	if z == 0 {
		s.bits++
		return
	}
	n, _ := s.win.code(z)
	s.bits += n
}

// encodeDeltas writes the values of pts[1:] with delta codec c.
func encodeDeltas(w *bitWriter, pts []Point, c valueCodec) {
	var win deltaWindow
	var hist [maxDeltaOrder]uint64
	hist[0] = c.key(pts[0].Value)
	for i, p := range pts[1:] {
		k := c.key(p.Value)
		z := zigzag(k - predict(&hist, min(c.order, i+1)))
		hist[2], hist[1], hist[0] = hist[1], hist[0], k
		if z == 0 {
			w.writeZero()
			continue
		}
		n, newWindow := win.code(z)
		var ctl uint64 = 2
		if newWindow {
			ctl = 3<<deltaLenBits | uint64(win.l-1)
		}
		if n <= 64 {
			w.writeBits(ctl<<win.l|z, n)
		} else {
			w.writeBits(ctl, n-win.l)
			w.writeBits(z, win.l)
		}
	}
}

// deltaDecoder decodes a stream written by encodeDeltas.
type deltaDecoder struct {
	r     bitReader
	order int
	hist  [maxDeltaOrder]uint64
	known int  // keys decoded so far, the first included, up to maxDeltaOrder
	l     uint // 0 until the first window
	bad   bool
}

func newDeltaDecoder(src []byte, first float64, c valueCodec) deltaDecoder {
	d := deltaDecoder{r: newBitReader(src), order: c.order, known: 1}
	d.hist[0] = c.key(first)
	return d
}

// decode fills out with the next len(out) keys. Like xorDecoder.decode it
// keeps the reader in locals and flags impossible codes in d.bad.
func (d *deltaDecoder) decode(out []uint64) {
	src, pos, buf, n := d.r.src, d.r.pos, d.r.buf, d.r.n
	hist, known, l := d.hist, d.known, d.l
	bad := false
	for i := 0; i < len(out); i++ {
		if n < 56 {
			if pos+8 <= len(src) {
				buf |= binary.BigEndian.Uint64(src[pos:]) >> n
				pos += int((63 - n) >> 3)
				n |= 56
			} else {
				pos, buf, n = d.r.fill(pos, buf, n)
			}
		}
		var z uint64
		switch {
		case buf>>63 == 0:
			buf <<= 1
			n--
		default:
			s := l
			if buf>>62 == 2 {
				buf <<= 2
				n -= 2
				bad = bad || l == 0
			} else {
				s = uint(buf>>(62-deltaLenBits))&(1<<deltaLenBits-1) + 1
				buf <<= 2 + deltaLenBits
				n -= 2 + deltaLenBits
				l = s
			}
			// At least 48 bits are at hand; a wider field may need a
			// refill half way, as in xorDecoder.decode.
			if s <= n {
				z = buf >> (64 - s)
				buf <<= s
				n -= s
			} else {
				rest := s - n
				z = buf >> (64 - n) << rest
				buf <<= n
				if pos+8 <= len(src) {
					buf |= binary.BigEndian.Uint64(src[pos:])
					pos += 7
					n = 56
				} else {
					pos, buf, n = d.r.fill(pos, buf, 0)
				}
				z |= buf >> (64 - rest)
				buf <<= rest
				n -= rest
			}
		}
		k := predict(&hist, min(d.order, known)) + unzigzag(z)
		hist[2], hist[1], hist[0] = hist[1], hist[0], k
		known = min(known+1, maxDeltaOrder)
		out[i] = k
	}
	d.r.pos, d.r.buf, d.r.n = pos, buf, n
	d.hist, d.known, d.l = hist, known, l
	d.bad = d.bad || bad
}

// finish reports a bad code or a stream not consumed exactly.
func (d *deltaDecoder) finish() error {
	if d.bad {
		return corruptf("bad value window")
	}
	return d.r.finish()
}
