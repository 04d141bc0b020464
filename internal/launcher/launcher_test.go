package launcher_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

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

// patience returns when a wait for something that must happen gives up:
// shortly before the test binary's deadline, so that a wait in vain is
// reported as a failure instead of a killed binary, and never on a margin
// that a slow machine could miss.
func patience(t *testing.T) time.Time {
	d, ok := t.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d.Add(-time.Until(d) / 10)
}

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

// afterStored returns a shell command that waits until the fake server
// has been sent a line with text. Between stdout and stderr the launcher
// keeps the order it reads them in, which is the job's only when the
// launcher reads the first stream before the job writes the second
// (docs/run.md, "Order"); a job that waits for its line to reach the
// server orders its streams however slow the machine.
func afterStored(t *testing.T, f *fakeServer, text string) string {
	t.Helper()
	// Polling for an event, not a margin; the bound (10 min at least) only
	// turns a line that never arrives into a failure instead of a hang.
	return fmt.Sprintf(`i=0; until [ -e %q ]; do i=$((i+1)); [ $i -gt 60000 ] && exit 99; sleep 0.01; done`, storedMarker(t, f, text))
}

// storedMarker returns the path of a file that f creates once it has been
// sent a line with text.
func storedMarker(t *testing.T, f *fakeServer, text string) string {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "stored")
	var once sync.Once
	prev := f.AppendHook
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		for _, l := range b.Lines {
			if l.Text == text {
				once.Do(func() {
					if err := os.WriteFile(marker, nil, 0o600); err != nil {
						t.Error(err)
					}
				})
			}
		}
		if prev != nil {
			return prev(b)
		}
		return false, nil
	}
	return marker
}

