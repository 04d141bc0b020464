package gpu

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Spool is the agent's on-disk queue of samples the server has not stored
// yet. It is a directory of append-only segment files, oldest first; a
// record is one sample with its labels (docs/format/gpu-spool.md). When the
// spool grows past its byte bound the oldest segment is deleted, and the
// samples in it are lost with a logged warning.
//
// The read position is kept in memory only: after a restart the agent
// sends the undeleted segments again from their start, and the server
// stores each (node, timestamp) once, so a resend costs bytes, not
// duplicates.
//
// A Spool is safe for concurrent use, but Peek and Ack are meant for one
// sender: Ack acknowledges what the last Peek returned.
type Spool struct {
	dir  string
	opts SpoolOptions
	log  *slog.Logger
	lock io.Closer

	mu      sync.Mutex
	segs    []*segment // oldest first; the last one is appended to
	w       *os.File   // the last segment, open for appending
	cur     spoolPos   // first record not acknowledged
	count   int        // records not acknowledged
	bytes   int64      // size of all segment files
	dropped int64      // records dropped because the spool was full
	peeked  []spoolPos // the position after each record of the last Peek
	buf     []byte
}

// SpoolOptions configure a Spool.
type SpoolOptions struct {
	// MaxBytes bounds the spool's size on disk; 0 means 64 MiB. At 10 s
	// per sample of 8 GPUs that holds days of samples.
	MaxBytes int64
	// SegmentBytes is the size at which a new segment file starts; 0 means
	// MaxBytes/8 (at least 4 KiB).
	SegmentBytes int64
	// Logger receives warnings about dropped and corrupt records; nil
	// discards them.
	Logger *slog.Logger
}

// SpoolRecord is one spooled sample with its labels.
type SpoolRecord struct {
	Labels Labels
	Sample Sample
}

type segment struct {
	seq     uint64
	size    int64
	records int
	acked   int
}

type spoolPos struct {
	seq uint64
	off int64
}

// Record framing: a 4-byte big-endian payload length, the CRC-32C of the
// payload, the payload.
const (
	frameHeader    = 8
	maxRecordBytes = 16 << 20
	spoolVersion   = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSpoolLocked is returned by OpenSpool when another agent uses the
// directory.
var ErrSpoolLocked = errors.New("the spool directory is in use by another agent")

// OpenSpool opens the spool in dir, creating it if needed. It takes a lock
// on the directory, so two agents cannot share one, and reads the segments
// left by an earlier agent. A torn record at the end of the last segment
// (the agent died while writing) is cut off.
func OpenSpool(dir string, opts SpoolOptions) (*Spool, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = opts.MaxBytes / 8
	}
	opts.SegmentBytes = max(opts.SegmentBytes, 4096)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, err
	}
	s := &Spool{dir: dir, opts: opts, log: log, lock: lock}
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

func (s *Spool) segPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("seg-%016d.spool", seq))
}

// load scans the existing segments.
func (s *Spool) load() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read spool directory: %w", err)
	}
	var seqs []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "seg-") || !strings.HasSuffix(name, ".spool") {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "seg-"), ".spool"), 10, 64)
		if err == nil {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	for i, seq := range seqs {
		seg, err := s.scan(seq, i == len(seqs)-1)
		if err != nil {
			return err
		}
		if seg.records == 0 && i < len(seqs)-1 {
			os.Remove(s.segPath(seq))
			continue
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
		s.count += seg.records
	}
	if len(s.segs) == 0 {
		s.segs = []*segment{{seq: 1}}
	}
	s.cur = spoolPos{seq: s.segs[0].seq}
	last := s.segs[len(s.segs)-1]
	s.w, err = os.OpenFile(s.segPath(last.seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open spool segment: %w", err)
	}
	if s.count > 0 {
		s.log.Info("spool holds samples from before the restart; sending them first", "samples", s.count, "bytes", s.bytes)
	}
	return nil
}

// scan counts the valid records of a segment. A bad frame ends the
// segment: the last one is truncated there, an older one keeps its good
// records and the rest is skipped with a warning.
func (s *Spool) scan(seq uint64, last bool) (*segment, error) {
	path := s.segPath(seq)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open spool segment: %w", err)
	}
	defer f.Close()
	seg := &segment{seq: seq}
	r := bufio.NewReader(f)
	var buf []byte
	for {
		var rec SpoolRecord
		n, err := readFrame(r, &buf, &rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			fi, _ := f.Stat()
			s.log.Warn("spool segment has a damaged record; the samples after it are skipped", "segment", path, "offset", seg.size, "err", err)
			if last {
				if terr := os.Truncate(path, seg.size); terr != nil {
					return nil, fmt.Errorf("truncate damaged spool segment: %w", terr)
				}
			} else if fi != nil {
				seg.size = fi.Size()
			}
			break
		}
		seg.size += n
		seg.records++
	}
	return seg, nil
}

// Close closes the spool; what it holds stays on disk for the next agent.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.w.Close(), s.lock.Close())
}

