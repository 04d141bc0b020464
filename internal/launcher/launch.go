package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// Run launches the job and returns once it has ended and its output and
// outcome are recorded (or DeliverTimeout passed). An error before the job
// started (the server unreachable, a bad resume id) comes back with
// ExitCode 1, or 127 when the command cannot be started; once the job has
// started, Run reports problems with the server as messages and returns
// the job's exit code. ctx bounds the setup only: once started, the job is
// stopped by the signals given in Options, not by ctx.
//
// Run is the steps below, in order; each step's comment says why it is
// where it is.
func Run(ctx context.Context, opts Options) (Result, error) {
	l, code, err := newLauncher(ctx, opts)
	if err != nil {
		return Result{ExitCode: code}, err
	}
	if err := l.resolveRun(ctx); err != nil {
		return Result{ExitCode: 1}, err
	}
	res := l.announce(ctx)
	// From here on the job's output and outcome are recorded even when
	// the caller's ctx ends.
	bg := context.WithoutCancel(ctx)
	d := l.startDelivery(bg)
	defer d.close()
	if l.agentDir = l.makeAgentDir(); l.agentDir != "" {
		defer os.RemoveAll(l.agentDir)
	}
	ch, err := startChild(l.opts.Command, l.childEnv(), l.opts.Dir, l.opts.Stdin, l.opts.SpoolDir, l.opts.PipeOutput)
	if err != nil {
		return l.startFailed(bg, d, res, err)
	}
	startMs := l.now().UnixMilli()
	defer l.yieldIfFollowed(ch)() // the priority comes back once the outcome is recorded
	caps := l.startCapture(ch, d)
	// The attempt opens as the job started (its GPU-hours count from
	// there), once the output is captured: a slow server must not hold
	// the job's output back.
	att := l.startAttempt(bg, startMs)
	stopSampler := l.startSampler(bg, ch, att)
	stopHangWatch := l.startHangWatch(bg, ch, caps, d.q)
	out := l.waitJob(ch)
	stopHangWatch()
	l.drainOutput(ch, caps, d.q)
	stopSampler()
	jobEndMs := l.now().UnixMilli()
	l.waitShipped(d.shipped, d.stop)
	l.closeCutSaves(bg)
	l.countLines(d, &res)
	l.recordOutcome(bg, out, att, jobEndMs, &res)
	return res, nil
}

// newLauncher checks the options and fills in their defaults. It refuses
// what cannot work before anything is created on the server, with the
// exit code to return: 2 for a usage mistake, 1 otherwise.
func newLauncher(ctx context.Context, opts Options) (*launcher, int, error) {
	if len(opts.Command) == 0 {
		return nil, 2, errs.E(errs.Invalid, "no command to run: sextant run [flags] -- COMMAND [ARGS...]")
	}
	if opts.Tracker == nil || opts.Logs == nil {
		return nil, 1, errors.New("launcher: Tracker and Logs are required")
	}
	l := &launcher{opts: withDefaults(opts)}
	l.now = l.opts.Now
	if code, err := l.checkResumeFrom(ctx); err != nil {
		return nil, code, err
	}
	return l, 0, nil
}

// checkResumeFrom refuses a ResumeFrom checkpoint path that is not a
// complete checkpoint. It runs before the run is resolved, so that a
// mistyped or half-written checkpoint leaves no run marked RUNNING and
// no job started that would fail loading it.
func (l *launcher) checkResumeFrom(ctx context.Context) (int, error) {
	o := &l.opts
	p := o.ResumeFrom
	if p == "" || p == ResumeLatest {
		return 0, nil
	}
	if o.Checkpoints == nil {
		return 1, errors.New("launcher: ResumeFrom needs Checkpoints")
	}
	done, err := o.Checkpoints.CheckpointComplete(ctx, strings.TrimRight(p, "/"))
	if err != nil {
		return 1, fmt.Errorf("check checkpoint %s: %w", p, err)
	}
	if !done {
		return 2, errs.Errorf(errs.Invalid, "cannot resume from %s: it is not a complete checkpoint (no .metadata): `sextant ckpt ls` lists the complete ones", p)
	}
	return 0, nil
}

// resolveRun finds or creates the run (see setup), then, for a resume,
// the checkpoint the job starts from. The checkpoint comes second
// because ResumeLatest means the newest checkpoint of the run found.
func (l *launcher) resolveRun(ctx context.Context) error {
	if err := l.setup(ctx); err != nil {
		return err
	}
	if l.opts.ResumeFrom == "" {
		return nil
	}
	rp, err := l.resolveResume(ctx)
	if err != nil {
		return err
	}
	l.resume = rp
	return nil
}