func testRunCapturesOutput(t *testing.T, pipes bool) {
	f := newFakeServer()
	script := `echo "out 1"; ` + afterStored(t, f, "out 1") + `; echo "err 1" >&2; ` + afterStored(t, f, "err 1") +
		`; printf 'a\033[31mred\033[0m\r\nlast'`
	l := launch(t, f, sh(script), func(o *launcher.Options) {
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
	deadline := patience(t)
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
		// After Grace, not after the default 30 s: the message names the
		// grace the timer ran for, and 25 s is far beyond 300 ms on any
		// machine yet short of the default.
		if d := time.Since(start); d > 25*time.Second {
			t.Fatalf("took %v", d)
		}
		if !strings.Contains(l.msgs.String(), "did not exit within 300ms of SIGTERM: sending SIGKILL") {
			t.Fatalf("messages %q", l.msgs.String())
		}
	})
	// Ctrl-C when the job has the terminal: SIGINT reaches the job's
	// process group, not the launcher; the job catches it and exits 1.
	t.Run("GroupInterruptJobExits1", func(t *testing.T) {
		f := newFakeServer()
		_, done, out := launchAsync(t, f, sh(`trap 'echo "got INT"; exit 1' INT; echo ready $$; while :; do sleep 0.05; done`), nil)
		var pgid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(out.String(), "ready "), "%d", &pgid); err != nil || pgid <= 1 {
			t.Fatalf("no process group in %q: %v", out.String(), err)
		}
		if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		l := <-done
		if l.res.Status != tracking.StatusKilled || l.res.ExitCode != 1 || l.res.Signal != "SIGINT" {
			t.Fatalf("result %+v, output %q, messages %q", l.res, out.String(), l.msgs.String())
		}
		if run := f.run(t, l.res.RunID); run.Info.Status != tracking.StatusKilled || tag(run, launcher.TagSignal) != "SIGINT" || tag(run, launcher.TagExitCode) != "1" {
			t.Fatalf("run %v %v", run.Info.Status, run.Data.Tags)
		}
	})
	// A job that signals one of its processes and exits 1 stays FAILED:
	// only signals to the whole group count as an interrupt.
	t.Run("JobFailsAlone", func(t *testing.T) {
		f := newFakeServer()
		l := launch(t, f, sh(`sleep 30 & kill -TERM $!; wait; exit 1`), nil)
		if l.res.Status != tracking.StatusFailed || l.res.Signal != "" {
			t.Fatalf("result %+v", l.res)
		}
	})
	// SIGUSR1 forwarded to the group (Lightning's requeue signal) before a
	// Ctrl-C leaves the interrupt told as such.
	t.Run("GroupInterruptAfterUSR1", func(t *testing.T) {
		f := newFakeServer()
		sigs, done, out := launchAsync(t, f, sh(`trap 'echo usr1' USR1; trap 'echo "got INT"; exit 1' INT; echo ready $$; while :; do sleep 0.05; done`), nil)
		var pgid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(out.String(), "ready "), "%d", &pgid); err != nil || pgid <= 1 {
			t.Fatalf("no process group in %q: %v", out.String(), err)
		}
		sigs <- syscall.SIGUSR1
		for deadline := patience(t); !strings.Contains(out.String(), "usr1"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the job never got SIGUSR1: %q", out.String())
			}
		}
		if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		l := <-done
		if l.res.Status != tracking.StatusKilled || l.res.ExitCode != 1 || l.res.Signal != "SIGINT" {
			t.Fatalf("result %+v, output %q, messages %q", l.res, out.String(), l.msgs.String())
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
// started in the background still holds its output (the pipe, or the
// file followed): the launcher stores what that process writes after the
// job's exit, and when it does not exit, stops what is left of the job's
// process group once Drain has passed, and returns.
func TestForkedChild(t *testing.T) { outputModes(t, testForkedChild) }

func testForkedChild(t *testing.T, pipes bool) {
	t.Run("LateOutputStored", func(t *testing.T) {
		f := newFakeServer()
		// The background process writes once the job's process is gone
		// (reaped by the launcher), and leaves once its line is stored:
		// no sleep decides whether the line falls within the drain.
		script := `main=$$; (until ! kill -0 $main 2>/dev/null; do sleep 0.01; done; echo late; ` + afterStored(t, f, "late") + `) &
			echo "pid $!"; echo main done`
		l := launch(t, f, sh(script), func(o *launcher.Options) {
			// Far more than the line needs; the drain ends before, once
			// the background process has gone (and been reaped: a
			// zombie still counts as a process of the group).
			o.Drain = time.Minute
			o.PipeOutput = pipes
		})
		if l.res.ExitCode != 0 || l.res.Status != tracking.StatusFinished {
			t.Fatalf("result %+v", l.res)
		}
		if got := texts(f.lines(t, l.res.RunID)); len(got) != 3 || got[1] != "main done" || got[2] != "late" {
			t.Fatalf("lines %q: want the background process's line, written after the job's exit", got)
		}
	})
	t.Run("LeftoverStopped", func(t *testing.T) {
		f := newFakeServer()
		done := make(chan launched, 1)
		go func() {
			done <- launch(t, f, sh(`(exec sleep 3600) & echo "pid $!"; echo main done`), func(o *launcher.Options) {
				o.PipeOutput = pipes
			})
		}()
		var l launched
		select {
		case l = <-done:
		case <-time.After(time.Until(patience(t))):
			if ls := texts(f.lines(t, f.firstRun())); len(ls) > 0 {
				if pid, err := strconv.Atoi(strings.TrimPrefix(ls[0], "pid ")); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			t.Fatal("the launcher waited for the background process")
		}
		if l.res.ExitCode != 0 || l.res.Status != tracking.StatusFinished || !strings.Contains(l.msgs.String(), "stopping them") {
			t.Fatalf("result %+v, messages %q", l.res, l.msgs.String())
		}
		got := texts(f.lines(t, l.res.RunID))
		if len(got) != 2 || got[1] != "main done" {
			t.Fatalf("lines %q", got)
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(got[0], "pid "))
		if err != nil {
			t.Fatal(err)
		}
		// Stopped: gone once its new parent has reaped it.
		for end := patience(t); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("background process %d still running", pid)
			}
		}
	})
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
				// sed writes 4 KiB blocks that end inside a line; on a
				// loaded machine it may stop between two for longer than
				// the 2 s after which a line is sent as partial records,
				// rightly. Partial records are TestPartialLines' and
				// TestCapturePartialWaitsFromTheLineStart's business.
				o.PartialAfter = time.Hour
			})
		}()
		// Files: the job finishes, however slow the machine. Pipes:
		// it is still waiting after 3 s; it cannot finish, since the pipe
		// and the launcher's buffer hold less than half of its output.
		end := time.Now().Add(3 * time.Second)
		if !pipes {
			end = patience(t)
		}
		finished := false
		for ; time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
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

