package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sxclient "github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// benchLogs measures `sextant run` and run logs:
//
//  1. throughput: a child printing 200 MB of ~100-byte lines as fast as it
//     can, alone into a file and under `sextant run` (tee into a file, lines
//     to the server); the child's own wall time both ways, their ratio,
//     and how long after the child the server had every line;
//  2. tail latency: a child printing a time-stamped line every 5 ms under
//     `sextant run`, followed by `sextant logs -f`; the delay from print to
//     arrival at the follower's stdout;
//  3. range reads: a run pre-filled with 10,000,000 lines through the
//     append API, then lines 5,000,000 to 5,001,000 read over HTTP.
func benchLogs(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-logs-")
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	child, err := buildLogChild(dir)
	if err != nil {
		return nil, err
	}
	outBytes, prefill, rounds := int64(200<<20), 10_000_000, 7
	if c.short {
		outBytes, prefill, rounds = 40<<20, 1_000_000, 2
	}
	res := map[string]any{}
	s, err := startServer(ctx, bin, filepath.Join(dir, "data"), c.serverArgs...)
	if err != nil {
		return nil, err
	}
	stopped := map[*server]bool{}
	defer func() {
		for _, srv := range []*server{s} {
			if !stopped[srv] {
				srv.kill()
			}
		}
	}()

	// A second server at the lowest CPU priority: it gets only the CPU time
	// the job and the launcher leave, as a server on another machine would
	// take none. The first shares the machine's cores with them evenly.
	niced, err := startServer(ctx, bin, filepath.Join(dir, "data-niced"), c.serverArgs...)
	if err != nil {
		return nil, err
	}
	if err := reniceAll(niced.cmd.Process.Pid, 19); err != nil {
		niced.kill()
		return nil, err
	}
	tp, err := benchLogThroughput(ctx, map[string]*server{"server_same_priority": s, "server_niced": niced}, bin, child, dir, outBytes, rounds)
	if err != nil {
		niced.kill()
		return nil, fmt.Errorf("throughput: %w", err)
	}
	if err := niced.stop(); err != nil {
		return nil, err
	}
	res["throughput"] = tp
	lat, err := benchLogTail(ctx, s, bin, child, dir)
	if err != nil {
		return nil, fmt.Errorf("tail latency: %w", err)
	}
	res["tail_latency"] = lat
	rr, err := benchLogRange(ctx, s, prefill)
	if err != nil {
		return nil, fmt.Errorf("range read: %w", err)
	}
	res["range_read"] = rr
	res["server_peak_rss_mb"] = mb(s.procStatus("VmHWM"))
	stopped[s] = true
	return res, s.stop()
}

// logChildSource is the child the benchmark runs: it prints -bytes of
// realistic ~100-byte training log lines as fast as it can through a 64 KiB
// buffer (as Python's print does into a pipe, in larger blocks), and writes
// its own wall time to -elapsed; or, with -every, one time-stamped line per
// interval, flushed at once.
const logChildSource = `package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	total := flag.Int64("bytes", 0, "")
	elapsed := flag.String("elapsed", "", "")
	every := flag.Duration("every", 0, "")
	count := flag.Int("count", 0, "")
	flag.Parse()
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	if *every > 0 {
		for i := 0; i < *count; i++ {
			fmt.Fprintf(w, "ts=%d seq=%d step loss=0.12345 lr=3e-4\n", time.Now().UnixNano(), i)
			w.Flush()
			time.Sleep(*every)
		}
		return
	}
	start := time.Now()
	var buf []byte
	var n int64
	for i := 0; n < *total; i++ {
		buf = buf[:0]
		buf = time.Now().UTC().AppendFormat(buf, "2006-01-02T15:04:05.000000Z")
		buf = append(buf, " INFO train step="...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, " loss="...)
		buf = strconv.AppendFloat(buf, 2.0/float64(i+1)+0.01*float64(i%7), 'f', 6, 64)
		buf = append(buf, " lr=3.0e-04 grad_norm="...)
		buf = strconv.AppendFloat(buf, 0.5+float64(i%97)/100, 'f', 4, 64)
		buf = append(buf, " tok/s="...)
		buf = strconv.AppendInt(buf, int64(90000+i%977), 10)
		for len(buf) < 99 {
			buf = append(buf, '.')
		}
		buf = append(buf, '\n')
		w.Write(buf)
		n += int64(len(buf))
	}
	w.Flush()
	if *elapsed != "" {
		os.WriteFile(*elapsed, []byte(strconv.FormatInt(time.Since(start).Nanoseconds(), 10)), 0o644)
	}
}
`