// announce says which run the job runs in, and where to see it, before
// the job prints anything, and tags the run with this node's host name
// in a multi-node job so that a node's failure can be traced to its
// machine. It returns the Result as far as it is known.
func (l *launcher) announce(ctx context.Context) Result {
	o := &l.opts
	res := Result{RunID: l.run.Info.RunID, RunName: l.run.Info.RunName, ExperimentID: l.expID, ExperimentName: l.expName}
	l.say("run %s (%s) in experiment %s", res.RunID, res.RunName, res.ExperimentName)
	if o.TrackingURI != "" {
		l.say("view it at %s", RunURL(o.TrackingURI, res.RunID))
	}
	if o.Job.ID != "" {
		tag := tracking.Tag{Key: nodeTagPrefix(o.Job) + "host", Value: hostname()}
		if err := o.Tracker.SetTags(ctx, l.run.Info.RunID, tag); err != nil {
			l.say("could not tag the run with this node's host name: %v", err)
		}
	}
	return res
}

// nodeTagPrefix starts the tags of this node (and local rank, when the
// launcher captures one rank) in a multi-node job.
func nodeTagPrefix(j Job) string {
	prefix := TagNodePrefix + strconv.Itoa(j.NodeRank) + "."
	if j.LocalRank >= 0 {
		prefix += "rank" + strconv.Itoa(j.LocalRank) + "."
	}
	return prefix
}

// delivery is the path of the job's output to the server: the queue the
// captures fill and the shipper that empties it, in its own goroutine.
type delivery struct {
	q       *queue
	ship    *shipper
	shipped <-chan struct{} // closed when the shipper has returned
	stop    context.CancelFunc
	warn    func(format string, args ...any)
}

// startDelivery starts the shipper before the job, so that even a job
// that cannot start leaves its one line of explanation in the run's log.
func (l *launcher) startDelivery(ctx context.Context) *delivery {
	o := &l.opts
	q := newQueue(queueOptions{MemBytes: o.MemoryBytes, SpoolDir: o.SpoolDir, SpoolBytes: o.SpoolBytes, BatchLines: o.BatchLines, BatchBytes: int64(o.BatchBytes), Now: l.now})
	ship := &shipper{
		q: q, sink: o.Logs, runID: l.run.Info.RunID, source: newSource(o.Job),
		flush: o.FlushInterval, maxLines: o.BatchLines, maxBytes: o.BatchBytes, warn: l.say,
		highWater: o.MemoryBytes - o.MemoryBytes/8,
	}
	shipCtx, stop := context.WithCancel(ctx)
	shipped := make(chan struct{})
	go func() {
		defer close(shipped)
		ship.run(shipCtx)
	}()
	return &delivery{q: q, ship: ship, shipped: shipped, stop: stop, warn: l.say}
}

// close stops the shipper, if it is still running, and removes the
// spool file; it is deferred, so that no spool is left behind whatever
// way Run returns.
func (d *delivery) close() {
	d.stop()
	if err := d.q.remove(); err != nil {
		d.warn("could not remove the output spool: %v", err)
	}
}

// startFailed records a job that could not be started: the reason goes
// to the run's log (where a user looking at the run will look) and the
// run ends FAILED. The exit code is 126 for a command that is not
// executable and 127 otherwise, as a shell's.
func (l *launcher) startFailed(ctx context.Context, d *delivery, res Result, err error) (Result, error) {
	o := &l.opts
	code := 127
	if errors.Is(err, os.ErrPermission) {
		code = 126
	}
	node, rank := int32(o.Job.NodeRank), int32(o.Job.LocalRank)
	d.q.push([]byte(fmt.Sprintf("[sextant] cannot start %s: %v", o.Command[0], err)), l.now().UnixMilli(), runlogs.Stderr, 0, node, rank)
	d.q.close(node, rank)
	l.waitShipped(d.shipped, d.stop)
	res.ExitCode = code
	res.Status, _ = l.finish(ctx, outcome{code: code, startErr: err})
	return res, fmt.Errorf("start %s: %w", o.Command[0], err)
}

// yieldIfFollowed lowers the launcher below the job (see yieldToJob)
// when the job writes to files the launcher follows. Through pipes the
// job would wait for a launcher that yields, so it does not.
func (l *launcher) yieldIfFollowed(ch *child) (restore func()) {
	if _, pipes := ch.stdout.(*pipeOutput); !pipes && l.opts.Nice > 0 {
		return l.yieldToJob(l.opts.Nice)
	}
	return func() {}
}

// captures reads the job's two output streams into the queue: a reader
// goroutine per stream, and a flusher that sends an unfinished line
// (a progress bar) once it has waited PartialAfter, so that a job
// printing no newline for a while still shows progress on the server.
type captures struct {
	caps        []*capture
	readers     sync.WaitGroup
	stopFlusher chan struct{}
	flusherDone chan struct{}
}

// startCapture starts reading the job's output. It also tells the
// shipper how fast the job writes, so that the shipper holds back during
// a burst (see shipper.sendIn).
func (l *launcher) startCapture(ch *child, d *delivery) *captures {
	o := &l.opts
	node, rank := int32(o.Job.NodeRank), int32(o.Job.LocalRank)
	cs := &captures{
		caps: []*capture{
			newCapture(runlogs.Stdout, ch.stdout, o.Stdout, d.q, node, rank, o.RankPrefix, o.LineBytes, l.now),
			newCapture(runlogs.Stderr, ch.stderr, o.Stderr, d.q, node, rank, o.RankPrefix, o.LineBytes, l.now),
		},
		stopFlusher: make(chan struct{}),
		flusherDone: make(chan struct{}),
	}
	d.ship.setBusy(burstDetector(func() int64 { return cs.caps[0].read.Load() + cs.caps[1].read.Load() }, l.now))
	for _, c := range cs.caps {
		cs.readers.Go(c.run)
	}
	go cs.flushPartials(o.PartialAfter)
	return cs
}

