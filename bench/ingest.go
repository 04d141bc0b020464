package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ingestKeys are the ten metric keys each run logs: a training loop's
// usual mix.
var ingestKeys = []string{
	"loss", "val_loss", "accuracy", "learning_rate", "grad_norm",
	"tokens_per_second", "epoch", "train/perplexity", "system/gpu_0_utilization_percentage", "system/gpu_0_memory_usage_megabytes",
}

// benchIngest: 32 runs log concurrently, each sending log-batch requests of
// 1000 metrics (10 keys x 100 steps), as fast as the server acknowledges
// them. Then the server is killed with SIGKILL, restarted, and every
// acknowledged point is looked for; then it is stopped cleanly and the
// database is measured.
func benchIngest(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-ingest-")
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
	defer func() {
		if s != nil {
			s.kill()
		}
	}()
	cl := newClient(s.url)
	exp, err := cl.createExperiment(ctx, "/Shared/bench/ingest")
	if err != nil {
		return nil, err
	}
	runIDs := make([]string, c.runs)
	for i := range runIDs {
		if runIDs[i], err = cl.createRun(ctx, exp, fmt.Sprintf("ingest-%02d", i), time.Now().UnixMilli()); err != nil {
			return nil, err
		}
	}

	warmup := 2 * time.Second
	if c.short {
		warmup = time.Second
	}
	load, err := runIngestLoad(ctx, cl, s, runIDs, warmup, c.duration)
	if err != nil {
		return nil, err
	}
	ackedPts, totalAcked, rate := load.acked, load.total, load.rate
	logf("ingest: %.0f points/s, %d points acknowledged, %d errors", rate, totalAcked, load.errors)

	// Crash: every acknowledged point must survive SIGKILL.
	if os.Getenv("BENCH_SERVER_LOG") != "" {
		logf("server log:\n%s", s.stderr.String())
	}
	s.kill()
	s = nil
	s, err = startServer(ctx, bin, dir, c.serverArgs...)
	if err != nil {
		return nil, err
	}
	cl = newClient(s.url)
	var stored int64
	missing := 0
	for w, id := range runIDs {
		var runStored int64
		for _, key := range ingestKeys {
			pts, err := cl.history(ctx, id, key, 1_000_000)
			if err != nil {
				return nil, err
			}
			runStored += int64(len(pts))
		}
		if runStored < ackedPts[w] {
			missing++
		}
		stored += runStored
	}
	logf("after SIGKILL and restart: %d points stored, %d acknowledged", stored, totalAcked)

	// Let the idle sweep compact the tails, then stop cleanly so the WAL is
	// folded into the database file, and measure it.
	time.Sleep(7 * time.Second)
	if err := s.stop(); err != nil {
		return nil, err
	}
	s = nil
	file, live, err := dbBytes(ctx, dir)
	if err != nil {
		return nil, err
	}
	res := map[string]any{
		"runs":              c.runs,
		"batch_metrics":     len(ingestKeys) * ingestStepsPerBatch,
		"measured_seconds":  load.seconds,
		"points_per_second": math.Round(rate),
		"latency":           load.lat.summary(),
		"errors":            load.errors,
		"server_cpu_cores":  load.cpuCores,
		// The server's CPU per point, less dependent on what else shares
		// the machine than points/s (the load generator, other work).
		"server_cpu_us_per_point": load.cpuCores / rate * 1e6,
		"machine_cpu_busy":        load.machineBusy,
		"server_rss_peak_mb":      float64(load.rssPeak) / (1 << 20),
		"acknowledged_points":     totalAcked,
		"stored_after_sigkill":    stored,
		"runs_missing_points":     missing,
		"durable":                 missing == 0 && stored >= totalAcked,
		"db_file_bytes":           file,
		"bytes_per_point":         float64(file) / float64(stored),
		"bytes_per_point_live":    float64(live) / float64(stored),
		"value_distribution":      "float64 loss curves with N(0, 0.01) noise (full-entropy mantissas)",
		"timestamps_and_steps":    "steps +1, timestamps +7 ms with 0-2 ms jitter",
		"target_points_per_sec":   300000,
		"target_p99_ms":           100,
		"target_bytes_per_point":  10,
	}
	if load.firstErr != "" {
		res["first_error"] = load.firstErr
	}
	return res, nil
}

// ingestStepsPerBatch is the steps per key in one log-batch request.
const ingestStepsPerBatch = 100

