package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/wire"
)

// Run logs (/api/2.0/sextant/logs/...): launchers append the output they
// capture; readers get line ranges, search, and follow a run live with a
// long poll or server-sent events. docs/run.md describes the API.

const logsPrefix = "/sextant/logs"

func (s *Server) registerLogRoutes() {
	if s.opts.RunLogs == nil {
		return // the server was built without run logs
	}
	for _, p := range []string{"/api/2.0", "/ajax-api/2.0"} {
		s.handle("POST", p+logsPrefix+"/append", EditExperiment, s.appendLogs)
		s.handle("GET", p+logsPrefix+"/get", ReadExperiment, s.getLogs)
		s.handle("GET", p+logsPrefix+"/search", ReadExperiment, s.searchLogs)
		s.handle("GET", p+logsPrefix+"/tail", ReadExperiment, s.tailLogs)
		s.handle("GET", p+logsPrefix+"/density", ReadExperiment, s.logDensity)
	}
}

func (s *Server) appendLogs(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req wire.LogAppendRequest
	if err := wire.DecodeLogAppend(body, &req); err != nil {
		return err
	}
	if err := s.allowRun(r, req.RunID); err != nil {
		return err
	}
	b, err := req.Batch()
	if err != nil {
		return err
	}
	res, err := s.opts.RunLogs.Append(r.Context(), req.RunID, b)
	if err != nil {
		return err
	}
	return writeRaw(w, wire.AppendLogAppendResult(make([]byte, 0, 96), res))
}

// logQuery parses the parameters shared by get, search and tail.
func logQuery(r *http.Request, extra ...string) (runlogs.Query, query, error) {
	known := append([]string{"run_id", "limit", "node", "stream", "since_ms", "q", "regex"}, extra...)
	qs, err := parseQuery(r, known...)
	if err != nil {
		return runlogs.Query{}, qs, err
	}
	q := runlogs.Query{RunID: qs.str("run_id"), Contains: qs.str("q"), Regexp: qs.str("regex")}
	if q.RunID == "" {
		return q, qs, invalid("Missing value for required parameter 'run_id'")
	}
	limit, _, err := qs.int("limit")
	if err != nil {
		return q, qs, err
	}
	if limit < 0 || limit > math.MaxInt32 {
		return q, qs, invalid("limit must be between 1 and %d, got %d", runlogs.DefaultLimits().PageLines, limit)
	}
	q.Limit = int(limit)
	if v, ok, err := qs.int("node"); err != nil {
		return q, qs, err
	} else if ok {
		if v < 0 || v > math.MaxInt32 {
			return q, qs, invalid("node must be 0 or more, got %d", v)
		}
		n := int32(v)
		q.Node = &n
	}
	if st := qs.str("stream"); st != "" {
		var ok bool
		if q.Stream, ok = runlogs.ParseStream(st); !ok {
			return q, qs, invalid("Invalid value '%s' for parameter 'stream': expected stdout or stderr", errs.Truncate(st, 20))
		}
	}
	if q.SinceMs, _, err = qs.int("since_ms"); err != nil {
		return q, qs, err
	}
	return q, qs, nil
}

func (s *Server) getLogs(w http.ResponseWriter, r *http.Request) error {
	q, qs, err := logQuery(r, "from_line")
	if err != nil {
		return err
	}
	if q.FromLine, _, err = qs.int("from_line"); err != nil {
		return err
	}
	if err := s.allowRun(r, q.RunID); err != nil {
		return err
	}
	page, err := s.opts.RunLogs.Read(r.Context(), q)
	if err != nil {
		return err
	}
	return writeRaw(w, wire.AppendLogPage(nil, &page))
}

func (s *Server) searchLogs(w http.ResponseWriter, r *http.Request) error {
	q, qs, err := logQuery(r, "from_line")
	if err != nil {
		return err
	}
	if q.Contains == "" && q.Regexp == "" {
		return invalid("search needs q (a substring) or regex (a regular expression)")
	}
	if q.FromLine, _, err = qs.int("from_line"); err != nil {
		return err
	}
	if !qs.has("limit") {
		q.Limit = 100
	}
	if err := s.allowRun(r, q.RunID); err != nil {
		return err
	}
	page, err := s.opts.RunLogs.Read(r.Context(), q)
	if err != nil {
		return err
	}
	return writeRaw(w, wire.AppendLogPage(nil, &page))
}

