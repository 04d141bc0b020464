package httpapi

import (
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
	"net/http"

	"github.com/sextant/sextant/internal/runevents"
)

// Run events (/api/2.0/sextant/events/...): checkpoints, GPU health, idle
// and stalled jobs and resumes on a run's time line. Appending needs
// CAN_EDIT on the run's experiment, listing CAN_READ. docs/api.md
// describes the routes; internal/wire/events.go holds their shapes.

const eventsPrefix = "/sextant/events"

func (s *Server) registerEventRoutes() {
	if s.opts.Events == nil {
		return
	}
	for _, p := range []string{"/api/2.0", "/ajax-api/2.0"} {
		s.handle("POST", p+eventsPrefix+"/append", EditExperiment, s.appendEvents)
		s.handle("GET", p+eventsPrefix+"/list", ReadExperiment, s.listEvents)
	}
}

func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req wire.AppendEventsRequest
	if err := wire.Decode(body, &req); err != nil {
		return err
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	evs := make([]runevents.Event, len(req.Events))
	for i := range req.Events {
		if evs[i], err = req.Events[i].Domain(i); err != nil {
			return err
		}
	}
	seqs, err := s.opts.Events.Append(r.Context(), req.RunID, evs)
	if err != nil {
		return err
	}
	return writeJSON(w, wire.AppendEventsResponse{Seqs: seqs})
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	qs, err := parseQuery(r, "run_id", "kind", "after_seq", "from_ms", "to_ms", "open", "limit")
	if err != nil {
		return err
	}
	q := runevents.Query{RunID: qs.str("run_id")}
	if q.Kinds, err = wire.ParseKinds(qs.list("kind")); err != nil {
		return err
	}
	if q.AfterSeq, _, err = qs.int("after_seq"); err != nil {
		return err
	}
	if q.FromMs, _, err = qs.int("from_ms"); err != nil {
		return err
	}
	if q.ToMs, _, err = qs.int("to_ms"); err != nil {
		return err
	}
	limit, _, err := qs.int("limit")
	if err != nil {
		return err
	}
	if limit < 0 || limit > 1<<31 {
		return invalid("limit must be between 1 and %d, got %d", s.opts.Events.Limits().PageEvents, limit)
	}
	q.Limit = int(limit)
	switch qs.str("open") {
	case "", "false":
	case "true":
		q.OpenOnly = true
	default:
		return invalid("Invalid value '%s' for parameter 'open': expected true or false", errs.Truncate(qs.str("open"), 20))
	}
	if err := s.allowRunID(r, q.RunID); err != nil {
		return err
	}
	page, err := s.opts.Events.List(r.Context(), q)
	if err != nil {
		return err
	}
	out := wire.ListEventsResponse{Events: make([]wire.EventJSON, len(page.Events)), NextSeq: page.NextSeq}
	for i := range page.Events {
		out.Events[i] = wire.EventToJSON(&page.Events[i])
	}
	return writeJSON(w, out)
}
