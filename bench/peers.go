package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The reads benchmark measures Sextant beside two peers that speak the same
// MLflow REST API, each started by the bench from a path given on the
// command line and skipped when absent:
//
//   - FastTrackML (-fml): an `fml` binary built from its public source;
//     SQLite backend in a temporary directory.
//   - MLflow's own server (-mlflow): the `mlflow` executable of a virtual
//     environment; SQLite backend in a temporary directory. -mlflow-venv DIR
//     creates that environment from PyPI (the newest mlflow) when DIR has
//     none yet, and reuses it afterwards.
//
// Nothing of the peers is part of this repository: the bench only runs
// their executables.

// peerSpec says how to start one peer, or why it is absent.
type peerSpec struct {
	name    string
	absent  string // why the peer is skipped; "" when it runs
	version string
	python  string // mlflow only: the Python of its environment
	start   func(ctx context.Context, dataDir string) (*server, error)
}

// peerSpecs returns sextant and the peers named on the command line, in
// the order they are measured.
func peerSpecs(ctx context.Context, c config, bin string) []peerSpec {
	specs := []peerSpec{{
		name:    "sextant",
		version: "this tree",
		start: func(ctx context.Context, dir string) (*server, error) {
			return startServer(ctx, bin, dir, c.serverArgs...)
		},
	}}
	specs = append(specs, fmlSpec(c.fmlBin))
	specs = append(specs, mlflowSpec(ctx, c))
	return specs
}

func fmlSpec(bin string) peerSpec {
	p := peerSpec{name: "fasttrackml"}
	if bin == "" {
		p.absent = "no -fml given"
		return p
	}
	if _, err := os.Stat(bin); err != nil {
		p.absent = fmt.Sprintf("-fml %s: %v", bin, err)
		return p
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err == nil {
		p.version = strings.TrimSpace(string(out))
	}
	p.start = func(ctx context.Context, dir string) (*server, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command(bin, "server",
			"--listen-address", addr,
			"--database-uri", "sqlite://"+filepath.Join(dir, "fasttrackml.db"),
			"--default-artifact-root", filepath.Join(dir, "artifacts"),
			"--log-level", "warn")
		cmd.Dir = dir
		return startProcess(ctx, cmd, "http://"+addr, dir, 60*time.Second)
	}
	return p
}

func mlflowSpec(ctx context.Context, c config) peerSpec {
	p := peerSpec{name: "mlflow"}
	bin := c.mlflowBin
	if bin == "" && c.mlflowVenv != "" {
		var err error
		if bin, err = ensureMLflowVenv(ctx, c.mlflowVenv); err != nil {
			p.absent = fmt.Sprintf("-mlflow-venv %s: %v", c.mlflowVenv, err)
			return p
		}
	}
	if bin == "" {
		p.absent = "neither -mlflow nor -mlflow-venv given"
		return p
	}
	if _, err := os.Stat(bin); err != nil {
		p.absent = fmt.Sprintf("-mlflow %s: %v", bin, err)
		return p
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err == nil {
		p.version = strings.TrimSpace(string(out))
	}
	p.python = filepath.Join(filepath.Dir(bin), "python")
	p.start = func(ctx context.Context, dir string) (*server, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "server",
			"--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--backend-store-uri", "sqlite:///"+filepath.Join(dir, "mlflow.db"),
			"--default-artifact-root", filepath.Join(dir, "artifacts"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MLFLOW_DISABLE_TELEMETRY=true", "DO_NOT_TRACK=true")
		// Its first start creates the schema (dozens of migrations).
		return startProcess(ctx, cmd, fmt.Sprintf("http://127.0.0.1:%d", port), dir, 3*time.Minute)
	}
	return p
}

// ensureMLflowVenv returns the mlflow executable of the virtual environment
// in dir, creating it with the newest mlflow from PyPI first if dir has
// none. A finished environment is marked with a .complete file.
func ensureMLflowVenv(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bin", "mlflow")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return bin, nil
	}
	logf("creating a virtual environment with the newest mlflow from PyPI in %s", dir)
	os.RemoveAll(dir)
	for _, args := range [][]string{
		{"python3", "-m", "venv", dir},
		{filepath.Join(dir, "bin", "pip"), "install", "--quiet", "--upgrade", "mlflow"},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	return bin, nil
}

// startProcess starts cmd, a server that will answer GET base+/health, and
// waits up to wait for it.
func startProcess(ctx context.Context, cmd *exec.Cmd, base, dataDir string, wait time.Duration) (*server, error) {
	s := &server{url: base, dataDir: dataDir, cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1), group: true}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Peers log every request; keep the start of it, enough to see why
	// one failed to start.
	w := &cappedWriter{buf: s.stderr, max: 1 << 20}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitHealthy(ctx, wait); err != nil {
		return nil, err
	}
	return s, nil
}

// cappedWriter writes to buf until it holds max bytes, then drops the rest.
type cappedWriter struct {
	buf *bytes.Buffer
	max int
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
