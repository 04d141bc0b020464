package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu/gputest"
	"github.com/sextant/sextant/internal/pgtest"
)

// syncBuffer is a bytes.Buffer safe for a goroutine writing while the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func getJSON(t *testing.T, url string, out any) {
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
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

type seriesBody struct {
	BucketMs int64 `json:"bucket_ms"`
	GPUs     []struct {
		Node     string                 `json:"node"`
		RunID    string                 `json:"run_id"`
		NodeRank *int                   `json:"node_rank"`
		Index    int                    `json:"index"`
		Series   map[string][][]float64 `json:"series"`
	} `json:"gpus"`
}

// TestAgentsEndToEnd runs two agents (the CLI's Run, simulated sources of
// 4 GPUs each) posing as the two nodes of one run against a real server,
// for 30 minutes of simulated time. The server is down from minute 10 to
// minute 20: the agents spool and catch up, and every sample arrives
// exactly once. Then the query API is checked: both nodes' GPUs, raw and
// downsampled history, the run's system metrics, and a restart with a
// 10-minute retention that prunes the older history for good.
//
// It runs on SQLite and on PostgreSQL (the GPU store of each).
func TestAgentsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Run("sqlite", func(t *testing.T) { agentsEndToEnd(t, "--sqlite-synchronous", "NORMAL") })
	t.Run("postgres", func(t *testing.T) { agentsEndToEnd(t, "--db", pgtest.NewDatabase(t)) })
}

