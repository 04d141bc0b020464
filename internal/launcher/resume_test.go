package launcher_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/launcher"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

func withEvents(f *fakeServer, edit func(*launcher.Options)) func(*launcher.Options) {
	return func(o *launcher.Options) {
		o.Events, o.Checkpoints = f, f
		if edit != nil {
			edit(o)
		}
	}
}

func recordSave(t *testing.T, f *fakeServer, run string, step int64, o runevents.Outcome) string {
	t.Helper()
	p := "/Volumes/m/t/ckpt/run/step_" + itoa(step)
	ev := runevents.Event{Key: "save-" + itoa(step), Kind: runevents.KindCheckpointSave, TimeMs: 1_800_000_000_000 + step, GPU: -1, Step: step,
		Checkpoint: &runevents.Checkpoint{Path: p, Outcome: o, BlockedMs: -1}}
	if o == runevents.OutcomeWriting {
		ev.Open = true
	} else {
		ev.EndMs = ev.TimeMs + 10
	}
	if _, err := f.AppendEvents(context.Background(), run, []runevents.Event{ev}); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestResumeLatest: the job that ran before was killed while saving step
// 30; resuming continues the same run (found by its command) from the
// newest complete checkpoint still on the volume, marks the cut-off save
// incomplete, hands the job the checkpoint, its step and the run's last
// logged step, and records the resume.
func TestResumeLatest(t *testing.T) {
	f := newFakeServer()
	job := sh(`echo "from=$SEXTANT_RESUME_FROM step=$SEXTANT_RESUME_STEP logged=$SEXTANT_RESUME_LOGGED_STEP run=$MLFLOW_RUN_ID"`)
	first := launch(t, f, job, withEvents(f, nil))
	run := first.res.RunID
	s10 := recordSave(t, f, run, 10, runevents.OutcomeComplete)
	s20 := recordSave(t, f, run, 20, runevents.OutcomeComplete)
	recordSave(t, f, run, 25, runevents.OutcomeFailed)
	recordSave(t, f, run, 30, runevents.OutcomeWriting)
	f.setComplete(s10) // step 20 was deleted from the volume since
	f.setMetrics(run, tracking.Metric{Key: "loss", Point: metrics.Point{Step: 33}}, tracking.Metric{Key: "system/gpu_0_utilization_percentage", Point: metrics.Point{Step: 900}})
	_ = s20

	second := launch(t, f, job, withEvents(f, func(o *launcher.Options) { o.ResumeFrom = launcher.ResumeLatest }))
	if second.err != nil || second.res.RunID != run {
		t.Fatalf("resume: %+v %v, want run %s", second.res, second.err, run)
	}
	want := "from=" + s10 + " step=10 logged=33 run=" + run
	if got := strings.TrimSpace(second.stdout.String()); got != want {
		t.Errorf("the job saw %q, want %q", got, want)
	}
	evs, err := f.events.All(context.Background(), runevents.Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	var resumes []runevents.Event
	for _, e := range evs {
		switch {
		case e.Kind == runevents.KindResume:
			resumes = append(resumes, e)
		case e.Step == 30 && (e.Open || e.Checkpoint.Outcome != runevents.OutcomeIncomplete || e.EndMs == 0):
			t.Errorf("the cut-off save of step 30 is %+v %+v, want closed incomplete", e, e.Checkpoint)
		}
	}
	if len(resumes) != 1 || resumes[0].Step != 10 || resumes[0].Attrs["path"] != s10 {
		t.Errorf("resume events %+v", resumes)
	}

	// A fresh job that has no checkpoint yet starts from the beginning,
	// in the same run, with no resume variables.
	f2 := newFakeServer()
	a := launch(t, f2, job, withEvents(f2, nil))
	b := launch(t, f2, job, withEvents(f2, func(o *launcher.Options) { o.ResumeFrom = launcher.ResumeLatest; o.Resume = a.res.RunID }))
	if b.err != nil || b.res.RunID != a.res.RunID || strings.TrimSpace(b.stdout.String()) != "from= step= logged= run="+a.res.RunID {
		t.Errorf("resume without checkpoints: %+v %v %q", b.res, b.err, b.stdout.String())
	}
	if !strings.Contains(b.msgs.String(), "no complete checkpoint") {
		t.Errorf("messages do not say there was no checkpoint: %s", b.msgs.String())
	}
}

// TestResumeLatestOtherArguments: --resume latest finds the run of the
// same script when the arguments changed (more epochs, a random port), and
// says which run it picked and why; another script's run is not taken.
func TestResumeLatestOtherArguments(t *testing.T) {
	f := newFakeServer()
	dir := t.TempDir()
	script := dir + "/train.sh"
	first := launch(t, f, []string{"/bin/sh", script, "--epochs", "10", "--master-port", "29511"}, withEvents(f, func(o *launcher.Options) { o.Dir = dir }))
	if first.err != nil {
		t.Fatal(first.err)
	}
	other := launch(t, f, sh("exit 0"), withEvents(f, nil)) // newer, another job
	if other.err != nil || other.res.RunID == first.res.RunID {
		t.Fatal(other.err)
	}
	again := launch(t, f, []string{"/bin/sh", script, "--epochs", "20", "--master-port", "31234"}, withEvents(f, func(o *launcher.Options) {
		o.Dir = dir
		o.ResumeFrom = launcher.ResumeLatest
	}))
	if again.err != nil || again.res.RunID != first.res.RunID {
		t.Fatalf("resume with other arguments: %+v %v, want run %s", again.res, again.err, first.res.RunID)
	}
	msgs := again.msgs.String()
	for _, want := range []string{"resuming run " + first.res.RunID, "the newest run of script " + script, "started as: /bin/sh " + script + " --epochs 10"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("messages do not say %q:\n%s", want, msgs)
		}
	}
}

func TestResumeFromPath(t *testing.T) {
	f := newFakeServer()
	job := sh(`echo "from=$SEXTANT_RESUME_FROM step=$SEXTANT_RESUME_STEP"`)
	// No run of this command yet: a path starts a new run from it.
	f.setComplete("/Volumes/m/t/ckpt/old/step_7")
	l := launch(t, f, job, withEvents(f, func(o *launcher.Options) { o.ResumeFrom = "/Volumes/m/t/ckpt/old/step_7/" }))
	if l.err != nil || strings.TrimSpace(l.stdout.String()) != "from=/Volumes/m/t/ckpt/old/step_7 step=7" {
		t.Fatalf("resume from a path: %+v %v %q", l.res, l.err, l.stdout.String())
	}
	// An incomplete checkpoint is refused before anything starts.
	bad := launch(t, f, job, withEvents(f, func(o *launcher.Options) { o.ResumeFrom = "/Volumes/m/t/ckpt/old/step_8" }))
	if !errs.Is(bad.err, errs.Invalid) || bad.res.ExitCode != 2 || bad.stdout.String() != "" || !strings.Contains(bad.err.Error(), "not a complete checkpoint") {
		t.Errorf("resume from an incomplete checkpoint: %+v %v", bad.res, bad.err)
	}
	// latest with no run of the command in the experiment: nothing to resume.
	none := launch(t, f, sh(`echo other`), withEvents(f, func(o *launcher.Options) { o.ResumeFrom = launcher.ResumeLatest }))
	if !errs.Is(none.err, errs.NotFound) || !strings.Contains(none.err.Error(), "--run-id") {
		t.Errorf("latest without a run: %v", none.err)
	}
}

// TestOpenSavesClosedAtEnd: a job killed while a save is in flight
// leaves the save open; the launcher marks it incomplete when the job has
// ended.
func TestOpenSavesClosedAtEnd(t *testing.T) {
	f := newFakeServer()
	f.AppendHook = func(b runlogs.Batch) (bool, error) {
		for _, l := range b.Lines {
			if l.Text == "saving" { // what a VolumeWriter records as a save starts
				recordSave(t, f, f.firstRun(), 5, runevents.OutcomeWriting)
			}
		}
		return false, nil
	}
	l := launch(t, f, sh(`echo saving; sleep 0.2; kill -9 $$`), withEvents(f, nil))
	if l.res.Status != tracking.StatusKilled {
		t.Fatalf("the job ended %+v", l.res)
	}
	evs, err := f.events.All(context.Background(), runevents.Query{RunID: l.res.RunID, Kinds: []runevents.Kind{runevents.KindCheckpointSave}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v %v", evs, err)
	}
	if e := evs[0]; e.Open || e.EndMs == 0 || e.Checkpoint.Outcome != runevents.OutcomeIncomplete {
		t.Errorf("the cut-off save is %+v %+v, want closed incomplete", e, e.Checkpoint)
	}
}
