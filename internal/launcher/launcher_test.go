package launcher_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/launcher"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// syncBuffer is a bytes.Buffer safe for the launcher's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type launched struct {
	res            launcher.Result
	err            error
	stdout, stderr *syncBuffer
	msgs           *syncBuffer
}

// launch runs a job against f with test-sized timings; edit adjusts the
// options.
func launch(t *testing.T, f *fakeServer, command []string, edit func(*launcher.Options)) launched {
	t.Helper()
	l := launched{stdout: &syncBuffer{}, stderr: &syncBuffer{}, msgs: &syncBuffer{}}
	o := launcher.Options{
		Command: command, Env: os.Environ(), Stdout: l.stdout, Stderr: l.stderr, Messages: l.msgs,
		Tracker: f, Logs: f, TrackingURI: "http://tracking.invalid", Experiment: "/Shared/test", User: "tester",
		Grace: 2 * time.Second, Drain: 300 * time.Millisecond, FlushInterval: 20 * time.Millisecond,
		DeliverTimeout: 20 * time.Second, JoinTimeout: 10 * time.Second, SpoolDir: t.TempDir(),
		Job: launcher.Job{LocalRank: runlogs.UnknownRank, NNodes: 1},
	}
	if edit != nil {
		edit(&o)
	}
	l.res, l.err = launcher.Run(t.Context(), o)
	if msgs := l.msgs.String(); msgs != "" {
		t.Logf("launcher messages:\n%s", msgs)
	}
	return l
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func texts(ls []runlogs.Line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Text
	}
	return out
}

func tag(r *tracking.Run, key string) string { return tagOf(r, key) }

// outputModes runs a test with the job's output into followed files (the
// default) and through pipes.
func outputModes(t *testing.T, test func(t *testing.T, pipes bool)) {
	for _, pipes := range []bool{false, true} {
		name := "files"
		if pipes {
			name = "pipes"
		}
		t.Run(name, func(t *testing.T) { test(t, pipes) })
	}
}

func TestRunCapturesOutput(t *testing.T) { outputModes(t, testRunCapturesOutput) }

func testRunCapturesOutput(t *testing.T, pipes bool) {
	f := newFakeServer()
	l := launch(t, f, sh(`echo "out 1"; sleep 0.05; echo "err 1" >&2; sleep 0.05; printf 'a\033[31mred\033[0m\r\nlast'`), func(o *launcher.Options) {
		o.PipeOutput = pipes
	})
	if l.err != nil || l.res.ExitCode != 0 || l.res.Status != tracking.StatusFinished {
		t.Fatalf("result %+v, err %v", l.res, l.err)
	}
	// The tee is byte for byte.
	if got := l.stdout.String(); got != "out 1\na\033[31mred\033[0m\r\nlast" {
		t.Fatalf("stdout tee: %q", got)
	}
	if got := l.stderr.String(); got != "err 1\n" {
		t.Fatalf("stderr tee: %q", got)
	}
	ls := f.lines(t, l.res.RunID)
	want := []string{"out 1", "err 1", "a\033[31mred\033[0m", "last"}
	if strings.Join(texts(ls), "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", texts(ls), want)
	}
	if ls[0].Stream != runlogs.Stdout || ls[1].Stream != runlogs.Stderr || ls[0].Number != 1 || ls[3].Number != 4 {
		t.Fatalf("lines %+v", ls)
	}
	run := f.run(t, l.res.RunID)
	if run.Info.Status != tracking.StatusFinished || run.Info.EndTimeMs == 0 || tag(run, launcher.TagExitCode) != "0" || tag(run, launcher.TagSignal) != "" {
		t.Fatalf("run %+v", run)
	}
	if !strings.HasPrefix(run.Info.RunName, "jobTaskRun-") || tag(run, tracking.TagUser) != "tester" {
		t.Fatalf("run name %q, tags %v", run.Info.RunName, run.Data.Tags)
	}
	if l.res.Lines != 4 || l.res.Delivered != 4 || l.res.Lost != 0 {
		t.Fatalf("counts %+v", l.res)
	}
}

