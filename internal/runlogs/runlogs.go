// Package runlogs holds the run-log domain: the line record that
// `sextant run` captures from a training job's standard output and error,
// how raw output bytes are cut into records (Splitter), the compressed
// chunk encoding records are stored in (docs/format/runlog-chunk.md), the
// limits, the Store interface that storage implements, and the Service
// that validates appends and serves range reads, searches and live tails.
//
// A run's log is one sequence of lines numbered 1, 2, 3, ... across every
// node, rank and resume of the run. Launchers append batches; each batch
// comes from one source (one launcher process) and carries the sequence
// number of its first line, so that a batch sent again after a lost answer
// is recognised and stored once.
package runlogs

import (
	"context"

	"github.com/sextant/sextant/internal/tracking"
)

// Stream says which output stream a line was written to. The numbers are
// persisted.
type Stream uint8

// The streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// String returns "stdout" or "stderr".
func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "unknown"
}

// ParseStream parses "stdout" or "stderr".
func ParseStream(name string) (Stream, bool) {
	switch name {
	case "stdout":
		return Stdout, true
	case "stderr":
		return Stderr, true
	}
	return 0, false
}

// Flags qualify a line record. The bits are persisted.
type Flags uint8

// The flags.
const (
	// FlagPartial says that the record does not end its line: the line
	// was longer than the line limit and continues in the next record of
	// the same source and stream, or it was written without an end and
	// recorded before the end arrived.
	FlagPartial Flags = 1
	// FlagCR says that the record was ended by a carriage return alone
	// ("\r", as progress bars write), so a terminal would overwrite it
	// with the next record of its stream.
	FlagCR Flags = 2

	flagsKnown = FlagPartial | FlagCR
)

// UnknownRank is the LocalRank of a line whose local rank is not known.
const UnknownRank = -1

// Line is one record of a run's log.
type Line struct {
	// Number is the line's position in the run's log, from 1. Stores set
	// it; it is ignored in appended batches.
	Number int64
	// TimestampMs is when the launcher read the line, in milliseconds
	// since the Unix epoch.
	TimestampMs int64
	Stream      Stream
	// Node is the node rank of the launcher that captured the line (0 on
	// a single machine).
	Node int32
	// LocalRank is the rank of the process on its node, or UnknownRank.
	LocalRank int32
	Flags     Flags
	// Text is the line without its terminator: valid UTF-8, at most
	// Limits.LineBytes bytes.
	Text string
}

// Terminator returns what ended the line in the original output: "\n",
// "\r" for a carriage-return record, or "" for a partial record.
func (l *Line) Terminator() string {
	switch {
	case l.Flags&FlagPartial != 0:
		return ""
	case l.Flags&FlagCR != 0:
		return "\r"
	}
	return "\n"
}

// Batch is one append request: consecutive lines of one source.
type Batch struct {
	// Source identifies the launcher process that captured the lines;
	// every launcher picks a fresh one (see docs/run.md).
	Source string
	// FirstSeq is the source's sequence number of Lines[0]; line i has
	// sequence FirstSeq+i. A source numbers its lines from 0 without gaps
	// except where it dropped lines, and sends them in order.
	FirstSeq int64
	Lines    []Line
}

// AppendResult says what an append stored.
type AppendResult struct {
	// FirstLine is the number given to the first stored line; 0 when
	// nothing was stored.
	FirstLine int64
	// Stored is the number of lines stored; Duplicates the number skipped
	// because the source had sent them before.
	Stored     int
	Duplicates int
	// NextSeq is the sequence number the server expects next from the
	// source.
	NextSeq int64
}

// Head is the state of a run's log.
type Head struct {
	// NextLine is the number the next stored line will get: lines 1 to
	// NextLine-1 exist.
	NextLine int64
	// Bytes is the total size of the stored texts.
	Bytes int64
	// RunStatus is the status of the run.
	RunStatus tracking.RunStatus
}

// Lines returns the number of stored lines.
func (h Head) Lines() int64 { return h.NextLine - 1 }