// flushPartials sends each stream's unfinished line once it has waited
// after, until stopFlusher is closed.
func (cs *captures) flushPartials(after time.Duration) {
	defer close(cs.flusherDone)
	t := time.NewTicker(max(after/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-cs.stopFlusher:
			return
		case <-t.C:
			for _, c := range cs.caps {
				c.flushPartial(after)
			}
		}
	}
}

// waitJob waits for the job's process to exit while forwarding signals
// to it, and returns how it ended. A signal that reached the job's
// process group without passing through the launcher (Ctrl-C at the
// terminal) counts as an interruption, so that the run ends KILLED.
func (l *launcher) waitJob(ch *child) outcome {
	exited := make(chan struct{})
	forwarded := l.forwardSignals(ch, exited)
	code, died, werr := ch.wait()
	close(exited)
	out := <-forwarded
	out.interrupted = ch.groupSignal()
	ch.reclaimTTY()
	if werr != nil && code < 0 {
		l.say("waiting for the job failed: %v", werr)
		code = 1
	}
	out.code, out.died = code, died
	if out.interrupted != 0 && out.forwarded == 0 {
		l.say("the job was interrupted: %s reached its process group (Ctrl-C, or a signal to the group)", signalName(out.interrupted))
	}
	return out
}

// drainOutput reads the output the job's processes still write after its
// main process exited, for Drain, then stops what is left of its process
// group and closes the queue: the job's last lines (often the error) are
// kept, and a process left behind cannot hold the launcher forever.
func (l *launcher) drainOutput(ch *child, cs *captures, q *queue) {
	deadline := time.Now().Add(l.opts.Drain)
	ch.stdout.finish(deadline, ch.groupAlive)
	ch.stderr.finish(deadline, ch.groupAlive)
	cs.readers.Wait()
	l.stopLeftovers(ch)
	_ = ch.stdout.Close()
	_ = ch.stderr.Close()
	close(cs.stopFlusher)
	<-cs.flusherDone
	q.close(int32(l.opts.Job.NodeRank), int32(l.opts.Job.LocalRank))
}

// stopLeftovers ends the processes the job started and left running:
// SIGTERM, then SIGKILL 2 s later. They would otherwise keep the job's
// GPUs after the run is recorded as ended.
func (l *launcher) stopLeftovers(ch *child) {
	if !ch.groupAlive() {
		return
	}
	l.say("the job's process exited but processes it started are still running: stopping them")
	_ = ch.signal(syscall.SIGTERM)
	for end := time.Now().Add(2 * time.Second); ch.groupAlive() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if ch.groupAlive() {
		_ = ch.signal(syscall.SIGKILL)
	}
}

// closeCutSaves marks the checkpoint saves the job left open as
// incomplete, now that it has ended. In a multi-node job only node 0
// does it, once for the run.
func (l *launcher) closeCutSaves(ctx context.Context) {
	if l.opts.Job.ID == "" || l.opts.Job.Creator() {
		l.closeOpenSaves(ctx, l.now().UnixMilli())
	}
}

// countLines puts the numbers of lines captured, delivered and lost in
// res once the shipper is done, and says when some did not reach the
// server, since the run's log is then not the whole output.
func (l *launcher) countLines(d *delivery, res *Result) {
	st := d.q.statsNow()
	res.Lines = st.Captured
	res.Delivered = d.ship.delivered.Load()
	res.Lost = res.Lines - res.Delivered
	if res.Lost > 0 {
		l.say("%d lines of output were not stored on the server", res.Lost)
	}
}

// recordOutcome puts the job's exit code, signal and status in res and
// records them on the run, closing the attempt at jobEndMs. A server that is down or restarting is tried
// again each second, for DeliverTimeout, so that the run does not stay
// RUNNING after the job ended; res keeps the status the launcher worked
// out if recording fails.
func (l *launcher) recordOutcome(ctx context.Context, out outcome, att *attempt, jobEndMs int64, res *Result) {
	fctx, cancel := context.WithTimeout(ctx, l.opts.DeliverTimeout)
	defer cancel()
	status, sig := out.status()
	res.ExitCode, res.Status = out.code, status
	if sig != 0 {
		res.Signal = signalName(sig)
	}
	att.end(fctx, jobEndMs, status, out.code)
	for attempt := 0; ; attempt++ {
		status, err := l.finish(fctx, out)
		if err == nil {
			res.Status = status
			return
		}
		if fctx.Err() != nil || !transientOrUnknown(err) {
			l.say("could not record the job's end on the run: %v", err)
			return
		}
		if attempt == 0 {
			l.say("could not record the job's end on the run yet (%v); retrying", err)
		}
		select {
		case <-fctx.Done():
		case <-time.After(time.Second):
		}
	}
}
