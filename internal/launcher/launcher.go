// Package launcher runs a training job for `sextant run`: it finds or
// creates the job's experiment and run on the tracking server, starts the
// job with the MLflow variables pointing at that run, shows the job's
// output on the terminal unchanged while streaming it, line by line, to
// the run's log on the server, forwards signals to the job, and records
// how the job ended. docs/run.md describes it for users.
//
// The launcher talks to the server through two interfaces it declares,
// Tracker and LogSink; internal/client implements both over HTTP.
package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// Tracker is what the launcher needs from the tracking server. Errors
// carry errs codes (NotFound for a missing experiment or run,
// AlreadyExists for a name taken meanwhile); implementations retry
// transient failures themselves, for a bounded time.
type Tracker interface {
	GetExperimentByName(ctx context.Context, name string) (*tracking.Experiment, error)
	GetExperiment(ctx context.Context, id string) (*tracking.Experiment, error)
	CreateExperiment(ctx context.Context, name string) (string, error)
	CreateRun(ctx context.Context, req tracking.CreateRunRequest) (*tracking.Run, error)
	GetRun(ctx context.Context, id string) (*tracking.Run, error)
	UpdateRun(ctx context.Context, id string, u tracking.RunUpdate) error
	SetTags(ctx context.Context, runID string, tags ...tracking.Tag) error
	SearchRuns(ctx context.Context, experimentIDs []string, filter string, orderBy []string, max int) ([]*tracking.Run, error)
}

// LogSink receives the job's output. AppendLogs is called by one
// goroutine at a time, with a source's batches in sequence order, and a
// batch may be sent again after an error: the sink must store each line
// once (the server does, by source and sequence number). It does not keep
// b. Transient failures (errs.Transient) are retried by the launcher;
// any other error stops the shipping of output.
type LogSink interface {
	AppendLogs(ctx context.Context, runID string, b runlogs.Batch) (runlogs.AppendResult, error)
}

