package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// benchReads measures reads the way the real clients make them, on Sextant
// and, in the same run, on the peers given on the command line (see
// peers.go):
//
//	go run ./bench -fml /path/to/fml -mlflow-venv ~/.cache/sextant-bench/mlflow reads
//
// Parts (-reads, default all):
//
//	history  the full history of a 200,000-point metric read as
//	         MlflowClient.get_metric_history reads it: pages of 25,000
//	         points following next_page_token; timed from Go (the server's
//	         and the transfer's time) and through the Python client itself
//	bulk     get-history-bulk-interval, 1,000 points, of a 200,000- and a
//	         10,000,000-point metric (the MLflow UI's chart read)
//	search   runs/search, four filter shapes ordered by a metric, first page
//	         of 1,000 (MlflowClient.search_runs' default max_results), at
//	         each -reads-search-runs size; timed from Go, beside the time
//	         to read the same page from a server that does nothing else
//	         (the transfer's floor), and through the Python client itself
//	bytes    bytes on disk per point of 2,000,000-point series (data
//	         directory after a clean stop, WAL included), random and smooth
//	         values, with SQLite's page and index overhead
//
// Every timed figure is the median of the rounds; in each round every
// server is timed once, in a rotating order, so that ratios compare
// servers under the same load. The JSON says what load the machine had.
func benchReads(ctx context.Context, c config, bin string) (any, error) {
	parts := map[string]bool{}
	for _, p := range strings.Split(c.readsParts, ",") {
		switch p = strings.TrimSpace(p); p {
		case "history", "bulk", "search", "bytes":
			parts[p] = true
		case "":
		default:
			return nil, fmt.Errorf("-reads %q: unknown part %q (want history, bulk, search, bytes)", c.readsParts, p)
		}
	}
	specs := peerSpecs(ctx, c, bin)
	peers := map[string]any{}
	for _, sp := range specs {
		if sp.absent != "" {
			peers[sp.name] = map[string]string{"absent": sp.absent}
			logf("reads: %s absent: %s", sp.name, sp.absent)
			continue
		}
		peers[sp.name] = map[string]string{"version": sp.version}
	}
	root, err := os.MkdirTemp("", "sextant-bench-reads-")
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(root)
	}
	res := map[string]any{
		"command": c.command,
		"servers": peers,
		"about": "each server runs on this machine with SQLite in a fresh temporary directory and is driven over HTTP/1.1 from this process; " +
			"figures are medians of rounds that time every server once each; *_x_slower_than_sextant is the peer's median over Sextant's",
		"load_before": loadAvg(),
	}
	if parts["history"] || parts["bulk"] {
		h, err := readsHistory(ctx, c, specs, filepath.Join(root, "history"), parts)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		for k, v := range h {
			res[k] = v
		}
	}
	if parts["search"] {
		sr, err := readsSearch(ctx, c, specs, filepath.Join(root, "search"))
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		res["search"] = sr
	}
	if parts["bytes"] {
		b, err := readsBytes(ctx, c, specs[0], filepath.Join(root, "bytes"))
		if err != nil {
			return nil, fmt.Errorf("bytes: %w", err)
		}
		res["bytes_per_point"] = b
	}
	res["load_after"] = loadAvg()
	return res, nil
}

// livePeer is a running server of the reads benchmark.
type livePeer struct {
	name string
	s    *server
	cl   *client
	exp  string
	exp2 string // the search part's second experiment
}

// startPeers starts every present peer in its own directory under dir.
func startPeers(ctx context.Context, specs []peerSpec, dir string, only func(name string) bool) ([]*livePeer, func(), error) {
	var out []*livePeer
	stop := func() {
		for _, p := range out {
			p.s.kill()
		}
	}
	for _, sp := range specs {
		if sp.absent != "" || (only != nil && !only(sp.name)) {
			continue
		}
		logf("reads: starting %s", sp.name)
		s, err := sp.start(ctx, filepath.Join(dir, sp.name))
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("start %s: %w", sp.name, err)
		}
		out = append(out, &livePeer{name: sp.name, s: s, cl: newClient(s.url)})
	}
	return out, stop, nil
}

