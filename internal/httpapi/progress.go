package httpapi

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/sextant/sextant/internal/progress"
	"github.com/sextant/sextant/internal/wire"
)

// Per-rank progress (/api/2.0/sextant/progress): a training loop's step
// reports, stored as metrics of the run under sextant/progress/rank_<r>/
// (internal/progress), and read back per rank for the run page. Reporting
// needs CAN_EDIT on the run's experiment, reading CAN_READ. docs/run.md
// and docs/api.md describe the routes; internal/wire/progress.go holds
// their shapes.

const progressPrefix = "/sextant/progress"

func (s *Server) registerProgressRoutes() {
	svc := progress.NewService(s.tr, nil)
	for _, p := range []string{"/api/2.0", "/ajax-api/2.0"} {
		s.handle("POST", p+progressPrefix, EditExperiment, func(w http.ResponseWriter, r *http.Request) error { return s.reportProgress(w, r, svc) })
		s.handle("GET", p+progressPrefix, ReadExperiment, func(w http.ResponseWriter, r *http.Request) error { return s.getProgress(w, r, svc) })
	}
}

// progressBodies keeps the buffers of progress request bodies: a thousand
// ranks each send one every few seconds, and a fresh buffer grown to each
// body was a sixth of the server's allocations (so of its GC) under
// `go run ./bench progress`. Nothing of the body outlives the handler:
// the decoder copies the strings it keeps.
var progressBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *Server) reportProgress(w http.ResponseWriter, r *http.Request, svc *progress.Service) error {
	buf := progressBodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= logBatchScratchMax { // a rare huge body is left to the collector
			buf.Reset()
			progressBodies.Put(buf)
		}
	}()
	body, err := s.readBodyInto(w, r, buf, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req wire.ProgressRequest
	if err := wire.DecodeProgress(body, &req); err != nil {
		return err
	}
	if err := s.allowRunID(r, req.RunID); err != nil {
		return err
	}
	b, err := req.Domain()
	if err != nil {
		return err
	}
	if err := svc.Ingest(r.Context(), b); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) getProgress(w http.ResponseWriter, r *http.Request, svc *progress.Service) error {
	qs, err := parseQuery(r, "run_id", "max_points")
	if err != nil {
		return err
	}
	n, _, err := qs.int("max_points")
	if err != nil {
		return err
	}
	if n < 0 || n > progress.MaxSeriesPoints {
		return invalid("max_points must be between 2 and %d, got %d", progress.MaxSeriesPoints, n)
	}
	runID := qs.str("run_id")
	if err := s.allowRunID(r, runID); err != nil {
		return err
	}
	ranks, err := svc.Series(r.Context(), runID, int(n))
	if err != nil {
		return err
	}
	return writeJSON(w, wire.ProgressToJSON(ranks))
}