func buildLogChild(dir string) (string, error) {
	src := filepath.Join(dir, "child")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(logChildSource), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module logchild\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "logchild")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the child: %w", err)
	}
	return out, nil
}

func readElapsed(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(string(b), 10, 64)
	return float64(ns) / 1e9, err
}

var runLine = regexp.MustCompile(`sextant: run ([0-9a-f]{32}) `)

func benchLogThroughput(ctx context.Context, servers map[string]*server, bin, child, dir string, total int64, rounds int) (any, error) {
	type series struct {
		child, wall []float64
		lines       int64
	}
	var alone, piped []float64
	runs := map[string]*series{}
	for name := range servers {
		runs[name] = &series{}
	}
	for round := range rounds {
		// Alone, into a file.
		elapsed := filepath.Join(dir, "elapsed")
		out, err := os.Create(filepath.Join(dir, "alone.out"))
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, child, "-bytes", strconv.FormatInt(total, 10), "-elapsed", elapsed)
		cmd.Stdout = out
		err = cmd.Run()
		out.Close()
		if err != nil {
			return nil, err
		}
		a, err := readElapsed(elapsed)
		if err != nil {
			return nil, err
		}
		alone = append(alone, a)
		// For comparison, the cheapest capture through a pipe: cat draining
		// it into a file (sextant run gives the job files, not pipes, unless
		// --output-pipes).
		sh := exec.CommandContext(ctx, "/bin/sh", "-c", `"$0" -bytes "$1" -elapsed "$2" | cat > "$3"`, child, strconv.FormatInt(total, 10), elapsed, filepath.Join(dir, "cat.out"))
		if err := sh.Run(); err != nil {
			return nil, err
		}
		p, err := readElapsed(elapsed)
		if err != nil {
			return nil, err
		}
		piped = append(piped, p)
		logf("logs: round %d: child alone into a file %.2fs, through a pipe to cat %.2fs", round, a, p)
		for _, name := range []string{"server_same_priority", "server_niced"} {
			srv, sr := servers[name], runs[name]
			u, wall, lines, err := runUnderLauncher(ctx, srv, bin, child, dir, total, elapsed, fmt.Sprintf("throughput-%s-%d", name, round))
			if err != nil {
				return nil, err
			}
			sr.child, sr.wall, sr.lines = append(sr.child, u), append(sr.wall, wall), lines
			logf("logs: round %d (%s): child under sextant run %.2fs (ratio %.3f); the server had all %d lines after %.2fs",
				round, name, u, u/a, lines, wall)
		}
	}
	out := map[string]any{
		"output_bytes":                total,
		"rounds":                      rounds,
		"child_alone_s":               alone,
		"child_alone_median_s":        median(alone),
		"child_piped_to_cat_s":        piped,
		"child_piped_to_cat_median_s": median(piped),
		"note": "child times are the child's own (first line to last flush), alone into a file and under sextant run (tee into a file), rounds interleaved; " +
			"best is the fastest round of each (other load on the machine only adds time), median the middle one; " +
			"the launcher exits once the server has acknowledged every line, so its wall time is when the server had them all. " +
			"server_niced runs the server at nice 19 on the same machine, as if it ran elsewhere; server_same_priority shares the cores evenly.",
	}
	out["child_alone_best_s"] = slices.Min(alone)
	for name, sr := range runs {
		u := median(sr.child)
		out[name] = map[string]any{
			"lines":                       sr.lines,
			"child_under_run_s":           sr.child,
			"child_under_run_median_s":    u,
			"child_under_run_best_s":      slices.Min(sr.child),
			"slowdown_ratio_median":       u / median(alone),
			"slowdown_ratio_best":         slices.Min(sr.child) / slices.Min(alone),
			"slowdown_ratio_vs_pipe":      u / median(piped),
			"all_lines_on_server_after_s": sr.wall,
			"server_ingest_mb_per_s":      mb(total) / median(sr.wall),
			"server_ingest_lines_per_s":   float64(sr.lines) / median(sr.wall),
		}
	}
	return out, nil
}

