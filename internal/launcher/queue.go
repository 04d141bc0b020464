package launcher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
)

// The queue holds captured lines until the server has them. Lines are
// numbered (the source's sequence numbers) as they enter and leave in the
// same order, in batches: the shipper peeks a batch, sends it, and acks it
// once the server has answered, so a batch whose answer was lost is sent
// again with the same numbers and stored once.
//
// Lines are kept encoded (record format below), in memory up to a bound;
// past it, what is in memory moves to a spool file on disk (bounded too),
// and the shipper reads the spool before memory. When the spool is full
// as well, new lines are dropped and counted, and a marker line saying how
// many were lost takes their place once there is room again.
//
// A record is: uvarint text length, varint timestamp, one byte of stream
// and flags (stream | flags<<2), varint node, varint local rank, text.

func appendRecord(dst []byte, l *runlogs.Line) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(l.Text)))
	dst = binary.AppendVarint(dst, l.TimestampMs)
	dst = append(dst, byte(l.Stream&3)|byte(l.Flags&3)<<2)
	dst = binary.AppendVarint(dst, int64(l.Node))
	dst = binary.AppendVarint(dst, int64(l.LocalRank))
	return append(dst, l.Text...)
}

func appendRecordText(dst []byte, text []byte, ts int64, stream runlogs.Stream, f runlogs.Flags, node, rank int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(text)))
	dst = binary.AppendVarint(dst, ts)
	dst = append(dst, byte(stream&3)|byte(f&3)<<2)
	dst = binary.AppendVarint(dst, int64(node))
	dst = binary.AppendVarint(dst, int64(rank))
	return append(dst, text...)
}

var errBadRecord = errors.New("launcher: corrupt queue record")

// decodeRecord decodes the record at the start of b: the line (its Text is
// left empty), the text's bounds in b, and the record's size. ok is false
// when b does not hold a whole record.
func decodeRecord(b []byte) (l runlogs.Line, textStart, size int, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return l, 0, 0, errBadRecord
	}
	i := k
	ts, k := binary.Varint(b[i:])
	if k <= 0 {
		return l, 0, 0, errBadRecord
	}
	i += k
	if i >= len(b) {
		return l, 0, 0, errBadRecord
	}
	meta := b[i]
	i++
	node, k := binary.Varint(b[i:])
	if k <= 0 {
		return l, 0, 0, errBadRecord
	}
	i += k
	rank, k := binary.Varint(b[i:])
	if k <= 0 {
		return l, 0, 0, errBadRecord
	}
	i += k
	if uint64(len(b)-i) < n {
		return l, 0, 0, errBadRecord
	}
	l = runlogs.Line{TimestampMs: ts, Stream: runlogs.Stream(meta & 3), Flags: runlogs.Flags(meta>>2) & 3, Node: int32(node), LocalRank: int32(rank)}
	return l, i, i + int(n), nil
}

// decodeRecords decodes count records from b into lines. The texts share
// one copy of b.
func decodeRecords(dst []runlogs.Line, b []byte, count int) ([]runlogs.Line, error) {
	all := string(b)
	base := len(dst)
	for off := 0; len(dst)-base < count; {
		l, ts, size, err := decodeRecord(b[off:])
		if err != nil {
			return dst[:base], err
		}
		l.Text = all[off+ts : off+size]
		dst = append(dst, l)
		off += size
	}
	return dst, nil
}

// queueOptions bound a queue.
type queueOptions struct {
	// MemBytes bounds the encoded lines kept in memory.
	MemBytes int64
	// SpoolDir is where the spool file goes; SpoolBytes bounds it (0 or
	// less: no spool, lines beyond MemBytes are dropped).
	SpoolDir   string
	SpoolBytes int64
	// BatchLines and BatchBytes are the shipper's batch size: the queue
	// wakes the shipper when that much is waiting (and when the first line
	// arrives), not at every line.
	BatchLines int
	BatchBytes int64
	// Now stamps drop markers.
	Now func() time.Time
}

type queue struct {
	opts queueOptions

	mu      sync.Mutex
	changed chan struct{} // a token when lines were added or the queue closed

	mem      blocks // encoded lines in memory
	memCount int
	spool    *spool

	nextSeq int64 // the sequence number of the next line pushed
	headSeq int64 // the first line not yet acknowledged

	// inflight is the batch handed out by peek and not acked yet.
	inflight struct {
		active    bool
		fromSpool bool
		count     int
		bytes     int
	}
	oldest   time.Time // when the oldest unsent line was pushed
	fullSent bool      // the shipper was woken for a full batch since its last peek
	dropped  int64     // lines dropped since the last marker
	stats    queueStats
	closed   bool
	disabled bool // the server refused the log for good: discard
}

type queueStats struct {
	Captured  int64 // lines offered, drop markers included
	Dropped   int64 // lines lost to a full spool
	Discarded int64 // lines thrown away after the server refused the log
	Spooled   int64 // lines that went through the spool
}

