package httpapi_test

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// value returns the value of the counter, gauge or histogram count of
// the series of name whose labels include labels, and whether it exists.
func value(t *testing.T, a *authServer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestMetricsMove: requests are counted by route pattern and status, and
// the store's counters follow what a run logs: points and log lines
// stored (a retried batch adds nothing), commits, active runs. /metrics
// serves them in the text format.
func TestMetricsMove(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	get := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := value(t, a, name, labels)
		if !ok {
			t.Fatalf("no series %s%v", name, labels)
		}
		return v
	}
	logBatch := map[string]string{"method": "POST", "route": "/api/2.0/mlflow/runs/log-batch", "code": "200"}
	requests0 := get("sextant_http_requests_total", logBatch)
	points0 := get("sextant_metric_points_ingested_total", nil)
	commits0 := get("sextant_db_commit_duration_seconds", nil)
	active := get("sextant_runs_active", nil)
	if active < 1 {
		t.Fatalf("sextant_runs_active = %v with the fixture's run running", active)
	}

	batch := map[string]any{"run_id": f.run, "metrics": []any{
		map[string]any{"key": "loss", "value": 0.5, "timestamp": 1, "step": 1},
		map[string]any{"key": "loss", "value": 0.4, "timestamp": 2, "step": 2},
		map[string]any{"key": "acc", "value": 0.9, "timestamp": 2, "step": 2},
	}}
	a.must(owner, "POST", "/api/2.0/mlflow/runs/log-batch", batch)
	a.must(owner, "POST", "/api/2.0/mlflow/runs/log-batch", batch) // a client retry: stored once
	if d := get("sextant_metric_points_ingested_total", nil) - points0; d != 3 {
		t.Errorf("points ingested moved by %v, want 3", d)
	}
	if d := get("sextant_http_requests_total", logBatch) - requests0; d != 2 {
		t.Errorf("log-batch requests moved by %v, want 2", d)
	}
	if d := get("sextant_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/api/2.0/mlflow/runs/log-batch"}); d < 2 {
		t.Errorf("log-batch latency histogram holds %v requests", d)
	}
	if d := get("sextant_db_commit_duration_seconds", nil) - commits0; d < 2 {
		t.Errorf("commits moved by %v, want at least 2", d)
	}

	lines0 := get("sextant_log_lines_ingested_total", nil)
	appendLines := map[string]any{"run_id": f.run, "source": "rank0", "first_seq": 0, "lines": []any{
		map[string]any{"timestamp": 1, "stream": "stdout", "text": "epoch 1"},
		map[string]any{"timestamp": 2, "stream": "stderr", "text": "warning"},
	}}
	a.must(owner, "POST", "/api/2.0/sextant/logs/append", appendLines)
	a.must(owner, "POST", "/api/2.0/sextant/logs/append", appendLines)
	if d := get("sextant_log_lines_ingested_total", nil) - lines0; d != 2 {
		t.Errorf("log lines ingested moved by %v, want 2", d)
	}

	// Refusals are counted under their own code; unknown paths under the
	// pattern that answered them, never under the path sent.
	a.as(outsider, "POST", "/api/2.0/mlflow/runs/log-batch", batch)
	if v := get("sextant_http_requests_total", map[string]string{"route": "/api/2.0/mlflow/runs/log-batch", "code": "404"}); v != 1 {
		t.Errorf("404s on log-batch: %v, want 1", v)
	}
	a.as(owner, "GET", "/no/such/page-42", nil)
	if v := get("sextant_http_requests_total", map[string]string{"method": "GET", "route": "/", "code": "404"}); v < 1 {
		t.Errorf("the unknown path's 404 is not counted under route /: %v", v)
	}
	if _, ok := value(t, a, "sextant_http_requests_total", map[string]string{"route": "/no/such/page-42"}); ok {
		t.Error("a request path became a route label")
	}

	res := a.as(reader, "GET", "/metrics", nil)
	if res.status != 200 || !strings.HasPrefix(res.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", res.status, res.header.Get("Content-Type"))
	}
	for _, want := range []string{
		"# TYPE sextant_http_requests_total counter",
		"# TYPE sextant_http_request_duration_seconds histogram",
		"# TYPE sextant_db_write_queue_depth gauge",
		"sextant_db_size_bytes ",
		"sextant_gpu_nodes_reporting ",
		`sextant_http_requests_total{code="200",method="POST",route="/api/2.0/mlflow/runs/log-batch"}`,
	} {
		if !strings.Contains(res.raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