func TestRunExportsEnvironment(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, sh(`echo "$MLFLOW_TRACKING_URI $MLFLOW_RUN_ID $MLFLOW_EXPERIMENT_NAME $MLFLOW_EXPERIMENT_ID $MLFLOW_TRACKING_TOKEN"`), func(o *launcher.Options) {
		o.Token = "tok"
		o.Env = append(o.Env, "MLFLOW_RUN_ID=stale")
	})
	want := fmt.Sprintf("http://tracking.invalid %s /Shared/test %s tok\n", l.res.RunID, l.res.ExperimentID)
	if l.stdout.String() != want {
		t.Fatalf("env %q, want %q", l.stdout.String(), want)
	}
}

func TestRunExitStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		code   int
		status tracking.RunStatus
		signal string
	}{
		"Finished":     {"exit 0", 0, tracking.StatusFinished, ""},
		"Failed":       {"exit 3", 3, tracking.StatusFailed, ""},
		"KilledBySelf": {"kill -KILL $$", 137, tracking.StatusKilled, "SIGKILL"},
		"Crashed":      {"kill -SEGV $$", 139, tracking.StatusFailed, "SIGSEGV"},
		"NotFound":     {"", 127, tracking.StatusFailed, ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeServer()
			cmd := sh(tc.script)
			if name == "NotFound" {
				cmd = []string{"/nonexistent/train"}
			}
			l := launch(t, f, cmd, nil)
			if l.res.ExitCode != tc.code || l.res.Status != tc.status || l.res.Signal != tc.signal {
				t.Fatalf("result %+v (err %v), want code %d status %v signal %q", l.res, l.err, tc.code, tc.status, tc.signal)
			}
			run := f.run(t, l.res.RunID)
			if run.Info.Status != tc.status || tag(run, launcher.TagExitCode) != strconv.Itoa(tc.code) || tag(run, launcher.TagSignal) != tc.signal {
				t.Fatalf("run status %v, tags %v", run.Info.Status, run.Data.Tags)
			}
			if name == "NotFound" && (l.err == nil || !strings.Contains(texts(f.lines(t, l.res.RunID))[0], "cannot start")) {
				t.Fatalf("missing command: err %v, log %q", l.err, texts(f.lines(t, l.res.RunID)))
			}
		})
	}
}

