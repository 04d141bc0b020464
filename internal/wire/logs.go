package wire

import (
	"math"
	"strconv"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// The run-log API (/api/2.0/sextant/logs/...; docs/run.md): the launcher
// appends what it captures, readers page, search and tail. Appends and
// pages are megabytes of text, so both are encoded by hand and the append
// is also decoded by hand (logs_decode.go).

// LogAppendRequest is the body of POST /api/2.0/sextant/logs/append.
type LogAppendRequest struct {
	RunID     string      `json:"run_id"`
	Source    string      `json:"source"`
	FirstSeq  Int         `json:"first_seq"`
	Node      Int         `json:"node"`
	LocalRank Int         `json:"local_rank"`
	Lines     []LogLineIn `json:"lines"`
}

// LogLineIn is a line as launchers send it. Node and local_rank
// default to the batch's.
type LogLineIn struct {
	Timestamp Int    `json:"timestamp"`
	Stream    string `json:"stream"`
	Text      string `json:"text"`
	Node      Int    `json:"node"`
	LocalRank Int    `json:"local_rank"`
	Partial   bool   `json:"partial"`
	CR        bool   `json:"cr"`
}

// Batch returns the request as a runlogs.Batch, or errs.Invalid naming
// the first field that is missing or out of range.
func (req *LogAppendRequest) Batch() (runlogs.Batch, error) {
	if !req.FirstSeq.Set && len(req.Lines) > 0 {
		return runlogs.Batch{}, invalid("Missing value for required parameter 'first_seq'")
	}
	node, rank := int64(0), int64(runlogs.UnknownRank)
	if req.Node.Set {
		node = req.Node.V
	}
	if req.LocalRank.Set {
		rank = req.LocalRank.V
	}
	b := runlogs.Batch{Source: req.Source, FirstSeq: req.FirstSeq.V, Lines: make([]runlogs.Line, len(req.Lines))}
	for i := range req.Lines {
		in := &req.Lines[i]
		st, ok := runlogs.ParseStream(in.Stream)
		if !ok {
			return runlogs.Batch{}, invalid("Invalid value '%s' for parameter 'lines[%d].stream': expected stdout or stderr", errs.Truncate(in.Stream, 20), i)
		}
		n, k := node, rank
		if in.Node.Set {
			n = in.Node.V
		}
		if in.LocalRank.Set {
			k = in.LocalRank.V
		}
		if n < 0 || n > math.MaxInt32 || k < runlogs.UnknownRank || k > math.MaxInt32 {
			return runlogs.Batch{}, invalid("lines[%d]: node must be 0 or more and local_rank -1 or more (got %d and %d)", i, n, k)
		}
		if !in.Timestamp.Set {
			return runlogs.Batch{}, invalid("Missing value for required parameter 'lines[%d].timestamp'", i)
		}
		l := runlogs.Line{TimestampMs: in.Timestamp.V, Stream: st, Node: int32(n), LocalRank: int32(k), Text: in.Text}
		if in.Partial {
			l.Flags |= runlogs.FlagPartial
		}
		if in.CR {
			l.Flags |= runlogs.FlagCR
		}
		b.Lines[i] = l
	}
	return b, nil
}

// AppendLogPage appends the JSON of a page of lines. Pages of log lines are
// built by hand: a 10,000-line page is a few megabytes of strings.
func AppendLogPage(dst []byte, p *runlogs.Page) []byte {
	n := 64
	for i := range p.Lines {
		n += len(p.Lines[i].Text) + 110
	}
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	dst = append(dst, `{"lines":[`...)
	for i := range p.Lines {
		l := &p.Lines[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"line":`...)
		dst = strconv.AppendInt(dst, l.Number, 10)
		dst = append(dst, `,"timestamp":`...)
		dst = strconv.AppendInt(dst, l.TimestampMs, 10)
		dst = append(dst, `,"stream":"`...)
		dst = append(dst, l.Stream.String()...)
		dst = append(dst, `","node":`...)
		dst = strconv.AppendInt(dst, int64(l.Node), 10)
		dst = append(dst, `,"local_rank":`...)
		dst = strconv.AppendInt(dst, int64(l.LocalRank), 10)
		if l.Flags&runlogs.FlagPartial != 0 {
			dst = append(dst, `,"partial":true`...)
		}
		if l.Flags&runlogs.FlagCR != 0 {
			dst = append(dst, `,"cr":true`...)
		}
		dst = append(dst, `,"text":`...)
		dst = AppendString(dst, l.Text)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"next_line":`...)
	dst = strconv.AppendInt(dst, p.NextLine, 10)
	dst = append(dst, `,"total_lines":`...)
	dst = strconv.AppendInt(dst, p.Head.Lines(), 10)
	dst = append(dst, `,"run_status":"`...)
	dst = append(dst, p.Head.RunStatus.String()...)
	return append(dst, `"}`...)
}

// AppendLogAppend appends the JSON body of an append request for b to
// dst. Node and local rank are sent once for the batch (those of its
// first line) and per line only where they differ.
func AppendLogAppend(dst []byte, runID string, b runlogs.Batch) []byte {
	var node, rank int32 = 0, runlogs.UnknownRank
	if len(b.Lines) > 0 {
		node, rank = b.Lines[0].Node, b.Lines[0].LocalRank
	}
	n := 128
	for i := range b.Lines {
		n += len(b.Lines[i].Text) + 64
	}
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	dst = append(dst, `{"run_id":`...)
	dst = AppendString(dst, runID)
	dst = append(dst, `,"source":`...)
	dst = AppendString(dst, b.Source)
	dst = append(dst, `,"first_seq":`...)
	dst = strconv.AppendInt(dst, b.FirstSeq, 10)
	dst = append(dst, `,"node":`...)
	dst = strconv.AppendInt(dst, int64(node), 10)
	dst = append(dst, `,"local_rank":`...)
	dst = strconv.AppendInt(dst, int64(rank), 10)
	dst = append(dst, `,"lines":[`...)
	for i := range b.Lines {
		l := &b.Lines[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"timestamp":`...)
		dst = strconv.AppendInt(dst, l.TimestampMs, 10)
		dst = append(dst, `,"stream":"`...)
		dst = append(dst, l.Stream.String()...)
		dst = append(dst, '"')
		if l.Node != node {
			dst = append(dst, `,"node":`...)
			dst = strconv.AppendInt(dst, int64(l.Node), 10)
		}
		if l.LocalRank != rank {
			dst = append(dst, `,"local_rank":`...)
			dst = strconv.AppendInt(dst, int64(l.LocalRank), 10)
		}
		if l.Flags&runlogs.FlagPartial != 0 {
			dst = append(dst, `,"partial":true`...)
		}
		if l.Flags&runlogs.FlagCR != 0 {
			dst = append(dst, `,"cr":true`...)
		}
		dst = append(dst, `,"text":`...)
		dst = AppendString(dst, l.Text)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// LogAppendResult is the answer to an append.
type LogAppendResult struct {
	FirstLine  int64 `json:"first_line"`
	Stored     int   `json:"stored"`
	Duplicates int   `json:"duplicates"`
	NextSeq    int64 `json:"next_seq"`
}

// AppendLogAppendResult appends the answer to an append.
func AppendLogAppendResult(dst []byte, res runlogs.AppendResult) []byte {
	dst = append(dst, `{"first_line":`...)
	dst = strconv.AppendInt(dst, res.FirstLine, 10)
	dst = append(dst, `,"stored":`...)
	dst = strconv.AppendInt(dst, int64(res.Stored), 10)
	dst = append(dst, `,"duplicates":`...)
	dst = strconv.AppendInt(dst, int64(res.Duplicates), 10)
	dst = append(dst, `,"next_seq":`...)
	dst = strconv.AppendInt(dst, res.NextSeq, 10)
	return append(dst, '}')
}

// LogPage is the answer of get, search and tail, as AppendLogPage writes
// it; total_lines counts the run's lines.
type LogPage struct {
	Lines      []LogLine `json:"lines"`
	NextLine   int64     `json:"next_line"`
	TotalLines int64     `json:"total_lines"`
	RunStatus  string    `json:"run_status"`
}

// LogLine is a line of a LogPage.
type LogLine struct {
	Line      int64  `json:"line"`
	Timestamp int64  `json:"timestamp"`
	Stream    string `json:"stream"`
	Node      int32  `json:"node"`
	LocalRank int32  `json:"local_rank"`
	Partial   bool   `json:"partial,omitempty"`
	CR        bool   `json:"cr,omitempty"`
	Text      string `json:"text"`
}

// Domain returns the page as runlogs has it. An unknown stream or run
// status reads as the zero value.
func (w *LogPage) Domain() runlogs.Page {
	st, _ := tracking.ParseRunStatus(w.RunStatus)
	p := runlogs.Page{NextLine: w.NextLine, Head: runlogs.Head{NextLine: w.TotalLines + 1, RunStatus: st}, Lines: make([]runlogs.Line, len(w.Lines))}
	for i, l := range w.Lines {
		s, _ := runlogs.ParseStream(l.Stream)
		out := runlogs.Line{Number: l.Line, TimestampMs: l.Timestamp, Stream: s, Node: l.Node, LocalRank: l.LocalRank, Text: l.Text}
		if l.Partial {
			out.Flags |= runlogs.FlagPartial
		}
		if l.CR {
			out.Flags |= runlogs.FlagCR
		}
		p.Lines[i] = out
	}
	return p
}
