package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// searchShape is one runs/search of the reads benchmark.
type searchShape struct {
	Name    string `json:"-"`
	Filter  string `json:"filter"`
	OrderBy string `json:"order_by"`
	About   string `json:"about"`
	// Both searches the second experiment too (otherRuns runs), as
	// MLflow's UI does when experiments are compared.
	Both bool `json:"both_experiments,omitempty"`
}

// ids returns the experiments sh searches on p.
func (sh searchShape) ids(p *livePeer) []string {
	if sh.Both {
		return []string{p.exp, p.exp2}
	}
	return []string{p.exp}
}

// The second experiment of the search part: otherRuns runs, numbered from
// otherFrom (their own names, start times and values), created once.
const (
	otherRuns = 2000
	otherFrom = 1_000_000
)

// searchShapes are the filter shapes, each ordered by a metric and
// asking for the first page of 1,000 runs (MlflowClient.search_runs'
// default max_results).
var searchShapes = []searchShape{
	{"metric_and_param", "metrics.loss < 0.5 AND params.lr = '0.001'", "metrics.accuracy DESC",
		"about 1 run in 8 matches: the page fills from 8,000 runs on", false},
	{"tag_selective_and_metric", "tags.sweep = 'sweep-3' AND metrics.val_loss < 0.5", "metrics.loss ASC",
		"a sweep of 200 runs, half of them match, at every size: only a plan that starts from the tag stays flat", false},
	{"broad_metric_and_param", "metrics.accuracy > 0.1 AND params.optimizer != 'sgd'", "metrics.val_loss ASC",
		"about 6 runs in 10 match: the page is full at every size", false},
	{"time_window_and_metric", "attributes.start_time >= 1700000000100 AND attributes.start_time < 1700000000200 AND metrics.loss < 0.5", "metrics.accuracy DESC",
		"the runs started in one window (100 runs, about half match) at every size: only a plan that starts from start times stays flat", false},
	{"two_experiments_metric_and_param", "metrics.loss < 0.5 AND params.lr = '0.001'", "metrics.accuracy DESC",
		"metric_and_param over this experiment and a second one of 2,000 runs (experiment_ids: both), as MLflow's UI searches when experiments are compared", true},
}

const searchPage = 1000

// searchRun returns the log-batch body of run i of the search experiment:
// the same for every server, whatever order the runs are created in.
func searchRunBody(runID string, i int) []byte {
	rng := rand.New(rand.NewPCG(uint64(i), 99))
	lrs := []string{"0.1", "0.01", "0.001", "0.0001"}
	opts := []string{"adam", "sgd", "adamw"}
	body, _ := json.Marshal(map[string]any{
		"run_id": runID,
		"params": []map[string]string{
			{"key": "lr", "value": lrs[rng.IntN(len(lrs))]},
			{"key": "optimizer", "value": opts[rng.IntN(len(opts))]},
			{"key": "batch_size", "value": strconv.Itoa(16 << rng.IntN(4))},
		},
		"tags": []map[string]string{
			{"key": "team", "value": []string{"vision", "nlp", "rl"}[rng.IntN(3)]},
			{"key": "sweep", "value": "sweep-" + strconv.Itoa(i/200)},
		},
		"metrics": []map[string]any{
			{"key": "loss", "value": rng.Float64(), "timestamp": 1_700_000_000_000 + i, "step": 10},
			{"key": "accuracy", "value": rng.Float64(), "timestamp": 1_700_000_000_000 + i, "step": 10},
			{"key": "val_loss", "value": rng.Float64(), "timestamp": 1_700_000_000_000 + i, "step": 10},
		},
	})
	return body
}

