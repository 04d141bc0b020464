package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed progress_rank.py
var progressRankScript string

// progressStepS is the training step both parts of the bench assume: 10 ms.
const progressStepS = 0.010

// benchProgress measures per-rank progress reporting (issue 45):
//
//   - client: 8 Python ranks (processes) run a loop of 10 ms sleep steps,
//     without Progress and with Progress.step() after every step against
//     the server, alternating, for several rounds; per rank, the wall
//     overhead and the CPU the process spent (step() calls plus the sender
//     thread) per step, as fractions of the step; medians of ranks, then
//     of rounds.
//   - server: 1,000 simulated ranks (125 nodes x 8 ranks of one run), each
//     reporting 10 steps/s the way the Python sender does (one request per
//     rank per send interval, the same JSON body), for -progress-duration;
//     the server process's CPU per wall second (fraction of a core), the
//     request latencies, how the writer grouped the requests into commits
//     (from /metrics), and every acknowledged report read back. The
//     interval is the sender's _SEND_INTERVAL_S (5 s), or
//     -progress-interval to compare others without editing the sender.
func benchProgress(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-progress-")
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	s, err := startServer(ctx, bin, dir, c.serverArgs...)
	if err != nil {
		return nil, err
	}
	defer s.kill()
	cl := newClient(s.url)
	exp, err := cl.createExperiment(ctx, "/Shared/bench/progress")
	if err != nil {
		return nil, err
	}
	interval, err := progressInterval()
	if err != nil {
		return nil, err
	}
	if c.progressInterval > 0 {
		interval = c.progressInterval // to compare intervals without editing the sender
	}
	res := map[string]any{"send_interval_s": interval.Seconds()}
	if !strings.Contains(c.progressParts, "server") && !strings.Contains(c.progressParts, "client") {
		return nil, fmt.Errorf("-progress-parts %q: want client, server or both", c.progressParts)
	}
	if strings.Contains(c.progressParts, "client") {
		out, err := progressClient(ctx, c, cl, s, exp)
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		res["client"] = out
	}
	if strings.Contains(c.progressParts, "server") {
		out, err := progressServer(ctx, c, cl, s, exp, interval)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		res["server"] = out
	}
	return res, nil
}

var sendIntervalRE = regexp.MustCompile(`(?m)^_SEND_INTERVAL_S\s*=\s*([0-9.]+)`)

// progressInterval reads the Python sender's interval from
// python/sextant/progress.py, so that the simulated ranks send as it does.
func progressInterval() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("python", "sextant", "progress.py"))
	if err != nil {
		return 0, fmt.Errorf("read the sender's interval (run from the repository root): %w", err)
	}
	m := sendIntervalRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("python/sextant/progress.py has no _SEND_INTERVAL_S")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("_SEND_INTERVAL_S %q: %v", m[1], err)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// rankResult is what progress_rank.py prints.
type rankResult struct {
	WallS     float64 `json:"wall_s"`
	CPUS      float64 `json:"cpu_s"`
	MainCPUS  float64 `json:"main_thread_cpu_s"`
	SenderCPU float64 `json:"sender_thread_cpu_s"`
	Sent      int     `json:"sent"`
	Dropped   int     `json:"dropped"`
}