func agentsEndToEnd(t *testing.T, store ...string) {
	dir := t.TempDir()
	port := freePort(t)
	args := append([]string{"--port", port, "--data-dir", dir}, store...)
	addr, stop := runServer(t, nil, args...)
	base := "http://" + addr
	start := time.Now().Add(-30 * time.Minute).Truncate(10 * time.Second)

	runID := createRunAPI(t, base, fmt.Sprintf(`{"experiment_id":"0","start_time":%d}`, start.UnixMilli()))

	clock := gputest.NewManualClock(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	logs := make([]*syncBuffer, 2)
	for rank := range 2 {
		logs[rank] = &syncBuffer{}
		m := &Main{Stdout: io.Discard, Stderr: logs[rank], Getenv: func(string) string { return "" }}
		cmd := &AgentCommand{main: m, clock: clock}
		wg.Go(func() {
			err := cmd.Run(ctx, flag.NewFlagSet("sextant agent", flag.ContinueOnError), []string{
				"--server", base, "--node", fmt.Sprintf("node-%d", rank), "--gpu-source", "sim:4",
				"--run-id", runID, "--node-rank", strconv.Itoa(rank), "--num-nodes", "2",
				"--spool-dir", filepath.Join(dir, fmt.Sprintf("spool-%d", rank)), "--log-level", "debug",
			})
			if err != nil {
				t.Errorf("agent %d: %v", rank, err)
			}
		})
	}
	tick := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if err := clock.BlockUntil(wctx, 2); err != nil {
			t.Fatalf("agents did not finish their tick: %v\n%s\n%s", err, logs[0], logs[1])
		}
	}
	const ticks = 180 // 30 minutes at 10 s
	for i := 1; i <= ticks; i++ {
		tick()
		switch i {
		case 61:
			if err := stop(); err != nil {
				t.Fatalf("stop server: %v", err)
			}
		case 121:
			addr, stop = runServer(t, nil, args...)
		}
		clock.Advance(10 * time.Second)
	}
	tick()
	cancel()
	wg.Wait()
	for rank, l := range logs {
		if !strings.Contains(l.String(), "spooling them until the server takes them") || !strings.Contains(l.String(), "reachable again") {
			t.Errorf("agent %d did not log the outage and the recovery:\n%s", rank, l)
		}
	}

	// Every sample of both nodes, exactly once.
	var raw seriesBody
	getJSON(t, base+"/api/2.0/sextant/gpu/series?run_id="+runID+"&points=0&fields=util,temp", &raw)
	if len(raw.GPUs) != 8 {
		t.Fatalf("%d GPUs in the run's series, want 2 nodes x 4", len(raw.GPUs))
	}
	for _, g := range raw.GPUs {
		pts := g.Series["util"]
		if len(pts) != ticks+1 {
			t.Fatalf("%s GPU %d: %d samples, want %d", g.Node, g.Index, len(pts), ticks+1)
		}
		for k, p := range pts {
			if want := start.Add(time.Duration(k) * 10 * time.Second).UnixMilli(); int64(p[0]) != want {
				t.Fatalf("%s GPU %d sample %d at %d, want %d (each timestamp once, in order)", g.Node, g.Index, k, int64(p[0]), want)
			}
		}
		if g.RunID != runID || g.NodeRank == nil || g.Node != fmt.Sprintf("node-%d", *g.NodeRank) {
			t.Fatalf("labels: %+v", g)
		}
	}
	// Downsampled as asked: 30 points over the 30 minutes, each bucket's
	// mean within the raw samples' range.
	var ds seriesBody
	getJSON(t, fmt.Sprintf("%s/api/2.0/sextant/gpu/series?node=node-0,node-1&points=30&fields=util&from_ms=%d&to_ms=%d", base, start.UnixMilli(), start.Add(30*time.Minute+time.Second).UnixMilli()), &ds)
	if len(ds.GPUs) != 8 || ds.BucketMs < 60_000 {
		t.Fatalf("downsampled: %d GPUs, bucket %d ms", len(ds.GPUs), ds.BucketMs)
	}
	for i, g := range ds.GPUs {
		pts := g.Series["util"]
		if len(pts) > 30 || len(pts) < 29 {
			t.Fatalf("%d points, want at most 30 covering the range", len(pts))
		}
		rawPts := raw.GPUs[i].Series["util"]
		for _, p := range pts {
			lo, hi, n := 101.0, -1.0, 0
			for _, r := range rawPts {
				if r[0] >= p[0] && r[0] < p[0]+float64(ds.BucketMs) {
					lo, hi, n = min(lo, r[1]), max(hi, r[1]), n+1
				}
			}
			if n == 0 || p[1] < lo || p[1] > hi {
				t.Fatalf("bucket %v: mean outside the %d raw samples' range [%v, %v]", p, n, lo, hi)
			}
		}
	}
	var latest struct {
		Nodes []struct {
			Node string            `json:"node"`
			TsMs int64             `json:"ts_ms"`
			GPUs []json.RawMessage `json:"gpus"`
		} `json:"nodes"`
	}
	getJSON(t, base+"/api/2.0/sextant/gpu/latest", &latest)
	if len(latest.Nodes) != 2 || latest.Nodes[1].Node != "node-1" || latest.Nodes[0].TsMs != start.Add(30*time.Minute).UnixMilli() || len(latest.Nodes[0].GPUs) != 4 {
		t.Fatalf("latest: %+v", latest)
	}
	// The run got the samples as MLflow system metrics, node-prefixed.
	for _, key := range []string{"system/node_0/gpu_0_utilization_percentage", "system/node_1/gpu_3_temperature_celsius", "system/node_1/gpu_2_memory_usage_megabytes"} {
		var h struct {
			Metrics []struct {
				Step int64 `json:"step"`
			} `json:"metrics"`
		}
		getJSON(t, base+"/api/2.0/mlflow/metrics/get-history?run_id="+runID+"&metric_key="+key, &h)
		if len(h.Metrics) != ticks+1 || h.Metrics[ticks].Step != 1800 {
			t.Fatalf("%s: %d points, last step %v; want %d, 1800", key, len(h.Metrics), h.Metrics, ticks+1)
		}
	}
	for rank := range 2 {
		segs, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("spool-%d", rank), "seg-*"))
		for _, s := range segs {
			if fi, _ := os.Stat(s); fi.Size() != 0 {
				t.Errorf("spool segment %s still holds %d bytes", s, fi.Size())
			}
		}
	}

	// A restart with a 10-minute retention prunes the older history; a
	// later restart with the default retention shows it is gone for good.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	addr, stop = runServer(t, nil, append(args, "--gpu-retention", "10m")...)
	cutoff := time.Now().Add(-10 * time.Minute).UnixMilli()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	addr, stop = runServer(t, nil, args...)
	defer stop()
	var trimmed seriesBody
	getJSON(t, "http://"+addr+"/api/2.0/sextant/gpu/series?points=0&fields=util&from_ms=1", &trimmed)
	if len(trimmed.GPUs) != 8 {
		t.Fatalf("%d GPUs after pruning", len(trimmed.GPUs))
	}
	for _, g := range trimmed.GPUs {
		pts := g.Series["util"]
		if len(pts) == 0 || len(pts) > 62 || int64(pts[0][0]) < cutoff-10_000 {
			t.Fatalf("after a 10-minute prune: %d samples from %v (cutoff %d)", len(pts), pts[0][0], cutoff)
		}
	}
}