// growRuns creates runs from..to-1 of experiment exp on p.
func growRuns(ctx context.Context, p *livePeer, exp string, from, to, workers int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				id, err := p.cl.createRun(ctx, exp, "run-"+strconv.Itoa(i), 1_700_000_000_000+int64(i))
				if err != nil {
					errc <- err
					return
				}
				if err := p.cl.post(ctx, "/api/2.0/mlflow/runs/log-batch", searchRunBody(id, i), nil); err != nil {
					errc <- err
					return
				}
				// Ended, as a sweep's runs are: a run left RUNNING with
				// 2023's timestamps is one Sextant's watcher finds stalled
				// and tags (sextant.alert), writing to the experiment
				// while it is searched.
				end := fmt.Sprintf(`{"run_id":%q,"status":"FINISHED","end_time":%d}`, id, 1_700_000_060_000+int64(i))
				if err := p.cl.post(ctx, "/api/2.0/mlflow/runs/update", []byte(end), nil); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// readsSearch grows one experiment per server through the sizes and times
// the shapes at each.
func readsSearch(ctx context.Context, c config, specs []peerSpec, dir string) (map[string]any, error) {
	var sizes []int
	for _, f := range strings.Split(c.readsSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return nil, fmt.Errorf("-reads-search-runs %q: want ascending positive sizes", c.readsSizes)
		}
		sizes = append(sizes, n)
	}
	peers, stop, err := startPeers(ctx, specs, dir, nil)
	if err != nil {
		return nil, err
	}
	defer stop()
	floor, err := startFloorServer()
	if err != nil {
		return nil, err
	}
	defer floor.stop()
	for _, p := range peers {
		if p.exp, err = p.cl.createExperiment(ctx, "bench-reads-search"); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if p.exp2, err = p.cl.createExperiment(ctx, "bench-reads-search-other"); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		workers := map[string]int{"sextant": 8, "fasttrackml": 4, "mlflow": 2}[p.name]
		if err := growRuns(ctx, p, p.exp2, otherFrom, otherFrom+otherRuns, workers); err != nil {
			return nil, fmt.Errorf("%s: create runs: %w", p.name, err)
		}
	}
	shapes := map[string]any{}
	for _, sh := range searchShapes {
		shapes[sh.Name] = sh
	}
	out := map[string]any{
		"shapes":                   shapes,
		"page_size":                searchPage,
		"how":                      "POST runs/search {experiment_ids, filter, order_by, max_results: 1000}, the body read to its end but neither kept nor decoded while timed; the runs have 3 params, 2 tags and 3 metrics each and are FINISHED, the same on every server; each size is measured once the servers have gone quiet (under 5% of a core for 6 s) after its runs were created",
		"how_transfer_floor":       "transfer_floor_ms: the same client sending the same request to a Go HTTP server in the benchmark's process that answers Sextant's page, byte for byte, and does nothing else (median of four times as many rounds, back to back): the least a Go HTTP server takes for that page here",
		"how_python":               "python_client_search_runs: MlflowClient(tracking_uri).search_runs([experiment] (both experiments for two_experiments_metric_and_param), filter_string, order_by=[...], max_results=1000) in a Python process of its own per server and size, after one untimed call that checks the number of runs; wall time per call, the client's parsing included",
		"mlflow_only_up_to_runs":   c.mlflowMaxRuns,
		"target_sextant_ms":        20,
		"target_x_slower_fm":       15,
		"target_growth_first_last": 2,
	}
	have := map[string]int{}
	bySize := map[string]any{}
	first := map[string]map[string]float64{}   // shape -> server -> ms at the first size
	firstHits := map[string]map[string]int{}   // shape -> server -> runs returned at the first size
	firstFloor := map[string][2]float64{}      // shape -> transfer floor and Sextant above it at the first size
	firstPy := map[string]map[string]float64{} // shape -> server -> Python client's ms at the first size
	for _, size := range sizes {
		var on []*livePeer
		for _, p := range peers {
			if p.name == "mlflow" && size > c.mlflowMaxRuns {
				continue
			}
			workers := map[string]int{"sextant": 8, "fasttrackml": 4, "mlflow": 2}[p.name]
			t0 := time.Now()
			if err := growRuns(ctx, p, p.exp, have[p.name], size, workers); err != nil {
				return nil, fmt.Errorf("%s: create runs: %w", p.name, err)
			}
			logf("reads: %s has %d runs (%.0f runs/s)", p.name, size, float64(size-have[p.name])/time.Since(t0).Seconds())
			have[p.name] = size
			on = append(on, p)
		}
		// Let the servers' background work finish: Sextant compacts the
		// new runs' metrics once they have been quiet for 5 s, which a
		// fixed 2 s pause left to the first rounds (metric_and_param at
		// 2,000 runs: 10.2, 5.9, 4.1, 1.2, 0.9 ms, round after round).
		var ss []*server
		for _, p := range on {
			if p.s != nil {
				ss = append(ss, p.s)
			}
		}
		waitQuiet(ss...)
		at := map[string]any{}
		rss := map[string]any{}
		for _, p := range on {
			if p.s != nil {
				rss[p.name+"_before_searches_mb"] = round2(float64(p.s.procStatus("VmRSS")) / (1 << 20))
			}
		}
		sxHits := map[string]int{}
		for _, sh := range searchShapes {
			bodies := map[string][]byte{}
			hits := map[string]any{}
			firsts := map[string]any{}
			var sxNames []string
			var sxPage []byte
			for _, p := range on {
				b, _ := json.Marshal(map[string]any{"experiment_ids": sh.ids(p), "filter": sh.Filter, "order_by": []string{sh.OrderBy}, "max_results": searchPage})
				bodies[p.name] = b
				t0 := time.Now()
				names, page, err := searchNames(ctx, p, b)
				firsts[p.name+"_ms"] = round2(ms(time.Since(t0)))
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", p.name, sh.Name, err)
				}
				hits[p.name] = len(names)
				if firstHits[sh.Name] == nil {
					firstHits[sh.Name] = map[string]int{}
				}
				if _, ok := firstHits[sh.Name][p.name]; !ok {
					firstHits[sh.Name][p.name] = len(names)
				}
				if p.name == "sextant" {
					sxNames, sxPage = names, page
				} else if sxNames != nil {
					hits[p.name+"_same_runs_in_same_order_as_sextant"] = slices.Equal(names, sxNames)
				}
			}
			times, load, err := rounds(on, c.readsRounds, min(c.readsRounds, 5), func(p *livePeer) error {
				_, err := p.cl.postDiscard(ctx, "/api/2.0/mlflow/runs/search", bodies[p.name])
				return err
			})
			if err != nil {
				return nil, err
			}
			m := medians(times)
			m["runs_returned"] = hits
			// The first search of the shape at this size, untimed above
			// (it also reads the page's run names): the first of all at a
			// size finds a search index that has to catch up.
			m["first_search"] = firsts
			m["sextant_rounds_ms"] = roundAll(times["sextant"])
			m["load"] = load
			sxHits[sh.Name] = len(sxNames)
			fl, err := floor.time(ctx, "/"+sh.Name+"/"+strconv.Itoa(size), bodies["sextant"], sxPage, floorRounds*c.readsRounds)
			if err != nil {
				return nil, fmt.Errorf("transfer floor: %w", err)
			}
			m["page_bytes"] = len(sxPage)
			m["transfer_floor_ms"] = round2(fl)
			// Sextant's time above the floor: its own work on the page,
			// whose growth is the search's, not the page's bytes'.
			above := median(times["sextant"]) - fl
			m["sextant_above_floor_ms"] = round2(above)
			if f, ok := firstFloor[sh.Name]; ok {
				m["transfer_floor_growth_from_"+strconv.Itoa(sizes[0])+"_runs"] = round2(fl / f[0])
				if f[1] > 0 {
					m["sextant_above_floor_growth_from_"+strconv.Itoa(sizes[0])+"_runs"] = round2(above / f[1])
				}
			} else {
				firstFloor[sh.Name] = [2]float64{fl, above}
			}
			if first[sh.Name] == nil {
				first[sh.Name] = map[string]float64{}
				for name, ts := range times {
					first[sh.Name][name] = median(ts)
				}
			} else {
				for name, ts := range times {
					f := first[sh.Name][name]
					if f <= 0 {
						continue
					}
					growth := median(ts) / f
					m[name+"_growth_from_"+strconv.Itoa(sizes[0])+"_runs"] = round2(growth)
					// A shape whose page is not full at the first size
					// (metric_and_param: 238 runs of 2,000 match) answers
					// more runs later; the time per run answered tells
					// the cost of the search from the cost of the page.
					h0 := firstHits[sh.Name][name]
					if h, _ := hits[name].(int); h0 > 0 && h > 0 && h != h0 {
						m[name+"_growth_per_run_returned_from_"+strconv.Itoa(sizes[0])+"_runs"] = round2(growth * float64(h0) / float64(h))
					}
				}
				// A shape whose page is not full at the first size, asked
				// again for as many runs as it answered there: the growth
				// of the search with the bytes of its answer held equal.
				if h0 := firstHits[sh.Name]["sextant"]; h0 > 0 && h0 < searchPage {
					same, err := samePageGrowth(ctx, on, sh, h0, c.readsRounds, first[sh.Name], sizes[0])
					if err != nil {
						return nil, err
					}
					m["same_page_as_"+strconv.Itoa(sizes[0])+"_runs"] = same
				}
			}
			at[sh.Name] = m
		}
		py, pyAbout, err := pythonSearch(ctx, c, specs, on, sxHits)
		if err != nil {
			return nil, err
		}
		if py == nil {
			at["python_client_search_runs"] = pyAbout
		} else {
			out["python_client"] = pyAbout
			at["python_client_search_runs"] = pythonSearchMedians(py, firstPy, sizes[0])
		}
		for _, p := range on {
			if p.s != nil {
				rss[p.name+"_after_searches_mb"] = round2(float64(p.s.procStatus("VmRSS")) / (1 << 20))
			}
		}
		at["rss"] = rss
		bySize[strconv.Itoa(size)+"_runs"] = at
	}
	out["by_size"] = bySize
	return out, nil
}

