package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// benchHistory logs a historyN-point metric and a bulkN-point metric, then
// times full get-history reads and get-history-bulk-interval reads.
func benchHistory(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-history-")
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
	exp, err := cl.createExperiment(ctx, "/Shared/bench/history")
	if err != nil {
		return nil, err
	}
	small, err := cl.createRun(ctx, exp, "history", time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	big, err := cl.createRun(ctx, exp, "bulk", time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := fill(ctx, cl, small, "loss", c.historyN); err != nil {
		return nil, err
	}
	logf("history: logged %d points in %v", c.historyN, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := fill(ctx, cl, big, "loss", c.bulkN); err != nil {
		return nil, err
	}
	fillSecs := time.Since(t0).Seconds()
	logf("history: logged %d points in %.1f s (%.0f points/s)", c.bulkN, fillSecs, float64(c.bulkN)/fillSecs)
	// Let compaction settle (the idle sweep runs every 5 s).
	time.Sleep(7 * time.Second)

	const reps = 15
	full := make([]float64, 0, reps)
	paged := make([]float64, 0, reps)
	// Timed: the whole response received. Checked afterwards, untimed:
	// every point is there.
	for range reps {
		t := time.Now()
		if _, err := cl.historyRaw(ctx, small, "loss", 1_000_000); err != nil {
			return nil, err
		}
		full = append(full, ms(time.Since(t)))
		t = time.Now()
		if _, err := cl.historyRaw(ctx, small, "loss", 25_000); err != nil { // the Python client's page size
			return nil, err
		}
		paged = append(paged, ms(time.Since(t)))
	}
	for _, size := range []int{1_000_000, 25_000} {
		pts, err := cl.history(ctx, small, "loss", size)
		if err != nil {
			return nil, err
		}
		if len(pts) != c.historyN {
			return nil, fmt.Errorf("history (pages of %d) returned %d points, want %d", size, len(pts), c.historyN)
		}
		for i, p := range pts {
			if p.Step != int64(i) {
				return nil, fmt.Errorf("history (pages of %d): point %d has step %d", size, i, p.Step)
			}
		}
	}
	bulk := map[string][]float64{}
	for _, mode := range []string{"steps", "minmax"} {
		for _, rng := range []string{"all", "zoom"} {
			name := mode + "_" + rng
			for range reps {
				q := url.Values{"run_ids": {big}, "metric_key": {"loss"}, "max_results": {"1000"}, "sampling": {mode}}
				if rng == "zoom" {
					q.Set("start_step", strconv.Itoa(c.bulkN/2))
					q.Set("end_step", strconv.Itoa(c.bulkN/2+c.bulkN/100))
				}
				var out struct {
					Metrics []wirePoint `json:"metrics"`
				}
				t := time.Now()
				if err := cl.get(ctx, "/api/2.0/mlflow/metrics/get-history-bulk-interval", q, &out); err != nil {
					return nil, err
				}
				bulk[name] = append(bulk[name], ms(time.Since(t)))
				if len(out.Metrics) < 500 || len(out.Metrics) > 2002 {
					return nil, fmt.Errorf("bulk-interval %s returned %d points", name, len(out.Metrics))
				}
			}
		}
	}
	res := map[string]any{
		"history_points":                      c.historyN,
		"full_history_ms_median":              median(full),
		"full_history_client_paged_ms_median": median(paged),
		"bulk_points":                         c.bulkN,
		"bulk_fill_points_per_second":         math.Round(float64(c.bulkN) / fillSecs),
		"target_full_history_ms":              150,
		"target_bulk_interval_ms":             20,
	}
	for name, v := range bulk {
		res["bulk_interval_1000_"+name+"_ms_median"] = median(v)
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fill logs n points of key to run in 1000-point batches from 4 writers,
// each writer taking every fourth batch.
func fill(ctx context.Context, cl *client, runID, key string, n int) error {
	const batch = 1000
	batches := (n + batch - 1) / batch
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			body := make([]byte, 0, 96*1024)
			for b := w; b < batches; b += 4 {
				body = append(body[:0], `{"run_id":"`...)
				body = append(body, runID...)
				body = append(body, `","metrics":[`...)
				for i := range batch {
					st := int64(b*batch + i)
					if st >= int64(n) {
						break
					}
					if i > 0 {
						body = append(body, ',')
					}
					v := 2*math.Exp(-float64(st)/float64(n)*5) + rng.NormFloat64()*0.02
					body = appendMetric(body, key, v, 1_700_000_000_000+st*3, st)
				}
				body = append(body, "]}"...)
				if err := cl.post(ctx, "/api/2.0/mlflow/runs/log-batch", body, nil); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