// TestAgentAndRunOnOneNode: a node-wide `sextant agent` and the sampler
// of `sextant run` sample one node at the same interval, as in issue 20:
// the server stores one sample per node and instant, every one on the
// interval's grid, and those of the job's time carry the run's labels.
// The two samplers run for real (the launcher's job is a real process), on
// SQLite and on PostgreSQL.
func TestAgentAndRunOnOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Run("sqlite", func(t *testing.T) { agentAndRunOnOneNode(t, "--sqlite-synchronous", "NORMAL") })
	t.Run("postgres", func(t *testing.T) { agentAndRunOnOneNode(t, "--db", pgtest.NewDatabase(t)) })
}

func agentAndRunOnOneNode(t *testing.T, store ...string) {
	dir := t.TempDir()
	addr, stop := runServer(t, nil, append([]string{"--port", "0", "--data-dir", dir}, store...)...)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + addr
	const interval = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var agentLog syncBuffer
	agentDone := make(chan error, 1)
	go func() {
		m := &Main{Stdout: io.Discard, Stderr: &agentLog, Getenv: func(string) string { return "" }}
		agentDone <- m.Run(ctx, []string{"agent", "--server", base, "--node", "shared-node", "--gpu-source", "sim:2",
			"--interval", interval.String(), "--spool-dir", filepath.Join(dir, "agent-spool")})
	}()
	// The agent samples before the job, and after it.
	latest := func() int64 {
		var l struct {
			Nodes []struct {
				TsMs int64 `json:"ts_ms"`
			} `json:"nodes"`
		}
		getJSON(t, base+"/api/2.0/sextant/gpu/latest?node=shared-node", &l)
		if len(l.Nodes) == 0 {
			return 0
		}
		return l.Nodes[0].TsMs
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, agentLog.String())
			}
		}
	}
	waitFor("the agent's first sample", func() bool { return latest() > 0 })
	env := map[string]string{"MLFLOW_TRACKING_URI": base}
	var errb syncBuffer
	m := &Main{Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if err := m.Run(rctx, []string{"run", "--experiment", "/Shared/one-node", "--gpu-source", "sim:2", "--gpu-interval", interval.String(),
		"--node", "shared-node", "--spool-dir", dir, "--", "/bin/sh", "-c", "sleep 2"}); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	ended := time.Now().UnixMilli()
	waitFor("the agent's samples after the job", func() bool { return latest() > ended+interval.Milliseconds() })
	cancel()
	if err := <-agentDone; err != nil {
		t.Fatalf("agent: %v\n%s", err, agentLog.String())
	}
	runID := regexp.MustCompile(`sextant: run ([0-9a-f]{32})`).FindStringSubmatch(errb.String())
	if runID == nil {
		t.Fatalf("no run id in %q", errb.String())
	}

	var node, run seriesBody
	getJSON(t, base+"/api/2.0/sextant/gpu/series?node=shared-node&points=0&fields=util", &node)
	getJSON(t, base+"/api/2.0/sextant/gpu/series?run_id="+runID[1]+"&points=0&fields=util", &run)
	if len(node.GPUs) != 2 || len(run.GPUs) != 2 {
		t.Fatalf("%d GPUs of the node, %d of the run; want 2 and 2", len(node.GPUs), len(run.GPUs))
	}
	for i, g := range node.GPUs {
		pts := g.Series["util"]
		for k, p := range pts {
			ts := int64(p[0])
			if ts%interval.Milliseconds() != 0 {
				t.Fatalf("GPU %d: a sample at %d, off the %s grid: %v", g.Index, ts, interval, pts)
			}
			if k > 0 && ts <= int64(pts[k-1][0]) {
				t.Fatalf("GPU %d: samples at %d and %d: one per instant wanted", g.Index, int64(pts[k-1][0]), ts)
			}
		}
		// The agent's sample of an instant the launcher sampled too took the
		// run's labels: the run's samples are among the node's.
		runPts := run.GPUs[i].Series["util"]
		if len(runPts) < 3 || len(pts) <= len(runPts) {
			t.Fatalf("GPU %d: %d samples of the node, %d of the run (of 2 s at %s)", g.Index, len(pts), len(runPts), interval)
		}
		from, to := int64(runPts[0][0]), int64(runPts[len(runPts)-1][0])
		var inRun []float64
		for _, p := range pts {
			if int64(p[0]) >= from && int64(p[0]) <= to {
				inRun = append(inRun, p[0])
			}
		}
		var runTs []float64
		for _, p := range runPts {
			runTs = append(runTs, p[0])
		}
		// Every instant the launcher sampled is one of the node's samples
		// (stored once, with the run's labels). The node may hold a few more
		// in the run's time: on a loaded machine a sampler that wakes up past
		// the next instant skips it, and the agent may not have.
		for _, ts := range runTs {
			if !slices.Contains(inRun, ts) {
				t.Fatalf("GPU %d: the run's sample at %v is not one of the node's samples of its time %v (run: %v)", g.Index, ts, inRun, runTs)
			}
		}
	}
}