func progressClient(ctx context.Context, c config, cl *client, s *server, exp string) (any, error) {
	py := c.python
	if py == "" {
		py = "python3"
	}
	script := filepath.Join(os.TempDir(), fmt.Sprintf("sextant-bench-progress-%d.py", os.Getpid()))
	if err := os.WriteFile(script, []byte(progressRankScript), 0o644); err != nil {
		return nil, err
	}
	defer os.Remove(script)
	pyPath, err := filepath.Abs("python")
	if err != nil {
		return nil, err
	}
	const ranks = 8
	steps, rounds := 1000, 3
	if c.short {
		steps, rounds = 300, 1
	}
	var wallOver, cpuOver, senderPerStep, mainPerStep []float64
	sentAll, droppedAll := 0, 0
	for round := range rounds {
		runID, err := cl.createRun(ctx, exp, fmt.Sprintf("client-%d", round), time.Now().UnixMilli())
		if err != nil {
			return nil, err
		}
		// Alternate which mode goes first, so drift hits both alike.
		modes := []string{"off", "on"}
		if round%2 == 1 {
			modes = []string{"on", "off"}
		}
		got := map[string][]rankResult{}
		for _, mode := range modes {
			rs, err := runRanks(ctx, py, script, pyPath, s.url, runID, mode, ranks, steps)
			if err != nil {
				return nil, err
			}
			got[mode] = rs
		}
		var w, cp, sn, mn []float64
		for r := range ranks {
			off, on := got["off"][r], got["on"][r]
			w = append(w, (on.WallS-off.WallS)/float64(steps)/progressStepS)
			cp = append(cp, (on.CPUS-off.CPUS)/float64(steps)/progressStepS)
			sn = append(sn, on.SenderCPU/float64(steps)*1e6)
			mn = append(mn, (on.MainCPUS-off.MainCPUS)/float64(steps)*1e6)
			sentAll += on.Sent
			droppedAll += on.Dropped
		}
		wallOver = append(wallOver, median(w))
		cpuOver = append(cpuOver, median(cp))
		senderPerStep = append(senderPerStep, median(sn))
		mainPerStep = append(mainPerStep, median(mn))
		logf("progress client round %d: wall overhead %.4f, cpu overhead %.4f of a step", round, median(w), median(cp))
	}
	return map[string]any{
		"ranks":                          ranks,
		"steps_per_rank":                 steps,
		"rounds":                         rounds,
		"python":                         py,
		"step":                           "time.sleep(0.010) per step (8 sleeping ranks do not oversubscribe the 2 cores); each step then calls progress.data_ready() and progress.step(samples=32)",
		"wall_overhead":                  "per rank: (wall with Progress - wall without) / steps / 10 ms; median of ranks, then of rounds",
		"cpu_overhead":                   "per rank: (process CPU with Progress - without, from the loop's start to the last report sent) / steps / 10 ms; median of ranks, then of rounds",
		"wall_overhead_fraction_of_step": median(wallOver),
		"cpu_overhead_fraction_of_step":  median(cpuOver),
		"wall_overhead_rounds":           wallOver,
		"cpu_overhead_rounds":            cpuOver,
		"sender_thread_cpu_us_per_step":  median(senderPerStep),
		"step_call_cpu_us_per_step":      median(mainPerStep),
		"reports_sent":                   sentAll,
		"reports_dropped":                droppedAll,
		"target_fraction_of_step":        0.01,
	}, nil
}

// runRanks runs n ranks of progress_rank.py at once and returns their results in rank order.
func runRanks(ctx context.Context, py, script, pyPath, url, runID, mode string, n, steps int) ([]rankResult, error) {
	startAt := float64(time.Now().Add(3*time.Second).UnixNano()) / 1e9
	out := make([]rankResult, n)
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, py, script, mode, "sleep", strconv.Itoa(steps), strconv.FormatFloat(progressStepS, 'g', -1, 64), strconv.Itoa(r), strconv.FormatFloat(startAt, 'f', 3, 64))
			cmd.Env = append(os.Environ(), "PYTHONPATH="+pyPath, "MLFLOW_TRACKING_URI="+url, "MLFLOW_RUN_ID="+runID)
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(b, &out[r])
			}
			if err != nil {
				errc <- fmt.Errorf("rank %d (%s): %w: %s", r, mode, err, b)
			}
		})
	}
	wg.Wait()
	close(errc)
	return out, <-errc
}