// ingestLoad is the outcome of runIngestLoad.
type ingestLoad struct {
	rate     float64 // points/s while measuring
	seconds  float64
	lat      latencies
	acked    []int64 // acknowledged points per run
	total    int64
	errors   int64
	firstErr string
	cpuCores float64
	rssPeak  int64
	// machineBusy is the fraction of all the machine's cores that were
	// busy while measuring (servers, database, load generator, others).
	machineBusy float64
}

// runIngestLoad has one goroutine per run send 1000-metric log-batch
// requests (10 keys x 100 steps) as fast as the server acknowledges them,
// for warmup and then duration, and measures the second part.
func runIngestLoad(ctx context.Context, cl *client, s *server, runIDs []string, warmup, duration time.Duration) (ingestLoad, error) {
	return runIngestLoadOn(ctx, []*client{cl}, []*server{s}, runIDs, warmup, duration)
}

// runIngestLoadOn is runIngestLoad against several replicas: run w sends
// to cls[w % len(cls)]. CPU and RSS are the servers' sums.
func runIngestLoadOn(ctx context.Context, cls []*client, ss []*server, runIDs []string, warmup, duration time.Duration) (ingestLoad, error) {
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		mu        sync.Mutex
		out       = ingestLoad{acked: make([]int64, len(runIDs))}
		errCount  atomic.Int64
		firstErr  atomic.Value
		wg        sync.WaitGroup
	)
	for w := range runIDs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			body := make([]byte, 0, 96*1024)
			// A run loaded again (auth's rounds) continues after its last
			// step: re-sending stored steps would make every later load pay
			// for overlap checks the first did not.
			step := nextSteps.get(runIDs[w])
			defer func() { nextSteps.set(runIDs[w], step) }()
			var local latencies
			base := time.Now().UnixMilli()
			for !stop.Load() && ctx.Err() == nil {
				body = append(body[:0], `{"run_id":"`...)
				body = append(body, runIDs[w]...)
				body = append(body, `","metrics":[`...)
				for k, key := range ingestKeys {
					for i := range int64(ingestStepsPerBatch) {
						st := step + i
						// Loss-curve shapes with float64 noise: full-entropy
						// mantissas, the hardest realistic case to compress.
						v := math.Exp(-float64(st)/5e4)*float64(k+1) + rng.NormFloat64()*0.01
						if k > 0 || i > 0 {
							body = append(body, ',')
						}
						body = appendMetric(body, key, v, base+st*7+int64(rng.IntN(3)), st)
					}
				}
				body = append(body, "]}"...)
				t0 := time.Now()
				err := cls[w%len(cls)].post(ctx, "/api/2.0/mlflow/runs/log-batch", body, nil)
				d := time.Since(t0)
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				step += ingestStepsPerBatch
				atomic.AddInt64(&out.acked[w], int64(len(ingestKeys)*ingestStepsPerBatch))
				if measuring.Load() {
					local = append(local, d)
				}
			}
			mu.Lock()
			out.lat = append(out.lat, local...)
			mu.Unlock()
		})
	}
	time.Sleep(warmup)
	cpu := func() (t float64) {
		for _, s := range ss {
			t += s.cpuSeconds()
		}
		return t
	}
	startPts := sum(out.acked)
	cpu0 := cpu()
	busy0, total0 := machineCPU()
	t0 := time.Now()
	measuring.Store(true)
	for time.Since(t0) < duration && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		var rss int64
		for _, s := range ss {
			rss += s.procStatus("VmRSS")
		}
		out.rssPeak = max(out.rssPeak, rss)
	}
	measuring.Store(false)
	elapsed := time.Since(t0)
	endPts := sum(out.acked)
	cpu1 := cpu()
	busy1, total1 := machineCPU()
	if total1 > total0 {
		out.machineBusy = (busy1 - busy0) / (total1 - total0)
	}
	stop.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	out.total = sum(out.acked)
	out.seconds = elapsed.Seconds()
	out.rate = float64(endPts-startPts) / elapsed.Seconds()
	out.cpuCores = (cpu1 - cpu0) / elapsed.Seconds()
	out.errors = errCount.Load()
	if e := firstErr.Load(); e != nil {
		out.firstErr = e.(string)
	}
	return out, nil
}

func sum(xs []int64) int64 {
	var n int64
	for i := range xs {
		n += atomic.LoadInt64(&xs[i])
	}
	return n
}

// nextSteps remembers, per run, the step after the last one a load sent.
var nextSteps = stepBook{m: map[string]int64{}}

type stepBook struct {
	mu sync.Mutex
	m  map[string]int64
}

func (b *stepBook) get(run string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[run]
}

func (b *stepBook) set(run string, step int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[run] = step
}
