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

// progressScratch is what a progress request needs and gives back when it
// ends: the body's buffer, the decoded request (its reports' arrays, which
// wire.DecodeProgress reuses) and the domain reports. A thousand ranks
// each send one every few seconds, and fresh ones for each were most of
// the server's allocations (so of its GC) under `go run ./bench progress`.
// Nothing of them outlives the handler: the decoder copies the strings it
// keeps, and the progress service neither keeps nor changes the reports.
type progressScratch struct {
	body    bytes.Buffer
	req     wire.ProgressRequest
	reports []progress.Report
}

var progressScratches = sync.Pool{New: func() any { return new(progressScratch) }}

func (s *Server) reportProgress(w http.ResponseWriter, r *http.Request, svc *progress.Service) error {
	sc := progressScratches.Get().(*progressScratch)
	defer func() {
		// A rare huge request (too many reports: refused) is left to the
		// collector.
		if sc.body.Cap() <= logBatchScratchMax && cap(sc.reports) <= 1024 && cap(sc.req.Reports) <= 1024 {
			sc.body.Reset()
			progressScratches.Put(sc)
		}
	}()
	body, err := s.readBodyInto(w, r, &sc.body, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := wire.DecodeProgress(body, &sc.req); err != nil {
		return err
	}
	if err := s.allowRunID(r, sc.req.RunID); err != nil {
		return err
	}
	b, err := sc.req.Domain(sc.reports)
	sc.reports = b.Reports
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
