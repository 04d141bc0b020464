package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildServer builds cmd/sextant unless bin is given.
func buildServer(bin string) (string, func(), error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sextant-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, "sextant")
	logf("building ./cmd/sextant")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sextant")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build: %w", err)
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

// server is a sextant server process.
type server struct {
	url     string
	dataDir string
	cmd     *exec.Cmd
	stderr  *bytes.Buffer
	done    chan error
	// group: the process leads its own process group (a peer that forks
	// workers), and signals go to the whole group.
	group bool
}

// signal sends sig to the server, or to its process group.
func (s *server) signal(sig syscall.Signal) {
	if s.group {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig)
		return
	}
	_ = s.cmd.Process.Signal(sig)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts bin on dataDir and waits until it answers /health.
// With -db postgres, each data directory gets its own database of the
// bench's PostgreSQL server (the same one again on a restart).
func startServer(ctx context.Context, bin, dataDir string, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"server", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--data-dir", dataDir, "--log-level", "warn"}, extra...)
	if pg.srv != nil && !slices.Contains(extra, "--db") {
		db, err := pg.databaseFor(ctx, dataDir)
		if err != nil {
			return nil, err
		}
		args = append(args, "--db", db)
	}
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port), dataDir: dataDir, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	return s, nil
}

// waitHealthy waits until the server answers GET /health with 200, or
// fails (and kills it) when it exits or wait passes.
func (s *server) waitHealthy(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return fmt.Errorf("server exited: %v\n%s", err, s.stderr.String())
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		default:
		}
		resp, err := http.Get(s.url + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("server did not become healthy:\n%s", s.stderr.String())
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() error {
	s.signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("server exit: %v\n%s", err, s.stderr.String())
		}
		if s.stderr.Len() > 0 {
			logf("server log (warnings and errors):\n%s", s.stderr.String())
		}
		return nil
	case <-time.After(60 * time.Second):
		s.kill()
		return fmt.Errorf("server did not stop within 60 s")
	}
}

// kill sends SIGKILL, as a crash would.
func (s *server) kill() {
	s.signal(syscall.SIGKILL)
	<-s.done
}

// procStatus reads a "VmRSS"-style field of /proc/PID/status, in bytes.
func (s *server) procStatus(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				kb, _ := strconv.ParseInt(fs[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// cpuSeconds returns the server's user+system CPU time.
func (s *server) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line.
	i := bytes.LastIndexByte(b, ')')
	fs := strings.Fields(string(b[i+2:]))
	if len(fs) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fs[11], 64)
	st, _ := strconv.ParseFloat(fs[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

func machineInfo() map[string]any {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return map[string]any{"cpus": runtime.NumCPU(), "cpu_model": model, "go": runtime.Version(), "goos": runtime.GOOS}
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// machineCPU returns the busy and total CPU time of the whole machine so
// far (all cores, seconds), from /proc/stat.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fs := strings.Fields(line)
	if len(fs) < 5 || fs[0] != "cpu" {
		return 0, 0
	}
	for i, f := range fs[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / 100, total / 100
}

// promValues returns the values of the server's /metrics samples named in
// names (unlabelled ones), 0 for those it does not serve.
func (s *server) promValues(ctx context.Context, names ...string) map[string]float64 {
	out := make(map[string]float64, len(names))
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/metrics", nil)
	if err != nil {
		return out
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, " ")
		if ok && slices.Contains(names, name) {
			out[name], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return out
}
