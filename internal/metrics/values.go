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
// Three changes from Gorilla, each measured on loss curves (TestChunkSize):
//
//   - A chunk of float32 values (PyTorch's loss.item() on a float32 tensor
//     gives a float64 whose last 29 mantissa bits are zero) is keyed by its
//     float32 pattern, which drops those 29 bits and 3 exponent bits that
//     never vary.
//   - The key may be the IEEE-754 pattern rotated left by one bit, which
//     moves the sign to the bottom. Noise around zero flips the sign often;
//     with the sign on top every flip makes the XOR span the whole value,
//     at the bottom it costs what the low mantissa bits cost anyway. Values
//     with few mantissa bits (-1, 0.5, 2) are the opposite case, so the
//     encoder sizes the stream both ways and keeps the smaller.
//   - The encoder opens a new window only when that is cheaper for the
//     value at hand than reusing the current one, so one outlier does not
//     leave a wide window behind for every value after it.

// valueCodec says how values become keys and how the keys are coded: XORed
// with the previous key (order 0), or as the difference from a polynomial
// prediction of order 1 to 3 (see values_delta.go).
type valueCodec struct {
	width   uint // key width: 64 or 32
	sigBits uint // XOR: bits of the sig field, 6 or 5
	rot     int  // XOR: left rotation from IEEE-754 bits to key: 0, or 1 for sign-low
	order   int  // 0: XOR; 1 to 3: delta coding of that order on monotone keys
}

const (
	leadBits = 5
	maxLead  = 1<<leadBits - 1
	// canonicalNaN32 is the float32 NaN stored for every NaN of a float32
	// chunk; it widens to a NaN, which decoding then canonicalises.
	canonicalNaN32 = 0x7FC00000
)

// codecOf returns the codec that the chunk flags select.
func codecOf(flags byte) valueCodec {
	c := valueCodec{width: 64, sigBits: 6}
	if flags&flagFloat32 != 0 {
		c.width, c.sigBits = 32, 5
	}
	if flags&flagSignLow != 0 {
		c.rot = 1
	}
	c.order = int(flags&flagDeltaOrder) >> 2
	return c
}

// flags returns the chunk flags that select c.
func (c valueCodec) flags() byte {
	var f byte
	if c.width == 32 {
		f |= flagFloat32
	}
	if c.rot != 0 {
		f |= flagSignLow
	}
	return f | byte(c.order)<<2
}

// chooseCodec picks the codec that stores the values of pts in the fewest
// bits: 32-bit keys if they are all float32s, then whichever of XOR with the
// sign on top, XOR with the sign at the bottom and delta coding of order 1,
// 2 or 3 makes the shortest stream, sized in one pass, which costs a
// fraction of encoding it. A chunk of more than 2 × sampleBlocks ×
// sampleBlock points is sized on sampleBlocks runs of sampleBlock points
// spread over it: the values of one metric keep their shape over a chunk,
// and sizing all 4096 points of a merged chunk cost as much as encoding
// them (compaction merges every point once). It also returns the bytes the
// value stream should take, from the sizes, so that the encoder grows its
// buffer once: a merged chunk of noisy values takes 8 bytes a point, and
// growing to that from a guess made compaction copy each chunk several
// times.
func chooseCodec(pts []Point) (valueCodec, int) {
	c := codecOf(0)
	if allFloat32(pts) {
		c = codecOf(flagFloat32)
	}
	if len(pts) < 2 {
		return c, 8
	}
	var sizes codecSizes
	sized := len(pts) // the points sizes counts
	if len(pts) <= 2*sampleBlocks*sampleBlock {
		sizes = sizeCodecs(pts, c)
	} else {
		sized = sampleBlocks * sampleBlock
		for b := range sampleBlocks {
			start := b * (len(pts) - sampleBlock) / (sampleBlocks - 1)
			s := sizeCodecs(pts[start:start+sampleBlock], c)
			for i := range sizes {
				sizes[i] += s[i]
			}
		}
	}
	best := min(sizes[0], sizes[1])
	if sizes[1] < sizes[0] {
		c.rot = 1
	}
	for order := 1; order <= maxDeltaOrder; order++ {
		if sizes[1+order] < best {
			best = sizes[1+order]
			c.rot, c.order = 0, order
		}
	}
	// A sixteenth more than the estimate, for the points not sampled.
	bytes := int(best) * len(pts) / sized / 8
	return c, bytes + bytes/16 + 16
}

// sampleBlocks and sampleBlock say how chooseCodec samples a large chunk.
const sampleBlocks, sampleBlock = 4, 256

// codecSizes are the bits of a value stream coded by XOR with the sign on
// top, XOR with the sign at the bottom, and delta coding of order 1 to 3.
type codecSizes [2 + maxDeltaOrder]uint