// logDensity answers how many lines the log has over time, in buckets,
// with the first line of each (the run page's time line).
func (s *Server) logDensity(w http.ResponseWriter, r *http.Request) error {
	qs, err := parseQuery(r, "run_id", "from_ms", "to_ms", "buckets")
	if err != nil {
		return err
	}
	runID := qs.str("run_id")
	from, _, err := qs.int("from_ms")
	if err != nil {
		return err
	}
	to, _, err := qs.int("to_ms")
	if err != nil {
		return err
	}
	n, _, err := qs.int("buckets")
	if err != nil {
		return err
	}
	if n < 0 || n > runlogs.MaxDensityBuckets {
		return invalid("buckets must be between 1 and %d, got %d", runlogs.MaxDensityBuckets, n)
	}
	if err := s.allowRunID(r, runID); err != nil {
		return err
	}
	d, err := s.opts.RunLogs.Density(r.Context(), runID, from, to, int(n))
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"from_ms": d.FromMs, "to_ms": d.ToMs, "bucket_ms": d.BucketMs, "lines": d.Lines, "first_lines": d.FirstLine, "total_lines": d.TotalLines})
}

// tailLogs answers with the lines after after_line, waiting up to wait_ms
// (default and maximum: the service's MaxWait, 25 s) for the first one.
// With "Accept: text/event-stream" it streams server-sent events instead
// until the run ends or the client leaves (Last-Event-ID resumes).
func (s *Server) tailLogs(w http.ResponseWriter, r *http.Request) error {
	q, qs, err := logQuery(r, "after_line", "wait_ms")
	if err != nil {
		return err
	}
	after, _, err := qs.int("after_line")
	if err != nil {
		return err
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if v, err := strconv.ParseInt(id, 10, 64); err == nil && v > after {
			after = v
		}
	}
	if after < 0 || after == math.MaxInt64 {
		return invalid("after_line must be 0 or more, got %d", after)
	}
	q.FromLine = after + 1
	logs := s.opts.RunLogs
	wait := logs.MaxWait()
	if v, ok, err := qs.int("wait_ms"); err != nil {
		return err
	} else if ok {
		if v < 0 {
			return invalid("wait_ms must be 0 or more, got %d", v)
		}
		wait = min(time.Duration(min(v, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond, wait)
	}
	if err := s.allowRun(r, q.RunID); err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return s.streamLogs(w, r, q)
	}
	page, err := logs.Tail(r.Context(), q, wait)
	if err != nil {
		return err
	}
	return writeRaw(w, wire.AppendLogPage(nil, &page))
}

// streamLogs serves a tail as server-sent events: an event "lines" per
// page (its id is the last line considered, so that a reconnecting client
// resumes with Last-Event-ID), a comment as keep-alive when a wait ends
// empty, and an event "end" once the run has ended and everything was
// sent.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request, q runlogs.Query) error {
	logs := s.opts.RunLogs
	rc := http.NewResponseController(w)
	started := false
	var buf []byte
	for {
		page, err := logs.Tail(r.Context(), q, logs.MaxWait())
		if err != nil {
			if !started {
				return err
			}
			// Headers are out: end the stream so the client sees a cut.
			panic(http.ErrAbortHandler)
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		buf = buf[:0]
		switch {
		case len(page.Lines) > 0 || page.NextLine > q.FromLine:
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, page.NextLine-1, 10)
			buf = append(buf, "\nevent: lines\ndata: "...)
			buf = wire.AppendLogPage(buf, &page)
			buf = append(buf, "\n\n"...)
		default:
			buf = append(buf, ": keep-alive\n\n"...)
		}
		ended := page.Head.RunStatus.Terminal() && page.Done()
		if ended {
			buf = append(buf, "event: end\ndata: {}\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			return nil // the client left
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-logs.Done():
			return nil
		case <-r.Context().Done():
			return nil
		default:
		}
		if ended {
			return nil
		}
		q.FromLine = page.NextLine
	}
}