// Len returns the number of samples waiting.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Bytes returns the spool's size on disk.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Dropped returns how many samples were dropped because the spool was full.
func (s *Spool) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Append adds a record at the end. When the spool then exceeds its bound,
// the oldest segments are deleted.
func (s *Spool) Append(rec *SpoolRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = appendFrame(s.buf[:0], rec)
	last := s.segs[len(s.segs)-1]
	if last.records > 0 && last.size+int64(len(s.buf)) > s.opts.SegmentBytes {
		if err := s.roll(); err != nil {
			return err
		}
		last = s.segs[len(s.segs)-1]
	}
	if _, err := s.w.Write(s.buf); err != nil {
		// A partial write leaves a torn record that the next load cuts off;
		// start a new segment so later records stay readable.
		_ = s.roll()
		return fmt.Errorf("write spool: %w", err)
	}
	last.size += int64(len(s.buf))
	last.records++
	s.bytes += int64(len(s.buf))
	s.count++
	s.enforceBound()
	return nil
}

// roll starts a new segment.
func (s *Spool) roll() error {
	seq := s.segs[len(s.segs)-1].seq + 1
	w, err := os.OpenFile(s.segPath(seq), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create spool segment: %w", err)
	}
	s.w.Close()
	s.w = w
	s.segs = append(s.segs, &segment{seq: seq})
	return nil
}

// enforceBound deletes the oldest segments while the spool is over its
// bound. The segment being appended to is never deleted.
func (s *Spool) enforceBound() {
	var lost int
	for s.bytes > s.opts.MaxBytes && len(s.segs) > 1 {
		old := s.segs[0]
		lost += old.records - old.acked
		s.count -= old.records - old.acked
		s.bytes -= old.size
		os.Remove(s.segPath(old.seq))
		s.segs = s.segs[1:]
		s.cur = spoolPos{seq: s.segs[0].seq}
		s.peeked = nil
	}
	if lost > 0 {
		s.dropped += int64(lost)
		s.log.Warn("GPU sample spool is full: dropped the oldest samples", "dropped", lost, "max_bytes", s.opts.MaxBytes, "dir", s.dir)
	}
}

// Peek returns up to max of the oldest records not acknowledged, in order,
// without removing them.
func (s *Spool) Peek(max int) ([]SpoolRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peeked = s.peeked[:0]
	var out []SpoolRecord
	pos := s.cur
	for _, seg := range s.segs {
		if len(out) >= max {
			break
		}
		if seg.seq < pos.seq {
			continue
		}
		off := int64(0)
		if seg.seq == pos.seq {
			off = pos.off
		}
		if off >= seg.size {
			continue
		}
		f, err := os.Open(s.segPath(seg.seq))
		if err != nil {
			return nil, fmt.Errorf("read spool: %w", err)
		}
		r := bufio.NewReader(io.NewSectionReader(f, off, seg.size-off))
		var buf []byte
		for len(out) < max {
			var rec SpoolRecord
			n, err := readFrame(r, &buf, &rec)
			if err == io.EOF {
				break
			}
			if err != nil {
				// A damaged record ends its segment: skip to the next one
				// rather than block every later sample behind it.
				s.log.Warn("spool segment has a damaged record; skipping the rest of it", "segment", seg.seq, "offset", off, "err", err)
				break
			}
			off += n
			out = append(out, rec)
			s.peeked = append(s.peeked, spoolPos{seg.seq, off})
		}
		f.Close()
	}
	return out, nil
}

