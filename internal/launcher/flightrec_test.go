package launcher

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/tracking"
)

func strp(s string) *string { return &s }

// writeAnswer writes what a process's agent thread writes for request gen.
func writeAnswer(t *testing.T, dir string, pid, gen int, dump, done string) {
	t.Helper()
	base := filepath.Join(dir, strconv.Itoa(pid)+"."+strconv.Itoa(gen))
	if dump != "" {
		if err := os.WriteFile(base+".fr", []byte(dump), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(base+".frdone", []byte(done), 0o600); err != nil {
		t.Fatal(err)
	}
}

// collectFlightRecorder returns one answer per process: a dump, the
// process's reason for having none, or a timeout for one that did not
// answer by the deadline; answers to another request do not count.
func TestCollectFlightRecorder(t *testing.T) {
	dir := t.TempDir()
	procs := []procInfo{
		{PID: 101, Rank: strp("0")}, {PID: 102, Rank: strp("1")}, {PID: 103, Rank: strp("2")},
		{PID: 104, Rank: strp("3")}, {PID: 105, Rank: strp("4")}, {PID: 100},
	}
	writeAnswer(t, dir, 101, 2, `{"entries":[{"profiling_name":"gloo:all_reduce"}]}`, `{"format": "json", "entries": 1}`)
	writeAnswer(t, dir, 102, 2, "\x80\x04pickle", `{"format": "pickle", "entries": 7}`)
	writeAnswer(t, dir, 103, 2, "", `{"error": "RuntimeError: no FR"}`)
	writeAnswer(t, dir, 104, 1, `{"entries":[]}`, `{"format": "json", "entries": 0}`) // an answer to the previous request
	writeAnswer(t, dir, 105, 2, "", `{"format": "json", "entries": 3}`)               // says json but wrote nothing
	writeAnswer(t, dir, 100, 2, "", `{"error": "torch.distributed not initialized"}`)

	start := time.Now()
	got := collectFlightRecorder(dir, 2, procs, start.Add(300*time.Millisecond))
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("returned after %v, before the deadline, with rank 3 unanswered", took)
	}
	if len(got) != len(procs) {
		t.Fatalf("%d answers for %d processes", len(got), len(procs))
	}
	for i, want := range []frDump{
		{file: filepath.Join(dir, "101.2.fr"), format: "json", entries: 1},
		{file: filepath.Join(dir, "102.2.fr"), format: "pickle", entries: 7},
		{why: "RuntimeError: no FR"},
		{why: "no answer within 5s"},
		{why: "the dump file is missing"},
		{why: "torch.distributed not initialized"},
	} {
		g := got[i]
		if g.proc.PID != procs[i].PID || g.file != want.file || g.format != want.format || g.entries != want.entries ||
			!strings.HasPrefix(g.why, want.why) || (want.why == "") != (g.why == "") {
			t.Errorf("pid %d: got %+v, want %+v", procs[i].PID, g, want)
		}
	}

	// All answered: no wait for the deadline.
	start = time.Now()
	got = collectFlightRecorder(dir, 2, procs[:3], start.Add(time.Minute))
	if took := time.Since(start); took > 30*time.Second || got[0].file == "" {
		t.Fatalf("took %v for answers already there: %+v", took, got)
	}

	removeFlightRecorder(dir, 2, procs)
	left, _ := filepath.Glob(filepath.Join(dir, "*.2.fr*"))
	if len(left) != 0 {
		t.Fatalf("left after removal: %v", left)
	}
}

// putTracker is a Tracker that stores artifacts in a map, or fails to.
type putTracker struct {
	Tracker
	uri  string
	puts map[string]string
	fail map[string]bool
}

func (p *putTracker) PutRunArtifact(ctx context.Context, artifactURI, path string, body io.ReadSeeker, size int64) error {
	if artifactURI != p.uri {
		return errors.New("wrong artifact URI " + artifactURI)
	}
	if p.fail[path] {
		return errors.New("server said no")
	}
	b, err := io.ReadAll(body)
	if err != nil || int64(len(b)) != size {
		return errors.New("short body")
	}
	p.puts[path] = string(b)
	return nil
}

// keepFlightRecorder uploads each dump under the hang's folder, one file
// per rank, and says for every rank in the log where its dump is or why
// there is none; a failed upload is said, not fatal.
func TestKeepFlightRecorder(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 6, 18, 30, 5, 0, time.UTC)
	fdir := frArtifactDir(at)
	if fdir != "sextant/hang/20261206T183005Z" {
		t.Fatalf("folder %q", fdir)
	}
	writeAnswer(t, dir, 101, 1, `{"entries":[1]}`, `{"format":"json","entries":1}`)
	writeAnswer(t, dir, 102, 1, "pickled", `{"format":"pickle","entries":2}`)
	writeAnswer(t, dir, 103, 1, `{"entries":[]}`, `{"format":"json","entries":0}`)
	// 105 is a process of rank 0 without a process group (a DataLoader
	// worker started with spawn), 106 a second one of rank 1 with one.
	writeAnswer(t, dir, 105, 1, "", `{"error":"torch.distributed not initialized"}`)
	writeAnswer(t, dir, 106, 1, "pickled too", `{"format":"pickle","entries":3}`)
	procs := []procInfo{{PID: 101, Rank: strp("0")}, {PID: 102, Rank: strp("1")}, {PID: 103, Rank: strp("2")},
		{PID: 104, Rank: strp("3")}, {PID: 100, Argv: []string{"torchrun"}}, {PID: 105, Rank: strp("0")}, {PID: 106, Rank: strp("1")}}
	writeAnswer(t, dir, 100, 1, "", `{"error":"torch.distributed not initialized"}`)
	writeAnswer(t, dir, 104, 1, "", `{"error":"torch.distributed not initialized"}`)
	dumps := collectFlightRecorder(dir, 1, procs, time.Now())

	pt := &putTracker{uri: "mlflow-artifacts:/1/r/artifacts", puts: map[string]string{},
		fail: map[string]bool{fdir + "/flight_recorder_rank2.json": true}}
	q := newQueue(queueOptions{MemBytes: 1 << 20, BatchLines: 100, BatchBytes: 1 << 20})
	w := &hangWatch{l: &launcher{opts: Options{Tracker: pt}, run: &tracking.Run{Info: tracking.RunInfo{ArtifactURI: pt.uri}}},
		q: q, node: "n1"}
	if saved := w.keepFlightRecorder(context.Background(), dumps, fdir, at); saved != 3 {
		t.Errorf("saved %d, want 3", saved)
	}
	if len(pt.puts) != 3 || pt.puts[fdir+"/flight_recorder_rank0.json"] != `{"entries":[1]}` ||
		pt.puts[fdir+"/flight_recorder_rank1.pkl"] != "pickled" || pt.puts[fdir+"/flight_recorder_rank1_pid106.pkl"] != "pickled too" {
		t.Errorf("uploaded %v", pt.puts)
	}
	_, lines, err := q.peek(nil, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Text)
	}
	want := []string{
		"[sextant hang] rank 0 pid 101 node n1: Flight Recorder dump saved as artifact " + fdir + "/flight_recorder_rank0.json (1 entry)",
		"[sextant hang] rank 1 pid 102 node n1: Flight Recorder dump saved as artifact " + fdir + "/flight_recorder_rank1.pkl (2 entries)",
		"[sextant hang] rank 2 pid 103 node n1: Flight Recorder dump (0 entries) not kept: upload failed: server said no",
		"[sextant hang] rank 3 pid 104 node n1: no Flight Recorder dump (torch.distributed not initialized)",
		"[sextant hang] rank 1 pid 106 node n1: Flight Recorder dump saved as artifact " + fdir + "/flight_recorder_rank1_pid106.pkl (3 entries)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The real sitecustomize answers each request once, with a new
// generation each time, and says why it has no dump in a process without
// torch.distributed; without torch it sets no Flight Recorder variable.
func TestSitecustomizeAnswersFlightRecorderRequests(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed:", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomizePy, 0o600); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "env.txt")
	cmd := exec.Command(py, "-c", "import os, time\n"+
		"open(os.environ['ENV_OUT'], 'w').write(repr(sorted(k for k in os.environ if 'BUFFER_SIZE' in k)))\n"+
		"time.sleep(3600)\n")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "SEXTANT_AGENT_DIR="+dir, "RANK=0", "ENV_OUT="+env)
	cmd.Env = slicesDeleteEnv(cmd.Env, "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	waitFor(t, ".proc", func() bool { _, err := os.Stat(filepath.Join(dir, strconv.Itoa(pid)+".proc")); return err == nil })
	procs := []procInfo{{PID: pid, Rank: strp("0")}}
	for gen := 1; gen <= 2; gen++ {
		if err := askFlightRecorder(dir, gen); err != nil {
			t.Fatal(err)
		}
		var d []frDump
		waitFor(t, "the answer to request "+strconv.Itoa(gen), func() bool {
			d = collectFlightRecorder(dir, gen, procs, time.Now())
			return !strings.HasPrefix(d[0].why, "no answer")
		})
		if d[0].file != "" || d[0].why != "torch.distributed not in use" {
			t.Fatalf("request %d: %+v", gen, d[0])
		}
	}
	waitFor(t, "the job's environment", func() bool { b, _ := os.ReadFile(env); return len(b) > 0 })
	if b, _ := os.ReadFile(env); !hasTorch(py) && string(b) != "[]" {
		t.Errorf("Flight Recorder variables set in a job without torch: %s", b)
	}
}

// hasTorch says whether py can find torch (then the sitecustomize sets
// the buffer size, which the e2e test checks).
func hasTorch(py string) bool {
	return exec.Command(py, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)").Run() == nil
}

func slicesDeleteEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