// rounds times fn once per peer per round, the first peer rotating, and
// returns each peer's times in milliseconds. It also measures what the
// rest of the machine did meanwhile.
func rounds(peers []*livePeer, n int, maxPeerRounds int, fn func(p *livePeer) error) (map[string][]float64, loadSample, error) {
	times := map[string][]float64{}
	probe := startLoadProbe(peers)
	for r := range n {
		for i := range peers {
			p := peers[(r+i)%len(peers)]
			if p.name != "sextant" && r >= maxPeerRounds {
				continue
			}
			t := time.Now()
			if err := fn(p); err != nil {
				return nil, loadSample{}, fmt.Errorf("%s: %w", p.name, err)
			}
			times[p.name] = append(times[p.name], ms(time.Since(t)))
		}
	}
	return times, probe.stop(), nil
}

// medians summarises rounds: the median per server and each peer's median
// over Sextant's.
func medians(times map[string][]float64) map[string]any {
	out := map[string]any{}
	for name, ts := range times {
		out[name+"_ms"] = round2(median(ts))
	}
	if sx, ok := times["sextant"]; ok {
		for name, ts := range times {
			if name != "sextant" && median(sx) > 0 {
				out[name+"_x_slower_than_sextant"] = round2(median(ts) / median(sx))
			}
		}
	}
	return out
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// seriesGen returns the value of step i of a generated series.
type seriesGen func(rng *rand.Rand, i, n int) float64

// uniformValues are random float64 values, uniform in [0, 1): 52 random
// mantissa bits, the hardest case for any lossless encoding.
func uniformValues(rng *rand.Rand, _, _ int) float64 { return rng.Float64() }

// logSeries logs n points of key to run in 1000-point log-batch requests
// from writers concurrent writers: steps 0..n-1, timestamps 7 ms apart
// with 0-2 ms of jitter, values from gen. spikes, when set, overrides the
// value of some steps.
func logSeries(ctx context.Context, cl *client, runID, key string, n, writers int, gen seriesGen, spikes map[int]float64) error {
	const batch = 1000
	batches := (n + batch - 1) / batch
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			body := make([]byte, 0, 96*1024)
			for b := w; b < batches; b += writers {
				// Each batch has its own generator, so the series is the
				// same whatever the number of writers.
				rng := rand.New(rand.NewPCG(uint64(b), 17))
				body = append(body[:0], `{"run_id":"`...)
				body = append(body, runID...)
				body = append(body, `","metrics":[`...)
				for i := range batch {
					st := b*batch + i
					if st >= n {
						break
					}
					if i > 0 {
						body = append(body, ',')
					}
					v := gen(rng, st, n)
					if sv, ok := spikes[st]; ok {
						v = sv
					}
					body = appendMetric(body, key, v, 1_700_000_000_000+int64(st)*7+rng.Int64N(3), int64(st))
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

// readsHistory fills a 200,000-point metric on every server (and, for the
// bulk part, a 10,000,000-point one on Sextant) and times the reads.
func readsHistory(ctx context.Context, c config, specs []peerSpec, dir string, parts map[string]bool) (map[string]any, error) {
	peers, stop, err := startPeers(ctx, specs, dir, nil)
	if err != nil {
		return nil, err
	}
	defer stop()
	n, bigN := c.historyN, c.bulkN
	spikeAt := n / 3
	spikes := map[int]float64{spikeAt: 100}
	bigSpikeAt := bigN / 3
	runs := map[string]string{}
	var bigRun string
	for _, p := range peers {
		exp, err := p.cl.createExperiment(ctx, "bench-reads-history")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		run, err := p.cl.createRun(ctx, exp, "history", time.Now().UnixMilli())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		writers := map[string]int{"sextant": 4, "fasttrackml": 2, "mlflow": 1}[p.name]
		t0 := time.Now()
		if err := logSeries(ctx, p.cl, run, "loss", n, writers, uniformValues, spikes); err != nil {
			return nil, fmt.Errorf("%s: log %d points: %w", p.name, n, err)
		}
		logf("reads: %s logged %d points in %v", p.name, n, time.Since(t0).Round(time.Millisecond))
		runs[p.name] = run
		if p.name == "sextant" && parts["bulk"] {
			if bigRun, err = p.cl.createRun(ctx, exp, "bulk", time.Now().UnixMilli()); err != nil {
				return nil, err
			}
			t0 = time.Now()
			if err := logSeries(ctx, p.cl, bigRun, "loss", bigN, 4, uniformValues, map[int]float64{bigSpikeAt: 100}); err != nil {
				return nil, fmt.Errorf("sextant: log %d points: %w", bigN, err)
			}
			logf("reads: sextant logged %d points in %v", bigN, time.Since(t0).Round(time.Millisecond))
		}
	}
	// Sextant merges fresh small chunks in the background; let its idle
	// sweep (every 5 s) run, as it would long before anyone reads.
	time.Sleep(7 * time.Second)
	out := map[string]any{}
	maxPeer := min(c.readsRounds, 5)

	if parts["history"] {
		inOrder := map[string]bool{}
		for _, p := range peers {
			ok, err := checkHistory(ctx, p, runs[p.name], n)
			if err != nil {
				return nil, err
			}
			inOrder[p.name] = ok
		}
		times, load, err := rounds(peers, c.readsRounds, maxPeer, func(p *livePeer) error {
			_, err := p.cl.historyRaw(ctx, runs[p.name], "loss", 25_000)
			return err
		})
		if err != nil {
			return nil, err
		}
		h := map[string]any{
			"points":               n,
			"page_size":            25_000,
			"values":               "uniform random float64 in [0, 1) (17 significant digits each), one spike of 100",
			"how":                  "GET get-history with max_results=25000, following next_page_token until absent, as MlflowClient.get_metric_history does; timed until the last body is read, without decoding it (FastTrackML ignores max_results and returns every point in one page)",
			"go_paged":             medians(times),
			"points_in_step_order": inOrder,
			"go_paged_load":        load,
			"target_sextant_ms":    60,
			"target_x_slower_fm":   25,
		}
		py, err := pythonHistory(ctx, c, specs, peers, runs, n)
		if err != nil {
			return nil, err
		}
		h["python_client_get_metric_history"] = py
		out["history"] = h
	}

	if parts["bulk"] {
		b := map[string]any{
			"max_results": 1000,
			"how":         "GET get-history-bulk-interval?run_ids=R&metric_key=loss&max_results=1000 (the MLflow UI's chart read); sampling=minmax is Sextant's spike-keeping mode; zoom reads steps [N/2, N/2+N/100]",
			"target_ms":   10,
		}
		type bulkCase struct {
			name, run string
			points    int
			mode      string
			zoom      bool
			spikeAt   int
		}
		var cases []bulkCase
		for _, mode := range []string{"steps", "minmax"} {
			cases = append(cases, bulkCase{"points_200000_" + mode, "", n, mode, false, spikeAt})
			cases = append(cases, bulkCase{"points_10000000_" + mode, bigRun, bigN, mode, false, bigSpikeAt})
			cases = append(cases, bulkCase{"points_10000000_zoom_" + mode, bigRun, bigN, mode, true, -1})
		}
		if bigN != 10_000_000 {
			for i := range cases {
				cases[i].name = strings.Replace(cases[i].name, "10000000", strconv.Itoa(bigN), 1)
			}
		}
		for _, bc := range cases {
			q := url.Values{"metric_key": {"loss"}, "max_results": {"1000"}}
			if bc.mode != "steps" {
				q.Set("sampling", bc.mode)
			}
			if bc.zoom {
				q.Set("start_step", strconv.Itoa(bc.points/2))
				q.Set("end_step", strconv.Itoa(bc.points/2+bc.points/100))
			}
			// Only Sextant holds the big series; MLflow's server has the
			// endpoint (steps sampling only), FastTrackML has none.
			var on []*livePeer
			for _, p := range peers {
				switch {
				case p.name == "sextant":
				case bc.run != "" || bc.mode != "steps" || p.name == "fasttrackml":
					continue
				}
				on = append(on, p)
			}
			runOf := func(p *livePeer) string {
				if bc.run != "" {
					return bc.run
				}
				return runs[p.name]
			}
			for _, p := range on {
				if err := checkBulk(ctx, p, runOf(p), q, bc.points, bc.spikeAt, bc.mode, bc.zoom); err != nil {
					return nil, fmt.Errorf("bulk %s: %w", bc.name, err)
				}
			}
			times, load, err := rounds(on, c.readsRounds, maxPeer, func(p *livePeer) error {
				qq := url.Values{}
				for k, v := range q {
					qq[k] = v
				}
				qq.Set("run_ids", runOf(p))
				_, err := p.cl.getRaw(ctx, "/api/2.0/mlflow/metrics/get-history-bulk-interval", qq)
				return err
			})
			if err != nil {
				return nil, err
			}
			m := medians(times)
			m["load"] = load
			b[bc.name] = m
		}
		for _, p := range peers {
			if p.name == "fasttrackml" {
				q := url.Values{"run_ids": {runs[p.name]}, "metric_key": {"loss"}, "max_results": {"1000"}}
				_, err := p.cl.getRaw(ctx, "/api/2.0/mlflow/metrics/get-history-bulk-interval", q)
				b["fasttrackml"] = fmt.Sprintf("not supported: %v", err)
			}
		}
		out["bulk_interval"] = b
	}
	return out, nil
}

// checkHistory reads the whole history once, untimed, and checks that every
// point is there, each step once. It returns whether they came in step
// order (MLflow's order; FastTrackML returns them in its own).
func checkHistory(ctx context.Context, p *livePeer, run string, n int) (bool, error) {
	pts, err := p.cl.history(ctx, run, "loss", 25_000)
	if err != nil {
		return false, fmt.Errorf("%s: %w", p.name, err)
	}
	if len(pts) != n {
		return false, fmt.Errorf("%s: history returned %d points, want %d", p.name, len(pts), n)
	}
	ordered := slices.IsSortedFunc(pts, func(a, b wirePoint) int { return cmp.Compare(a.Step, b.Step) })
	slices.SortFunc(pts, func(a, b wirePoint) int { return cmp.Compare(a.Step, b.Step) })
	for i, pt := range pts {
		if pt.Step != int64(i) {
			return false, fmt.Errorf("%s: history lacks step %d", p.name, i)
		}
	}
	return ordered, nil
}

// checkBulk reads a sampled history once, untimed, and checks it: between
// 500 and 2002 points in step order, the range's last step kept, and in
// minmax mode the spike kept.
func checkBulk(ctx context.Context, p *livePeer, run string, q url.Values, n, spikeAt int, mode string, zoom bool) error {
	qq := url.Values{"run_ids": {run}}
	for k, v := range q {
		qq[k] = v
	}
	var out struct {
		Metrics []struct {
			Step  int64   `json:"step"`
			Value float64 `json:"value"`
		} `json:"metrics"`
	}
	if err := p.cl.get(ctx, "/api/2.0/mlflow/metrics/get-history-bulk-interval", qq, &out); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	ms := out.Metrics
	if len(ms) < 500 || len(ms) > 2002 {
		return fmt.Errorf("%s: %d points", p.name, len(ms))
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Step < ms[i-1].Step {
			return fmt.Errorf("%s: step %d after %d", p.name, ms[i].Step, ms[i-1].Step)
		}
	}
	last := int64(n - 1)
	if zoom {
		last = int64(n/2 + n/100)
	}
	if ms[len(ms)-1].Step != last {
		return fmt.Errorf("%s: last step %d, want %d", p.name, ms[len(ms)-1].Step, last)
	}
	if mode == "minmax" && spikeAt >= 0 && !slices.ContainsFunc(ms, func(m struct {
		Step  int64   `json:"step"`
		Value float64 `json:"value"`
	}) bool {
		return m.Step == int64(spikeAt) && m.Value == 100
	}) {
		return fmt.Errorf("%s: the spike at step %d is missing", p.name, spikeAt)
	}
	return nil
}

// getRaw sends a GET and returns the body unread by JSON.
func (c *client) getRaw(ctx context.Context, path string, q url.Values) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, truncateBytes(b, 200))
	}
	return b, nil
}

// postRaw sends a JSON body and returns the answer's body.
func (c *client) postRaw(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, truncateBytes(b, 200))
	}
	return b, nil
}