func newQueue(opts queueOptions) *queue {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &queue{opts: opts, changed: make(chan struct{}, 1)}
}

func (q *queue) signal() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// push adds one line; text is copied.
func (q *queue) push(text []byte, ts int64, stream runlogs.Stream, f runlogs.Flags, node, rank int32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.stats.Captured++
	if q.disabled {
		q.stats.Discarded++
		return
	}
	if q.dropped > 0 && !q.marker(node, rank, false) {
		q.dropped++
		q.stats.Dropped++
		return
	}
	if !q.room(int64(len(text)) + 32) {
		q.dropped++
		q.stats.Dropped++
		return
	}
	q.mem.add(text, ts, stream, f, node, rank)
	q.added()
}

// marker queues the line that says how many lines were dropped, when
// there is room for it (or in any case when force is set, at the end).
func (q *queue) marker(node, rank int32, force bool) bool {
	msg := fmt.Sprintf("[sextant] %d lines of output were not stored: the server could not be reached and the launcher's spool was full", q.dropped)
	if !q.room(int64(len(msg))+32) && !force {
		return false
	}
	q.mem.add([]byte(msg), q.opts.Now().UnixMilli(), runlogs.Stderr, 0, node, rank)
	q.stats.Captured++
	q.added()
	q.dropped = 0
	return true
}

func (q *queue) added() {
	if q.oldest.IsZero() {
		q.oldest = time.Now()
	}
	q.memCount++
	q.nextSeq++
	switch {
	case q.memCount+q.spoolCount() == 1:
		q.signal()
	case !q.fullSent && (q.memCount >= q.opts.BatchLines || q.mem.size >= q.opts.BatchBytes):
		q.fullSent = true
		q.signal()
	}
}

func (q *queue) spoolCount() int {
	if q.spool == nil {
		return 0
	}
	return q.spool.count
}

// room makes room for n more bytes in memory, moving what memory holds to
// the spool if needed; false when there is none.
func (q *queue) room(n int64) bool {
	if q.mem.size+n <= q.opts.MemBytes || q.memCount == 0 {
		return true
	}
	if q.opts.SpoolBytes <= 0 {
		return false
	}
	if q.spool == nil {
		sp, err := openSpool(q.opts.SpoolDir, q.opts.SpoolBytes)
		if err != nil {
			return false
		}
		q.spool = sp
	}
	if !q.spool.append(&q.mem, q.memCount) {
		return false
	}
	q.stats.Spooled += int64(q.memCount)
	if q.inflight.active && !q.inflight.fromSpool {
		// The batch in flight was at the head of memory, so it is at the
		// head of the spool now (the spool was empty when it was peeked).
		q.inflight.fromSpool = true
	}
	q.mem.reset()
	q.memCount = 0
	return true
}

// peek returns the next batch: at most maxLines lines and about maxBytes
// of encoded lines (at least one line), starting at the first line not
// acked, decoded into dst. It returns the same batch until ack.
func (q *queue) peek(dst []runlogs.Line, maxLines, maxBytes int) (first int64, lines []runlogs.Line, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fullSent = false
	var buf []byte
	var count int
	if q.spoolCount() > 0 {
		buf, count, err = q.spool.peek(maxLines, maxBytes)
		if err != nil {
			return 0, dst, err
		}
		q.inflight.fromSpool = true
	} else {
		// Decode straight from the blocks, segment by segment.
		size := 0
		lines = dst
		err = q.mem.peek(min(maxLines, q.memCount), maxBytes, func(seg []byte, k int) error {
			size += len(seg)
			count += k
			lines, err = decodeRecords(lines, seg, k)
			return err
		})
		if err != nil {
			return 0, dst, err
		}
		q.inflight.fromSpool = false
		if count > 0 {
			q.inflight.active, q.inflight.count, q.inflight.bytes = true, count, size
		} else {
			q.inflight.active = false
		}
		return q.headSeq, lines, nil
	}
	if count == 0 {
		q.inflight.active = false
		return q.headSeq, dst, nil
	}
	lines, err = decodeRecords(dst, buf, count)
	if err != nil {
		return 0, dst, err
	}
	q.inflight.active, q.inflight.count, q.inflight.bytes = true, count, len(buf)
	return q.headSeq, lines, nil
}

// scanRecords returns the prefix of b holding up to maxLines whole
// records and about maxBytes (at least one record).
func scanRecords(b []byte, maxLines, maxBytes int) ([]byte, int) {
	off, n := 0, 0
	for n < maxLines && off < len(b) {
		_, _, size, err := decodeRecord(b[off:])
		if err != nil {
			break
		}
		if n > 0 && off+size > maxBytes {
			break
		}
		off += size
		n++
	}
	return b[:off], n
}

