package runlogs

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// ErrCorruptChunk is wrapped by every error DecodeChunk returns for input
// that is not a valid chunk.
var ErrCorruptChunk = errors.New("runlogs: corrupt chunk")

// ChunkVersion is the format version byte that starts every chunk. It is
// persisted: a change to the encoding gets a new number, and the decoder
// keeps reading the old ones.
const ChunkVersion = 1

// The payload codecs. They are persisted.
const (
	codecNone  = 0
	codecFlate = 1 // raw DEFLATE (RFC 1951)
)

// Compression levels for AppendChunk.
const (
	// CompressFast is for the ingest path: about 5x on typical training
	// output at a few hundred MB/s.
	CompressFast = flate.BestSpeed
	// CompressSmall is for compaction, which runs off the ingest path.
	CompressSmall = flate.DefaultCompression
)

// maxPayload bounds the decoded payload a chunk may claim, so that a
// corrupt header cannot make the decoder allocate without bound. Chunks
// are cut at ChunkBytes of text, plus at most one line of LineBytes.
const maxPayload = 64 << 20

// Chunk sizes: a chunk is cut at ChunkLines lines or once its texts reach
// ChunkBytes, whichever comes first. A range read of up to a few thousand
// lines then decodes one or two chunks.
const (
	ChunkLines = 4096
	ChunkBytes = 512 << 10
)

// The chunk layout, as docs/format/runlog-chunk.md draws it:
//
//	version codec count payloadLen payload
//
// The payload (compressed unless codec is codecNone) holds the lines in
// columns: timestamps (the first, then deltas), one meta byte per line
// (stream and flags), node ranks, local ranks, text lengths, then the
// texts. Columns compress better than rows: each holds similar values.

// AppendChunk encodes lines (at least one) into a chunk compressed at
// level and appends it to dst. Line numbers are not stored: a chunk's
// lines are numbered from the FirstLine its store keeps beside it. The
// lines' fields must be valid (Service.Append checks them).
func AppendChunk(dst []byte, lines []Line, level int) []byte {
	pb := payloadPool.Get().(*[]byte)
	payload := appendPayload((*pb)[:0], lines)
	dst = append(dst, ChunkVersion)
	codecAt := len(dst)
	dst = append(dst, codecFlate)
	dst = binary.AppendUvarint(dst, uint64(len(lines)))
	dst = binary.AppendUvarint(dst, uint64(len(payload)))
	start := len(dst)
	dst = compress(dst, payload, level)
	if len(dst)-start >= len(payload) {
		// Incompressible (already compressed or random text): store as is.
		dst = append(dst[:start], payload...)
		dst[codecAt] = codecNone
	}
	*pb = payload
	payloadPool.Put(pb)
	return dst
}

