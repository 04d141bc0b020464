package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// benchSearch creates searchRuns runs with params, tags and metrics, then
// times runs/search with a metric and a param filter ordered by a metric.
func benchSearch(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-search-")
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
	exp, err := cl.createExperiment(ctx, "/Shared/bench/search")
	if err != nil {
		return nil, err
	}
	lrs := []string{"0.1", "0.01", "0.001", "0.0001"}
	opts := []string{"adam", "sgd", "adamw"}
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for {
				i := next.Add(1) - 1
				if i >= int64(c.searchRuns) || ctx.Err() != nil {
					return
				}
				id, err := cl.createRun(ctx, exp, "run-"+strconv.FormatInt(i, 10), 1_700_000_000_000+i)
				if err != nil {
					errc <- err
					return
				}
				body, _ := json.Marshal(map[string]any{
					"run_id": id,
					"params": []map[string]string{
						{"key": "lr", "value": lrs[rng.IntN(len(lrs))]},
						{"key": "optimizer", "value": opts[rng.IntN(len(opts))]},
						{"key": "batch_size", "value": strconv.Itoa(16 << rng.IntN(4))},
					},
					"tags": []map[string]string{{"key": "team", "value": []string{"vision", "nlp", "rl"}[rng.IntN(3)]}},
					"metrics": []map[string]any{
						{"key": "loss", "value": rng.Float64(), "timestamp": 1, "step": 10},
						{"key": "accuracy", "value": rng.Float64(), "timestamp": 1, "step": 10},
						{"key": "val_loss", "value": rng.Float64(), "timestamp": 1, "step": 10},
					},
				})
				if err := cl.post(ctx, "/api/2.0/mlflow/runs/log-batch", body, nil); err != nil {
					errc <- err
					return
				}
				if i%10000 == 9999 {
					logf("search: %d runs created", i+1)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	createSecs := time.Since(t0).Seconds()
	time.Sleep(2 * time.Second)

	type query struct {
		name    string
		filter  string
		orderBy []string
		max     int
	}
	queries := []query{
		{"metric_and_param_filter_order_by_metric_100", "metrics.loss < 0.5 AND params.lr = '0.001'", []string{"metrics.accuracy DESC"}, 100},
		{"metric_and_param_filter_order_by_metric_1000", "metrics.loss < 0.5 AND params.lr = '0.001'", []string{"metrics.accuracy DESC"}, 1000},
		{"no_filter_default_order_100", "", nil, 100},
		{"tag_filter_order_by_param_100", "tags.team = 'nlp'", []string{"params.batch_size ASC"}, 100},
	}
	res := map[string]any{
		"runs":                   c.searchRuns,
		"create_runs_per_second": float64(c.searchRuns) / createSecs,
		"target_first_page_ms":   50,
		"target_query":           queries[0].filter + " ORDER BY " + queries[0].orderBy[0],
	}
	for _, q := range queries {
		var times []float64
		var n int
		for range 15 {
			body, _ := json.Marshal(map[string]any{"experiment_ids": []string{exp}, "filter": q.filter, "order_by": q.orderBy, "max_results": q.max})
			var out struct {
				Runs []json.RawMessage `json:"runs"`
			}
			t := time.Now()
			if err := cl.post(ctx, "/api/2.0/mlflow/runs/search", body, &out); err != nil {
				return nil, err
			}
			times = append(times, ms(time.Since(t)))
			n = len(out.Runs)
		}
		if n == 0 {
			return nil, fmt.Errorf("query %s returned no runs", q.name)
		}
		res[q.name+"_ms_median"] = median(times)
		res[q.name+"_runs_returned"] = n
	}
	return res, nil
}