// runUnderLauncher runs the child under `sextant run` against srv and checks
// that the server has every line the child printed.
func runUnderLauncher(ctx context.Context, srv *server, bin, child, dir string, total int64, elapsed, runName string) (childS, wallS float64, lines int64, err error) {
	tee, err := os.Create(filepath.Join(dir, "run.out"))
	if err != nil {
		return 0, 0, 0, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "run", "--experiment", "/Shared/bench/logs", "--run-name", runName,
		"--", child, "-bytes", strconv.FormatInt(total, 10), "-elapsed", elapsed)
	cmd.Env = append(os.Environ(), "MLFLOW_TRACKING_URI="+srv.url)
	cmd.Stdout, cmd.Stderr = tee, &stderr
	t0 := time.Now()
	err = cmd.Run()
	wallS = time.Since(t0).Seconds()
	tee.Close()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sextant run: %v\n%s", err, stderr.String())
	}
	if childS, err = readElapsed(elapsed); err != nil {
		return 0, 0, 0, err
	}
	m := runLine.FindStringSubmatch(stderr.String())
	if m == nil {
		return 0, 0, 0, fmt.Errorf("no run id in %q", stderr.String())
	}
	sc, err := sxclient.New(srv.url, sxclient.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	page, err := sc.ReadLogs(ctx, runlogs.Query{RunID: m[1], Limit: 1})
	if err != nil {
		return 0, 0, 0, err
	}
	printed, size, err := countLines(filepath.Join(dir, "run.out"))
	if err != nil {
		return 0, 0, 0, err
	}
	if size < total {
		return 0, 0, 0, fmt.Errorf("the tee wrote %d bytes, want %d", size, total)
	}
	if lines = page.Head.Lines(); lines != printed {
		return 0, 0, 0, fmt.Errorf("the server has %d lines, the child printed %d", lines, printed)
	}
	return childS, wallS, lines, nil
}

// reniceAll sets the nice value of every thread of a process (Linux
// priorities are per thread; threads created later inherit it).
func reniceAll(pid, nice int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
			return fmt.Errorf("renice thread %d: %w", tid, err)
		}
	}
	return nil
}

func benchLogTail(ctx context.Context, s *server, bin, child, dir string) (any, error) {
	const count, every = 2000, 5 * time.Millisecond
	env := append(os.Environ(), "MLFLOW_TRACKING_URI="+s.url)
	job := exec.CommandContext(ctx, bin, "run", "--experiment", "/Shared/bench/logs", "--run-name", "tail-latency",
		"--", child, "-every", every.String(), "-count", strconv.Itoa(count))
	job.Env = env
	job.Stdout = io.Discard
	errPipe, err := job.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := job.Start(); err != nil {
		return nil, err
	}
	defer job.Process.Kill()
	br := bufio.NewReader(errPipe)
	var runID string
	for runID == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("no run id from the launcher: %w", err)
		}
		if m := runLine.FindStringSubmatch(line); m != nil {
			runID = m[1]
		}
	}
	go io.Copy(io.Discard, br)
	follow := exec.CommandContext(ctx, bin, "logs", "-f", runID)
	follow.Env = env
	out, err := follow.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := follow.Start(); err != nil {
		return nil, err
	}
	defer follow.Process.Kill()
	var lat latencies
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		now := time.Now().UnixNano()
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "ts=") {
			continue
		}
		ts, err := strconv.ParseInt(strings.TrimPrefix(f[0], "ts="), 10, 64)
		if err != nil {
			continue
		}
		lat = append(lat, time.Duration(now-ts))
	}
	if err := job.Wait(); err != nil {
		return nil, err
	}
	if err := follow.Wait(); err != nil {
		return nil, fmt.Errorf("sextant logs -f: %w", err)
	}
	if len(lat) != count {
		return nil, fmt.Errorf("the follower saw %d lines, the job printed %d", len(lat), count)
	}
	sum := lat.summary()
	logf("logs: tail latency p50 %.0f ms, p99 %.0f ms, max %.0f ms", sum["p50_ms"], sum["p99_ms"], sum["max_ms"])
	return map[string]any{"lines": count, "interval_ms": every.Milliseconds(), "print_to_follower": sum,
		"path": "job print -> sextant run (200 ms batches) -> append -> long-poll tail -> sextant logs -f stdout"}, nil
}