// progressBody appends a request as the Python sender makes it (json.dumps
// of {"run_id", "node", "reports"}, each report as Progress.step builds it
// for the Lightning callback: rank, step, time_ms, step_time_s,
// data_wait_s, samples, gpu).
func progressBody(b []byte, runID, node string, rank, gpu int, step0 int64, n int, timeMs int64, rng *rand.Rand) []byte {
	b = append(b, `{"run_id": "`...)
	b = append(b, runID...)
	b = append(b, `", "node": "`...)
	b = append(b, node...)
	b = append(b, `", "reports": [`...)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `{"rank": `...)
		b = strconv.AppendInt(b, int64(rank), 10)
		b = append(b, `, "step": `...)
		b = strconv.AppendInt(b, step0+int64(i), 10)
		b = append(b, `, "time_ms": `...)
		b = strconv.AppendInt(b, timeMs-int64(n-1-i)*100, 10)
		b = append(b, `, "step_time_s": `...)
		b = strconv.AppendFloat(b, 0.1+rng.Float64()*0.002, 'g', -1, 64)
		b = append(b, `, "data_wait_s": `...)
		b = strconv.AppendFloat(b, 0.001+rng.Float64()*0.0005, 'g', -1, 64)
		b = append(b, `, "samples": 32.0, "gpu": `...)
		b = strconv.AppendInt(b, int64(gpu), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func progressServer(ctx context.Context, c config, cl *client, s *server, exp string, interval time.Duration) (any, error) {
	const nodes, perNode, stepsPerS = 125, 8, 10
	ranks := nodes * perNode
	runID, err := cl.createRun(ctx, exp, "server-1000-ranks", time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	duration := c.progressDuration
	warmup := 2 * interval
	perReq := int(float64(stepsPerS) * interval.Seconds())
	// Each rank keeps its own connection, as each Python process does.
	var (
		stop, measuring atomic.Bool
		acked           = make([]int64, ranks)
		reqs, errCount  atomic.Int64
		firstErr        atomic.Value
		mu              sync.Mutex
		lat             latencies
		wg              sync.WaitGroup
	)
	for r := range ranks {
		wg.Go(func() {
			// Each node's ranks come from an address of its own (the server
			// caps connections per client address).
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+r/perNode))}}
			rc := &client{base: s.url, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DialContext: d.DialContext}, Timeout: time.Minute}}
			rng := rand.New(rand.NewPCG(uint64(r), 45))
			node := fmt.Sprintf("node-%03d", r/perNode)
			// Ranks start at random phases of the interval, as jobs do.
			next := time.Now().Add(time.Duration(rng.Int64N(int64(interval))))
			var step int64
			var body []byte
			var local latencies
			for !stop.Load() && ctx.Err() == nil {
				time.Sleep(time.Until(next))
				next = next.Add(interval)
				body = progressBody(body[:0], runID, node, r, r%perNode, step, perReq, time.Now().UnixMilli(), rng)
				t0 := time.Now()
				err := rc.post(ctx, "/api/2.0/sextant/progress", body, nil)
				d := time.Since(t0)
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				step += int64(perReq)
				atomic.StoreInt64(&acked[r], step)
				if measuring.Load() {
					reqs.Add(1)
					local = append(local, d)
				}
			}
			rc.hc.CloseIdleConnections()
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	time.Sleep(warmup)
	groupKeys := []string{"sextant_db_commit_requests_sum", "sextant_db_commit_requests_count"}
	prom0 := s.promValues(ctx, groupKeys...)
	cpu0 := s.cpuSeconds()
	busy0, total0 := machineCPU()
	t0 := time.Now()
	measuring.Store(true)
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(t0).Seconds()
	cpu1 := s.cpuSeconds()
	busy1, total1 := machineCPU()
	prom1 := s.promValues(ctx, groupKeys...)
	stop.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Every acknowledged report must be there: each rank's step_time_s
	// history, and a sample of ranks' data_wait_s and samples.
	missing, checked := 0, 0
	var stored int64
	for r := range ranks {
		keys := []string{"step_time_s"}
		if r%97 == 0 {
			keys = append(keys, "data_wait_s", "samples")
		}
		for _, k := range keys {
			pts, err := cl.history(ctx, runID, fmt.Sprintf("sextant/progress/rank_%d/%s", r, k), 25000)
			if err != nil {
				return nil, err
			}
			checked++
			stored += int64(len(pts))
			if int64(len(pts)) != acked[r] {
				missing++
			}
		}
	}
	var ackedAll int64
	for _, a := range acked {
		ackedAll += a
	}
	cores := (cpu1 - cpu0) / elapsed
	res := map[string]any{
		"ranks":                     ranks,
		"layout":                    "one run: 125 nodes x 8 ranks (node-000..node-124, gpu = rank % 8)",
		"steps_per_second_rank":     stepsPerS,
		"reports_per_request":       perReq,
		"report_fields":             "rank, step, time_ms, step_time_s, data_wait_s, samples, gpu (the Lightning callback's): 3 metric points a report",
		"connections":               "one keep-alive connection per rank, from one loopback address per node",
		"measured_seconds":          elapsed,
		"requests_per_second":       float64(reqs.Load()) / elapsed,
		"server_cpu_cores":          cores,
		"server_cpu_us_per_request": cores * 1e6 / (float64(reqs.Load()) / elapsed),
		"machine_cpu_busy":          0.0,
		"latency":                   lat.summary(),
		"errors":                    errCount.Load(),
		"acknowledged_reports":      ackedAll,
		"series_checked":            checked,
		"series_missing_reports":    missing,
		"all_landed":                missing == 0 && errCount.Load() == 0,
		"server_rss_mb":             float64(s.procStatus("VmRSS")) / (1 << 20),
		"target_server_cpu_cores":   0.10,
	}
	// How the writer grouped the requests: the commits per second, and the
	// write requests each commit carried (sextant_db_commit_requests).
	if n := prom1[groupKeys[1]] - prom0[groupKeys[1]]; n > 0 {
		res["commits_per_second"] = n / elapsed
		res["requests_per_commit"] = (prom1[groupKeys[0]] - prom0[groupKeys[0]]) / n
	}
	if total1 > total0 {
		res["machine_cpu_busy"] = (busy1 - busy0) / (total1 - total0)
	}
	if e := firstErr.Load(); e != nil {
		res["first_error"] = e.(string)
	}
	logf("progress server: %.3f cores, %.0f requests/s, missing %d of %d series", cores, float64(reqs.Load())/elapsed, missing, checked)
	return res, nil
}
