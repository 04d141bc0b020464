package metrics

import "encoding/binary"

// bitWriter appends a bit stream to a byte slice, most significant bit
// first. Bits collect in a 64-bit accumulator and reach the slice 8 bytes at
// a time, so writing a field costs a shift and an OR, not a loop over bits.
type bitWriter struct {
	out []byte
	acc uint64 // pending bits, left-aligned: the oldest one is bit 63
	n   uint   // number of pending bits in acc, 0..63
}

// writeBits appends the low k bits of v, k in 0..64. v must have no bits
// set above bit k-1.
func (w *bitWriter) writeBits(v uint64, k uint) {
	free := 64 - w.n
	if k < free {
		w.acc |= v << (free - k)
		w.n += k
		return
	}
	rest := k - free
	w.acc |= v >> rest
	w.out = binary.BigEndian.AppendUint64(w.out, w.acc)
	w.n = rest
	// A shift by 64 yields 0 in Go, which is right when rest is 0.
	w.acc = v << (64 - rest)
}

// writeZero appends a single 0 bit, the commonest code of every stream.
func (w *bitWriter) writeZero() {
	if w.n < 63 {
		w.n++
		return
	}
	w.writeBits(0, 1)
}

// flush appends the pending bits, padded with zero bits to a whole byte, and
// returns the stream. The writer is then empty and may be reused.
func (w *bitWriter) flush() []byte {
	for w.n > 0 {
		w.out = append(w.out, byte(w.acc>>56))
		w.acc <<= 8
		w.n -= min(w.n, 8)
	}
	w.acc = 0
	return w.out
}

// bitReader reads a bit stream written by bitWriter. Reading past the end
// never panics: the stream is padded with zero bits, and overrun reports it
// afterwards. That keeps the per-field check out of the decoders' inner
// loops; their loop counts are bounded by the header, which is validated
// against the stream length before decoding starts.
//
// buf holds the next bits of the stream, left-aligned. Its top n bits are
// counted; the bits below them may already hold the start of src[pos:]
// (a refill loads 8 bytes but counts only whole bytes that fit), which is
// harmless because the next refill ORs the very same bits in again.
type bitReader struct {
	src []byte
	pos int    // first byte of src not yet counted in n
	buf uint64 // the next bits, most significant first
	n   uint   // number of counted bits in buf
	// pad counts the zero bits added past the end of src. They are the
	// last bits counted in n, so more of them than n means some were
	// consumed.
	pad uint
}

func newBitReader(src []byte) bitReader {
	return bitReader{src: src}
}

// refill makes at least 56 bits available. With 56 or more available
// already it does nothing.
func (r *bitReader) refill() {
	r.pos, r.buf, r.n = r.fill(r.pos, r.buf, r.n)
}

// fill is refill for decoders that keep pos, buf and n in locals, so that
// their inner loops run on registers: it takes and returns them. The
// decoders inline its first branch by hand (the compiler will not: a call
// puts fill over the inlining budget) and call fill for the rest. n is
// never more than 63 (refills stop there), which the arithmetic needs.
func (r *bitReader) fill(pos int, buf uint64, n uint) (int, uint64, uint) {
	if pos+8 <= len(r.src) {
		buf |= binary.BigEndian.Uint64(r.src[pos:]) >> n
		// Count the whole bytes that fit: afterwards 56 <= n <= 63.
		// With n >= 56 already, nothing changes.
		return pos + int((63-n)>>3), buf, n | 56
	}
	r.pos, r.buf, r.n = pos, buf, n
	r.refillSlow()
	return r.pos, r.buf, r.n
}

// refillSlow is refill for the last 7 bytes of the stream and beyond, one
// byte at a time. Like refill, it leaves 56 <= n <= 63.
func (r *bitReader) refillSlow() {
	for r.n < 56 {
		if r.pos < len(r.src) {
			r.buf |= uint64(r.src[r.pos]) << (56 - r.n)
			r.pos++
		} else {
			r.pad += 8
		}
		r.n += 8
	}
}

// readBits consumes k bits, k in 0..56, and returns them in the low bits.
func (r *bitReader) readBits(k uint) uint64 {
	if r.n < k {
		r.refill()
	}
	v := r.buf >> (64 - k)
	r.buf <<= k
	r.n -= k
	return v
}

// readWide consumes k bits, k in 0..64.
func (r *bitReader) readWide(k uint) uint64 {
	if k <= 56 {
		return r.readBits(k)
	}
	hi := r.readBits(k - 32)
	return hi<<32 | r.readBits(32)
}

// skip consumes k bits, k in 0..n, that the caller has already peeked at.
func (r *bitReader) skip(k uint) {
	r.buf <<= k
	r.n -= k
}

// overrun reports whether more bits were consumed than the stream holds.
func (r *bitReader) overrun() bool {
	return r.pad > r.n
}

// finish checks that the stream was consumed exactly: no overrun, and what
// is left is fewer than 8 bits, all zero (the writer's padding). A stream
// with bytes to spare is as corrupt as one that is too short.
func (r *bitReader) finish() error {
	if r.overrun() {
		return corruptf("stream of %d bytes is too short", len(r.src))
	}
	rest := r.n - r.pad + 8*uint(len(r.src)-r.pos)
	if rest > 7 {
		return corruptf("stream has %d bits to spare", rest)
	}
	// rest <= 7 means every byte of src is counted in n.
	if r.buf>>(64-rest) != 0 {
		return corruptf("stream padding is not zero")
	}
	return nil
}