// postDiscard sends a POST and reads the whole answer without keeping it:
// a timed round's client cost then does not grow with the answer the way
// io.ReadAll's growing and copying does (0.3-0.5 ms of a 860 KB page of
// 1,000 runs here), for every server alike.
func (c *client) postDiscard(ctx context.Context, path string, body []byte) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return 0, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return io.Copy(io.Discard, resp.Body)
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// loadAvg returns /proc/loadavg's 1-, 5- and 15-minute load averages.
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(b))[:3] {
		v, _ := strconv.ParseFloat(f, 64)
		out = append(out, v)
	}
	return out
}

// loadSample says how busy the machine was while something was timed, in
// cores: all of it, and what is left after the bench and its servers.
type loadSample struct {
	Seconds     float64 `json:"seconds"`
	MachineBusy float64 `json:"machine_busy_cores"`
	Ours        float64 `json:"bench_and_servers_cores"`
	Others      float64 `json:"other_processes_cores"`
	Cores       int     `json:"cores"`
}

type loadProbe struct {
	t0          time.Time
	busy0, ours float64
	peers       []*livePeer
}

func startLoadProbe(peers []*livePeer) *loadProbe {
	p := &loadProbe{t0: time.Now(), peers: peers}
	p.busy0, _ = machineCPU()
	p.ours = p.oursCPU()
	return p
}