// Chunk is a stored chunk of consecutive lines of a run: its metadata and
// its encoded data (see AppendChunk).
type Chunk struct {
	FirstLine int64
	Count     int
	// MinTimestampMs and MaxTimestampMs bound the timestamps of its lines.
	MinTimestampMs int64
	MaxTimestampMs int64
	// Nodes is the set of node ranks of its lines (see NodeBit); Streams
	// the set of streams (see StreamBit).
	Nodes   uint64
	Streams uint8
	// RawBytes is the size of its texts.
	RawBytes int64
	Data     []byte
}

// NodeBit is the bit of node rank n in a node set. Ranks of 63 and above
// share the last bit.
func NodeBit(n int32) uint64 {
	if n < 0 {
		n = 0
	}
	return 1 << min(n, 63)
}

// StreamBit is the bit of a stream in a stream set.
func StreamBit(s Stream) uint8 { return 1 << (s & 7) }

// ChunkQuery selects the chunks of a run's log to read.
type ChunkQuery struct {
	// FromLine is the first line wanted: the chunk that holds it comes
	// first. Values below 1 mean 1.
	FromLine int64
	// MaxChunks caps the chunks returned; at least 1.
	MaxChunks int
	// Nodes and Streams, when not 0, skip chunks that hold no line of
	// these node ranks (NodeBit) or streams (StreamBit).
	Nodes   uint64
	Streams uint8
	// SinceMs, when above 0, skips chunks whose lines are all older.
	SinceMs int64
}

// Store stores run logs. Implementations live in adapter packages
// (internal/sqlstore) and pass the conformance suite in
// internal/runlogs/runlogstest.
//
// Contract, for every method:
//   - A missing run gives errs.NotFound naming the run id. A deleted run's
//     log can be neither appended to (errs.Invalid) nor read (errs.NotFound):
//     deleting a run hides its log, and purging the run removes it.
//   - Each method is atomic and safe for concurrent use; reads see one
//     snapshot of the log.
//   - Returned values are owned by the caller; the store keeps no
//     reference to arguments after returning.
//
// The Store does no validation of line shapes (the Service does); it
// enforces what needs stored state: existence, lifecycle, deduplication
// and the per-run limits given at construction.
type Store interface {
	// AppendLines stores b's lines at the end of the run's log, in order,
	// numbering them from the log's NextLine. A line whose sequence number
	// is below the one the store expects next from b.Source was stored
	// before (a retried request) and is skipped, so a batch sent twice is
	// stored once. Sequence numbers above the expected one (lines the
	// source dropped) are accepted. Breaching Limits.LinesPerRun or
	// BytesPerRun gives errs.LimitExceeded and stores nothing.
	AppendLines(ctx context.Context, runID string, b Batch) (AppendResult, error)
	// ReadChunks returns the log's head and up to q.MaxChunks chunks in
	// line order: the chunk holding q.FromLine (or the first after it)
	// and those that follow, skipping chunks excluded by q's sets. Chunks
	// never overlap and together hold lines 1 to Head.NextLine-1.
	ReadChunks(ctx context.Context, runID string, q ChunkQuery) (Head, []Chunk, error)
	// Spans returns the log's head and where each of its chunks is, in
	// lines and in time, in line order, without their data: what a
	// density of the log over time needs (Service.Density).
	Spans(ctx context.Context, runID string) (Head, []ChunkSpan, error)
}

// ChunkSpan is where a chunk's lines are in the log and in time.
type ChunkSpan struct {
	FirstLine                      int64
	Count                          int
	MinTimestampMs, MaxTimestampMs int64
}

// Matches reports whether q's sets and time bound admit chunk c (its
// position is not checked).
func (q *ChunkQuery) Matches(c *Chunk) bool {
	switch {
	case q.Nodes != 0 && c.Nodes&q.Nodes == 0:
		return false
	case q.Streams != 0 && c.Streams&q.Streams == 0:
		return false
	case q.SinceMs > 0 && c.MaxTimestampMs < q.SinceMs:
		return false
	}
	return true
}