// sizeCodecs sizes the value stream of pts (at least two points) in every
// coding, on keys of c's width.
func sizeCodecs(pts []Point, c valueCodec) codecSizes {
	high, low := newXORWindow(c), newXORWindow(c)
	var highBits, lowBits uint
	d := c
	d.order = 1
	var s1, s2, s3 deltaSizer
	prev := c.key(pts[0].Value)
	// The previous monotone keys, latest first. The first points have
	// fewer predecessors, and lower orders predict them, as in
	// encodeDeltas.
	k1 := d.key(pts[0].Value)
	k2, k3 := k1, k1
	for i, p := range pts[1:] {
		k := c.key(p.Value)
		x := k ^ prev
		prev = k
		if x == 0 {
			highBits++
			lowBits++
		} else {
			n, _ := high.code(x)
			highBits += n
			// Rotating the keys rotates their XOR.
			if c.width == 32 {
				x = uint64(bits.RotateLeft32(uint32(x), 1))
			} else {
				x = bits.RotateLeft64(x, 1)
			}
			n, _ = low.code(x)
			lowBits += n
		}
		m := d.key(p.Value)
		p1 := k1
		p2, p3 := p1, p1
		if i >= 1 {
			p2 = 2*k1 - k2
			p3 = p2
		}
		if i >= 2 {
			p3 = 3*k1 - 3*k2 + k3
		}
		s1.add(m - p1)
		s2.add(m - p2)
		s3.add(m - p3)
		k3, k2, k1 = k2, k1, m
	}
	return codecSizes{highBits, lowBits, s1.bits, s2.bits, s3.bits}
}

// allFloat32 reports whether every value of pts is a float32.
func allFloat32(pts []Point) bool {
	for _, p := range pts {
		if !isFloat32(p.Value) {
			return false
		}
	}
	return true
}

// isFloat32 reports whether v survives a round trip through float32 bit for
// bit. NaNs count as float32: every NaN is stored as the canonical one.
func isFloat32(v float64) bool {
	return v != v || math.Float64bits(float64(float32(v))) == math.Float64bits(v)
}

// key returns the key of v.
func (c valueCodec) key(v float64) uint64 {
	if c.order != 0 {
		return monoKey(v, c.width)
	}
	if c.width == 32 {
		f := math.Float32bits(float32(v))
		if v != v {
			f = canonicalNaN32
		}
		return uint64(bits.RotateLeft32(f, c.rot))
	}
	return bits.RotateLeft64(valueBits(v), c.rot)
}

// value returns the value of key.
func (c valueCodec) value(key uint64) float64 {
	if c.order != 0 {
		return monoValue(key, c.width)
	}
	if c.width == 32 {
		v := float64(math.Float32frombits(bits.RotateLeft32(uint32(key), -c.rot)))
		if v != v {
			return math.NaN()
		}
		return v
	}
	return math.Float64frombits(bits.RotateLeft64(key, -c.rot))
}

// xorWindow is the encoder's window, and its choice of code for each XOR.
type xorWindow struct {
	width, hdr       uint
	pad              uint // 64 - width: leading zeros of every key
	lead, trail, sig uint
}

func newXORWindow(c valueCodec) xorWindow {
	// No XOR has more than maxLead leading zeros counted, so no XOR fits
	// the initial window and the first one opens a new window.
	return xorWindow{width: c.width, hdr: leadBits + c.sigBits, pad: 64 - c.width, lead: maxLead + 1}
}

// code chooses the code for a nonzero XOR x and returns its length in bits.
// It reports whether the code opens a new window, which is then w's.
func (w *xorWindow) code(x uint64) (n uint, newWindow bool) {
	l := min(uint(bits.LeadingZeros64(x))-w.pad, maxLead)
	t := uint(bits.TrailingZeros64(x))
	s := w.width - l - t
	if l >= w.lead && t >= w.trail && w.sig <= s+w.hdr {
		return 2 + w.sig, false
	}
	w.lead, w.trail, w.sig = l, t, s
	return 2 + w.hdr + s, true
}

// encodeValues writes the values of pts[1:] with codec c.
func encodeValues(w *bitWriter, pts []Point, c valueCodec) {
	if c.order != 0 {
		encodeDeltas(w, pts, c)
		return
	}
	win := newXORWindow(c)
	prev := c.key(pts[0].Value)
	for _, p := range pts[1:] {
		k := c.key(p.Value)
		x := k ^ prev
		prev = k
		if x == 0 {
			w.writeZero()
			continue
		}
		n, newWindow := win.code(x)
		field := x >> win.trail
		if newWindow {
			ctl := 3<<win.hdr | uint64(win.lead)<<c.sigBits | uint64(win.sig)&(1<<c.sigBits-1)
			if n <= 64 {
				w.writeBits(ctl<<win.sig|field, n)
			} else {
				w.writeBits(ctl, 2+win.hdr)
				w.writeBits(field, win.sig)
			}
		} else if n <= 64 {
			w.writeBits(2<<win.sig|field, n)
		} else {
			w.writeBits(2, 2)
			w.writeBits(field, win.sig)
		}
	}
}

// xorDecoder decodes a stream written by encodeValues.
type xorDecoder struct {
	r     bitReader
	c     valueCodec
	key   uint64
	trail uint
	sig   uint // 0 until the first window
	bad   bool
}

func newXORDecoder(src []byte, first float64, c valueCodec) xorDecoder {
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
