package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sxclient "github.com/sextant/sextant/internal/client"

	"github.com/sextant/sextant/internal/gpu"
)

// benchGPU measures GPU monitoring:
//
//   - agent: the CPU and memory of a real `sextant agent` process sampling
//     8 simulated GPUs. It samples every second for a minute (to amplify
//     what is small) and reports the cost per 10 s interval, the default.
//   - ingest: the server's CPU while 1,000 simulated nodes of 8 GPUs each
//     post a sample every 10 s (100 requests a second), for nodes without
//     a run and for nodes whose samples are also logged to runs.
//   - query: the pane's history query for 64 GPUs (8 nodes of 8) over two
//     hours of 10 s samples, downsampled to 360 points per series, after
//     pre-filling the two hours with past timestamps.
func benchGPU(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-gpu-")
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	s, err := startServer(ctx, bin, filepath.Join(dir, "data"), c.serverArgs...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if s != nil {
			s.kill()
		}
	}()
	out := map[string]any{}
	logf("gpu: query (pre-filling 2 h of 8 nodes x 8 GPUs)")
	if out["query"], err = benchGPUQuery(ctx, c, s); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	logf("gpu: ingest (1,000 nodes x 8 GPUs every 10 s)")
	if out["ingest"], err = benchGPUIngest(ctx, c, s, false); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	logf("gpu: ingest with run-linked system metrics")
	if out["ingest_with_runs"], err = benchGPUIngest(ctx, c, s, true); err != nil {
		return nil, fmt.Errorf("ingest with runs: %w", err)
	}
	logf("gpu: agent overhead (8 simulated GPUs)")
	if out["agent"], err = benchGPUAgent(ctx, c, bin, s, dir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	err = s.stop()
	s = nil
	return out, err
}

// benchGPUAgent runs a real agent process and measures it.
func benchGPUAgent(ctx context.Context, c config, bin string, s *server, dir string) (any, error) {
	measure := 60 * time.Second
	if c.short {
		measure = 15 * time.Second
	}
	const interval = time.Second
	cmd := exec.Command(bin, "agent", "--server", s.url, "--node", "bench-agent", "--gpu-source", "sim:8",
		"--interval", interval.String(), "--spool-dir", filepath.Join(dir, "spool"), "--log-level", "warn")
	a := &server{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = a.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { a.done <- cmd.Wait() }()
	defer a.kill()
	select {
	case <-time.After(3 * time.Second): // start-up and first samples
	case err := <-a.done:
		return nil, fmt.Errorf("agent exited: %v\n%s", err, a.stderr)
	}
	cpu0, t0 := a.cpuSeconds(), time.Now()
	select {
	case <-time.After(measure):
	case <-ctx.Done():
		return nil, ctx.Err()
	case err := <-a.done:
		return nil, fmt.Errorf("agent exited: %v\n%s", err, a.stderr)
	}
	cpu, el := a.cpuSeconds()-cpu0, time.Since(t0)
	pct := cpu / el.Seconds() * 100
	perSample := cpu / (el.Seconds() / interval.Seconds())
	return map[string]any{
		"gpus":                     8,
		"measured_s":               el.Seconds(),
		"sample_interval_s":        interval.Seconds(),
		"cpu_percent_at_1s":        pct,
		"cpu_ms_per_sample":        perSample * 1000,
		"cpu_percent_at_10s":       perSample / 10 * 100,
		"rss_mb":                   float64(a.procStatus("VmRSS")) / (1 << 20),
		"peak_rss_mb":              float64(a.procStatus("VmHWM")) / (1 << 20),
		"target_cpu_percent_at_10": 0.2,
		"target_rss_mb":            30,
		"stderr":                   strings.TrimSpace(a.stderr.String()),
	}, nil
}

// gpuSamples returns n samples of a simulated 8-GPU node, 10 s apart,
// the last at end.
func gpuSamples(seed uint64, n int, end time.Time) []gpu.Sample {
	var now time.Time
	sim := gpu.NewSim(8, seed, func() time.Time { return now })
	out := make([]gpu.Sample, n)
	for i := range n {
		now = end.Add(-time.Duration(n-1-i) * 10 * time.Second)
		smp, _ := sim.Sample(context.Background())
		smp.TimestampMs = now.UnixMilli()
		out[i] = *smp
	}
	return out
}

// benchGPUIngest drives 100 requests a second of one 8-GPU sample each
// (1,000 nodes every 10 s) and measures the server's CPU.
func benchGPUIngest(ctx context.Context, c config, s *server, withRuns bool) (any, error) {
	const nodes, rate = 1000, 100 // nodes, requests per second
	dur := 30 * time.Second
	if c.short {
		dur = 10 * time.Second
	}
	cl := newClient(s.url)
	runIDs := make([]string, nodes)
	if withRuns {
		// 125 jobs of 8 nodes each.
		exp, err := cl.createExperiment(ctx, "/Shared/bench/gpu")
		if err != nil {
			return nil, err
		}
		for j := range nodes / 8 {
			id, err := cl.createRun(ctx, exp, fmt.Sprintf("job-%03d", j), time.Now().UnixMilli())
			if err != nil {
				return nil, err
			}
			for k := range 8 {
				runIDs[j*8+k] = id
			}
		}
	}
	sx, err := sxclient.New(s.url, sxclient.Options{Timeout: time.Minute, HTTPClient: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}})
	if err != nil {
		return nil, err
	}
	sink := sx.GPUSink()
	sims := make([]*gpu.Sim, nodes)
	var clock atomic.Int64
	for i := range sims {
		sims[i] = gpu.NewSim(8, uint64(i), func() time.Time { return time.UnixMilli(clock.Load()) })
	}
	var (
		mu       sync.Mutex
		lat      latencies
		errCount atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	work := make(chan int, 256)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				clock.Store(time.Now().UnixMilli())
				smp, _ := sims[i].Sample(ctx)
				smp.TimestampMs = time.Now().UnixMilli()
				rank, num := -1, 0
				if withRuns {
					rank, num = i%8, 8
				}
				b := &gpu.Batch{Labels: gpu.Labels{Node: fmt.Sprintf("node-%04d", i), RunID: runIDs[i], NodeRank: rank, NumNodes: num}, Samples: []gpu.Sample{*smp}}
				t := time.Now()
				res, err := sink.Send(ctx, b)
				d := time.Since(t)
				if err == nil && res.SystemMetricsErr != "" {
					err = fmt.Errorf("system metrics: %s", res.SystemMetricsErr)
				}
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	// Warm up for a second (connections, caches), then measure.
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	warm := time.Now().Add(time.Second)
	end := warm.Add(dur)
	var cpu0 float64
	var t0 time.Time
	sent, next := 0, 0
	for now := range tick.C {
		if ctx.Err() != nil {
			break
		}
		if t0.IsZero() && now.After(warm) {
			cpu0, t0 = s.cpuSeconds(), time.Now()
			mu.Lock()
			lat = lat[:0]
			mu.Unlock()
			sent = 0
		}
		if now.After(end) {
			break
		}
		select {
		case work <- next:
			sent++
		default: // the load generator cannot keep up; count it
			errCount.Add(1)
			firstErr.CompareAndSwap(nil, "load generator fell behind")
		}
		next = (next + 1) % nodes
	}
	close(work)
	wg.Wait()
	cpu, el := s.cpuSeconds()-cpu0, time.Since(t0)
	res := map[string]any{
		"nodes":                 nodes,
		"gpus_per_node":         8,
		"requests_per_s":        float64(sent) / el.Seconds(),
		"gpu_samples_per_s":     float64(sent) * 8 / el.Seconds(),
		"measured_s":            el.Seconds(),
		"server_cpu_percent":    cpu / el.Seconds() * 100,
		"latency":               lat.summary(),
		"errors":                errCount.Load(),
		"run_linked":            withRuns,
		"server_rss_mb":         float64(s.procStatus("VmRSS")) / (1 << 20),
		"system_metrics_per_s":  0.0,
		"db_bytes_after":        dirSize(s.dataDir),
		"first_error":           firstErr.Load(),
		"samples_per_request":   1,
		"request_interval_note": "each node posts one 8-GPU sample every 10 s",
	}
	if withRuns {
		res["system_metrics_per_s"] = float64(sent) * 8 * 6 / el.Seconds()
	} else {
		res["target_cpu_percent"] = 10
	}
	return res, nil
}

// benchGPUQuery pre-fills two hours for 8 nodes of 8 GPUs and times the
// pane's queries.
func benchGPUQuery(ctx context.Context, c config, s *server) (any, error) {
	sx, err := sxclient.New(s.url, sxclient.Options{})
	if err != nil {
		return nil, err
	}
	sink := sx.GPUSink()
	// Two hours less a minute, so the oldest sample is inside the
	// retention window when it arrives.
	const n = 714
	end := time.Now()
	var nodes []string
	for node := range 8 {
		name := fmt.Sprintf("pane-node-%d", node)
		nodes = append(nodes, name)
		samples := gpuSamples(uint64(1000+node), n, end)
		for i := 0; i < n; i += 100 {
			b := &gpu.Batch{Labels: gpu.Labels{Node: name, NodeRank: -1}, Samples: samples[i:min(i+100, n)]}
			if res, err := sink.Send(ctx, b); err != nil || res.Accepted != len(b.Samples) {
				return nil, fmt.Errorf("pre-fill: %+v %v", res, err)
			}
		}
	}
	cl := newClient(s.url)
	iters := 50
	if c.short {
		iters = 20
	}
	run := func(fields string) (map[string]float64, int, error) {
		q := url.Values{"node": {strings.Join(nodes, ",")}, "points": {"360"}}
		if fields != "" {
			q.Set("fields", fields)
		}
		var lat latencies
		size := 0
		for i := range iters + 3 {
			req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/2.0/sextant/gpu/series?"+q.Encode(), nil)
			t := time.Now()
			resp, err := cl.hc.Do(req)
			if err != nil {
				return nil, 0, err
			}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			d := time.Since(t)
			if err != nil || resp.StatusCode != 200 {
				return nil, 0, fmt.Errorf("series: %d %v %.200s", resp.StatusCode, err, buf.String())
			}
			if i >= 3 { // the first queries warm the page cache
				lat = append(lat, d)
			}
			size = buf.Len()
		}
		return lat.summary(), size, nil
	}
	pane, paneBytes, err := run("util,mem_used,temp")
	if err != nil {
		return nil, err
	}
	all, allBytes, err := run(strings.Join(gpu.FieldNames(), ","))
	if err != nil {
		return nil, err
	}
	var latest latencies
	for range iters {
		t := time.Now()
		if err := cl.get(ctx, "/api/2.0/sextant/gpu/latest", url.Values{"node": {strings.Join(nodes, ",")}}, nil); err != nil {
			return nil, err
		}
		latest = append(latest, time.Since(t))
	}
	return map[string]any{
		"gpus":                       64,
		"samples_per_gpu":            n,
		"points":                     360,
		"series_3_fields":            pane,
		"series_3_fields_bytes":      paneBytes,
		"series_all_8_fields":        all,
		"series_all_8_fields_bytes":  allBytes,
		"latest_8_nodes":             latest.summary(),
		"target_p50_ms_for_3_fields": 50,
		"note":                       "over HTTP on loopback, response read in full",
	}, nil
}