// ready starts the launch in the background and waits until the job has
// printed its first line.
func launchAsync(t *testing.T, f *fakeServer, command []string, edit func(*launcher.Options)) (chan<- os.Signal, <-chan launched, *syncBuffer) {
	t.Helper()
	sigs := make(chan os.Signal, 4)
	done := make(chan launched, 1)
	out := &syncBuffer{}
	go func() {
		done <- launch(t, f, command, func(o *launcher.Options) {
			o.Signals = sigs
			o.Stdout = out
			if edit != nil {
				edit(o)
			}
		})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatal("the job did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sigs, done, out
}

func TestSignalForwarded(t *testing.T) {
	t.Run("JobExitsOnSIGTERM", func(t *testing.T) {
		f := newFakeServer()
		sigs, done, out := launchAsync(t, f, sh(`trap 'echo "got TERM"; exit 0' TERM; echo ready; while :; do sleep 0.05; done`), nil)
		sigs <- syscall.SIGTERM
		l := <-done
		// Stopped on request: KILLED, whatever the job's own exit code.
		if l.res.Status != tracking.StatusKilled || l.res.ExitCode != 0 || l.res.Signal != "SIGTERM" || !strings.Contains(out.String(), "got TERM") {
			t.Fatalf("result %+v, output %q", l.res, out.String())
		}
		if run := f.run(t, l.res.RunID); run.Info.Status != tracking.StatusKilled || tag(run, launcher.TagSignal) != "SIGTERM" {
			t.Fatalf("run %v %v", run.Info.Status, run.Data.Tags)
		}
	})
	t.Run("JobDiesOfSIGINT", func(t *testing.T) {
		f := newFakeServer()
		sigs, done, _ := launchAsync(t, f, []string{"/bin/sh", "-c", `echo ready; exec sleep 30`}, nil)
		sigs <- syscall.SIGINT
		l := <-done
		if l.res.Status != tracking.StatusKilled || l.res.ExitCode != 130 || l.res.Signal != "SIGINT" {
			t.Fatalf("result %+v", l.res)
		}
	})
	t.Run("IgnoredSIGTERMGetsSIGKILL", func(t *testing.T) {
		f := newFakeServer()
		start := time.Now()
		sigs, done, _ := launchAsync(t, f, sh(`trap '' TERM; echo ready; while :; do sleep 0.05; done`), func(o *launcher.Options) {
			o.Grace = 300 * time.Millisecond
		})
		sigs <- syscall.SIGTERM
		l := <-done
		if l.res.Status != tracking.StatusKilled || l.res.ExitCode != 137 || l.res.Signal != "SIGKILL" {
			t.Fatalf("result %+v", l.res)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
		if !strings.Contains(l.msgs.String(), "sending SIGKILL") {
			t.Fatalf("messages %q", l.msgs.String())
		}
	})
	t.Run("SIGUSR1PassedOn", func(t *testing.T) {
		f := newFakeServer()
		sigs, done, out := launchAsync(t, f, sh(`trap 'echo usr1; exit 5' USR1; echo ready; while :; do sleep 0.05; done`), nil)
		sigs <- syscall.SIGUSR1
		l := <-done
		if l.res.Status != tracking.StatusFailed || l.res.ExitCode != 5 || !strings.Contains(out.String(), "usr1") {
			t.Fatalf("result %+v, output %q", l.res, out.String())
		}
	})
}

// TestForkedChild covers a job whose process exits while a process it
// started in the background still holds the output pipes: the launcher
// reads for Drain more, then stops what is left of the job's process
// group and returns.
func TestForkedChild(t *testing.T) { outputModes(t, testForkedChild) }

func testForkedChild(t *testing.T, pipes bool) {
	f := newFakeServer()
	start := time.Now()
	l := launch(t, f, sh(`(sleep 0.1; echo late; exec sleep 30) & echo "pid $!"; echo main done`), func(o *launcher.Options) {
		o.Drain = 500 * time.Millisecond
		o.PipeOutput = pipes
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the launcher waited %v for the background process", d)
	}
	if l.res.ExitCode != 0 || l.res.Status != tracking.StatusFinished {
		t.Fatalf("result %+v", l.res)
	}
	got := texts(f.lines(t, l.res.RunID))
	if len(got) != 3 || got[1] != "main done" || got[2] != "late" {
		t.Fatalf("lines %q: want the background process's line read during the drain", got)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(got[0], "pid "))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockingWriter blocks every Write until release is closed: a terminal
// that does not take the output.
type blockingWriter struct {
	release chan struct{}
	b       syncBuffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.b.Write(p)
}

// TestJobNeverWaitsForLauncher: with its output in followed files, a job
// printing 40 MB finishes while the launcher is stuck (here, on a terminal
// that takes nothing); through pipes (16 MiB at most) it waits, which
// shows the test can fail. Nothing is lost either way once the launcher
// moves again.
func TestJobNeverWaitsForLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("40 MB of output: too slow for the race detector's -short pass; the plain pass runs it")
	}
	const lines = 2_000_000
	outputModes(t, func(t *testing.T, pipes bool) {
		f := newFakeServer()
		marker := filepath.Join(t.TempDir(), "printed")
		tee := &blockingWriter{release: make(chan struct{})}
		done := make(chan launched, 1)
		go func() {
			done <- launch(t, f, sh(`seq 1 `+strconv.Itoa(lines)+` | sed 's/$/ 0123456789/'; touch `+marker), func(o *launcher.Options) {
				o.PipeOutput = pipes
				o.Stdout = tee
			})
		}()
		// Files: the job finishes within seconds. Pipes: it is still
		// waiting after 3 s, a long time for 40 MB.
		wait := 20 * time.Second
		if pipes {
			wait = 3 * time.Second
		}
		finished := false
		for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(marker); err == nil {
				finished = true
				break
			}
		}
		close(tee.release)
		l := <-done
		if finished == pipes {
			t.Fatalf("output through pipes %v, yet the job finished while the launcher was stuck: %v", pipes, finished)
		}
		if l.err != nil || l.res.ExitCode != 0 || l.res.Lines != lines || l.res.Delivered != lines {
			var odd []string
			for _, x := range f.lines(t, l.res.RunID) {
				if !strings.HasSuffix(x.Text, " 0123456789") {
					odd = append(odd, fmt.Sprintf("%d %q", x.Number, x.Text))
				}
			}
			t.Fatalf("result %+v, err %v; other lines: %v", l.res, l.err, odd)
		}
		if n := strings.Count(tee.b.String(), "\n"); n != lines {
			t.Fatalf("the terminal got %d lines", n)
		}
	})
}

func TestRunNamesAndResume(t *testing.T) {
	f := newFakeServer()
	first := launch(t, f, sh(`echo one; echo two`), func(o *launcher.Options) { o.RunName = "my-run" })
	if first.res.RunName != "my-run" || first.res.ExperimentName != "/Shared/test" {
		t.Fatalf("first %+v", first.res)
	}
	second := launch(t, f, sh(`echo three; exit 4`), func(o *launcher.Options) { o.Resume = first.res.RunID })
	if second.res.RunID != first.res.RunID || second.res.Status != tracking.StatusFailed {
		t.Fatalf("resumed %+v", second.res)
	}
	ls := f.lines(t, first.res.RunID)
	if strings.Join(texts(ls), ",") != "one,two,three" || ls[2].Number != 3 {
		t.Fatalf("lines after resume: %+v", ls)
	}
	if run := f.run(t, first.res.RunID); run.Info.RunName != "my-run" || tag(run, launcher.TagExitCode) != "4" {
		t.Fatalf("resumed run %+v", run)
	}
	// A missing run cannot be resumed.
	if l := launch(t, f, sh(`echo x`), func(o *launcher.Options) { o.Resume = "ffffffffffffffffffffffffffffffff" }); l.err == nil || errs.CodeOf(l.err) != errs.NotFound || l.res.ExitCode != 1 {
		t.Fatalf("resume of a missing run: %+v, %v", l.res, l.err)
	}
}

// printLines is a job printing n numbered lines as fast as it can.
func printLines(n int) []string {
	return sh(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done`, n))
}

func checkNumbered(t *testing.T, ls []runlogs.Line, n int) {
	t.Helper()
	if len(ls) != n {
		t.Fatalf("%d lines stored, want %d", len(ls), n)
	}
	for i, l := range ls {
		if l.Text != fmt.Sprintf("line %d", i) || l.Number != int64(i+1) {
			t.Fatalf("line %d is %q (number %d)", i, l.Text, l.Number)
		}
	}
}

// TestServerDown makes the server refuse appends for a while, with a tiny
// memory bound so the output goes through the spool: every line arrives
// once, in order.
func TestServerDown(t *testing.T) {
	f := newFakeServer()
	var mu sync.Mutex
	down := true
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return false, errs.E(errs.Unavailable, "cannot reach the server")
		}
		return false, nil
	}
	go func() {
		time.Sleep(time.Second)
		mu.Lock()
		down = false
		mu.Unlock()
	}()
	l := launch(t, f, printLines(3000), func(o *launcher.Options) {
		o.MemoryBytes = 2 << 10
		o.BatchLines = 100
	})
	checkNumbered(t, f.lines(t, l.res.RunID), 3000)
	if l.res.Lost != 0 || !strings.Contains(l.msgs.String(), "reachable again") {
		t.Fatalf("result %+v", l.res)
	}
	entries, _ := os.ReadDir(t.TempDir())
	_ = entries
}

// TestServerDiskFull makes the server answer its first appends with a
// full disk (507, InsufficientStorage), as a server does until space is
// freed: the launcher keeps the output and retries, and every line
// arrives once. Before, it stopped storing the output at the first 507.
func TestServerDiskFull(t *testing.T) {
	f := newFakeServer()
	var mu sync.Mutex
	refusals := 5
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			return false, &errs.Error{Code: errs.InsufficientStorage, Msg: "the server's disk is full", Hint: "free disk space under the data directory"}
		}
		return false, nil
	}
	l := launch(t, f, printLines(2000), func(o *launcher.Options) { o.BatchLines = 100 })
	checkNumbered(t, f.lines(t, l.res.RunID), 2000)
	if l.res.Lost != 0 || strings.Contains(l.msgs.String(), "no longer stored") {
		t.Fatalf("result %+v, messages %q", l.res, l.msgs.String())
	}
}

// TestLostAnswers makes the server store batches but lose its answer now
// and then: the launcher sends them again and the server stores them once.
func TestLostAnswers(t *testing.T) {
	f := newFakeServer()
	n := 0
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		n++
		if n%3 == 0 {
			return true, errs.E(errs.Unavailable, "connection reset")
		}
		return false, nil
	}
	l := launch(t, f, printLines(2000), func(o *launcher.Options) { o.BatchLines = 50 })
	checkNumbered(t, f.lines(t, l.res.RunID), 2000)
}

// TestSpoolFull drops what does not fit and says so in the log.
func TestSpoolFull(t *testing.T) {
	f := newFakeServer()
	var mu sync.Mutex
	down := true
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return false, errs.E(errs.Unavailable, "down")
		}
		return false, nil
	}
	flag := t.TempDir() + "/go"
	out := &syncBuffer{}
	done := make(chan launched, 1)
	go func() {
		done <- launch(t, f, sh(`i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done
			while [ ! -f `+flag+` ]; do sleep 0.02; done; echo after`), func(o *launcher.Options) {
			o.MemoryBytes = 1 << 10
			o.SpoolBytes = 4 << 10
			o.Stdout = out
		})
	}()
	for !strings.Contains(out.String(), "line 1999") {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	// Once what was kept is delivered (the count stops growing), the job
	// prints again.
	deadline := time.Now().Add(10 * time.Second)
	for last, stable := -1, 0; stable < 15; time.Sleep(20 * time.Millisecond) {
		n := len(f.lines(t, f.firstRun()))
		if n > 0 && n == last {
			stable++
		} else {
			stable = 0
		}
		last = n
		if time.Now().After(deadline) {
			t.Fatal("the kept output was not delivered")
		}
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := <-done
	got := texts(f.lines(t, l.res.RunID))
	if l.res.Lost == 0 || len(got) >= 2002 {
		t.Fatalf("nothing dropped: %+v, %d lines", l.res, len(got))
	}
	if !strings.Contains(got[len(got)-2], "lines of output were not stored") || got[len(got)-1] != "after" || got[0] != "line 0" {
		t.Fatalf("want the kept lines, the marker, then the new line; got first %q, last two %q", got[0], got[len(got)-2:])
	}
	if l.res.Lost != int64(2001-(len(got)-1)) {
		t.Fatalf("lost %d, stored %d of 2001", l.res.Lost, len(got)-1)
	}
}

// TestLogRefused keeps the job going when the server refuses the log.
func TestLogRefused(t *testing.T) {
	f := newFakeServer()
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		return false, errs.E(errs.LimitExceeded, "limit exceeded: log lines per run")
	}
	l := launch(t, f, sh(`echo a; echo b; exit 2`), nil)
	if l.res.ExitCode != 2 || l.res.Status != tracking.StatusFailed || l.stdout.String() != "a\nb\n" {
		t.Fatalf("result %+v", l.res)
	}
	if !strings.Contains(l.msgs.String(), "refused") || l.res.Lost != 2 {
		t.Fatalf("messages %q, lost %d", l.msgs.String(), l.res.Lost)
	}
}

func TestMultiNode(t *testing.T) {
	f := newFakeServer()
	job := func(node int) func(*launcher.Options) {
		return func(o *launcher.Options) {
			o.Job = launcher.Job{ID: "job-42", NodeRank: node, LocalRank: -1, NNodes: 2}
		}
	}
	var wg sync.WaitGroup
	results := make([]launched, 2)
	// Node 1 starts first and waits for node 0's run.
	wg.Go(func() { results[1] = launch(t, f, sh(`echo "from node 1"; exit 0`), job(1)) })
	time.Sleep(300 * time.Millisecond)
	wg.Go(func() { results[0] = launch(t, f, sh(`sleep 0.3; echo "from node 0"`), job(0)) })
	wg.Wait()
	r0, r1 := results[0].res, results[1].res
	if r0.RunID == "" || r0.RunID != r1.RunID {
		t.Fatalf("node runs %q and %q", r0.RunID, r1.RunID)
	}
	run := f.run(t, r0.RunID)
	if run.Info.Status != tracking.StatusFinished || tag(run, launcher.TagJobID) != "job-42" ||
		tag(run, "sextant.node.0.exit_code") != "0" || tag(run, "sextant.node.1.exit_code") != "0" || tag(run, "sextant.node.1.host") == "" {
		t.Fatalf("run %v %v", run.Info.Status, run.Data.Tags)
	}
	byNode := map[int32][]string{}
	for _, l := range f.lines(t, r0.RunID) {
		byNode[l.Node] = append(byNode[l.Node], l.Text)
	}
	if fmt.Sprint(byNode) != "map[0:[from node 0] 1:[from node 1]]" {
		t.Fatalf("lines by node: %v", byNode)
	}

	// A node that fails makes the run FAILED, even when node 0 succeeds.
	f2 := newFakeServer()
	wg.Go(func() { results[0] = launch(t, f2, sh(`sleep 0.5; echo ok`), job(0)) })
	wg.Go(func() { results[1] = launch(t, f2, sh(`echo boom; exit 7`), job(1)) })
	wg.Wait()
	run = f2.run(t, results[0].res.RunID)
	if run.Info.Status != tracking.StatusFailed || tag(run, "sextant.node.1.exit_code") != "7" {
		t.Fatalf("run with a failed node: %v %v", run.Info.Status, run.Data.Tags)
	}
}

func TestJoinTimeout(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, sh(`echo never`), func(o *launcher.Options) {
		o.Job = launcher.Job{ID: "lonely", NodeRank: 1, LocalRank: -1, NNodes: 2}
		o.JoinTimeout = 300 * time.Millisecond
	})
	if l.err == nil || errs.CodeOf(l.err) != errs.NotFound || l.stdout.String() != "" {
		t.Fatalf("join without node 0: %+v, %v", l.res, l.err)
	}
}

func TestRankPrefix(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, sh(`echo "[default0]:zero"; echo "[rank3]:three"; echo "plain"`), func(o *launcher.Options) { o.RankPrefix = true })
	ls := f.lines(t, l.res.RunID)
	if ls[0].LocalRank != 0 || ls[1].LocalRank != 3 || ls[2].LocalRank != runlogs.UnknownRank || ls[1].Text != "[rank3]:three" {
		t.Fatalf("ranks %+v", ls)
	}
}

func TestPartialLines(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, sh(`printf 'epoch 1: '; sleep 0.6; echo done`), func(o *launcher.Options) { o.PartialAfter = 200 * time.Millisecond })
	ls := f.lines(t, l.res.RunID)
	if len(ls) != 2 || ls[0].Text != "epoch 1: " || ls[0].Flags != runlogs.FlagPartial || ls[1].Text != "done" {
		t.Fatalf("lines %+v", ls)
	}
}

func TestRunSetupErrors(t *testing.T) {
	f := newFakeServer()
	if _, err := launcher.Run(context.Background(), launcher.Options{Tracker: f, Logs: f}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("no command: %v", err)
	}
}

// countWriter counts what the tee writes, keeping none of it.
type countWriter struct {
	mu sync.Mutex
	n  int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n += int64(len(p))
	c.mu.Unlock()
	return len(p), nil
}

// TestHugeLineWithoutNewline: a child writing one 100 MB line and no
// newline is teed whole and stored as records of at most 1 MiB (more of
// them when a slow child's pending text is flushed early as a partial
// record), all but the last flagged partial, with nothing lost.
func TestHugeLineWithoutNewline(t *testing.T) {
	const size = 100 << 20
	f := newFakeServer()
	out := &countWriter{}
	l := launch(t, f, sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x`, size)), func(o *launcher.Options) { o.Stdout = out })
	if l.err != nil || l.res.Status != tracking.StatusFinished {
		t.Fatalf("result %+v, err %v", l.res, l.err)
	}
	if out.n != size {
		t.Fatalf("tee wrote %d bytes, want %d", out.n, size)
	}
	ls := f.lines(t, l.res.RunID)
	if len(ls) < size/(1<<20) {
		t.Fatalf("%d records, want at least %d", len(ls), size/(1<<20))
	}
	total := 0
	for i, ln := range ls {
		total += len(ln.Text)
		partial := ln.Flags&runlogs.FlagPartial != 0
		if len(ln.Text) > 1<<20 || len(ln.Text) == 0 || strings.Trim(ln.Text, "x") != "" || (i < len(ls)-1 && !partial) {
			t.Fatalf("record %d of %d: %d bytes, flags %v", i, len(ls), len(ln.Text), ln.Flags)
		}
	}
	if total != size || l.res.Lost != 0 {
		t.Fatalf("stored %d bytes, lost %d", total, l.res.Lost)
	}
}
