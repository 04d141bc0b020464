package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promtoolPath returns promtool: $SEXTANT_PROMTOOL (scripts/test.sh
// installs Debian's prometheus package and sets it), else promtool on
// PATH. Without either the test is skipped, saying how to get it; with
// SEXTANT_PROMTOOL set, a missing binary fails the test.
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SEXTANT_PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	t.Skip("promtool not found: install Debian's prometheus package, or set SEXTANT_PROMTOOL (scripts/test.sh does)")
	return ""
}

// promtoolProblems runs `promtool check metrics` on an exposition and
// returns the problems it reports, one a line ("name problem").
func promtoolProblems(t *testing.T, promtool, exposition string) []string {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	// Exit status 3: lint problems, listed; anything else: promtool could
	// not parse the exposition or did not run.
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	var problems []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			problems = append(problems, l)
		}
	}
	return problems
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// sampleValue returns the value of the series line that starts with
// series (a name, or a name and its labels) in an exposition, or -1.
func sampleValue(exposition, series string) float64 {
	for _, l := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func postJSON(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// createRunAPI creates a run through runs/create with body and returns
// its id.
func createRunAPI(t *testing.T, base, body string) string {
	t.Helper()
	var created struct {
		Run struct {
			Info struct {
				RunID string `json:"run_id"`
			} `json:"info"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(postJSON(t, base+"/api/2.0/mlflow/runs/create", body)), &created); err != nil {
		t.Fatal(err)
	}
	return created.Run.Info.RunID
}

// dcgmLabelProblem is the one problem the agent's exposition may have:
// dcgm-exporter's modelName label, which users' dashboards select on, is
// not snake_case. It is allowed on the DCGM_FI_* series only.
var dcgmLabelProblem = regexp.MustCompile(`^DCGM_FI_[A-Z_]+ label names should be written in 'snake_case' not 'camelCase'$`)

// TestPrometheusMetrics runs a real server, a run under `sextant run`, a
// log-batch and a GPU agent against it, and checks both /metrics
// expositions with promtool: the server's passes as it is, the agent's
// apart from dcgm-exporter's own label names. The counters move with what
// was logged.
func TestPrometheusMetrics(t *testing.T) {
	promtool := promtoolPath(t)
	addr, stop := runServer(t, map[string]string{"SEXTANT_DATA_DIR": t.TempDir()}, "--port", "0", "--gpu-hour-price", "H100=2")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + addr
	before := scrape(t, base+"/metrics")

	// A run that logs three points, through the API as the mlflow client
	// does, and one that prints two lines under the launcher.
	runID := createRunAPI(t, base, `{"experiment_id": "0"}`)
	postJSON(t, base+"/api/2.0/mlflow/runs/log-batch", fmt.Sprintf(`{"run_id": %q, "metrics": [
		{"key": "loss", "value": 0.5, "timestamp": 1, "step": 1},
		{"key": "loss", "value": 0.4, "timestamp": 2, "step": 2},
		{"key": "acc", "value": 0.9, "timestamp": 2, "step": 2}]}`, runID))
	// An attempt of 2 GPUs for an hour, as sextant run records one.
	postJSON(t, base+"/api/2.0/sextant/events/append", fmt.Sprintf(`{"run_id": %q, "events": [{"kind": "attempt", "key": "attempt:0:1",
		"time_ms": 1800000000000, "end_ms": 1800003600000, "node": "n", "attrs": {"gpus": "2", "gpu_model": "NVIDIA H100 80GB HBM3"}}]}`, runID))
	env := map[string]string{"MLFLOW_TRACKING_URI": base}
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := m.Run(ctx, []string{"run", "--experiment", "/Shared/prom", "--", "/bin/sh", "-c", "echo one; echo two"}); err != nil {
		t.Fatalf("sextant run: %v", err)
	}

	// An agent with two simulated GPUs sending to the server, its own
	// /metrics on a free port.
	agentCtx, stopAgent := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	var agentErr syncBuffer
	am := &Main{Stdout: io.Discard, Stderr: &agentErr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { ready <- a }}
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- am.Run(agentCtx, []string{"agent", "--gpu-source", "sim:2", "--node", "prom-node", "--metrics-addr", "127.0.0.1:0",
			"--spool-dir", t.TempDir(), "--interval", "100ms"})
	}()
	defer func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	var agentAddr string
	select {
	case agentAddr = <-ready:
	case err := <-agentDone:
		t.Fatalf("agent exited: %v\n%s", err, agentErr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not start")
	}

	// The server's exposition, once the agent's samples arrived.
	var after string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after = scrape(t, base+"/metrics")
		if sampleValue(after, "sextant_gpu_nodes_reporting") >= 1 || time.Now().After(deadline) {
			break
		}
	}
	moved := func(series string) float64 { return sampleValue(after, series) - max(sampleValue(before, series), 0) }
	if d := moved("sextant_metric_points_ingested_total"); d != 3 {
		t.Errorf("sextant_metric_points_ingested_total moved by %v, want 3", d)
	}
	if d := moved("sextant_log_lines_ingested_total"); d != 2 {
		t.Errorf("sextant_log_lines_ingested_total moved by %v, want 2", d)
	}
	if d := moved(`sextant_http_requests_total{code="200",method="POST",route="/api/2.0/mlflow/runs/log-batch"}`); d < 1 {
		t.Errorf("log-batch requests moved by %v, want at least the test's own", d)
	}
	if v := sampleValue(after, `sextant_gpu_held_seconds{model="NVIDIA H100 80GB HBM3"}`); v != 7200 {
		t.Errorf("sextant_gpu_held_seconds = %v, want 7200 (2 GPUs for an hour)", v)
	}
	if v := sampleValue(after, `sextant_gpu_cost{model="NVIDIA H100 80GB HBM3"}`); v != 4 {
		t.Errorf("sextant_gpu_cost = %v, want 4 (2 GPU-hours at 2)", v)
	}
	if v := sampleValue(after, "sextant_gpu_nodes_reporting"); v != 1 {
		t.Errorf("sextant_gpu_nodes_reporting = %v, want 1 (the agent)", v)
	}
	if v := sampleValue(after, "sextant_runs_active"); v != 1 {
		t.Errorf("sextant_runs_active = %v, want 1 (the API's run; the launcher's ended)", v)
	}
	for _, series := range []string{"sextant_db_size_bytes", "sextant_db_commit_duration_seconds_count", "go_goroutines", "process_resident_memory_bytes"} {
		if v := sampleValue(after, series); v <= 0 {
			t.Errorf("%s = %v, want a positive value", series, v)
		}
	}
	// Measured at start, in the background: present once measured.
	for deadline := time.Now().Add(10 * time.Second); sampleValue(after, `sextant_blob_store_objects{store="artifacts"}`) < 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		after = scrape(t, base+"/metrics")
	}
	if v := sampleValue(after, `sextant_blob_store_objects{store="artifacts"}`); v < 0 {
		t.Errorf("no measurement of the artifact store")
	}
	if problems := promtoolProblems(t, promtool, after); len(problems) > 0 {
		t.Errorf("promtool check metrics on the server's /metrics:\n%s", strings.Join(problems, "\n"))
	}

	agentBody := scrape(t, "http://"+agentAddr+"/metrics")
	if !strings.Contains(agentBody, `DCGM_FI_DEV_GPU_UTIL{gpu="1"`) || !strings.Contains(agentBody, "sextant_agent_samples_total") || !strings.Contains(agentBody, `sextant_gpu_up{gpu="0"`) {
		t.Fatalf("agent /metrics lacks its GPUs or counters:\n%s", agentBody)
	}
	var other []string
	for _, p := range promtoolProblems(t, promtool, agentBody) {
		if !dcgmLabelProblem.MatchString(p) {
			other = append(other, p)
		}
	}
	if len(other) > 0 {
		t.Errorf("promtool check metrics on the agent's /metrics, besides dcgm-exporter's modelName label:\n%s", strings.Join(other, "\n"))
	}
	checkDashboard(t, promtool, "../../docs/grafana-dashboard.json", after+agentBody)
}

// metricName finds the metric names in a PromQL expression: Sextant's,
// dcgm-exporter's and Go's process metrics.
var metricName = regexp.MustCompile(`\b(?:sextant|process|go)_[a-z_]+\b|\bDCGM_FI_[A-Z_]+\b`)

// checkDashboard checks the Grafana dashboard of docs/: promtool parses
// every query (as the expression of a recording rule), and every metric a
// query names is in the expositions scraped.
func checkDashboard(t *testing.T, promtool, path, expositions string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			n++
			b, _ := json.Marshal(q.Expr)
			fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", n, b)
			for _, name := range metricName.FindAllString(q.Expr, -1) {
				series := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !strings.Contains(expositions, "# TYPE "+series+" ") {
					t.Errorf("dashboard panel %q queries %s, which neither /metrics serves", p.Title, name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("%s has %d queries", path, n)
	}
	file := t.TempDir() + "/dashboard-rules.yml"
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
