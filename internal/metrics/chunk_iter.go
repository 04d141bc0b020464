package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadMark is wrapped by the error ChunkIter.Resume returns for a mark
// that cannot belong to the chunk.
var ErrBadMark = errors.New("metrics: bad chunk mark")

// ChunkIter decodes a chunk a few points at a time, and can note where it
// stands (AppendMark) so that another ChunkIter, later and given the same
// chunk, carries on from there (Resume) without decoding the points before:
// a history page that ends inside a chunk hands the next page the mark in
// its page token.
//
// The zero ChunkIter is at the end of an empty chunk. A ChunkIter is not
// safe for concurrent use; it keeps a reference to the chunk it decodes.
type ChunkIter struct {
	h      chunkHeader
	sd, td dodDecoder
	vd     valueDecoder
	next   int // index of the point Next returns first
}

// Reset starts decoding src from its first point. Errors are those of
// DecodeChunk for a corrupt header; the streams are checked as Next reaches
// their end.
func (it *ChunkIter) Reset(src []byte) error {
	h, err := parseChunk(src)
	if err != nil {
		*it = ChunkIter{}
		return err
	}
	*it = ChunkIter{h: h}
	if h.count > 0 {
		it.sd = newDoDDecoder(h.steps, h.first.Step, &stepCode)
		it.td = newDoDDecoder(h.timestamps, h.first.TimestampMs, &timestampCode)
		it.vd = newValueDecoder(h.values, h.first.Value, h.codec)
	}
	return nil
}

// Len returns the number of points of the chunk.
func (it *ChunkIter) Len() int { return it.h.count }

// Index returns the index of the next point Next returns; Len at the end.
func (it *ChunkIter) Index() int { return it.next }

