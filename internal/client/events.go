package client

import (
	"context"
	"github.com/sextant/sextant/internal/wire"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
)

// The run-event calls (/api/2.0/sextant/events/...; docs/api.md). The wire
// shapes are internal/wire's (events.go).

const eventsPath = "/api/2.0/sextant/events"

// AppendEvents stores events on a run and returns the seq each got.
// Events with keys replace the run's events with the same keys, so sending
// them again after a lost answer is harmless.
func (c *Client) AppendEvents(ctx context.Context, runID string, evs []runevents.Event) ([]int64, error) {
	req := wire.AppendEventsRequest{RunID: runID, Events: make([]wire.EventJSON, len(evs))}
	for i := range evs {
		req.Events[i] = wire.EventToJSON(&evs[i])
		req.Events[i].Seq = 0
	}
	r, err := jsonRequest("POST", eventsPath+"/append", req)
	if err != nil {
		return nil, err
	}
	var out wire.AppendEventsResponse
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Seqs, nil
}

// ListEvents returns a page of a run's events.
func (c *Client) ListEvents(ctx context.Context, q runevents.Query) (runevents.Page, error) {
	v := url.Values{"run_id": {q.RunID}}
	if len(q.Kinds) > 0 {
		names := make([]string, len(q.Kinds))
		for i, k := range q.Kinds {
			names[i] = k.String()
		}
		v.Set("kind", strings.Join(names, ","))
	}
	set := func(k string, n int64) {
		if n > 0 {
			v.Set(k, strconv.FormatInt(n, 10))
		}
	}
	set("after_seq", q.AfterSeq)
	set("from_ms", q.FromMs)
	set("to_ms", q.ToMs)
	set("limit", int64(q.Limit))
	if q.OpenOnly {
		v.Set("open", "true")
	}
	var out wire.ListEventsResponse
	if err := c.call(ctx, &request{method: "GET", path: eventsPath + "/list", query: v}, &out); err != nil {
		return runevents.Page{}, err
	}
	p := runevents.Page{NextSeq: out.NextSeq, Events: make([]runevents.Event, len(out.Events))}
	for i := range out.Events {
		ev, err := out.Events[i].Domain(i)
		if err != nil {
			return runevents.Page{}, err
		}
		ev.Seq = out.Events[i].Seq
		p.Events[i] = ev
	}
	return p, nil
}

// AllEvents returns every event q selects, following pages.
func (c *Client) AllEvents(ctx context.Context, q runevents.Query) ([]runevents.Event, error) {
	return runevents.ListAll(ctx, c.ListEvents, q)
}

// CheckpointComplete reports whether the checkpoint directory at path
// (/Volumes/...) is complete: its .metadata exists (VolumeWriter uploads it
// last).
func (c *Client) CheckpointComplete(ctx context.Context, path string) (bool, error) {
	if !strings.HasPrefix(path, "/Volumes/") {
		return false, errs.Errorf(errs.Invalid, "checkpoint path %q is not a /Volumes/... path", path)
	}
	segs := strings.Split(strings.Trim(path, "/")+"/.metadata", "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	r := &request{method: "HEAD", path: "/api/2.0/fs/files/" + strings.Join(segs, "/"), raw: func(*http.Response) error { return nil }}
	err := c.call(ctx, r, nil)
	switch {
	case err == nil:
		return true, nil
	case errs.Is(err, errs.NotFound):
		return false, nil
	}
	return false, err
}
