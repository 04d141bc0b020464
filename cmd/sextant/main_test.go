package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/pgtest"
)

// TestMain stops the PostgreSQL server the PostgreSQL cases start.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// runServer starts "sextant server" in-process with args and env and
// returns its address and a function that stops it and returns Run's error.
func runServer(t *testing.T, env map[string]string, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	var stderr bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { ready <- a }}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, append([]string{"server"}, args...)) }()
	select {
	case addr := <-ready:
		return addr, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("server exited: %v\n%s", err, stderr.String())
	case <-time.After(2 * time.Minute):
		// Generous: under the race detector on a loaded 2-core machine a
		// start (migrations, the first bcrypt) has taken over 20 s.
		cancel()
		select {
		case <-done: // stopped: its log can be read without a race
			t.Fatalf("server did not start in 2 minutes\n%s", stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatal("server did not start in 2 minutes, nor stop when asked")
		}
	}
	return "", nil
}

func TestServerStartsAndStops(t *testing.T) {
	dir := t.TempDir()
	// The data directory comes from the environment, the port from a flag.
	addr, stop := runServer(t, map[string]string{"SEXTANT_DATA_DIR": dir}, "--port", "0")
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "OK" {
		t.Fatalf("health: %d %q", resp.StatusCode, b)
	}
	resp, err = http.Get("http://" + addr + "/api/2.0/mlflow/experiments/get?experiment_id=0")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("default experiment: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := stop(); err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
	// The data survives a restart on the same directory.
	addr, stop = runServer(t, nil, "--port", "0", "--data-dir", dir)
	defer stop()
	resp, err = http.Get("http://" + addr + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after restart: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestSecondServerOnDataDir: a second server on a SQLite data directory
// in use refuses to start, naming the running one; once that one stops,
// a server starts there again.
func TestSecondServerOnDataDir(t *testing.T) {
	dir := t.TempDir()
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", dir)
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	err := m.Run(t.Context(), []string{"server", "--port", "0", "--data-dir", dir})
	var le *DataDirLockedError
	if !errors.As(err, &le) {
		t.Fatalf("second server: %v, want a DataDirLockedError", err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "http://" + addr} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, stop = runServer(t, nil, "--port", "0", "--data-dir", dir)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"ErrPort":               {args: []string{"--port", "70000"}, want: "port"},
		"ErrSynchronous":        {args: []string{"--sqlite-synchronous", "OFF"}, want: "sqlite-synchronous"},
		"ErrSearchIndex":        {args: []string{"--search-index-mb", "-1"}, want: "search-index-mb"},
		"ErrProxies":            {args: []string{"--trusted-proxies", "proxy.internal"}, want: "trusted-proxies"},
		"ErrEnvNotNumber":       {env: map[string]string{"SEXTANT_PORT": "abc"}, want: "SEXTANT_PORT"},
		"ErrLimit":              {args: []string{"--max-params-per-run", "0"}, want: "max-params-per-run"},
		"ErrLogLevel":           {args: []string{"--log-level", "loud"}, want: "log-level"},
		"ErrArgs":               {args: []string{"extra"}, want: "unexpected arguments"},
		"ErrAllowedHosts":       {args: []string{"--allowed-hosts", "http://mlflow.example.com"}, want: "allowed-hosts"},
		"ErrBodyTimeout":        {args: []string{"--body-timeout", "10ms"}, want: "body-timeout"},
		"ErrBodyMinBytes":       {args: []string{"--body-min-bytes", "0"}, want: "body-min-bytes"},
		"ErrEnvDuration":        {env: map[string]string{"SEXTANT_IDLE_TIMEOUT": "soon"}, want: "SEXTANT_IDLE_TIMEOUT"},
		"ErrHealthRetention":    {args: []string{"--gpu-health-retention", "10m"}, want: "gpu-health-retention"},
		"ErrEnvHealthRetention": {env: map[string]string{"SEXTANT_GPU_HEALTH_RETENTION": "long"}, want: "SEXTANT_GPU_HEALTH_RETENTION"},
		"ErrNodeFlagFaults":     {args: []string{"--node-flag-faults", "0"}, want: "node-flag-faults"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return tc.env[k] }}
			err := m.Run(t.Context(), append([]string{"server", "--data-dir", t.TempDir()}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	cfg := DefaultConfig()
	env := map[string]string{"SEXTANT_PORT": "6000", "SEXTANT_HOST": "0.0.0.0"}
	fs := flag.NewFlagSet("sextant server", flag.ContinueOnError)
	if err := bindFlags(fs, &cfg, func(k string) string { return env[k] }, allFlags); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--port", "7000"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7000 || cfg.Host != "0.0.0.0" {
		t.Fatalf("port %d host %s", cfg.Port, cfg.Host)
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	if err := m.Run(t.Context(), []string{"version"}); err != nil || !strings.Contains(out.String(), version) {
		t.Fatalf("version: %v %q", err, out.String())
	}
	if err := m.Run(t.Context(), []string{"frobnicate"}); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Fatal("unknown command accepted")
	}
}