// Options configure a launch. Durations and sizes of 0 take the defaults
// given.
type Options struct {
	// Command is the job's command line; required.
	Command []string
	// Env is the job's environment before the launcher adds the MLflow
	// variables (usually the launcher's own).
	Env []string
	// Dir is the job's working directory; "" means the launcher's.
	Dir string
	// Stdin is given to the job as is; nil means no input.
	Stdin *os.File
	// Stdout and Stderr receive the job's output unchanged (the tee); nil
	// discards it.
	Stdout, Stderr io.Writer
	// Messages receives the launcher's own messages; nil discards them.
	Messages io.Writer

	// Tracker and Logs reach the server; required.
	Tracker Tracker
	Logs    LogSink
	// TrackingURI and the credentials are exported to the job.
	TrackingURI               string
	Token, Username, Password string

	// Experiment is the experiment's absolute name (see ExperimentName);
	// ExperimentExplicit says the user chose it, for the warning when it
	// differs from a resumed run's.
	Experiment         string
	ExperimentExplicit bool
	// RunName names a new run ("" means RunName()), or renames a resumed one.
	RunName string
	// User is the run's user.
	User string
	// Resume is the id of a run to continue instead of creating one.
	Resume string
	// ResumeFrom starts the job from a checkpoint: ResumeLatest (the run's
	// newest complete checkpoint, as its VolumeWriter recorded it) or a
	// checkpoint's /Volumes path. The job gets it in SEXTANT_RESUME_FROM.
	// Without Resume (and outside a multi-node job) the run is the newest
	// of the experiment that ran the same command; a path with no such run
	// starts a new one. Needs Events and Checkpoints.
	ResumeFrom string
	// Events reaches the run's events: the saves a killed job left open are
	// marked incomplete when the job ends, and resumes find checkpoints
	// there. nil turns both off.
	Events Events
	// Checkpoints checks that a checkpoint is complete before a resume.
	Checkpoints Checkpoints
	// Job places the launcher in a multi-node job (see ResolveJob).
	Job Job

	// Grace is how long the job has to exit after a forwarded SIGINT or
	// SIGTERM before it gets SIGKILL; 0 means 30 s.
	Grace time.Duration
	// Drain is how long the launcher waits for more of the job's output
	// after the job's process has exited (processes it left behind may
	// still hold the pipes); 0 means 2 s. Output written by then is read
	// in full, however long that takes. Then what is left of the job's
	// process group gets SIGTERM, and SIGKILL 2 s later.
	Drain time.Duration
	// FlushInterval is how long a line may wait to be sent with others;
	// 0 means 200 ms.
	FlushInterval time.Duration
	// BatchLines and BatchBytes cap one request; 0 means 20,000 lines and
	// 4 MiB.
	BatchLines, BatchBytes int
	// PartialAfter is how long an unfinished line waits before it is sent
	// as a partial record; 0 means 2 s.
	PartialAfter time.Duration
	// LineBytes caps one record; 0 means runlogs.MaxLineBytes.
	LineBytes int
	// MemoryBytes bounds the output kept in memory while the server is
	// behind; 0 means 256 MiB. SpoolBytes bounds what goes to a spool file
	// in SpoolDir beyond that; 0 means 1 GiB, negative means no spool.
	MemoryBytes int64
	SpoolBytes  int64
	SpoolDir    string
	// PipeOutput gives the job pipes for its output instead of files that
	// the launcher follows (see fileOutput; the files go in SpoolDir, or
	// the system's temporary directory). Through pipes, a job printing
	// faster than the launcher reads waits for it.
	PipeOutput bool
	// Nice is how many nice levels the launcher lowers its own CPU
	// priority by once the job runs, so that on cores the job keeps busy
	// the job goes first: its output waits in the files the launcher
	// follows, not in the job. The launcher then also runs Go code on at
	// most two cores, and leaves one to the job (see yieldToJob). Not with
	// pipes, where the job would wait for the launcher. 0: the launcher
	// does not yield.
	Nice int
	// DeliverTimeout is how long, after the job exited, the launcher keeps
	// trying to deliver the output and the run's final status to a server
	// that does not answer; 0 means 10 minutes.
	DeliverTimeout time.Duration
	// JoinTimeout is how long a node other than 0 waits for node 0's run;
	// 0 means 10 minutes.
	JoinTimeout time.Duration
	// RankPrefix reads each line's local rank from torchrun's line prefix
	// ("[default3]:", "[rank3]:"), for one launcher capturing all the
	// ranks of a node.
	RankPrefix bool

	// Signals are forwarded to the job's process group: SIGINT, SIGTERM,
	// SIGHUP and SIGQUIT also start the grace period; others (SIGUSR1,
	// SIGUSR2) are only passed on.
	Signals <-chan os.Signal
	// HangAfter is how long a rank may make no progress (no heartbeat from
	// sextant.progress; for a job that never calls it, no output and no
	// metric) before the launcher collects the job's Python stacks into
	// the run's log and opens a hung span on the run (hang.go); 0 or
	// negative turns hang detection off.
	HangAfter time.Duration
	// Sampler samples the job's GPUs for the run; nil means none.
	Sampler Sampler
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Result is how a launch ended.
type Result struct {
	RunID          string
	RunName        string
	ExperimentID   string
	ExperimentName string
	// ExitCode is the launcher's exit code: the job's, 128+N when signal
	// N ended it, 127 when it could not be started.
	ExitCode int
	Status   tracking.RunStatus
	// Signal names the signal that ended the job or that the launcher
	// forwarded to stop it; "" when none.
	Signal string
	// Lines is the number of lines captured; Delivered the number the
	// server acknowledged; Lost the number dropped (spool full) or left
	// undelivered.
	Lines, Delivered, Lost int64
}

type launcher struct {
	opts    Options
	now     func() time.Time
	run     *tracking.Run
	expID   string
	expName string
	resume  *resumePoint
	// agentDir is the job's SEXTANT_AGENT_DIR; "" when hang detection is
	// off.
	agentDir string
}

func (l *launcher) say(format string, args ...any) {
	if l.opts.Messages != nil {
		fmt.Fprintf(l.opts.Messages, "sextant: "+format+"\n", args...)
	}
}

// RunURL is the address of a run's page in the web UI of the server at
// trackingURI.
func RunURL(trackingURI, runID string) string {
	return strings.TrimRight(trackingURI, "/") + "/runs/" + url.PathEscape(runID)
}

func withDefaults(o Options) Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Grace, 30*time.Second)
	def(&o.Drain, 2*time.Second)
	def(&o.FlushInterval, 200*time.Millisecond)
	def(&o.PartialAfter, 2*time.Second)
	def(&o.DeliverTimeout, 10*time.Minute)
	def(&o.JoinTimeout, 10*time.Minute)
	if o.BatchLines <= 0 {
		o.BatchLines = 20_000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	if o.LineBytes <= 0 {
		o.LineBytes = runlogs.MaxLineBytes
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 256 << 20
	}
	if o.SpoolBytes == 0 {
		o.SpoolBytes = 1 << 30
	}
	if o.Sampler == nil {
		o.Sampler = NopSampler{}
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// newSource returns a fresh source id for this launcher's lines: the
// node and rank, and random bits so that a relaunch never reuses one.
func newSource(j Job) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := "n" + strconv.Itoa(j.NodeRank)
	if j.LocalRank >= 0 {
		s += "-r" + strconv.Itoa(j.LocalRank)
	}
	return s + "-" + hex.EncodeToString(b[:])
}

// forwardSignals forwards the signals of Options.Signals to the job's
// process group until exited is closed, and SIGKILLs the group Grace after
// the first termination signal. It then sends what it did on the channel
// returned: the first termination signal forwarded, and whether it had to
// escalate.
func (l *launcher) forwardSignals(ch *child, exited <-chan struct{}) <-chan outcome {
	o := &l.opts
	done := make(chan outcome, 1)
	go func() {
		var out outcome
		defer func() { done <- out }()
		var grace <-chan time.Time
		for {
			select {
			case <-exited:
				return
			case s := <-o.Signals:
				sig, ok := s.(syscall.Signal)
				if !ok {
					continue
				}
				if err := ch.signal(sig); err != nil {
					l.say("could not forward %s to the job: %v", signalName(sig), err)
				}
				switch sig {
				case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
					if out.forwarded == 0 {
						out.forwarded = sig
					}
					if grace == nil {
						grace = time.After(o.Grace)
						l.say("forwarded %s to the job; it gets SIGKILL if it has not exited in %v", signalName(sig), o.Grace)
					}
				}
			case <-grace:
				grace = nil
				l.say("the job did not exit within %v of %s: sending SIGKILL", o.Grace, signalName(out.forwarded))
				out.escalated = true
				_ = ch.signal(syscall.SIGKILL)
			}
		}
	}()
	return done
}

func transientOrUnknown(err error) bool {
	switch errs.CodeOf(err) {
	case errs.Unavailable, errs.Throttled, errs.Internal, errs.InsufficientStorage:
		return true
	}
	return false
}

// waitShipped waits for the shipper to deliver what is queued, for at most
// DeliverTimeout.
func (l *launcher) waitShipped(shipped <-chan struct{}, stop context.CancelFunc) {
	t := time.NewTimer(l.opts.DeliverTimeout)
	defer t.Stop()
	select {
	case <-shipped:
		return
	case <-t.C:
		l.say("gave up delivering the output after %v", l.opts.DeliverTimeout)
		stop()
		<-shipped
	}
}

// startSampler starts the Sampler and returns its stop function (which
// waits at most 10 s).
func (l *launcher) startSampler(ctx context.Context, ch *child, att *attempt) func() {
	o := &l.opts
	stop, err := o.Sampler.Start(ctx, SampledJob{
		RunID: l.run.Info.RunID, ExperimentID: l.expID, NodeRank: o.Job.NodeRank, LocalRank: o.Job.LocalRank,
		PID: ch.pgid, VisibleDevices: envValue(l.childEnv(), "CUDA_VISIBLE_DEVICES"), OnGPUs: att.gpus,
	})
	if err != nil {
		l.say("GPU sampling is off for this run: %v", err)
		return func() {}
	}
	return func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := stop(sctx); err != nil {
			l.say("stopping GPU sampling: %v", err)
		}
	}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := cutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// yieldToJob makes the launcher a side-car of the job it started: its
// threads drop nice levels below the job, and it runs Go code on at most
// two cores, leaving at least one to the job (unless GOMAXPROCS is set).
// Both matter on a machine whose cores the job keeps busy: at a lower
// priority alone, the runtime's spare threads still took turns on the
// job's core (docs/run.md has the figures). One core reads, tees and
// splits output far faster than a job prints it; what the launcher has
// not read yet waits in the job's output files. restore gives the threads
// their priority back (GOMAXPROCS stays: the process is about to end, or
// is a test).
func (l *launcher) yieldToJob(nice int) (restore func()) {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, min(2, runtime.NumCPU()-1)))
	}
	restore, err := yieldCPU(nice)
	if err != nil {
		l.say("could not lower the launcher's CPU priority: %v", err)
	}
	return restore
}
