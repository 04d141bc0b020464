package httpapi

import (
	"net/http"

	"runtime"
	"strconv"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"

	"github.com/sextant/sextant/internal/tracking"
)

func (s *Server) registerMetricRoutes() {
	s.handle("GET", "/mlflow/metrics/get-history", ReadExperiment, s.getMetricHistory)
	s.handle("GET", "/mlflow/metrics/get-history-bulk-interval", ReadExperiment, s.getMetricHistoryBulkInterval)
	// The older MLflow UI's bulk endpoint (ajax only upstream).
	s.handle("GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk", ReadExperiment, s.getMetricHistoryBulk)
}

func (s *Server) getMetricHistory(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_id", "run_uuid", "metric_key", "page_token", "max_results")
	if err != nil {
		return err
	}
	max, _, err := q.int("max_results")
	if err != nil {
		return err
	}
	id, err := runID(q.str("run_id"), q.str("run_uuid"))
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	page, err := s.tr.MetricHistory(r.Context(), id, q.str("metric_key"), clampInt(max), q.str("page_token"))
	if err != nil {
		return err
	}
	parts := encodePoints(page.Key, page.Points, "")
	tail := []byte{']'}
	if page.NextPageToken != "" {
		tail = append(tail, `,"next_page_token":`...)
		tail = wire.AppendString(tail, page.NextPageToken)
	}
	tail = append(tail, '}')
	return writeParts(w, append(append([][]byte{[]byte(`{"metrics":[`)}, parts...), tail))
}

// encodePoints encodes points as comma-separated JSON objects, in parts
// that together form the list. Large lists are encoded by several
// goroutines at once: float formatting dominates a 200,000-point history,
// and the cores are otherwise idle while one request waits for it.
func encodePoints(key string, pts []tracking.HistoryPoint, runID string) [][]byte {
	const perPart = 16384
	n := (len(pts) + perPart - 1) / perPart
	if n <= 1 {
		return [][]byte{appendPoints(nil, key, pts, runID, true)}
	}
	parts := make([][]byte, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			part := pts[i*perPart : min((i+1)*perPart, len(pts))]
			parts[i] = appendPoints(make([]byte, 0, len(part)*(96+len(key))), key, part, runID, i == 0)
		})
	}
	wg.Wait()
	return parts
}

func appendPoints(buf []byte, key string, pts []tracking.HistoryPoint, runID string, first bool) []byte {
	for i := range pts {
		if i > 0 || !first {
			buf = append(buf, ',')
		}
		buf = wire.AppendHistoryPoint(buf, key, &pts[i], runID)
	}
	return buf
}

// writeParts writes a 200 JSON response made of parts.
func writeParts(w http.ResponseWriter, parts [][]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return nil // the client left; nothing more to do
		}
	}
	return nil
}

// getMetricHistoryBulkInterval serves the MLflow UI's sampled history. The
// extra parameter sampling=minmax selects Sextant's spike-preserving
// downsampling (per-bucket minimum and maximum) instead of MLflow's evenly
// spaced steps.
func (s *Server) getMetricHistoryBulkInterval(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_ids", "metric_key", "start_step", "end_step", "max_results", "sampling")
	if err != nil {
		return err
	}
	bq := tracking.BulkIntervalQuery{RunIDs: q.list("run_ids"), Key: q.str("metric_key")}
	if v, ok, err := q.int("start_step"); err != nil {
		return err
	} else if ok {
		bq.StartStep = &v
	}
	if v, ok, err := q.int("end_step"); err != nil {
		return err
	} else if ok {
		bq.EndStep = &v
	}
	max, set, err := q.int("max_results")
	if err != nil {
		return err
	}
	if set && max <= 0 {
		return invalid("max_results must be between 1 and %d.", s.tr.Limits().BulkIntervalMaxResults)
	}
	bq.MaxResults = clampInt(max)
	switch q.str("sampling") {
	case "", "steps":
	case "minmax":
		bq.Mode = tracking.SampleMinMax
	default:
		return invalid("Invalid value '%s' for parameter 'sampling': expected steps or minmax", errs.Truncate(q.str("sampling"), 40))
	}
	if len(bq.RunIDs) > s.tr.Limits().BulkIntervalMaxRuns {
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: GetMetricHistoryBulkInterval request must specify at most %d run_ids. Received %d run_ids.", s.tr.Limits().BulkIntervalMaxRuns, len(bq.RunIDs))
	}
	if len(bq.RunIDs) == 0 {
		return invalid("Missing value for required parameter 'run_ids'")
	}
	for _, id := range bq.RunIDs {
		if err := s.allowRunID(r, id); err != nil {
			return err
		}
	}
	series, err := s.tr.MetricHistoryBulkInterval(r.Context(), bq)
	if err != nil {
		return err
	}
	return writeRaw(w, encodeSeries(bq.Key, series))
}

// getMetricHistoryBulk returns the full history of one metric for several
// runs (run_id repeated), up to max_results points per run.
func (s *Server) getMetricHistoryBulk(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "run_id", "metric_key", "max_results")
	if err != nil {
		return err
	}
	ids := q.list("run_id")
	if len(ids) == 0 {
		return invalid("GetMetricHistoryBulk request must specify at least one run_id.")
	}
	if len(ids) > 100 {
		return invalid("GetMetricHistoryBulk request cannot specify more than 100 run_ids. Received %d run_ids.", len(ids))
	}
	max, _, err := q.int("max_results")
	if err != nil {
		return err
	}
	if max <= 0 || max > 25000 {
		max = 25000
	}
	key := q.str("metric_key")
	series := make([]tracking.RunSeries, 0, len(ids))
	for _, id := range ids {
		if err := s.allowRunID(r, id); err != nil {
			return err
		}
	}
	for _, id := range ids {
		page, err := s.tr.MetricHistory(r.Context(), id, key, int(max), "")
		if err != nil {
			return err
		}
		series = append(series, tracking.RunSeries{RunID: id, Points: page.Points})
	}
	return writeRaw(w, encodeSeries(key, series))
}

func encodeSeries(key string, series []tracking.RunSeries) []byte {
	n := 0
	for _, rs := range series {
		n += len(rs.Points)
	}
	buf := make([]byte, 0, 32+n*(130+len(key)))
	buf = append(buf, `{"metrics":[`...)
	first := true
	for _, rs := range series {
		buf = appendPoints(buf, key, rs.Points, rs.RunID, first)
		first = first && len(rs.Points) == 0
	}
	return append(buf, ']', '}')
}