func benchLogRange(ctx context.Context, s *server, total int) (any, error) {
	sc, err := sxclient.New(s.url, sxclient.Options{})
	if err != nil {
		return nil, err
	}
	expID, err := sc.CreateExperiment(ctx, "/Shared/bench/logs-range")
	if err != nil {
		return nil, err
	}
	run, err := sc.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: expID, RunName: "ten-million-lines"})
	if err != nil {
		return nil, err
	}
	runID := run.Info.RunID
	// Pre-fill through the append API: four sources at once, 20,000-line
	// batches of ~100-byte lines.
	const sources, batch = 4, 20_000
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, sources)
	t0 := time.Now()
	var sent atomic.Int64
	for src := range sources {
		wg.Go(func() {
			lines := make([]runlogs.Line, batch)
			var seq int64
			for {
				start := next.Add(batch) - batch
				if start >= int64(total) {
					return
				}
				n := min(batch, total-int(start))
				ts := time.Now().UnixMilli()
				for i := range n {
					k := start + int64(i)
					lines[i] = runlogs.Line{TimestampMs: ts, Stream: runlogs.Stdout, LocalRank: -1,
						Text: fmt.Sprintf("2026-12-02T10:00:00.%06dZ INFO train step=%d loss=%.6f lr=3.0e-04 grad_norm=%.4f tok/s=%d ....", k%1000000, k, 2/float64(k+1), 0.5+float64(k%97)/100, 90000+k%977)}
				}
				if _, err := sc.AppendLogs(ctx, runID, runlogs.Batch{Source: fmt.Sprintf("prefill-%d", src), FirstSeq: seq, Lines: lines[:n]}); err != nil {
					errc <- err
					return
				}
				seq += int64(n)
				if done := sent.Add(int64(n)); done%1_000_000 < batch {
					logf("logs: pre-filled %d lines", done)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	fill := time.Since(t0).Seconds()
	// Lines 5,000,000 to 5,001,000 (the middle of 10,000,000).
	from := int64(total / 2)
	q := url.Values{"run_id": {runID}, "from_line": {strconv.FormatInt(from, 10)}, "limit": {"1001"}}
	bc := newClient(s.url)
	var lat latencies
	var body struct {
		Lines []struct {
			Line int64 `json:"line"`
		} `json:"lines"`
		TotalLines int64 `json:"total_lines"`
	}
	for i := range 30 {
		t := time.Now()
		if err := bc.get(ctx, "/api/2.0/sextant/logs/get", q, &body); err != nil {
			return nil, err
		}
		if i > 0 { // the first read warms the page cache
			lat = append(lat, time.Since(t))
		}
	}
	if len(body.Lines) != 1001 || body.Lines[0].Line != from || body.TotalLines != int64(total) {
		return nil, fmt.Errorf("read %d lines from %d of %d", len(body.Lines), body.Lines[0].Line, body.TotalLines)
	}
	// A search for a rare string scans a bounded amount per call.
	var slat latencies
	sq := url.Values{"run_id": {runID}, "q": {"step=4999999 "}, "from_line": {strconv.FormatInt(from-500_000, 10)}}
	for range 5 {
		t := time.Now()
		if err := bc.get(ctx, "/api/2.0/sextant/logs/search", sq, nil); err != nil {
			return nil, err
		}
		slat = append(slat, time.Since(t))
	}
	file, live, _ := sqliteBytes(s.dataDir)
	sum := lat.summary()
	logf("logs: read 1,001 lines at line %d of %d: p50 %.1f ms, p99 %.1f ms", from, total, sum["p50_ms"], sum["p99_ms"])
	return map[string]any{
		"log_lines":                total,
		"prefill_s":                fill,
		"prefill_lines_per_s":      float64(total) / fill,
		"prefill_mb_per_s":         mb(int64(total)*100) / fill,
		"read":                     fmt.Sprintf("lines %d to %d", from, from+1000),
		"read_latency":             sum,
		"search_from_4.5M_latency": slat.summary(),
		"db_file_bytes":            file,
		"db_bytes_per_line":        float64(live) / float64(total),
	}, nil
}

// countLines counts the newlines of a file and its size.
func countLines(path string) (lines, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
		size += int64(n)
		if err == io.EOF {
			return lines, size, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
}
