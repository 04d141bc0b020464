package httpapi

import (
	"net/http"

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
	page, err := s.tr.MetricHistory(r.Context(), runID(q.str("run_id"), q.str("run_uuid")), q.str("metric_key"), clampInt(max), q.str("page_token"))
	if err != nil {
		return err
	}
	buf := make([]byte, 0, 64+len(page.Points)*(72+len(page.Key)))
	buf = append(buf, `{"metrics":[`...)
	for i := range page.Points {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendHistoryPoint(buf, page.Key, &page.Points[i], "")
	}
	buf = append(buf, ']')
	if page.NextPageToken != "" {
		buf = append(buf, `,"next_page_token":`...)
		buf = appendString(buf, page.NextPageToken)
	}
	buf = append(buf, '}')
	return writeRaw(w, buf)
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
		return invalid("Invalid value '%s' for parameter 'sampling': expected steps or minmax", truncate(q.str("sampling"), 40))
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
	buf := make([]byte, 0, 32+n*(110+len(key)))
	buf = append(buf, `{"metrics":[`...)
	first := true
	for _, rs := range series {
		for i := range rs.Points {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendHistoryPoint(buf, key, &rs.Points[i], rs.RunID)
		}
	}
	return append(buf, ']', '}')
}