func TestAgentConfigErrors(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"ErrSource":         {args: []string{"--gpu-source", "cuda"}, want: "gpu-source"},
		"ErrSimCount":       {args: []string{"--gpu-source", "sim:0"}, want: "gpu-source"},
		"ErrInterval":       {args: []string{"--interval", "1ms"}, want: "interval"},
		"ErrServer":         {args: []string{"--server", "file:///tmp/mlruns"}, want: "server"},
		"ErrServerFromEnv":  {env: map[string]string{"MLFLOW_TRACKING_URI": "databricks"}, want: "server"},
		"ErrRankFromEnv":    {env: map[string]string{"NODE_RANK": "one"}, want: "NODE_RANK"},
		"ErrNode":           {args: []string{"--node", "a\tb"}, want: "node"},
		"ErrSpoolMax":       {args: []string{"--spool-max-bytes", "10"}, want: "spool-max-bytes"},
		"ErrArgs":           {args: []string{"extra"}, want: "unexpected arguments"},
		"ErrExplicitNVML":   {args: []string{"--gpu-source", "nvml"}, want: "nvml"},
		"ErrIntervalFormat": {env: map[string]string{"SEXTANT_INTERVAL": "10"}, want: "interval"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }}
			err := m.Run(t.Context(), append([]string{"agent", "--spool-dir", t.TempDir()}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestAgentOnceAndMetrics: --once prints one sample; --metrics-addr
// serves dcgm-exporter names; CUDA_VISIBLE_DEVICES limits the GPUs; the
// agent sends credentials the way the mlflow client does.
func TestAgentOnceAndMetrics(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "1,3"}
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	if err := m.Run(t.Context(), []string{"agent", "--once", "--gpu-source", "sim:4"}); err != nil {
		t.Fatal(err)
	}
	var smp struct {
		TsMs int64 `json:"ts_ms"`
		GPUs []struct {
			Index int      `json:"index"`
			Util  *float64 `json:"util"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(out.Bytes(), &smp); err != nil || len(smp.GPUs) != 2 || smp.GPUs[0].Index != 1 || smp.GPUs[1].Index != 3 || smp.GPUs[0].Util == nil {
		t.Fatalf("--once with CUDA_VISIBLE_DEVICES=1,3: %v %s", err, out.String())
	}

	var auth sync.Map
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store("h", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"accepted":1}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	ready := make(chan string, 1)
	env = map[string]string{"MLFLOW_TRACKING_URI": "http://" + ln.Addr().String(), "MLFLOW_TRACKING_TOKEN": "secret-token"}
	var stderr syncBuffer
	m = &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { ready <- a }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, []string{"agent", "--gpu-source", "sim:2", "--node", "n9", "--metrics-addr", "127.0.0.1:0", "--spool-dir", t.TempDir(), "--interval", "100ms"})
	}()
	var metricsAddr string
	select {
	case metricsAddr = <-ready:
	case err := <-done:
		t.Fatalf("agent exited: %v\n%s", err, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not start")
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		body = string(b)
		if strings.Contains(body, `DCGM_FI_DEV_GPU_UTIL{gpu="1"`) {
			break
		}
	}
	for _, want := range []string{`DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-`, `modelName="NVIDIA H100 80GB HBM3",Hostname="n9"}`, "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, _ := auth.Load("h"); h != "Bearer secret-token" {
		t.Errorf("Authorization %q, want the bearer token", h)
	}
	if strings.Contains(stderr.String(), "secret-token") {
		t.Error("the token was logged")
	}
}
