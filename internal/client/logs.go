package client

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/wire"
)

// The run-log calls (/api/2.0/sextant/logs/...; docs/run.md).

const logsPath = "/api/2.0/sextant/logs"

// AppendLogs sends one batch of a run's log. Sending the same batch again
// (after a lost answer) is safe: the server stores each line once.
func (c *Client) AppendLogs(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error) {
	body := wire.AppendLogAppend(nil, runID, b)
	r := &request{method: "POST", path: logsPath + "/append", body: bytes.NewReader(body), size: int64(len(body)), ctype: "application/json"}
	var out wire.LogAppendResult
	if err := c.call(ctx, r, &out); err != nil {
		return runlogs.AppendResult{}, err
	}
	return runlogs.AppendResult(out), nil
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
	var out wire.LogPage
	if err := c.call(ctx, &request{method: "GET", path: path, query: v}, &out); err != nil {
		return runlogs.Page{}, err
	}
	return out.Domain(), nil
}

// TailLogs returns the lines from q.FromLine on, waiting up to wait on the
// server for the first one (a long poll).
func (c *Client) TailLogs(ctx context.Context, q runlogs.Query, wait time.Duration) (runlogs.Page, error) {
	v := logValues(q)
	v.Set("after_line", itoa(max(q.FromLine, 1)-1))
	v.Set("wait_ms", itoa(wait.Milliseconds()))
	var out wire.LogPage
	if err := c.call(ctx, &request{method: "GET", path: logsPath + "/tail", query: v, wait: wait}, &out); err != nil {
		return runlogs.Page{}, err
	}
	return out.Domain(), nil
}
