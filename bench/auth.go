package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// benchAuth measures what multi-user mode costs:
//   - log-batch ingestion with authentication (HTTP Basic, as the mlflow
//     client sends it on every request) against the same load in
//     single-user mode, in alternating rounds so that machine noise hits
//     both alike;
//   - runs/search over runs in folders with mixed permissions, by a user
//     who may read half of them, against an administrator searching just
//     those experiments (the same result, without permission filtering).
func benchAuth(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-auth-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	off, err := startServer(ctx, bin, filepath.Join(dir, "off"), c.serverArgs...)
	if err != nil {
		return nil, err
	}
	defer off.kill()
	on, err := startServer(ctx, bin, filepath.Join(dir, "on"), append([]string{"--auth", "on", "--admin-email", "admin@bench.local"}, c.serverArgs...)...)
	if err != nil {
		return nil, err
	}
	defer on.kill()
	adminCl, err := adminClient(on)
	if err != nil {
		return nil, err
	}
	if err := adminCl.post(ctx, "/api/2.0/sextant/users", mustJSON(map[string]any{"email": "alice@bench.local", "password": "alice-bench-pw"}), nil); err != nil {
		return nil, err
	}
	alice := newClient(on.url)
	alice.basic = basicHeader("alice@bench.local", "alice-bench-pw")
	if err := alice.post(ctx, "/api/2.0/sextant/workspace/mkdirs", mustJSON(map[string]any{"path": "/Users/alice@bench.local/bench"}), nil); err != nil {
		return nil, err
	}

	// Ingestion, alternating single-user and multi-user rounds.
	offCl := newClient(off.url)
	offRuns, err := makeRuns(ctx, offCl, "/Shared/bench-ingest", c.runs)
	if err != nil {
		return nil, err
	}
	onRuns, err := makeRuns(ctx, alice, "/Users/alice@bench.local/bench/ingest", c.runs)
	if err != nil {
		return nil, err
	}
	var offRates, onRates, offP99, onP99 []float64
	// Each round runs both modes, in alternating order, and lets the
	// servers finish their background work, and the kernel write back what
	// the last load left dirty, before the next load, so neither mode pays
	// for the other's (the second load in a row on one server was up to
	// twice as slow without the sync).
	settle := func() {
		waitQuiet(off, on)
		syscall.Sync()
	}
	for i := range c.authRounds {
		var a, b ingestLoad
		var err error
		if i%2 == 0 {
			if a, err = runIngestLoad(ctx, offCl, off, offRuns, time.Second, c.authRound); err == nil {
				settle()
				b, err = runIngestLoad(ctx, alice, on, onRuns, time.Second, c.authRound)
			}
		} else {
			if b, err = runIngestLoad(ctx, alice, on, onRuns, time.Second, c.authRound); err == nil {
				settle()
				a, err = runIngestLoad(ctx, offCl, off, offRuns, time.Second, c.authRound)
			}
		}
		if err != nil {
			return nil, err
		}
		settle()
		if a.errors > 0 || b.errors > 0 {
			return nil, fmt.Errorf("ingest errors: %s %s", a.firstErr, b.firstErr)
		}
		logf("auth round %d: single-user %.0f points/s, multi-user %.0f points/s", i+1, a.rate, b.rate)
		offRates, onRates = append(offRates, a.rate), append(onRates, b.rate)
		offP99, onP99 = append(offP99, a.lat.summary()["p99_ms"]), append(onP99, b.lat.summary()["p99_ms"])
	}

	// Search over folders with mixed permissions.
	const folders = 10
	home := "/Users/admin@bench.local"
	var exps, readable []string
	for f := range folders {
		folder := fmt.Sprintf("%s/f%d", home, f)
		if err := adminCl.post(ctx, "/api/2.0/sextant/workspace/mkdirs", mustJSON(map[string]any{"path": folder}), nil); err != nil {
			return nil, err
		}
		id, err := adminCl.createExperiment(ctx, folder+"/exp")
		if err != nil {
			return nil, err
		}
		exps = append(exps, id)
		if f%2 == 0 {
			readable = append(readable, id)
			if err := adminCl.put(ctx, "/api/2.0/sextant/permissions", mustJSON(map[string]any{"resource": "folder:" + folder, "principal": "alice@bench.local", "level": "CAN_READ"})); err != nil {
				return nil, err
			}
		}
	}
	t0 := time.Now()
	if err := fillRuns(ctx, adminCl, exps, c.authSearchRuns); err != nil {
		return nil, err
	}
	logf("auth: %d runs created in %v", c.authSearchRuns, time.Since(t0).Round(time.Second))
	query := func(cl *client, ids []string) (float64, int, error) {
		body := mustJSON(map[string]any{"experiment_ids": ids, "filter": "metrics.loss < 0.5 AND params.lr = '0.001'", "order_by": []string{"metrics.accuracy DESC"}, "max_results": 100})
		var out struct {
			Runs []json.RawMessage `json:"runs"`
		}
		t := time.Now()
		err := cl.post(ctx, "/api/2.0/mlflow/runs/search", body, &out)
		return ms(time.Since(t)), len(out.Runs), err
	}
	var adminTimes, aliceTimes []float64
	for range 15 {
		a, na, err := query(adminCl, readable)
		if err != nil {
			return nil, err
		}
		b, nb, err := query(alice, exps)
		if err != nil {
			return nil, err
		}
		if na != nb || na == 0 {
			return nil, fmt.Errorf("admin saw %d runs, alice %d: the searches should return the same runs", na, nb)
		}
		adminTimes, aliceTimes = append(adminTimes, a), append(aliceTimes, b)
	}
	single, multi := median(offRates), median(onRates)
	// The machine's speed drifts between rounds (disk and neighbours), so
	// the overhead is the median of each round's own ratio: both modes of
	// a round ran back to back.
	ratios := make([]float64, len(offRates))
	for i := range offRates {
		ratios[i] = onRates[i] / offRates[i]
	}
	return map[string]any{
		"ingest_rounds":                         c.authRounds,
		"ingest_round_seconds":                  c.authRound.Seconds(),
		"ingest_single_user_points_per_second":  single,
		"ingest_multi_user_points_per_second":   multi,
		"ingest_round_ratios_multi_over_single": ratios,
		"ingest_auth_overhead":                  1 - median(ratios),
		"ingest_auth_overhead_of_medians":       1 - multi/single,
		"ingest_single_user_p99_ms_median":      median(offP99),
		"ingest_multi_user_p99_ms_median":       median(onP99),
		"search_runs":                           c.authSearchRuns,
		"search_folders":                        folders,
		"search_readable_folders":               len(readable),
		"search_unrestricted_ms_median":         median(adminTimes),
		"search_mixed_permissions_ms_median":    median(aliceTimes),
		"search_permission_overhead":            median(aliceTimes)/median(adminTimes) - 1,
		"target_ingest_auth_overhead":           0.05,
		"target_search_permission_overhead":     0.20,
	}, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func basicHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

var oneTimeRE = regexp.MustCompile(`one-time password (\S+)`)

// adminClient signs in as the administrator the server created at its
// first start, with the password it printed.
func adminClient(s *server) (*client, error) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := oneTimeRE.FindStringSubmatch(s.stderr.String()); m != nil {
			cl := newClient(s.url)
			cl.basic = basicHeader("admin@bench.local", m[1])
			return cl, nil
		}
	}
	return nil, fmt.Errorf("the server printed no one-time password")
}

