package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrCorruptChunk is wrapped by every error DecodeChunk, DecodeChunkSteps and
// ChunkLen return for input that is not a valid chunk.
var ErrCorruptChunk = errors.New("metrics: corrupt chunk")

// ErrUnsorted is wrapped by the error AppendChunk returns for points that are
// not sorted by Compare.
var ErrUnsorted = errors.New("metrics: points not sorted")

// The bits of the flags byte, which select the value stream's codec. They
// are persisted; the other bits must be 0.
const (
	// flagFloat32 says that every value is a float32, and the value
	// stream holds 32-bit keys.
	flagFloat32 = 1
	// flagSignLow says that XOR keys have the sign bit at the bottom.
	flagSignLow = 2
	// flagDeltaOrder (version 2) holds the order, 1 to 3, of the delta
	// codec; 0 selects XOR coding, the only codec of version 1.
	flagDeltaOrder = 3 << 2
	flagsKnownV1   = flagFloat32 | flagSignLow
	flagsKnown     = flagFloat32 | flagSignLow | flagDeltaOrder
)

// decodeBlock is how many points DecodeChunk decodes per stream at a time.
const decodeBlock = 256

// ChunkVersion is the format version byte that starts every chunk written by
// AppendChunk. It is persisted: a change to the encoding gets a new number,
// and the decoder keeps reading the old ones. Version 2 added the delta
// value codec; version 1 chunks (XOR values only) still decode.
const ChunkVersion = 2

// The chunk layout, as docs/format/chunk.md draws it:
//
//	version count [flags step0 ts0 value0 stepsLen tsLen steps timestamps values]
//
// Steps, timestamps and values are three separate bit streams, each padded
// to a whole byte, so that DecodeChunkSteps can decode steps alone. Every
// point after the first costs at least one bit in each stream, which bounds
// the count a valid header can claim by the length of its streams.

// AppendChunk encodes pts, which must be sorted by Compare, and appends the
// chunk to dst. Zero points make a valid chunk of two bytes. If pts is not
// sorted, AppendChunk returns dst unchanged and an error wrapping
// ErrUnsorted. Every NaN value is stored as the NaN that math.NaN returns.
func AppendChunk(dst []byte, pts []Point) ([]byte, error) {
	return appendChecked(dst, pts, chooseCodec)
}

// AppendChunkQuick is AppendChunk without sizing the value stream every
// way: it picks XOR coding of the IEEE-754 pattern, on 32-bit keys when
// every value is a float32. For chunks that live only until compaction
// merges them (a request's few hundred points): choosing the codec cost a
// third of encoding them, and saved a few percent of bytes that compaction
// saves anyway.
func AppendChunkQuick(dst []byte, pts []Point) ([]byte, error) {
	return appendChecked(dst, pts, quickCodec)
}

// quickCodec returns the codec of AppendChunkQuick, and the bytes its value
// stream takes at most but for a few: XOR codes of full-entropy values,
// which are what a quick chunk mostly holds.
func quickCodec(pts []Point) (valueCodec, int) {
	if allFloat32(pts) {
		return codecOf(flagFloat32), 5 * len(pts)
	}
	return codecOf(0), 9 * len(pts)
}

func appendChecked(dst []byte, pts []Point, choose func([]Point) (valueCodec, int)) ([]byte, error) {
	for i := 1; i < len(pts); i++ {
		if Compare(pts[i-1], pts[i]) > 0 {
			return dst, fmt.Errorf("%w: point %d (step %d) sorts after point %d (step %d)",
				ErrUnsorted, i-1, pts[i-1].Step, i, pts[i].Step)
		}
	}
	if len(pts) == 0 {
		return append(dst, ChunkVersion, 0), nil
	}
	codec, valueBytes := choose(pts)
	// The header, the steps and timestamps (a few bits a point when
	// regular) and the value stream, so that encoding grows dst once.
	dst = slices.Grow(dst, 32+2*len(pts)+valueBytes)
	dst = append(dst, ChunkVersion)
	dst = binary.AppendUvarint(dst, uint64(len(pts)))
	return appendChunk(dst, pts, codec), nil
}

// appendChunk is AppendChunk after the checks, with the value codec chosen;
// dst already holds the version and the count.
func appendChunk(dst []byte, pts []Point, codec valueCodec) []byte {
	first := pts[0]
	dst = append(dst, codec.flags())
	dst = binary.AppendVarint(dst, first.Step)
	dst = binary.AppendVarint(dst, first.TimestampMs)
	dst = binary.LittleEndian.AppendUint64(dst, valueBits(first.Value))

	// The streams go straight into dst; their lengths, which the header
	// needs before them, are inserted afterwards. Moving a few kilobytes
	// once is cheaper than encoding into scratch buffers and copying.
	// appendChecked has grown dst to the chunk's estimated size.
	base := len(dst)
	w := bitWriter{out: dst}
	encodeSteps(&w, pts)
	stepsLen := len(w.flush()) - base
	encodeTimestamps(&w, pts)
	tsLen := len(w.flush()) - base - stepsLen
	encodeValues(&w, pts, codec)
	dst = w.flush()

	var lens [2 * binary.MaxVarintLen64]byte
	n := binary.PutUvarint(lens[:], uint64(stepsLen))
	n += binary.PutUvarint(lens[n:], uint64(tsLen))
	return slices.Insert(dst, base, lens[:n]...)
}

