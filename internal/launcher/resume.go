package launcher

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// Events is what the launcher needs of a run's events: the checkpoints the
// job recorded (to resume from the latest), closing the saves a killed job
// left open, and recording the resume. internal/client implements it.
type Events interface {
	AppendEvents(ctx context.Context, runID string, evs []runevents.Event) ([]int64, error)
	ListEvents(ctx context.Context, q runevents.Query) (runevents.Page, error)
}

// Checkpoints tells whether a checkpoint on a volume is complete (its
// .metadata landed). internal/client implements it.
type Checkpoints interface {
	CheckpointComplete(ctx context.Context, path string) (bool, error)
}

// ResumeLatest is the ResumeFrom that picks the run's newest complete
// checkpoint.
const ResumeLatest = "latest"

// The variables a resumed job gets (python/sextant/resume.py reads them).
const (
	EnvResumeFrom       = "SEXTANT_RESUME_FROM"
	EnvResumeStep       = "SEXTANT_RESUME_STEP"
	EnvResumeLoggedStep = "SEXTANT_RESUME_LOGGED_STEP"
)

// resumePoint is the checkpoint a resumed job starts from.
type resumePoint struct {
	path       string
	step       int64 // -1: unknown
	loggedStep int64 // the highest step of the run's metrics before; -1: none
}

// findSameJobRun returns the newest run of the experiment that sextant run
// started for the same job (JobKey: the same script or module, whatever
// the arguments), with why it was picked, or nil.
func (l *launcher) findSameJobRun(ctx context.Context) (*tracking.Run, string, error) {
	key := JobKey(l.opts.Command)
	cmd := errs.Truncate(strings.Join(l.opts.Command, " "), 5000)
	runs, err := l.opts.Tracker.SearchRuns(ctx, []string{l.expID}, "tags.`"+TagCommand+"` IS NOT NULL", []string{"attributes.start_time DESC"}, 200)
	if err != nil {
		return nil, "", fmt.Errorf("find the last run of this job: %w", err)
	}
	for _, r := range runs {
		for _, t := range r.Data.Tags {
			if t.Key != TagCommand {
				continue
			}
			// The tag holds the command's words joined by spaces: split
			// again, an argument with spaces in it becomes several, which
			// changes nothing before the script.
			if t.Value != cmd && JobKey(strings.Fields(t.Value)) != key {
				continue
			}
			why := fmt.Sprintf("the newest run of %s in experiment %s", describeKey(key), l.opts.Experiment)
			switch {
			case t.Value == cmd:
				why += ", with the same command"
			default:
				why += fmt.Sprintf(", started as: %s", errs.Truncate(t.Value, 300))
			}
			return r, why, nil
		}
	}
	return nil, "", nil
}

// describeKey says what a JobKey identifies, for messages.
func describeKey(key string) string {
	kind, v, _ := strings.Cut(key, " ")
	switch kind {
	case "script":
		return "script " + v
	case "module":
		return "module " + v
	}
	return "this command"
}

// closeOpenSaves marks the saves the job left open (it ended, or was
// killed, while saving) incomplete, ending when the job did, and ends the
// other spans left open on the run (idle, stalled, a GPU throttling).
func (l *launcher) closeOpenSaves(ctx context.Context, endMs int64) {
	ev := l.opts.Events
	if ev == nil {
		return
	}
	open, err := runevents.ListAll(ctx, ev.ListEvents, runevents.Query{RunID: l.run.Info.RunID, OpenOnly: true})
	if err != nil {
		l.say("could not read the run's open events: %v", err)
		return
	}
	// Attempts are the launchers' own: each closes its own.
	open = slices.DeleteFunc(open, func(e runevents.Event) bool { return e.Kind == runevents.KindAttempt })
	if len(open) == 0 {
		return
	}
	for i := range open {
		e := &open[i]
		e.Open, e.EndMs = false, max(endMs, e.TimeMs)
		if e.Kind == runevents.KindCheckpointSave && e.Checkpoint != nil {
			e.Severity = runevents.SeverityWarning
			e.Checkpoint.Outcome = runevents.OutcomeIncomplete
			e.Message = fmt.Sprintf("save of %s cut off: the job ended while saving (no .metadata: nothing loads it)", e.Checkpoint.Path)
		} else {
			e.Message += " (until the job ended)"
		}
	}
	if _, err := ev.AppendEvents(ctx, l.run.Info.RunID, open); err != nil {
		l.say("could not close %d open event(s) of the run: %v", len(open), err)
	}
}

// resolveResume finds the checkpoint to resume from (o.ResumeFrom: latest
// or a path) for the run, closes the saves the previous attempt left open,
// and records the resume on the run. It returns nil when "latest" finds no
// complete checkpoint: the job then starts from the beginning.
func (l *launcher) resolveResume(ctx context.Context) (*resumePoint, error) {
	o := &l.opts
	if o.Events == nil || o.Checkpoints == nil {
		return nil, errs.E(errs.Invalid, "resuming from a checkpoint needs the server's run events")
	}
	id := l.run.Info.RunID
	// One launcher of a multi-node job speaks for the run.
	creator := o.Job.ID == "" || o.Job.Creator()
	if creator {
		l.closeOpenSaves(ctx, l.now().UnixMilli())
	}
	rp := &resumePoint{step: -1, loggedStep: -1}
	if o.ResumeFrom == ResumeLatest {
		path, step, err := l.latestCheckpoint(ctx, id)
		if err != nil {
			return nil, err
		}
		if path == "" {
			l.say("run %s has no complete checkpoint to resume from: the job starts from the beginning", id)
			return nil, nil
		}
		rp.path, rp.step = path, step
	} else {
		p := strings.TrimRight(o.ResumeFrom, "/")
		done, err := o.Checkpoints.CheckpointComplete(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("check checkpoint %s: %w", p, err)
		}
		if !done {
			return nil, errs.Errorf(errs.Invalid, "checkpoint %s is not complete (it has no .metadata, or is not there): `sextant ckpt ls --run %s` lists the run's checkpoints", p, id)
		}
		rp.path, rp.step = p, trailingStep(p)
	}
	rp.loggedStep = l.lastLoggedStep()
	msg := fmt.Sprintf("resumed from %s", rp.path)
	if rp.step >= 0 {
		msg += fmt.Sprintf(" (step %d)", rp.step)
	}
	if !creator {
		return rp, nil
	}
	if _, err := o.Events.AppendEvents(ctx, id, []runevents.Event{{
		Kind: runevents.KindResume, TimeMs: l.now().UnixMilli(), GPU: -1, Step: rp.step, Message: msg, Attrs: map[string]string{"path": rp.path},
	}}); err != nil {
		l.say("could not record the resume on the run: %v", err)
	}
	l.say("%s", msg)
	return rp, nil
}

// latestCheckpoint returns the path and step of the run's newest
// checkpoint recorded complete that is still complete on the volume
// (ckpt gc may have deleted a recorded one since), or "" when there is
// none.
func (l *launcher) latestCheckpoint(ctx context.Context, runID string) (string, int64, error) {
	evs, err := runevents.ListAll(ctx, l.opts.Events.ListEvents, runevents.Query{RunID: runID, Kinds: []runevents.Kind{runevents.KindCheckpointSave}})
	if err != nil {
		return "", 0, fmt.Errorf("list the checkpoints of run %s: %w", runID, err)
	}
	// Newest first; the first whose .metadata is on the volume.
	for len(evs) > 0 {
		best, ok := runevents.LatestComplete(evs)
		if !ok {
			break
		}
		done, err := l.opts.Checkpoints.CheckpointComplete(ctx, best.Checkpoint.Path)
		if err != nil {
			return "", 0, fmt.Errorf("check checkpoint %s: %w", best.Checkpoint.Path, err)
		}
		if done {
			return best.Checkpoint.Path, best.Step, nil
		}
		l.say("checkpoint %s (step %d) is recorded complete but is no longer on the volume; trying the one before", best.Checkpoint.Path, best.Step)
		evs = dropSeq(evs, best.Seq)
	}
	return "", 0, nil
}

// lastLoggedStep is the highest step of the run's own metrics (not the
// system/ ones the launcher samples, nor the progress reports'
// sextant/progress/ ones, which the replayed steps report again), or -1:
// the resumed job skips the steps up to it, which the killed attempt
// logged already, so that the replayed steps are not logged twice.
func (l *launcher) lastLoggedStep() int64 {
	step := int64(-1)
	for _, m := range l.run.Data.Metrics {
		if !strings.HasPrefix(m.Key, "system/") && !strings.HasPrefix(m.Key, "sextant/progress/") {
			step = max(step, m.Step)
		}
	}
	return step
}

func dropSeq(evs []runevents.Event, seq int64) []runevents.Event {
	out := evs[:0:0]
	for _, e := range evs {
		if e.Seq != seq {
			out = append(out, e)
		}
	}
	return out
}

// trailingStep is the number ending a checkpoint path's last segment
// (step_100), or -1.
func trailingStep(p string) int64 {
	name := p[strings.LastIndexByte(p, '/')+1:]
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) {
		return -1
	}
	n, err := strconv.ParseInt(name[i:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// resumeEnv returns the variables that hand the resume to the job.
func (rp *resumePoint) env() map[string]string {
	if rp == nil {
		return nil
	}
	m := map[string]string{EnvResumeFrom: rp.path}
	if rp.step >= 0 {
		m[EnvResumeStep] = strconv.FormatInt(rp.step, 10)
	}
	if rp.loggedStep >= 0 {
		m[EnvResumeLoggedStep] = strconv.FormatInt(rp.loggedStep, 10)
	}
	return m
}
