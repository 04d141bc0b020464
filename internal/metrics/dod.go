package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// dodCode is a prefix code for delta-of-deltas. Class 0 is a single 0 bit
// and means a delta-of-delta of 0. Class c, for 0 < c < last, is c one bits,
// a zero bit, then the delta-of-delta in widths[c] bits, two's complement.
// Class last is last one bits, then the delta-of-delta in 64 bits.
type dodCode struct {
	widths [8]uint8
	last   uint
}

// stepCode suits steps: nearly always evenly spaced, so the delta-of-delta
// is 0, with the odd small irregularity.
var stepCode = dodCode{widths: [8]uint8{0, 6, 13, 20, 32, 64}, last: 5}

// timestampCode suits wall-clock milliseconds: deltas jitter by a few ms,
// and points logged in one batch share a timestamp.
var timestampCode = dodCode{widths: [8]uint8{0, 4, 8, 12, 20, 32, 64}, last: 6}

// maxDoDBits is the longest code short of the 64-bit escape, prefix
// included, of any dodCode: the decoder refills once for all of it.
const maxDoDBits = 6 + 32

// put writes a nonzero dod with code c. Callers write the 0 code, the
// common case, themselves with writeZero, which inlines.
func (c *dodCode) put(w *bitWriter, dod int64) {
	for k := uint(1); k < c.last; k++ {
		width := uint(c.widths[k])
		if lim := int64(1) << (width - 1); -lim <= dod && dod < lim {
			prefix := uint64(1)<<(k+1) - 2 // k one bits, then a zero
			w.writeBits(prefix<<width|uint64(dod)&(1<<width-1), k+1+width)
			return
		}
	}
	w.writeBits(1<<c.last-1, c.last)
	w.writeBits(uint64(dod), 64)
}

// encodeSteps writes the steps of pts[1:] as delta-of-deltas. The first
// delta is taken against a delta of 0. All arithmetic is on uint64, which
// wraps, so any int64 steps round-trip.
func encodeSteps(w *bitWriter, pts []Point) {
	prev, delta := uint64(pts[0].Step), uint64(0)
	for _, p := range pts[1:] {
		d := uint64(p.Step) - prev
		if d == delta {
			w.writeZero()
		} else {
			stepCode.put(w, int64(d-delta))
		}
		prev, delta = uint64(p.Step), d
	}
}

// encodeTimestamps is encodeSteps for timestamps.
func encodeTimestamps(w *bitWriter, pts []Point) {
	prev, delta := uint64(pts[0].TimestampMs), uint64(0)
	for _, p := range pts[1:] {
		d := uint64(p.TimestampMs) - prev
		if d == delta {
			w.writeZero()
		} else {
			timestampCode.put(w, int64(d-delta))
		}
		prev, delta = uint64(p.TimestampMs), d
	}
}

// dodDecoder decodes a stream written by encodeSteps or encodeTimestamps.
type dodDecoder struct {
	r     bitReader
	code  *dodCode
	v     uint64
	delta uint64
}

func newDoDDecoder(src []byte, first int64, code *dodCode) dodDecoder {
	return dodDecoder{r: newBitReader(src), code: code, v: uint64(first)}
}

// decode fills out with the next len(out) values.
//
// This is the decoder's inner loop, so it keeps the reader's state in
// locals, which the compiler holds in registers, and goes through the
// bitReader methods only on the rare paths: the last bytes of the stream
// and the 64-bit escape.
func (d *dodDecoder) decode(out []int64) {
	src, pos, buf, n := d.r.src, d.r.pos, d.r.buf, d.r.n
	widths, last := &d.code.widths, d.code.last
	v, delta := d.v, d.delta
	for i := 0; i < len(out); {
		if n < maxDoDBits {
			if pos+8 <= len(src) {
				buf |= binary.BigEndian.Uint64(src[pos:]) >> n
				pos += int((63 - n) >> 3)
				n |= 56
			} else {
				pos, buf, n = d.r.fill(pos, buf, n)
			}
		}
		// Regular steps make long runs of 0 codes; take them in one go.
		if buf>>56 == 0 {
			zeros := min(uint(bits.LeadingZeros64(buf)), n, uint(len(out)-i))
			run := out[i : i+int(zeros)]
			for k := range run {
				v += delta
				run[k] = int64(v)
			}
			i += int(zeros)
			buf <<= zeros
			n -= zeros
			continue
		}
		// Otherwise decode one code without branching on its class, as
		// jittery timestamps mix classes 0, 1 and 2 unpredictably: class
		// 0 has width 0, and the mask makes its field 0.
		ones := uint(bits.LeadingZeros64(^buf))
		if ones >= last {
			d.r.pos, d.r.buf, d.r.n = pos, buf, n
			d.r.skip(last)
			delta += d.r.readWide(64)
			pos, buf, n = d.r.pos, d.r.buf, d.r.n
		} else {
			w := uint(widths[ones&7])
			field := buf << (ones + 1) &^ (math.MaxUint64 >> w)
			// Shift the field down arithmetically to sign-extend it.
			delta += uint64(int64(field) >> (64 - w))
			buf <<= ones + 1 + w
			n -= ones + 1 + w
		}
		v += delta
		out[i] = int64(v)
		i++
	}
	d.r.pos, d.r.buf, d.r.n = pos, buf, n
	d.v, d.delta = v, delta
}