func appendPayload(p []byte, lines []Line) []byte {
	n := 0
	for i := range lines {
		n += len(lines[i].Text)
	}
	p = growBytes(p, n+len(lines)*8)
	prev := int64(0)
	for i := range lines {
		ts := lines[i].TimestampMs
		p = binary.AppendVarint(p, ts-prev)
		prev = ts
	}
	for i := range lines {
		p = append(p, byte(lines[i].Stream&3)|byte(lines[i].Flags&flagsKnown)<<2)
	}
	for i := range lines {
		p = binary.AppendUvarint(p, uint64(max(lines[i].Node, 0)))
	}
	for i := range lines {
		p = binary.AppendVarint(p, int64(lines[i].LocalRank))
	}
	for i := range lines {
		p = binary.AppendUvarint(p, uint64(len(lines[i].Text)))
	}
	for i := range lines {
		p = append(p, lines[i].Text...)
	}
	return p
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// DecodeChunk decodes a chunk and appends its lines to dst, numbered from
// firstLine. The lines' texts share one allocation.
func DecodeChunk(dst []Line, data []byte, firstLine int64) ([]Line, error) {
	count, payloadLen, body, codec, err := chunkHeader(data)
	if err != nil {
		return dst, err
	}
	var payload []byte
	var pb *[]byte
	switch codec {
	case codecNone:
		if len(body) != payloadLen {
			return dst, corrupt("payload is %d bytes, the header says %d", len(body), payloadLen)
		}
		payload = body
	case codecFlate:
		pb = payloadPool.Get().(*[]byte)
		defer payloadPool.Put(pb)
		if cap(*pb) < payloadLen {
			*pb = make([]byte, payloadLen)
		}
		payload = (*pb)[:payloadLen]
		if err := decompress(payload, body); err != nil {
			return dst, err
		}
	}
	return decodePayload(dst, payload, count, firstLine)
}

// ChunkLen returns the number of lines in a chunk, reading only its header.
func ChunkLen(data []byte) (int, error) {
	count, _, _, _, err := chunkHeader(data)
	return count, err
}

func chunkHeader(data []byte) (count, payloadLen int, body []byte, codec byte, err error) {
	if len(data) < 2 {
		return 0, 0, nil, 0, corrupt("%d bytes is too short for a header", len(data))
	}
	if data[0] != ChunkVersion {
		return 0, 0, nil, 0, corrupt("unknown version %d", data[0])
	}
	codec = data[1]
	if codec != codecNone && codec != codecFlate {
		return 0, 0, nil, 0, corrupt("unknown codec %d", codec)
	}
	rest := data[2:]
	c, n := binary.Uvarint(rest)
	if n <= 0 {
		return 0, 0, nil, 0, corrupt("bad line count")
	}
	rest = rest[n:]
	pl, n := binary.Uvarint(rest)
	if n <= 0 {
		return 0, 0, nil, 0, corrupt("bad payload length")
	}
	rest = rest[n:]
	if pl > maxPayload {
		return 0, 0, nil, 0, corrupt("payload length %d is over the limit of %d", pl, maxPayload)
	}
	// Every line costs at least 5 payload bytes: a timestamp, a meta
	// byte, a node, a local rank and a text length of one byte each.
	if c == 0 || c > pl/5 {
		return 0, 0, nil, 0, corrupt("%d lines cannot fit in %d payload bytes", c, pl)
	}
	return int(c), int(pl), rest, codec, nil
}

func decodePayload(dst []Line, p []byte, count int, firstLine int64) ([]Line, error) {
	base := len(dst)
	dst = growLines(dst, count)
	dst = dst[:base+count]
	out := dst[base:]
	i := 0
	var ts int64
	for k := range out {
		d, n := binary.Varint(p[i:])
		if n <= 0 {
			return dst[:base], corrupt("bad timestamp of line %d", k)
		}
		i += n
		ts += d
		out[k] = Line{Number: firstLine + int64(k), TimestampMs: ts}
	}
	if len(p)-i < count {
		return dst[:base], corrupt("meta column cut short")
	}
	for k := range out {
		m := p[i+k]
		s := Stream(m & 3)
		if s != Stdout && s != Stderr || m>>4 != 0 {
			return dst[:base], corrupt("bad meta byte %#x of line %d", m, k)
		}
		out[k].Stream = s
		out[k].Flags = Flags(m>>2) & flagsKnown
	}
	i += count
	for k := range out {
		v, n := binary.Uvarint(p[i:])
		if n <= 0 || v > math.MaxInt32 {
			return dst[:base], corrupt("bad node rank of line %d", k)
		}
		i += n
		out[k].Node = int32(v)
	}
	for k := range out {
		v, n := binary.Varint(p[i:])
		if n <= 0 || v < UnknownRank || v > math.MaxInt32 {
			return dst[:base], corrupt("bad local rank of line %d", k)
		}
		i += n
		out[k].LocalRank = int32(v)
	}
	total := 0
	lens := i
	for k := range out {
		v, n := binary.Uvarint(p[i:])
		if n <= 0 || v > uint64(len(p)) {
			return dst[:base], corrupt("bad text length of line %d", k)
		}
		i += n
		total += int(v)
	}
	if total != len(p)-i {
		return dst[:base], corrupt("texts take %d bytes, the lengths say %d", len(p)-i, total)
	}
	texts := string(p[i:])
	off := 0
	for k := range out {
		v, n := binary.Uvarint(p[lens:])
		lens += n
		out[k].Text = texts[off : off+int(v)]
		off += int(v)
	}
	return dst, nil
}

func growLines(s []Line, n int) []Line {
	if cap(s)-len(s) >= n {
		return s
	}
	ns := make([]Line, len(s), len(s)+n)
	copy(ns, s)
	return ns
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptChunk, fmt.Sprintf(format, args...))
}