// pythonSearchMedians summarises the Python client's times (shape ->
// server -> ms): medians, and the growth from first, each shape's medians
// at the first size, which the first call fills in.
func pythonSearchMedians(py map[string]map[string][]float64, first map[string]map[string]float64, firstSize int) map[string]any {
	out := map[string]any{}
	for name, times := range py {
		m := medians(times)
		if first[name] == nil {
			first[name] = map[string]float64{}
			for server, ts := range times {
				first[name][server] = median(ts)
			}
		} else {
			for server, ts := range times {
				if f := first[name][server]; f > 0 {
					m[server+"_growth_from_"+strconv.Itoa(firstSize)+"_runs"] = round2(median(ts) / f)
				}
			}
		}
		out[name] = m
	}
	return out
}

// samePageGrowth times sh on the servers on asking for page runs, and
// its growth from base, each server's median at the first size (whose
// page held that many runs).
func samePageGrowth(ctx context.Context, on []*livePeer, sh searchShape, page, nRounds int, base map[string]float64, firstSize int) (map[string]any, error) {
	bodies := map[string][]byte{}
	for _, p := range on {
		bodies[p.name], _ = json.Marshal(map[string]any{"experiment_ids": sh.ids(p), "filter": sh.Filter, "order_by": []string{sh.OrderBy}, "max_results": page})
	}
	times, _, err := rounds(on, nRounds, min(nRounds, 5), func(p *livePeer) error {
		_, err := p.cl.postDiscard(ctx, "/api/2.0/mlflow/runs/search", bodies[p.name])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s, max_results %d: %w", sh.Name, page, err)
	}
	out := medians(times)
	out["max_results"] = page
	for name, ts := range times {
		if f := base[name]; f > 0 {
			out[name+"_growth_from_"+strconv.Itoa(firstSize)+"_runs"] = round2(median(ts) / f)
		}
	}
	return out, nil
}

// searchNames runs one search, untimed, and returns the names of the runs
// of the page in order, and the page as it came.
func searchNames(ctx context.Context, p *livePeer, body []byte) ([]string, []byte, error) {
	b, err := p.cl.postRaw(ctx, "/api/2.0/mlflow/runs/search", body)
	if err != nil {
		return nil, nil, err
	}
	var out struct {
		Runs []struct {
			Info struct {
				RunName string `json:"run_name"`
			} `json:"info"`
		} `json:"runs"`
	}
	if err := decodeJSON(b, &out); err != nil {
		return nil, nil, err
	}
	names := make([]string, len(out.Runs))
	for i, r := range out.Runs {
		names[i] = r.Info.RunName
	}
	return names, b, nil
}

func roundAll(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = round2(v)
	}
	return out
}