// DecodeChunk decodes the chunk src and appends its points to dst. On
// corrupt input it returns dst unchanged and an error wrapping
// ErrCorruptChunk; it never panics, and the count in the header is checked
// against the length of src before dst grows, so a hostile chunk cannot make
// it allocate more than 8*len(src)+1 points. Some corruptions, such as a
// flipped bit inside a value, still decode, to wrong points.
func DecodeChunk(dst []Point, src []byte) ([]Point, error) {
	var it ChunkIter
	if err := it.Reset(src); err != nil {
		return dst, err
	}
	return it.Next(dst, it.Len())
}

// DecodeChunkSteps appends the steps of the chunk src to dst, without
// decoding timestamps or values. Errors are as for DecodeChunk, except that
// corruption confined to the timestamp or value streams goes unnoticed.
func DecodeChunkSteps(dst []int64, src []byte) ([]int64, error) {
	h, err := parseChunk(src)
	if err != nil || h.count == 0 {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, h.count)[:start+h.count]
	out := dst[start:]
	out[0] = h.first.Step
	sd := newDoDDecoder(h.steps, h.first.Step, &stepCode)
	sd.decode(out[1:])
	if err := sd.r.finish(); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// ChunkLen returns the number of points in the chunk src. It reads and
// checks only the header, so a chunk whose streams are corrupt may still
// report a length that DecodeChunk then rejects.
func ChunkLen(src []byte) (int, error) {
	h, err := parseChunk(src)
	return h.count, err
}

// chunkHeader is a parsed chunk header with the three streams it frames.
type chunkHeader struct {
	count                     int
	first                     Point
	codec                     valueCodec
	steps, timestamps, values []byte
}

// parseChunk parses and checks the header of src. A header that passes
// claims no more points than its streams can hold, which is what lets the
// decoders size their output before decoding.
func parseChunk(src []byte) (chunkHeader, error) {
	var h chunkHeader
	if len(src) == 0 {
		return h, corruptf("empty")
	}
	known := byte(flagsKnown)
	switch src[0] {
	case ChunkVersion:
	case 1:
		known = flagsKnownV1
	default:
		return h, corruptf("unknown version %d", src[0])
	}
	rest := src[1:]
	count, n := binary.Uvarint(rest)
	if n <= 0 {
		return h, corruptf("bad point count")
	}
	rest = rest[n:]
	if count == 0 {
		if len(rest) != 0 {
			return h, corruptf("%d bytes after an empty chunk", len(rest))
		}
		return h, nil
	}
	// Sign placement is a choice of the XOR codec only.
	if len(rest) == 0 || rest[0]&^known != 0 || (rest[0]&flagDeltaOrder != 0 && rest[0]&flagSignLow != 0) {
		return h, corruptf("bad flags")
	}
	h.codec = codecOf(rest[0])
	rest = rest[1:]
	step, n := binary.Varint(rest)
	if n <= 0 {
		return h, corruptf("bad first step")
	}
	rest = rest[n:]
	ts, n := binary.Varint(rest)
	if n <= 0 {
		return h, corruptf("bad first timestamp")
	}
	rest = rest[n:]
	if len(rest) < 8 {
		return h, corruptf("short first value")
	}
	value := math.Float64frombits(binary.LittleEndian.Uint64(rest))
	if value != value {
		// AppendChunk writes only the canonical NaN; keep that promise
		// for hand-made chunks too.
		value = math.NaN()
	}
	rest = rest[8:]
	stepsLen, n := binary.Uvarint(rest)
	if n <= 0 {
		return h, corruptf("bad step stream length")
	}
	rest = rest[n:]
	tsLen, n := binary.Uvarint(rest)
	if n <= 0 {
		return h, corruptf("bad timestamp stream length")
	}
	rest = rest[n:]
	if stepsLen > uint64(len(rest)) || tsLen > uint64(len(rest))-stepsLen {
		return h, corruptf("stream lengths %d and %d exceed the %d bytes left", stepsLen, tsLen, len(rest))
	}
	h.steps = rest[:stepsLen]
	h.timestamps = rest[stepsLen : stepsLen+tsLen]
	h.values = rest[stepsLen+tsLen:]
	// Each point after the first takes at least one bit of every stream.
	limit := 8 * uint64(min(len(h.steps), len(h.timestamps), len(h.values)))
	if count-1 > limit {
		return h, corruptf("%d points do not fit in %d bytes", count, len(src))
	}
	h.count = int(count)
	h.first = Point{Step: step, TimestampMs: ts, Value: value}
	return h, nil
}

// corruptf returns an error wrapping ErrCorruptChunk.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptChunk, fmt.Sprintf(format, args...))
}

// valueBits returns the bits of v as stored: NaNs are canonicalised so that
// a NaN payload never costs a new XOR window, and decodes the same way on
// every platform.
func valueBits(v float64) uint64 {
	if v != v {
		return canonicalNaN
	}
	return math.Float64bits(v)
}

// valueDecoder decodes a value stream with the chunk's codec.
type valueDecoder struct {
	delta bool
	x     xorDecoder
	d     deltaDecoder
}

func newValueDecoder(src []byte, first float64, c valueCodec) valueDecoder {
	if c.order != 0 {
		return valueDecoder{delta: true, d: newDeltaDecoder(src, first, c)}
	}
	return valueDecoder{x: newXORDecoder(src, first, c)}
}

// decode fills out with the next len(out) keys.
func (v *valueDecoder) decode(out []uint64) {
	if v.delta {
		v.d.decode(out)
		return
	}
	v.x.decode(out)
}

// finish reports a bad code or a stream not consumed exactly.
func (v *valueDecoder) finish() error {
	if v.delta {
		return v.d.finish()
	}
	return v.x.finish()
}

// reader returns the decoder's bit reader.
func (v *valueDecoder) reader() *bitReader {
	if v.delta {
		return &v.d.r
	}
	return &v.x.r
}