// payloadPool holds buffers for uncompressed payloads.
var payloadPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// A flate.Writer costs about 600 KB to set up, so writers are reused.
var (
	writerPools sync.Map // level -> *sync.Pool
	readerPool  = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}
)

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func compress(dst, src []byte, level int) []byte {
	pi, _ := writerPools.LoadOrStore(level, &sync.Pool{})
	pool := pi.(*sync.Pool)
	aw := &appendWriter{b: dst}
	fw, _ := pool.Get().(*flate.Writer)
	if fw == nil {
		var err error
		fw, err = flate.NewWriter(aw, level)
		if err != nil {
			fw, _ = flate.NewWriter(aw, CompressFast)
		}
	} else {
		fw.Reset(aw)
	}
	// Writes to an appendWriter cannot fail.
	_, _ = fw.Write(src)
	_ = fw.Close()
	pool.Put(fw)
	return aw.b
}

func decompress(dst, src []byte) error {
	fr := readerPool.Get().(io.ReadCloser)
	defer readerPool.Put(fr)
	// bytes.Reader is an io.ByteReader, so the decompressor reads no
	// further than the end of the stream, and what is left is trailing
	// garbage.
	br := bytes.NewReader(src)
	if err := fr.(flate.Resetter).Reset(br, nil); err != nil {
		return corrupt("%v", err)
	}
	if _, err := io.ReadFull(fr, dst); err != nil {
		return corrupt("payload: %v", err)
	}
	var one [1]byte
	if n, err := fr.Read(one[:]); n != 0 || err != io.EOF {
		return corrupt("payload is longer than the header says")
	}
	if br.Len() != 0 {
		return corrupt("%d bytes after the compressed payload", br.Len())
	}
	return nil
}

// CutChunks cuts consecutive lines into the groups that make one chunk
// each: at most ChunkLines lines, closed once their texts reach
// ChunkBytes. The groups share lines' backing array.
func CutChunks(lines []Line) [][]Line {
	var out [][]Line
	for len(lines) > 0 {
		n, size := 0, 0
		for n < len(lines) && n < ChunkLines && size < ChunkBytes {
			size += len(lines[n].Text)
			n++
		}
		out = append(out, lines[:n])
		lines = lines[n:]
	}
	return out
}

// Full reports whether a chunk of count lines and rawBytes of text is as
// large as CutChunks makes them; smaller chunks are merged by compaction.
func Full(count int, rawBytes int64) bool {
	return count >= ChunkLines || rawBytes >= ChunkBytes
}

// ChunkOf encodes lines (at least one) as the chunk that starts at line
// firstLine, with its metadata.
func ChunkOf(lines []Line, firstLine int64, level int) Chunk {
	c := Chunk{
		FirstLine:      firstLine,
		Count:          len(lines),
		MinTimestampMs: lines[0].TimestampMs,
		MaxTimestampMs: lines[0].TimestampMs,
	}
	for i := range lines {
		l := &lines[i]
		c.MinTimestampMs = min(c.MinTimestampMs, l.TimestampMs)
		c.MaxTimestampMs = max(c.MaxTimestampMs, l.TimestampMs)
		c.Nodes |= NodeBit(l.Node)
		c.Streams |= StreamBit(l.Stream)
		c.RawBytes += int64(len(l.Text))
	}
	c.Data = AppendChunk(nil, lines, level)
	return c
}