// ack drops the batch peek returned.
func (q *queue) ack() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.inflight.active {
		return
	}
	if q.inflight.fromSpool {
		q.spool.advance(q.inflight.bytes, q.inflight.count)
	} else {
		q.mem.consume(q.inflight.bytes)
		q.memCount -= q.inflight.count
	}
	q.headSeq += int64(q.inflight.count)
	q.inflight.active = false
	if q.memCount == 0 && q.spoolCount() == 0 {
		q.oldest = time.Time{}
	} else {
		q.oldest = time.Now() // what is left waits its turn from now
	}
}

// pending returns the number of lines not yet acked and since when the
// oldest has waited.
func (q *queue) pending() (int, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.memCount + q.spoolCount(), q.oldest
}

// pendingBytes returns the encoded size of the lines not yet acked.
func (q *queue) pendingBytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.mem.size
	if q.spool != nil {
		n += q.spool.w - q.spool.r
	}
	return n
}

// close stops accepting lines; what is queued stays until acked. Lines
// dropped since the last marker get theirs now, past the bounds if need
// be.
func (q *queue) close(node, rank int32) {
	q.mu.Lock()
	if q.dropped > 0 && !q.disabled {
		q.marker(node, rank, true)
	}
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// disable throws away what is queued and what comes later: the server
// refused the log for good.
func (q *queue) disable() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.disabled = true
	q.stats.Discarded += int64(q.memCount + q.spoolCount())
	q.mem.reset()
	q.memCount = 0
	if q.spool != nil {
		q.spool.reset()
	}
	q.inflight.active = false
	q.signal()
}

// isClosed reports whether close was called.
func (q *queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func (q *queue) statsNow() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// remove deletes the spool file.
func (q *queue) remove() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.spool == nil {
		return nil
	}
	return q.spool.remove()
}

// blocks is a FIFO of encoded lines in blocks of blockSize, so that
// neither adding nor consuming lines ever moves the bytes already held.
// A line is never split across blocks.
type blocks struct {
	bs   [][]byte
	off  int   // bytes of bs[0] already consumed
	size int64 // bytes not consumed
	free [][]byte
}

const blockSize = 1 << 20

func (b *blocks) add(text []byte, ts int64, stream runlogs.Stream, f runlogs.Flags, node, rank int32) {
	need := len(text) + 2*binary.MaxVarintLen64 + 3*binary.MaxVarintLen32 + 1
	if len(b.bs) == 0 || cap(b.bs[len(b.bs)-1])-len(b.bs[len(b.bs)-1]) < need {
		var nb []byte
		if n := len(b.free); n > 0 && need <= blockSize {
			nb, b.free = b.free[n-1][:0], b.free[:n-1]
		} else {
			nb = make([]byte, 0, max(blockSize, need))
		}
		b.bs = append(b.bs, nb)
	}
	last := &b.bs[len(b.bs)-1]
	before := len(*last)
	*last = appendRecordText(*last, text, ts, stream, f, node, rank)
	b.size += int64(len(*last) - before)
}

// peek calls fn with the front segments holding up to maxLines whole
// lines and about maxBytes (at least one line), and the number of lines in
// each. The segments stay valid until consume.
func (b *blocks) peek(maxLines, maxBytes int, fn func(seg []byte, lines int) error) error {
	n, size := 0, 0
	for i, blk := range b.bs {
		if i == 0 {
			blk = blk[b.off:]
		}
		if n > 0 && size >= maxBytes {
			break
		}
		seg, k := scanRecords(blk, maxLines-n, max(maxBytes-size, 1))
		if k > 0 {
			if err := fn(seg, k); err != nil {
				return err
			}
		}
		n += k
		size += len(seg)
		if n >= maxLines || len(seg) < len(blk) {
			break
		}
	}
	return nil
}

// consume drops n bytes (whole lines) from the front.
func (b *blocks) consume(n int) {
	b.size -= int64(n)
	for n > 0 {
		rem := len(b.bs[0]) - b.off
		if n < rem {
			b.off += n
			return
		}
		n -= rem
		b.recycle(b.bs[0])
		b.bs = b.bs[1:]
		b.off = 0
	}
	if len(b.bs) == 1 && b.off == len(b.bs[0]) {
		b.bs[0], b.off = b.bs[0][:0], 0
	}
}

func (b *blocks) recycle(blk []byte) {
	if cap(blk) == blockSize && len(b.free) < 4 {
		b.free = append(b.free, blk[:0])
	}
}

// segments calls fn with the unconsumed bytes, in order.
func (b *blocks) segments(fn func([]byte) error) error {
	for i, blk := range b.bs {
		if i == 0 {
			blk = blk[b.off:]
		}
		if err := fn(blk); err != nil {
			return err
		}
	}
	return nil
}

func (b *blocks) reset() {
	for _, blk := range b.bs {
		b.recycle(blk)
	}
	b.bs, b.off, b.size = b.bs[:0], 0, 0
}