func (p *loadProbe) oursCPU() float64 {
	t := selfCPU()
	for _, lp := range p.peers {
		t += lp.s.groupCPUSeconds()
	}
	return t
}

func (p *loadProbe) stop() loadSample {
	secs := time.Since(p.t0).Seconds()
	busy1, _ := machineCPU()
	ours := p.oursCPU() - p.ours
	busy := busy1 - p.busy0
	return loadSample{
		Seconds:     round2(secs),
		MachineBusy: round2(busy / secs),
		Ours:        round2(ours / secs),
		Others:      round2(max(0, busy-ours) / secs),
		Cores:       runtime.NumCPU(),
	}
}

// selfCPU is this process's CPU time and its waited-for children's.
func selfCPU() float64 {
	var t float64
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			t += float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		}
	}
	return t
}

// groupCPUSeconds is cpuSeconds summed over the server's process group when
// it has one (a peer's workers), else the server's own.
func (s *server) groupCPUSeconds() float64 {
	if !s.group {
		return s.cpuSeconds()
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var t float64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		fs := strings.Fields(string(b[i+2:]))
		if len(fs) < 13 {
			continue
		}
		// Field 5 of the line (index 2 here) is the process group.
		if pg, _ := strconv.Atoi(fs[2]); pg != s.cmd.Process.Pid {
			continue
		}
		ut, _ := strconv.ParseFloat(fs[11], 64)
		st, _ := strconv.ParseFloat(fs[12], 64)
		t += (ut + st) / 100
	}
	return t
}

// decodeJSON is json.Unmarshal for figures the bench checks after timing.
func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }
