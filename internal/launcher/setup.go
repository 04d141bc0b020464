package launcher

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Tags the launcher sets on runs.
const (
	TagJobID    = "sextant.job_id"
	TagExitCode = "sextant.exit_code"
	TagSignal   = "sextant.signal"
	TagCommand  = "sextant.command"
	TagNNodes   = "sextant.nnodes"
	// TagNodePrefix starts the per-node tags of a multi-node job:
	// sextant.node.<rank>.exit_code, .signal and .host.
	TagNodePrefix = "sextant.node."
)

// ensureExperiment returns the id of the experiment with the given name,
// creating it when missing. Two launchers creating it at once both end
// up with the one that won.
func (l *launcher) ensureExperiment(ctx context.Context, name string) (string, error) {
	for attempt := 0; ; attempt++ {
		e, err := l.opts.Tracker.GetExperimentByName(ctx, name)
		if err == nil {
			if e.LifecycleStage == tracking.Deleted {
				return "", errs.Errorf(errs.Invalid, "experiment %q is deleted: restore it or choose another name", name)
			}
			return e.ID, nil
		}
		if errs.CodeOf(err) != errs.NotFound {
			return "", fmt.Errorf("look up experiment %q: %w", name, err)
		}
		id, err := l.opts.Tracker.CreateExperiment(ctx, name)
		if err == nil {
			return id, nil
		}
		if errs.CodeOf(err) != errs.AlreadyExists || attempt >= 3 {
			return "", fmt.Errorf("create experiment %q: %w", name, err)
		}
		// Another launcher created it meanwhile (or it exists deleted,
		// which the next look-up reports).
	}
}

// setup finds or creates the run: resumed (--resume), joined (a node of
// a multi-node job finding the run its node 0 created), or new.
func (l *launcher) setup(ctx context.Context) error {
	o := &l.opts
	if o.ResumeFrom != "" && o.Resume == "" && o.Job.ID == "" {
		if err := l.findRunToResume(ctx); err != nil {
			return err
		}
	}
	if o.Resume != "" {
		return l.resumeRun(ctx)
	}
	expID, err := l.ensureExperiment(ctx, o.Experiment)
	if err != nil {
		return err
	}
	l.expID, l.expName = expID, o.Experiment
	switch {
	case o.Job.ID == "":
		l.run, err = l.createRun(ctx)
		return err
	case o.Job.Creator():
		return l.createJobRun(ctx)
	}
	return l.joinJobRun(ctx)
}

// findRunToResume sets Resume to the run this command ran in last, in the
// experiment, for a --resume given no run: a user resuming a script
// means its last run. None is an error for ResumeLatest (there is no
// checkpoint to take) but not for a checkpoint path, which then starts a
// new run from that checkpoint.
func (l *launcher) findRunToResume(ctx context.Context) error {
	o := &l.opts
	expID, err := l.ensureExperiment(ctx, o.Experiment)
	if err != nil {
		return err
	}
	l.expID, l.expName = expID, o.Experiment
	run, why, err := l.findSameJobRun(ctx)
	if err != nil {
		return err
	}
	switch {
	case run != nil:
		l.say("resuming run %s (%s): %s", run.Info.RunID, run.Info.RunName, why)
		o.Resume = run.Info.RunID
	case o.ResumeFrom == ResumeLatest:
		return errs.Errorf(errs.NotFound, "no run to resume: experiment %s has no run of %s; name the run with --run-id (or MLFLOW_RUN_ID)", o.Experiment, describeKey(JobKey(o.Command)))
	}
	return nil
}

// resumeRun marks the run Resume names RUNNING again (renamed when
// RunName is set) and takes its experiment, whatever Experiment says: a
// run stays in the experiment it was created in.
func (l *launcher) resumeRun(ctx context.Context) error {
	o := &l.opts
	tr := o.Tracker
	run, err := tr.GetRun(ctx, o.Resume)
	if err != nil {
		return fmt.Errorf("resume run %s: %w", o.Resume, err)
	}
	if run.Info.LifecycleStage == tracking.Deleted {
		return errs.Errorf(errs.Invalid, "run %s is deleted: restore it before resuming it", o.Resume)
	}
	running := tracking.StatusRunning
	u := tracking.RunUpdate{Status: &running}
	if o.RunName != "" {
		u.Name = &o.RunName
	}
	if err := tr.UpdateRun(ctx, run.Info.RunID, u); err != nil {
		return fmt.Errorf("resume run %s: %w", o.Resume, err)
	}
	exp, err := tr.GetExperiment(ctx, run.Info.ExperimentID)
	if err != nil {
		return fmt.Errorf("resume run %s: %w", o.Resume, err)
	}
	if o.Experiment != "" && o.ExperimentExplicit && o.Experiment != exp.Name {
		l.say("run %s is in experiment %s, not %s: resuming it there", run.Info.RunID, exp.Name, o.Experiment)
	}
	l.run, l.expID, l.expName = run, exp.ID, exp.Name
	if o.RunName != "" {
		l.run.Info.RunName = o.RunName
	}
	return nil
}

