package httpapi

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
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
	max, set, err := q.int("max_results")
	if err != nil {
		return err
	}
	if set && max <= 0 {
		return invalid("Invalid value %d for parameter 'max_results' supplied. It must be a positive integer.", max)
	}
	id, err := runID(q.str("run_id"), q.str("run_uuid"))
	if err != nil {
		return err
	}
	if err := s.allowRunID(r, id); err != nil {
		return err
	}
	hb := historyBuffers.Get().(*tracking.HistoryBuffer)
	defer putHistoryBuffer(hb)
	key := q.str("metric_key")
	if err := s.tr.MetricHistoryInto(r.Context(), id, key, clampInt(max), q.str("page_token"), hb); err != nil {
		return err
	}
	parts := encodeHistory(key, hb)
	defer putEncodeBuffers(parts)
	head := []byte(`{"metrics":[`)
	tail := []byte{']'}
	if hb.NextPageToken != "" {
		tail = append(tail, `,"next_page_token":`...)
		tail = wire.AppendString(tail, hb.NextPageToken)
	}
	tail = append(tail, '}')
	return writeParts(w, head, parts, tail)
}

// historyBuffers and encodeBuffers keep the memory of history pages
// between requests: a page of 25,000 points needs 600 KB of points and
// 2 MB of JSON, which the allocator would otherwise zero and the garbage
// collector scan on every page.
var (
	historyBuffers = sync.Pool{New: func() any { return new(tracking.HistoryBuffer) }}
	encodeBuffers  = sync.Pool{New: func() any { return new([]byte) }}
)

// pooledLimit is the largest buffer (bytes, or points) a pool keeps; a
// rare huge page is left to the garbage collector.
const pooledLimit = 8 << 20

func putHistoryBuffer(hb *tracking.HistoryBuffer) {
	if cap(hb.Points) <= pooledLimit/24 {
		historyBuffers.Put(hb)
	}
}

func putEncodeBuffers(parts []*[]byte) {
	for _, p := range parts {
		if cap(*p) <= pooledLimit {
			encodeBuffers.Put(p)
		}
	}
}

// pointsPerPart is the least number of points worth a goroutine of their
// own: float formatting dominates a large page, and the cores are
// otherwise idle while one request waits for it.
const pointsPerPart = 4096

// encodeHistory encodes the points of hb as comma-separated JSON objects,
// in parts that together form the list (see encodeParts).
func encodeHistory(key string, hb *tracking.HistoryBuffer) []*[]byte {
	prefix := wire.HistoryPrefix(key)
	return encodeParts(len(hb.Points), pointsPerPart, func(dst []byte, from, to int) []byte {
		return wire.AppendHistory(dst, prefix, hb, from, to)
	})
}

// encodeParts encodes items [0, n) with enc, which appends items
// [from, to), in parts that together form the whole, on up to GOMAXPROCS
// goroutines of at least per items each. The parts come from
// encodeBuffers.
func encodeParts(n, per int, enc func(dst []byte, from, to int) []byte) []*[]byte {
	k := max(1, min(runtime.GOMAXPROCS(0), (n+per-1)/per))
	parts := make([]*[]byte, k)
	for i := range parts {
		parts[i] = encodeBuffers.Get().(*[]byte)
	}
	if k == 1 {
		*parts[0] = enc((*parts[0])[:0], 0, n)
		return parts
	}
	size := (n + k - 1) / k
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			*parts[i] = enc((*parts[i])[:0], min(i*size, n), min((i+1)*size, n))
		})
	}
	wg.Wait()
	return parts
}

// writeParts writes a 200 JSON response made of head, parts and tail.
func writeParts(w http.ResponseWriter, head []byte, parts []*[]byte, tail []byte) error {
	n := len(head) + len(tail)
	for _, p := range parts {
		n += len(*p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil {
		return nil // the client left; nothing more to do
	}
	for _, p := range parts {
		if _, err := w.Write(*p); err != nil {
			return nil
		}
	}
	_, _ = w.Write(tail)
	return nil
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
	// In MLflow's order: run_ids, metric_key, the steps, max_results.
	if len(bq.RunIDs) == 0 {
		return invalid("Missing value for required parameter 'run_ids'. See the API docs for more information about request parameters.")
	}
	if len(bq.RunIDs) > s.tr.Limits().BulkIntervalMaxRuns {
		return invalid("GetMetricHistoryBulkInterval request must specify at most %d run_ids. Received %d run_ids. See the API docs for more information about request parameters.", s.tr.Limits().BulkIntervalMaxRuns, len(bq.RunIDs))
	}
	if bq.Key == "" {
		return invalid("Missing value for required parameter 'metric_key'. See the API docs for more information about request parameters.")
	}
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
		return invalid("max_results must be between 1 and %d. See the API docs for more information about request parameters.", s.tr.Limits().BulkIntervalMaxResults)
	}
	bq.MaxResults = clampInt(max)
	switch q.str("sampling") {
	case "", "steps":
	case "minmax":
		bq.Mode = tracking.SampleMinMax
	default:
		return invalid("Invalid value '%s' for parameter 'sampling': expected steps or minmax", errs.Truncate(q.str("sampling"), 40))
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
	// MLflow checks the whole request before it reads a run: a missing
	// metric_key is a 400 even when a run is unknown.
	if !q.has("metric_key") {
		return invalid("GetMetricHistoryBulk request must specify a metric_key.")
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
