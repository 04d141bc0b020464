package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The value stream, after Gorilla. Each value is turned into a key of width
// bits (64, or 32 when every value of the chunk is a float32), the key is
// XORed with the previous key, and the XOR is written as
//
//	0                            same key
//	10 <sig bits>                XOR fits the current window
//	11 <lead:5> <sig:S> <sig bits>  a new window: lead leading zero bits
//	                             (at most 31), sig meaningful bits; sig ==
//	                             width is written as 0. S is 6 for 64-bit
//	                             keys and 5 for 32-bit keys.
//
// Two changes from Gorilla, both measured on loss curves (see
// TestChunkSize):
//
//   - The key is the IEEE-754 pattern rotated left by one bit, moving the
//     sign to the bottom. Noise around zero flips the sign often, and with
//     the sign on top every flip made the XOR as wide as the whole value;
//     at the bottom it costs one bit. Values of one sign lose nothing.
//   - A chunk of float32 values (PyTorch's loss.item() on a float32 tensor
//     gives a float64 whose last 29 mantissa bits are zero) is keyed by its
//     float32 pattern, which drops those 29 bits and 3 exponent bits that
//     never vary.
//
// The encoder opens a new window only when that is cheaper for the value at
// hand than reusing the current one, so one outlier does not leave a wide
// window behind for every value after it.

// xorCodec is the value stream's key width and window size field.
type xorCodec struct {
	width   uint // key width: 64 or 32
	sigBits uint // bits of the sig field: 6 or 5
}

var (
	xor64 = xorCodec{width: 64, sigBits: 6}
	xor32 = xorCodec{width: 32, sigBits: 5}
)

const (
	leadBits = 5
	maxLead  = 1<<leadBits - 1
	// canonicalNaN32 is the float32 NaN stored for every NaN of a float32
	// chunk; it widens to a NaN, which decoding then canonicalises.
	canonicalNaN32 = 0x7FC00000
)

// isFloat32 reports whether v survives a round trip through float32 bit for
// bit. NaNs count as float32: every NaN is stored as the canonical one.
func isFloat32(v float64) bool {
	return v != v || math.Float64bits(float64(float32(v))) == math.Float64bits(v)
}

// key returns the key of v.
func (c xorCodec) key(v float64) uint64 {
	if c.width == 32 {
		f := math.Float32bits(float32(v))
		if v != v {
			f = canonicalNaN32
		}
		return uint64(bits.RotateLeft32(f, 1))
	}
	return bits.RotateLeft64(valueBits(v), 1)
}

// value64 returns the value of a 64-bit key.
func value64(key uint64) float64 {
	return math.Float64frombits(bits.RotateLeft64(key, -1))
}

// value32 returns the value of a 32-bit key.
func value32(key uint64) float64 {
	v := float64(math.Float32frombits(bits.RotateLeft32(uint32(key), -1)))
	if v != v {
		return math.NaN()
	}
	return v
}

// encodeValues writes the values of pts[1:].
func encodeValues(w *bitWriter, pts []Point, c xorCodec) {
	hdr := leadBits + c.sigBits
	prev := c.key(pts[0].Value)
	var lead, trail, sig uint // sig == 0: no window yet
	for _, p := range pts[1:] {
		k := c.key(p.Value)
		x := k ^ prev
		prev = k
		if x == 0 {
			w.writeZero()
			continue
		}
		l := min(uint(bits.LeadingZeros64(x))-(64-c.width), maxLead)
		t := uint(bits.TrailingZeros64(x))
		s := c.width - l - t
		if sig != 0 && l >= lead && t >= trail && sig <= s+hdr {
			if sig <= 62 {
				w.writeBits(2<<sig|x>>trail, 2+sig)
			} else {
				w.writeBits(2, 2)
				w.writeBits(x>>trail, sig)
			}
			continue
		}
		lead, trail, sig = l, t, s
		ctl := uint64(3)<<hdr | uint64(l)<<c.sigBits | uint64(s)&(1<<c.sigBits-1)
		if 2+hdr+s <= 64 {
			w.writeBits(ctl<<s|x>>t, 2+hdr+s)
		} else {
			w.writeBits(ctl, 2+hdr)
			w.writeBits(x>>t, s)
		}
	}
}

// xorDecoder decodes a stream written by encodeValues.
type xorDecoder struct {
	r     bitReader
	c     xorCodec
	key   uint64
	trail uint
	sig   uint // 0 until the first window
	bad   bool
}

func newXORDecoder(src []byte, first float64, c xorCodec) xorDecoder {
	return xorDecoder{r: newBitReader(src), c: c, key: c.key(first)}
}

// decode fills out with the next len(out) keys. A code that cannot occur
// in a valid stream sets d.bad, which finish reports, so that the loop has
// no error exit. Like dodDecoder.decode, it keeps the reader in locals.
func (d *xorDecoder) decode(out []uint64) {
	src, pos, buf, n := d.r.src, d.r.pos, d.r.buf, d.r.n
	key, trail, sig := d.key, d.trail, d.sig
	width, sigBits := d.c.width, d.c.sigBits
	hdr := leadBits + sigBits
	bad := false
	for i := 0; i < len(out); {
		if n < 56 {
			if pos+8 <= len(src) {
				buf |= binary.BigEndian.Uint64(src[pos:]) >> n
				pos += int((63 - n) >> 3)
				n |= 56
			} else {
				pos, buf, n = d.r.fill(pos, buf, n)
			}
		}
		// A run of repeated values is a run of 0 codes.
		zeros := min(uint(bits.LeadingZeros64(buf)), n, uint(len(out)-i))
		if zeros > 0 {
			run := out[i : i+int(zeros)]
			for k := range run {
				run[k] = key
			}
			i += int(zeros)
			buf <<= zeros
			n -= zeros
			continue
		}
		s := sig
		if buf>>62 == 2 {
			buf <<= 2
			n -= 2
			bad = bad || sig == 0
		} else {
			lead := uint(buf>>(62-leadBits)) & maxLead
			s = uint(buf>>(62-hdr)) & (1<<sigBits - 1)
			buf <<= 2 + hdr
			n -= 2 + hdr
			if s == 0 {
				s = width
			}
			if lead+s > width {
				bad = true
				s = width - lead
			}
			trail, sig = width-lead-s, s
		}
		// Read the s meaningful bits. At least 43 bits are at hand,
		// enough for a float32 XOR; a wide float64 one may need a refill
		// half way.
		var x uint64
		if s <= n {
			x = buf >> (64 - s)
			buf <<= s
			n -= s
		} else {
			rest := s - n
			x = buf >> (64 - n) << rest
			buf <<= n
			if pos+8 <= len(src) {
				buf |= binary.BigEndian.Uint64(src[pos:])
				pos += 7
				n = 56
			} else {
				pos, buf, n = d.r.fill(pos, buf, 0)
			}
			x |= buf >> (64 - rest)
			buf <<= rest
			n -= rest
		}
		key ^= x << trail
		out[i] = key
		i++
	}
	d.r.pos, d.r.buf, d.r.n = pos, buf, n
	d.key, d.trail, d.sig = key, trail, sig
	d.bad = d.bad || bad
}

// finish reports a bad code or a stream not consumed exactly.
func (d *xorDecoder) finish() error {
	if d.bad {
		return corruptf("bad value window")
	}
	return d.r.finish()
}
