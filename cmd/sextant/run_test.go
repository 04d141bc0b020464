package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRunAndLogsCommands(t *testing.T) {
	addr, stop := runServer(t, map[string]string{"SEXTANT_DATA_DIR": t.TempDir()}, "--port", "0")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	env := map[string]string{"MLFLOW_TRACKING_URI": "http://" + addr}
	run := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := m.Run(ctx, args)
		return out.String(), errb.String(), err
	}

	// stdout and stderr are two pipes: lines written to both at once are
	// ordered as the launcher reads them, so the child pauses between them.
	out, stderr, err := run("run", "--experiment", "/Shared/cmd", "--run-name", "cmd-test", "--", "/bin/sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 4")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 4 || out != "one\n" || !strings.Contains(stderr, "two\n") {
		t.Fatalf("run: %v, stdout %q, stderr %q", err, out, stderr)
	}
	m := regexp.MustCompile(`sextant: run ([0-9a-f]{32}) \(cmd-test\) in experiment /Shared/cmd`).FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(err.Error(), "FAILED") {
		t.Fatalf("stderr %q, err %v", stderr, err)
	}
	runID := m[1]
	// The banner has the run's page in the web UI.
	if !strings.Contains(stderr, "sextant: view it at http://"+addr+"/runs/"+runID+"\n") {
		t.Fatalf("no link to the run's page in the banner: %q", stderr)
	}

	// Flags after the run id, and filters.
	if out, _, err := run("logs", runID, "--labels"); err != nil || out != "[node 0 stdout] one\n[node 0 stderr] two\n" {
		t.Fatalf("logs: %q, %v", out, err)
	}
	if out, _, err := run("logs", "--grep", "^tw", runID); err != nil || out != "two\n" {
		t.Fatalf("logs --grep: %q, %v", out, err)
	}
	if out, _, err := run("logs", "-f", runID); err != nil || out != "one\ntwo\n" {
		t.Fatalf("logs -f of an ended run: %q, %v", out, err)
	}
	if _, stderr, err := run("logs", runID, "--save-artifact", "--artifact-name", "both"); err != nil || !strings.Contains(stderr, "logs/both.txt") {
		t.Fatalf("save: %q, %v", stderr, err)
	}
}

func TestRunCommandErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"NoCommand":         {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run"}, "no command"},
		"BadServer":         {map[string]string{"MLFLOW_TRACKING_URI": "file:///tmp/mlruns"}, []string{"run", "--", "true"}, "server"},
		"BadServerFlag":     {nil, []string{"run", "--server", "127.0.0.1:5000", "--", "true"}, "not an http(s) URL"},
		"NoJobID":           {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--node-rank", "1", "--nnodes", "2", "--", "true"}, "job id"},
		"BadGPUSource":      {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--gpu-source", "cuda", "--", "true"}, "gpu-source"},
		"BadNode":           {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--node", "a\tb", "--", "true"}, "node"},
		"BadNice":           {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--nice", "-5", "--", "true"}, "nice"},
		"BadRankPrefix":     {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"run", "--rank-prefix", "x", "--", "true"}, "rank-prefix"},
		"LogsNoRun":         {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs"}, "one RUN_ID"},
		"LogsBadStream":     {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--stream", "stdin", "r"}, "stdout or stderr"},
		"LogsBadSince":      {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--since", "yesterday", "r"}, "duration"},
		"LogsBadArtifactNm": {map[string]string{"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"}, []string{"logs", "--artifact-name", "a/b", "r"}, "plain file name"},
	} {
		t.Run(name, func(t *testing.T) {
			m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return tc.env[k] }}
			err := m.Run(context.Background(), tc.args)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want exit 2 mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f := func(in string, want time.Time) {
		t.Helper()
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	f("10m", now.Add(-10*time.Minute))
	f("2026-12-01T10:00:00Z", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if _, err := parseSince("-5m", now); err == nil {
		t.Error("negative duration accepted")
	}
}

// TestRunSamplesGPUs: sextant run samples the GPUs the job can see (a
// simulated node of 4, CUDA_VISIBLE_DEVICES=1,3) for the run while it runs:
// the GPU pane's series of the run has this host's GPUs 1 and 3 only,
// sampled every interval, and the run has them as MLflow system metrics.
// --node names the node; with --gpu-source none the run gets no samples.
func TestRunSamplesGPUs(t *testing.T) {
	addr, stop := runServer(t, map[string]string{"SEXTANT_DATA_DIR": t.TempDir()}, "--port", "0")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + addr
	env := map[string]string{"MLFLOW_TRACKING_URI": base}
	launch := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Run(ctx, append([]string{"run", "--experiment", "/Shared/gpu"}, args...)); err != nil {
			t.Fatalf("run: %v\n%s", err, errb.String())
		}
		m2 := regexp.MustCompile(`sextant: run ([0-9a-f]{32})`).FindStringSubmatch(errb.String())
		if m2 == nil {
			t.Fatalf("no run id in %q", errb.String())
		}
		return m2[1]
	}
	host, _ := os.Hostname()
	// The job sees GPUs 1 and 3 only (CUDA_VISIBLE_DEVICES reaches it from
	// the launcher's environment, as it would from the shell's).
	t.Setenv("CUDA_VISIBLE_DEVICES", "1,3")

	runID := launch("--gpu-source", "sim:4", "--gpu-interval", "100ms", "--", "/bin/sh", "-c", "sleep 1")
	var series seriesBody
	getJSON(t, base+"/api/2.0/sextant/gpu/series?run_id="+runID+"&points=0&fields=util", &series)
	indexes := map[int]int{}
	for _, g := range series.GPUs {
		if g.Node != host || g.RunID != runID || g.NodeRank == nil || *g.NodeRank != 0 {
			t.Fatalf("GPU of node %q, run %q, rank %v; want %q, %q, 0", g.Node, g.RunID, g.NodeRank, host, runID)
		}
		indexes[g.Index] = len(g.Series["util"])
	}
	// About 10 samples in the second the job ran; a loaded machine may
	// take fewer.
	if len(indexes) != 2 || indexes[1] < 3 || indexes[3] < 3 {
		t.Fatalf("samples per GPU index: %v, want GPUs 1 and 3 with a sample every 100ms", indexes)
	}
	var run struct {
		Run struct {
			Data struct {
				Metrics []struct {
					Key string `json:"key"`
				} `json:"metrics"`
			} `json:"data"`
		} `json:"run"`
	}
	getJSON(t, base+"/api/2.0/mlflow/runs/get?run_id="+runID, &run)
	keys := map[string]bool{}
	for _, m := range run.Run.Data.Metrics {
		keys[m.Key] = true
	}
	if !keys["system/gpu_1_utilization_percentage"] || !keys["system/gpu_3_memory_usage_megabytes"] || keys["system/gpu_0_utilization_percentage"] {
		t.Fatalf("system metrics of the run: %v", keys)
	}

	// --node names the node as a node-wide agent does (Kubernetes: the
	// node's name, not the pod's host name).
	runID = launch("--gpu-source", "sim:4", "--gpu-interval", "100ms", "--node", "gpu-node-7", "--", "/bin/sh", "-c", "sleep 0.3")
	series = seriesBody{}
	getJSON(t, base+"/api/2.0/sextant/gpu/series?run_id="+runID+"&points=0&fields=util", &series)
	if len(series.GPUs) != 2 || series.GPUs[0].Node != "gpu-node-7" {
		t.Fatalf("--node: %+v", series.GPUs)
	}

	runID = launch("--gpu-source", "none", "--", "/bin/sh", "-c", "sleep 0.3")
	series = seriesBody{}
	getJSON(t, base+"/api/2.0/sextant/gpu/series?run_id="+runID+"&points=0&fields=util", &series)
	if len(series.GPUs) != 0 {
		t.Fatalf("--gpu-source none: %d GPUs sampled", len(series.GPUs))
	}
}
