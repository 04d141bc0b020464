package main

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// readLoad is what runReadLoadOn measured.
type readLoad struct {
	rate     float64 // reads per second, all kinds
	lat      map[string]latencies
	errors   int64
	firstErr string
	cpuCores float64
	seconds  float64
}

// readKinds are the reads the UI makes most while a team watches training:
// a chart's downsampled curve, the first page of a run's history, and the
// runs table ordered by a metric.
var readKinds = []string{"bulk_interval_1000", "history_page_10000", "search_100_by_metric"}

// runReadLoadOn sends reads from workers clients, worker w to
// cls[w % len(cls)], each cycling through readKinds over runIDs, for
// duration after a one-second warm-up; CPU is the servers' sum.
func runReadLoadOn(ctx context.Context, cls []*client, ss []*server, exp string, runIDs []string, workers int, duration time.Duration) (readLoad, error) {
	var (
		measuring, stop atomic.Bool
		done            atomic.Int64
		errCount        atomic.Int64
		firstErr        atomic.Value
		mu              sync.Mutex
		wg              sync.WaitGroup
		out             = readLoad{lat: map[string]latencies{}}
	)
	for w := range workers {
		wg.Go(func() {
			cl := cls[w%len(cls)]
			local := map[string]latencies{}
			for i := w; !stop.Load() && ctx.Err() == nil; i++ {
				kind := readKinds[i%len(readKinds)]
				run := runIDs[i%len(runIDs)]
				t0 := time.Now()
				var err error
				switch kind {
				case "bulk_interval_1000":
					var res struct {
						Metrics []wirePoint `json:"metrics"`
					}
					q := url.Values{"run_ids": {run}, "metric_key": {"loss"}, "max_results": {"1000"}}
					if err = cl.get(ctx, "/api/2.0/mlflow/metrics/get-history-bulk-interval", q, &res); err == nil && len(res.Metrics) == 0 {
						err = fmt.Errorf("bulk-interval of run %s returned no points", run)
					}
				case "history_page_10000":
					var res struct {
						Metrics []wirePoint `json:"metrics"`
					}
					q := url.Values{"run_id": {run}, "metric_key": {"val_loss"}, "max_results": {"10000"}}
					if err = cl.get(ctx, "/api/2.0/mlflow/metrics/get-history", q, &res); err == nil && len(res.Metrics) == 0 {
						err = fmt.Errorf("get-history of run %s returned no points", run)
					}
				case "search_100_by_metric":
					var res struct {
						Runs []any `json:"runs"`
					}
					body := fmt.Appendf(nil, `{"experiment_ids":[%q],"filter":"metrics.loss < 100","order_by":["metrics.accuracy DESC"],"max_results":100}`, exp)
					if err = cl.post(ctx, "/api/2.0/mlflow/runs/search", body, &res); err == nil && len(res.Runs) != len(runIDs) {
						err = fmt.Errorf("runs/search returned %d runs, want %d", len(res.Runs), len(runIDs))
					}
				}
				d := time.Since(t0)
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if measuring.Load() {
					local[kind] = append(local[kind], d)
					done.Add(1)
				}
			}
			mu.Lock()
			for k, l := range local {
				out.lat[k] = append(out.lat[k], l...)
			}
			mu.Unlock()
		})
	}
	time.Sleep(time.Second)
	cpu := func() (t float64) {
		for _, s := range ss {
			t += s.cpuSeconds()
		}
		return t
	}
	cpu0 := cpu()
	t0 := time.Now()
	measuring.Store(true)
	for time.Since(t0) < duration && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1 := cpu()
	stop.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	out.seconds = elapsed.Seconds()
	out.rate = float64(done.Load()) / elapsed.Seconds()
	out.cpuCores = (cpu1 - cpu0) / elapsed.Seconds()
	out.errors = errCount.Load()
	if e := firstErr.Load(); e != nil {
		out.firstErr = e.(string)
	}
	return out, nil
}