// Next appends up to max of the chunk's next points to dst and returns it.
// When it reaches the end of the chunk it checks that every stream was used
// up exactly; if not, it returns dst as it was and an error wrapping
// ErrCorruptChunk (as DecodeChunk, some corruptions decode to wrong points
// instead).
func (it *ChunkIter) Next(dst []Point, max int) ([]Point, error) {
	m := min(max, it.h.count-it.next)
	if m <= 0 {
		return dst, nil
	}
	start := len(dst)
	dst = growPoints(dst, m)
	out := dst[start : start+m]
	if it.next == 0 {
		out[0] = it.h.first
		out = out[1:]
	}
	// As in DecodeChunk: each stream a block at a time into arrays on the
	// stack, then zipped into points in one pass.
	var steps, timestamps [decodeBlock]int64
	var keys [decodeBlock]uint64
	codec := it.h.codec
	for rest := out; len(rest) > 0; {
		n := min(len(rest), decodeBlock)
		block, s, t, k := rest[:n], steps[:n], timestamps[:n], keys[:n]
		it.sd.decode(s)
		it.td.decode(t)
		it.vd.decode(k)
		for j := range block {
			block[j] = Point{Step: s[j], TimestampMs: t[j], Value: codec.value(k[j])}
		}
		rest = rest[n:]
	}
	it.next += m
	if it.next == it.h.count {
		if err := errors.Join(it.sd.r.finish(), it.td.r.finish(), it.vd.finish()); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// Last returns the point Next returned last, as the decoders' state holds
// it, and false before the first point. After Resume it is the point the
// mark was taken after, which lets a caller check a mark against what it
// expects.
func (it *ChunkIter) Last() (Point, bool) {
	switch it.next {
	case 0:
		return Point{}, false
	case 1:
		return it.h.first, true
	}
	var key uint64
	if it.vd.delta {
		key = it.vd.d.hist[0]
	} else {
		key = it.vd.x.key
	}
	return Point{Step: int64(it.sd.v), TimestampMs: int64(it.td.v), Value: it.h.codec.value(key)}, true
}

// Skip decodes and drops the next n points, using scratch (which it
// returns, grown) for them.
func (it *ChunkIter) Skip(n int, scratch []Point) ([]Point, error) {
	for n > 0 && it.next < it.h.count {
		var err error
		k := min(n, decodeBlock)
		if scratch, err = it.Next(scratch[:0], k); err != nil {
			return scratch, err
		}
		n -= k
	}
	return scratch, nil
}

// growPoints extends dst by n points, reallocating at most once.
func growPoints(dst []Point, n int) []Point {
	if cap(dst)-len(dst) < n {
		nd := make([]Point, len(dst), 2*cap(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// markVersion starts every mark, so that the layout can change.
const markVersion = 1

// AppendMark appends to dst the iterator's position: the index of the next
// point and, once past the first point, the state of the three stream
// decoders (about 30 to 60 bytes). The layout is private to this package
// and may change between releases; Resume rejects marks it cannot read.
func (it *ChunkIter) AppendMark(dst []byte) []byte {
	dst = append(dst, markVersion)
	dst = binary.AppendUvarint(dst, uint64(it.next))
	if it.next == 0 {
		return dst
	}
	for _, d := range []*dodDecoder{&it.sd, &it.td} {
		dst = binary.AppendUvarint(dst, consumedBits(&d.r))
		dst = binary.AppendUvarint(dst, d.v)
		dst = binary.AppendUvarint(dst, d.delta)
	}
	dst = binary.AppendUvarint(dst, consumedBits(it.vd.reader()))
	if it.vd.delta {
		d := &it.vd.d
		for _, k := range d.hist {
			dst = binary.AppendUvarint(dst, k)
		}
		return append(dst, byte(d.known), byte(d.l))
	}
	x := &it.vd.x
	dst = binary.AppendUvarint(dst, x.key)
	return append(dst, byte(x.trail), byte(x.sig))
}

// Resume starts decoding src at mark, which AppendMark wrote for an
// iterator over the same chunk. A mark that cannot belong to src gives an
// error wrapping ErrBadMark, a corrupt chunk one wrapping ErrCorruptChunk.
// Resume cannot tell every mark of another chunk from a mark of src:
// callers keep the chunk's identity with the mark.
func (it *ChunkIter) Resume(src []byte, mark []byte) error {
	if err := it.Reset(src); err != nil {
		return err
	}
	r := markReader{b: mark}
	if v := r.byte(); v != markVersion {
		return badMark("version %d", v)
	}
	next := r.uvarint()
	if r.bad || next > uint64(it.h.count) {
		return badMark("index %d of %d points", next, it.h.count)
	}
	if next == 0 {
		if len(r.b) != 0 {
			return badMark("trailing bytes")
		}
		return nil
	}
	for _, d := range []*dodDecoder{&it.sd, &it.td} {
		bits := r.uvarint()
		d.v, d.delta = r.uvarint(), r.uvarint()
		if r.bad || !seekBits(&d.r, bits) {
			return badMark("stream position")
		}
	}
	bits := r.uvarint()
	if r.bad || !seekBits(it.vd.reader(), bits) {
		return badMark("value stream position")
	}
	width := it.h.codec.width
	if it.vd.delta {
		d := &it.vd.d
		for i := range d.hist {
			d.hist[i] = r.uvarint()
		}
		d.known, d.l = int(r.byte()), uint(r.byte())
		if d.known < 1 || d.known > maxDeltaOrder || d.l > 64 {
			return badMark("delta state")
		}
	} else {
		x := &it.vd.x
		x.key = r.uvarint()
		x.trail, x.sig = uint(r.byte()), uint(r.byte())
		if x.sig > width || x.trail+x.sig > width || (width == 32 && x.key>>32 != 0) {
			return badMark("xor state")
		}
	}
	if r.bad || len(r.b) != 0 {
		return badMark("length")
	}
	it.next = int(next)
	return nil
}

func badMark(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadMark, fmt.Sprintf(format, args...))
}

// consumedBits returns how many bits of its stream r has consumed.
func consumedBits(r *bitReader) uint64 {
	return uint64(8*r.pos) + uint64(r.pad) - uint64(r.n)
}

// seekBits positions a fresh reader after the first bits bits of its
// stream, and reports whether the stream has that many.
func seekBits(r *bitReader, bits uint64) bool {
	if bits > 8*uint64(len(r.src)) {
		return false
	}
	r.pos, r.buf, r.n, r.pad = int(bits/8), 0, 0, 0
	r.refill()
	r.skip(uint(bits % 8))
	return true
}

// markReader reads a mark; a short or malformed mark sets bad.
type markReader struct {
	b   []byte
	bad bool
}

func (r *markReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *markReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}
