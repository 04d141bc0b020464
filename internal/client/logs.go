package client

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// The run-log calls (/api/2.0/sextant/logs/...; docs/run.md).

const logsPath = "/api/2.0/sextant/logs"

// AppendLogs sends one batch of a run's log. Sending the same batch again
// (after a lost answer) is safe: the server stores each line once.
func (c *Client) AppendLogs(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error) {
	body := AppendLogsBody(nil, runID, b)
	r := &request{method: "POST", path: logsPath + "/append", body: bytes.NewReader(body), size: int64(len(body)), ctype: "application/json"}
	var out struct {
		FirstLine  int64 `json:"first_line"`
		Stored     int   `json:"stored"`
		Duplicates int   `json:"duplicates"`
		NextSeq    int64 `json:"next_seq"`
	}
	if err := c.call(ctx, r, &out); err != nil {
		return runlogs.AppendResult{}, err
	}
	return runlogs.AppendResult(out), nil
}

// AppendLogsBody appends the JSON body of an append request to dst. Node
// and local rank are sent once for the batch (those of its first line)
// and per line only where they differ.
func AppendLogsBody(dst []byte, runID string, b runlogs.Batch) []byte {
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
	dst = appendJSONString(dst, runID)
	dst = append(dst, `,"source":`...)
	dst = appendJSONString(dst, b.Source)
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
		dst = appendJSONString(dst, l.Text)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD (texts from the Splitter are valid already).
func appendJSONString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip the bytes that stand for themselves, the usual case, eight
		// at a time while none of them needs a look.
		for i+8 <= len(s) && plainWord(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
		}
		for i < len(s) && jsonSafe[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plainWord reports whether none of the eight bytes of w is a control
// character, '"', '\\' or a non-ASCII byte.
func plainWord(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	hasLess := func(x uint64, n uint64) uint64 { return (x - lo*n) & ^x & hi }
	hasZero := func(x uint64) uint64 { return (x - lo) & ^x & hi }
	return (w&hi)|hasLess(w, 0x20)|hasZero(w^(lo*'"'))|hasZero(w^(lo*'\\')) == 0
}

// jsonSafe marks the ASCII bytes that go into a JSON string as they are.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

type wireLogPage struct {
	Lines []struct {
		Line      int64  `json:"line"`
		Timestamp int64  `json:"timestamp"`
		Stream    string `json:"stream"`
		Node      int32  `json:"node"`
		LocalRank int32  `json:"local_rank"`
		Partial   bool   `json:"partial"`
		CR        bool   `json:"cr"`
		Text      string `json:"text"`
	} `json:"lines"`
	NextLine   int64  `json:"next_line"`
	TotalLines int64  `json:"total_lines"`
	RunStatus  string `json:"run_status"`
}

func (w *wireLogPage) domain() runlogs.Page {
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

func logValues(q runlogs.Query) url.Values {
	v := url.Values{"run_id": {q.RunID}}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Node != nil {
		v.Set("node", itoa(int64(*q.Node)))
	}
	if q.Stream != 0 {
		v.Set("stream", q.Stream.String())
	}
	if q.SinceMs > 0 {
		v.Set("since_ms", itoa(q.SinceMs))
	}
	if q.Contains != "" {
		v.Set("q", q.Contains)
	}
	if q.Regexp != "" {
		v.Set("regex", q.Regexp)
	}
	return v
}

// ReadLogs returns a page of a run's log from q.FromLine on; with
// q.Contains or q.Regexp set it searches.
func (c *Client) ReadLogs(ctx context.Context, q runlogs.Query) (runlogs.Page, error) {
	v := logValues(q)
	if q.FromLine > 0 {
		v.Set("from_line", itoa(q.FromLine))
	}
	path := logsPath + "/get"
	if q.Contains != "" || q.Regexp != "" {
		path = logsPath + "/search"
	}
	var out wireLogPage
	if err := c.call(ctx, &request{method: "GET", path: path, query: v}, &out); err != nil {
		return runlogs.Page{}, err
	}
	return out.domain(), nil
}

// TailLogs returns the lines from q.FromLine on, waiting up to wait on the
// server for the first one (a long poll).
func (c *Client) TailLogs(ctx context.Context, q runlogs.Query, wait time.Duration) (runlogs.Page, error) {
	v := logValues(q)
	v.Set("after_line", itoa(max(q.FromLine, 1)-1))
	v.Set("wait_ms", itoa(wait.Milliseconds()))
	var out wireLogPage
	if err := c.call(ctx, &request{method: "GET", path: logsPath + "/tail", query: v, wait: wait}, &out); err != nil {
		return runlogs.Page{}, err
	}
	return out.domain(), nil
}