func makeRuns(ctx context.Context, cl *client, expName string, n int) ([]string, error) {
	exp, err := cl.createExperiment(ctx, expName)
	if err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		if ids[i], err = cl.createRun(ctx, exp, fmt.Sprintf("r%02d", i), time.Now().UnixMilli()); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// fillRuns creates n runs spread over the experiments, each with params,
// a tag and metrics, from 16 workers.
func fillRuns(ctx context.Context, cl *client, exps []string, n int) error {
	lrs := []string{"0.1", "0.01", "0.001", "0.0001"}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				id, err := cl.createRun(ctx, exps[int(i)%len(exps)], "run-"+strconv.FormatInt(i, 10), 1_700_000_000_000+i)
				if err != nil {
					errc <- err
					return
				}
				body := mustJSON(map[string]any{
					"run_id": id,
					"params": []map[string]string{{"key": "lr", "value": lrs[rng.IntN(len(lrs))]}},
					"metrics": []map[string]any{
						{"key": "loss", "value": rng.Float64(), "timestamp": 1, "step": 1},
						{"key": "accuracy", "value": rng.Float64(), "timestamp": 1, "step": 1},
					},
				})
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

// waitQuiet returns once the servers used less than 5% of a core over 6
// seconds (longer than the compaction sweep's 5), or after two minutes.
func waitQuiet(ss ...*server) {
	cpu := func() (t float64) {
		for _, s := range ss {
			t += s.cpuSeconds()
		}
		return t
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		c0 := cpu()
		time.Sleep(6 * time.Second)
		if cpu()-c0 < 0.3 {
			return
		}
	}
}