// createJobRun creates the run of a multi-node job, as its node 0. A
// restarted node 0 of the same job resumes the run it made, so that the
// other nodes, which find the run by job id, stay in it.
func (l *launcher) createJobRun(ctx context.Context) error {
	run, err := l.findJobRun(ctx)
	if err != nil {
		return err
	}
	if run == nil {
		l.run, err = l.createRun(ctx)
		return err
	}
	l.run = run
	running := tracking.StatusRunning
	return l.opts.Tracker.UpdateRun(ctx, run.Info.RunID, tracking.RunUpdate{Status: &running})
}

// joinJobRun waits, for at most JoinTimeout, for node 0 of the job to
// create the run, checking each second: the nodes of a job start in any
// order.
func (l *launcher) joinJobRun(ctx context.Context) error {
	o := &l.opts
	deadline := time.Now().Add(o.JoinTimeout)
	said := false
	for {
		run, err := l.findJobRun(ctx)
		if err != nil {
			return err
		}
		if run != nil {
			l.run = run
			return nil
		}
		if time.Now().After(deadline) {
			return errs.Errorf(errs.NotFound, "no run of job %s appeared in experiment %s within %v: is node 0 running `sextant run` with the same job id and experiment?", o.Job.ID, l.expName, o.JoinTimeout)
		}
		if !said {
			l.say("waiting for node 0 to create the run of job %s", o.Job.ID)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (l *launcher) findJobRun(ctx context.Context) (*tracking.Run, error) {
	filter := "tags.`" + TagJobID + "` = '" + l.opts.Job.ID + "'"
	runs, err := l.opts.Tracker.SearchRuns(ctx, []string{l.expID}, filter, []string{"attributes.start_time ASC"}, 1)
	if err != nil {
		return nil, fmt.Errorf("find the run of job %s: %w", l.opts.Job.ID, err)
	}
	if len(runs) == 0 {
		return nil, nil
	}
	return runs[0], nil
}

func (l *launcher) createRun(ctx context.Context) (*tracking.Run, error) {
	o := &l.opts
	name := o.RunName
	if name == "" {
		name = RunName()
	}
	tags := []tracking.Tag{
		{Key: tracking.TagUser, Value: o.User},
		{Key: "mlflow.source.name", Value: sourceName(o.Command)},
		{Key: "mlflow.source.type", Value: "JOB"},
		{Key: TagCommand, Value: errs.Truncate(strings.Join(o.Command, " "), 5000)},
	}
	if o.Job.ID != "" {
		tags = append(tags, tracking.Tag{Key: TagJobID, Value: o.Job.ID}, tracking.Tag{Key: TagNNodes, Value: strconv.Itoa(o.Job.NNodes)})
	}
	run, err := o.Tracker.CreateRun(ctx, tracking.CreateRunRequest{
		ExperimentID: l.expID, UserID: o.User, RunName: name, StartTimeMs: l.now().UnixMilli(), Tags: tags,
	})
	if err != nil {
		return nil, fmt.Errorf("create run in experiment %s: %w", l.expName, err)
	}
	return run, nil
}

// sourceName is the script a command runs, for mlflow.source.name.
func sourceName(argv []string) string {
	for _, a := range argv[1:] {
		if strings.HasSuffix(a, ".py") || strings.HasSuffix(a, ".sh") {
			return a
		}
	}
	return argv[0]
}

// crashSignals end a process because it failed, not because it was told
// to stop: a run they end is FAILED, not KILLED.
var crashSignals = map[syscall.Signal]bool{
	syscall.SIGSEGV: true, syscall.SIGABRT: true, syscall.SIGBUS: true, syscall.SIGFPE: true, syscall.SIGILL: true,
}

// outcome is how the job ended.
type outcome struct {
	code      int            // the launcher's exit code
	died      syscall.Signal // the signal that ended the child, or 0
	forwarded syscall.Signal // the termination signal the launcher forwarded, or 0
	// interrupted is a termination signal sent to the job's whole process
	// group, not through the launcher (Ctrl-C when the job has the
	// terminal), or 0.
	interrupted syscall.Signal
	escalated   bool  // the launcher had to send SIGKILL
	startErr    error // the child could not be started
}

// status maps the outcome to a run status and the signal to record.
func (o outcome) status() (tracking.RunStatus, syscall.Signal) {
	switch {
	case o.startErr != nil:
		return tracking.StatusFailed, 0
	case o.died != 0 && crashSignals[o.died] && o.forwarded == 0 && o.interrupted == 0:
		return tracking.StatusFailed, o.died
	case o.forwarded != 0 || o.interrupted != 0:
		// The job was asked to stop; however it ended (a job catching
		// SIGINT may exit 1), it was killed.
		switch {
		case o.died != 0:
			return tracking.StatusKilled, o.died
		case o.forwarded != 0:
			return tracking.StatusKilled, o.forwarded
		}
		return tracking.StatusKilled, o.interrupted
	case o.died != 0:
		return tracking.StatusKilled, o.died
	case o.code == 0:
		return tracking.StatusFinished, 0
	}
	return tracking.StatusFailed, 0
}

// finish records the outcome on the run: tags, then the status and end
// time. On a multi-node job every node tags its own exit; node 0 sets the
// final status, FAILED or KILLED if any node recorded a failure by then,
// and the other nodes set the status only when they fail.
func (l *launcher) finish(ctx context.Context, out outcome) (tracking.RunStatus, error) {
	o := &l.opts
	st, sig := out.status()
	tags := []tracking.Tag{}
	multi := o.Job.ID != ""
	prefix := ""
	if multi {
		prefix = nodeTagPrefix(o.Job)
		tags = append(tags, tracking.Tag{Key: prefix + "exit_code", Value: strconv.Itoa(out.code)})
		if sig != 0 {
			tags = append(tags, tracking.Tag{Key: prefix + "signal", Value: signalName(sig)})
		}
	}
	if !multi || o.Job.Creator() || st != tracking.StatusFinished {
		tags = append(tags, tracking.Tag{Key: TagExitCode, Value: strconv.Itoa(out.code)})
		if sig != 0 {
			tags = append(tags, tracking.Tag{Key: TagSignal, Value: signalName(sig)})
		}
	}
	if err := o.Tracker.SetTags(ctx, l.run.Info.RunID, tags...); err != nil {
		return st, fmt.Errorf("record the exit on run %s: %w", l.run.Info.RunID, err)
	}
	if multi && !o.Job.Creator() && st == tracking.StatusFinished {
		return st, nil // node 0 decides
	}
	if multi && o.Job.Creator() && st == tracking.StatusFinished {
		st = l.worstNodeStatus(ctx, st)
	}
	end := l.now().UnixMilli()
	if err := o.Tracker.UpdateRun(ctx, l.run.Info.RunID, tracking.RunUpdate{Status: &st, EndTimeMs: &end}); err != nil {
		return st, fmt.Errorf("set the status of run %s: %w", l.run.Info.RunID, err)
	}
	return st, nil
}

// worstNodeStatus returns FAILED or KILLED when another node of the job
// recorded a failure, else st.
func (l *launcher) worstNodeStatus(ctx context.Context, st tracking.RunStatus) tracking.RunStatus {
	run, err := l.opts.Tracker.GetRun(ctx, l.run.Info.RunID)
	if err != nil {
		return st
	}
	for _, t := range run.Data.Tags {
		if !strings.HasPrefix(t.Key, TagNodePrefix) {
			continue
		}
		switch {
		case strings.HasSuffix(t.Key, ".signal"):
			return tracking.StatusKilled
		case strings.HasSuffix(t.Key, ".exit_code") && t.Value != "0":
			st = tracking.StatusFailed
		}
	}
	return st
}

// childEnv is the job's environment: the launcher's, with the tracking
// variables pointing at the run.
func (l *launcher) childEnv() []string {
	o := &l.opts
	set := map[string]string{
		"MLFLOW_TRACKING_URI":    o.TrackingURI,
		"MLFLOW_RUN_ID":          l.run.Info.RunID,
		"MLFLOW_EXPERIMENT_NAME": l.expName,
		"MLFLOW_EXPERIMENT_ID":   l.expID,
		"SEXTANT_RUN_ID":         l.run.Info.RunID,
	}
	for k, v := range l.resume.env() {
		set[k] = v
	}
	if o.Job.ID != "" {
		set["SEXTANT_JOB_ID"] = o.Job.ID
	}
	if l.agentDir != "" {
		// First on the path, so that Python runs the agent's sitecustomize
		// (which runs the one it shadows).
		set[EnvAgentDir] = l.agentDir
		set["PYTHONPATH"] = l.agentDir
		if p := envValue(o.Env, "PYTHONPATH"); p != "" {
			set["PYTHONPATH"] += string(os.PathListSeparator) + p
		}
	}
	if o.Token != "" {
		set["MLFLOW_TRACKING_TOKEN"] = o.Token
	}
	if o.Username != "" {
		set["MLFLOW_TRACKING_USERNAME"] = o.Username
	}
	if o.Password != "" {
		set["MLFLOW_TRACKING_PASSWORD"] = o.Password
	}
	env := make([]string, 0, len(o.Env)+len(set))
	for _, kv := range o.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvResumeFrom || k == EnvResumeStep || k == EnvResumeLoggedStep {
			continue // this launch's, or none: never one inherited
		}
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// hostname is the machine's name for per-node tags.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
