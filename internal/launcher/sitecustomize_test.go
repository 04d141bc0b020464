package launcher

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond until it holds; the limit only ends a broken test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// A real Python process started with the agent's sitecustomize records who
// it is, and on SIGUSR2 dumps its stacks, whose main thread's innermost
// frame is the function it is blocked in.
func TestSitecustomizeDumpsStacksOnSIGUSR2(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed:", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomizePy, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", "import time\ndef blocked_here():\n    time.sleep(3600)\nblocked_here()\n")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "SEXTANT_AGENT_DIR="+dir, "RANK=3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)

	var info struct {
		Rank       string `json:"rank"`
		MainThread string `json:"main_thread"`
	}
	waitFor(t, ".proc", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, pid+".proc"))
		return err == nil && json.Unmarshal(b, &info) == nil
	})
	if info.Rank != "3" || info.MainThread == "" {
		t.Fatalf(".proc %+v", info)
	}
	// The .proc file is written before the main module runs; wait until the
	// main thread is in blocked_here by asking for dumps until one shows it.
	var dump string
	waitFor(t, "a dump naming blocked_here", func() bool {
		_ = cmd.Process.Signal(syscall.SIGUSR2)
		time.Sleep(50 * time.Millisecond) // pacing of the retries, not ordering
		b, _ := os.ReadFile(filepath.Join(dir, pid+".stacks"))
		dump = string(b)
		return strings.Contains(dump, "blocked_here")
	})
	last := dump[strings.LastIndex(dump, "Current thread"):]
	f, ok := innermostFrame(last, info.MainThread)
	if !ok || f.Func != "blocked_here" || f.Line != 3 {
		t.Fatalf("innermost frame %v %v in\n%s", f, ok, dump)
	}
	if cmd.ProcessState != nil {
		t.Fatal("the process died of SIGUSR2")
	}
}