// TestServerDown makes the server refuse appends until the job has printed
// everything, with a tiny memory bound so the output goes through the
// spool: every line arrives once, in order.
func TestServerDown(t *testing.T) {
	f := newFakeServer()
	var mu sync.Mutex
	down, refused := true, 0
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			refused++
			return false, errs.E(errs.Unavailable, "cannot reach the server")
		}
		return false, nil
	}
	out := &syncBuffer{}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Up again once the launcher has been refused and the job has
		// printed its last line: events, not a time that a slow machine
		// could let pass before either.
		for {
			mu.Lock()
			if refused > 0 && strings.Contains(out.String(), "line 2999\n") {
				down = false
				mu.Unlock()
				return
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	l := launch(t, f, printLines(3000), func(o *launcher.Options) {
		o.MemoryBytes = 2 << 10
		o.BatchLines = 100
		o.Stdout = out
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
	// After its 2000 lines the job prints "after" until one is stored:
	// however long the launcher takes to deliver what it kept, the first
	// "after" that finds room comes after the drop marker.
	stored := storedMarker(t, f, "after")
	out := &syncBuffer{}
	done := make(chan launched, 1)
	go func() {
		done <- launch(t, f, sh(`i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done
			until [ -e `+stored+` ]; do echo after; sleep 0.02; done`), func(o *launcher.Options) {
			o.MemoryBytes = 1 << 10
			o.SpoolBytes = 4 << 10
			o.Stdout = out
		})
	}()
	for end := patience(t); !strings.Contains(out.String(), "line 1999\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the job did not print its lines")
		}
	}
	mu.Lock()
	down = false
	mu.Unlock()
	l := <-done
	got := texts(f.lines(t, l.res.RunID))
	// What was kept (lines 0 to m-1), the marker, then what found room
	// once the server was back: perhaps more of the 2000 lines (read
	// before the server came back, queued after), and more markers if
	// those filled the tiny spool again, then "after".
	isMarker := func(s string) bool { return strings.Contains(s, "lines of output were not stored") }
	m := slices.IndexFunc(got, isMarker)
	if m <= 0 || l.res.Lost == 0 {
		t.Fatalf("nothing dropped, or nothing kept: %+v, marker at %d of %d lines", l.res, m, len(got))
	}
	for i, s := range got[:m] {
		if s != fmt.Sprintf("line %d", i) {
			t.Fatalf("kept line %d is %q", i, s)
		}
	}
	last, afters, markers, said := m-1, 0, 0, int64(0)
	for _, s := range got[m:] {
		var n int64
		switch _, err := fmt.Sscanf(s, "line %d", &n); {
		case isMarker(s):
			markers++
			var k int64
			if _, err := fmt.Sscanf(s, "[sextant] %d lines", &k); err != nil || k <= 0 {
				t.Fatalf("marker %q", s)
			}
			said += k
		case s == "after":
			afters++
		case err == nil && n > int64(last) && afters == 0:
			last = int(n)
		default:
			t.Fatalf("after the first marker: %q", got[m:])
		}
	}
	if afters == 0 {
		t.Fatalf("want the new output after the marker; got %q", got[m:])
	}
	// The markers count every line lost, and the lines add up: each
	// printed line is stored or lost.
	printed := 2000 + strings.Count(out.String(), "after\n")
	if said != l.res.Lost || int64(printed) != int64(len(got)-markers)+l.res.Lost {
		t.Fatalf("markers say %d lost, result %d; %d printed, %d stored", said, l.res.Lost, printed, len(got)-markers)
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

// TestPartialLines: a line printed without its end reaches the server as
// a partial record while the job waits (here, until it has).
func TestPartialLines(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, sh(`printf 'epoch 1: '; `+afterStored(t, f, "epoch 1: ")+`; echo done`), func(o *launcher.Options) { o.PartialAfter = 200 * time.Millisecond })
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

// TestLongCommandTag: a command line over the tag's 5000 bytes is cut on
// a character boundary, so the tag stays valid UTF-8 (the server refuses
// any other). Cutting at byte 5000 split an é in two.
func TestLongCommandTag(t *testing.T) {
	f := newFakeServer()
	l := launch(t, f, []string{"/bin/true", "x" + strings.Repeat("é", 3000)}, nil)
	if l.err != nil {
		t.Fatal(l.err)
	}
	r, err := f.GetRun(t.Context(), l.res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got := tag(r, launcher.TagCommand)
	if !utf8.ValidString(got) || len(got) > 5003 || !strings.HasPrefix(got, "/bin/true xéé") || !strings.HasSuffix(got, "é...") {
		t.Fatalf("command tag of %d bytes, valid UTF-8 %v: ...%q", len(got), utf8.ValidString(got), got[max(0, len(got)-12):])
	}
}