// Ack removes the first n records returned by the last Peek. Segments read
// to their end are deleted.
func (s *Spool) Ack(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		return nil
	}
	if n > len(s.peeked) {
		return fmt.Errorf("ack %d records, but the last peek returned %d", n, len(s.peeked))
	}
	for _, p := range s.peeked[:n] {
		for _, seg := range s.segs {
			if seg.seq == p.seq {
				seg.acked++
			}
		}
	}
	s.cur = s.peeked[n-1]
	s.peeked = s.peeked[n:]
	s.count -= n
	// Delete fully acknowledged segments before the one appended to.
	for len(s.segs) > 1 && s.segs[0].acked >= s.segs[0].records {
		old := s.segs[0]
		s.bytes -= old.size
		if err := os.Remove(s.segPath(old.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove spool segment", "err", err)
		}
		s.segs = s.segs[1:]
		s.cur = spoolPos{seq: s.segs[0].seq}
	}
	// Everything sent: start the last segment over, so the spool does not
	// keep sent records on disk.
	if s.count == 0 && len(s.segs) == 1 && s.segs[0].size > 0 {
		if err := s.w.Truncate(0); err != nil {
			return fmt.Errorf("reset spool: %w", err)
		}
		s.bytes -= s.segs[0].size
		s.segs[0].size, s.segs[0].records, s.segs[0].acked = 0, 0, 0
		s.cur = spoolPos{seq: s.segs[0].seq}
		s.peeked = s.peeked[:0]
	}
	return nil
}

// appendFrame appends rec as a framed record.
func appendFrame(dst []byte, rec *SpoolRecord) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst = appendRecord(dst, rec)
	payload := dst[start+frameHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

// appendRecord appends a record's payload: version, labels, timestamp and
// the packed sample.
func appendRecord(dst []byte, rec *SpoolRecord) []byte {
	dst = append(dst, spoolVersion)
	dst = appendString(dst, rec.Labels.Node)
	dst = appendString(dst, rec.Labels.RunID)
	dst = binary.AppendVarint(dst, int64(rec.Labels.NodeRank))
	dst = binary.AppendUvarint(dst, uint64(max(rec.Labels.NumNodes, 0)))
	dst = binary.AppendVarint(dst, rec.Sample.TimestampMs)
	return AppendSample(dst, &rec.Sample)
}

// DecodeSpoolRecord decodes a record payload (without its frame).
func DecodeSpoolRecord(b []byte, rec *SpoolRecord) error {
	d := decoder{b: b}
	if v := d.byte(); v != spoolVersion {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("%w: unknown spool record version %d", ErrCorrupt, v)
	}
	d.string(&rec.Labels.Node)
	d.string(&rec.Labels.RunID)
	rank, n := binary.Varint(d.b)
	if n <= 0 || rank < -1 || rank > 1<<31 {
		return fmt.Errorf("%w: node rank", ErrCorrupt)
	}
	d.b = d.b[n:]
	rec.Labels.NodeRank = int(rank)
	rec.Labels.NumNodes = d.count(1 << 31)
	ts, n := binary.Varint(d.b)
	if d.err != nil || n <= 0 {
		return fmt.Errorf("%w: timestamp", ErrCorrupt)
	}
	rec.Sample.TimestampMs = ts
	return DecodeSample(d.b[n:], &rec.Sample)
}

// readFrame reads one framed record into rec and returns its size on disk.
// It returns io.EOF at a clean end and another error for a torn or
// damaged frame.
func readFrame(r *bufio.Reader, buf *[]byte, rec *SpoolRecord) (int64, error) {
	var hdr [frameHeader]byte
	n, err := io.ReadFull(r, hdr[:])
	if err == io.EOF {
		return 0, io.EOF
	}
	if err != nil {
		return 0, fmt.Errorf("torn record header (%d bytes)", n)
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size == 0 || size > maxRecordBytes {
		return 0, fmt.Errorf("record length %d out of range", size)
	}
	if cap(*buf) < int(size) {
		*buf = make([]byte, size)
	}
	b := (*buf)[:size]
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, errors.New("torn record")
	}
	if crc32.Checksum(b, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return 0, errors.New("checksum mismatch")
	}
	if err := DecodeSpoolRecord(b, rec); err != nil {
		return 0, err
	}
	return int64(frameHeader) + int64(size), nil
}
