package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// TestCkptLsRun: the checkpoints a run recorded, with their timings; a
// save left "writing" by a job that ended shows as incomplete, and
// latest names the newest complete one.
func TestCkptLsRun(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	ctx := context.Background()
	cl, err := client.New("http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	id := run.Info.RunID
	t0 := int64(1_800_000_000_000)
	save := func(step int64, o runevents.Outcome, end int64, errText string) runevents.Event {
		return runevents.Event{Key: "s" + string(rune('0'+step)), Kind: runevents.KindCheckpointSave, TimeMs: t0 + step*1000, EndMs: end, Open: end == 0, GPU: -1, Step: step,
			Checkpoint: &runevents.Checkpoint{Path: "/Volumes/m/t/ckpt/run/step_" + string(rune('0'+step)), Outcome: o, Error: errText, Bytes: 3 << 20, Files: 2, Ranks: 2,
				Mode: "process", Staging: "shared", BlockedMs: 250}}
	}
	if _, err := cl.AppendEvents(ctx, id, []runevents.Event{
		save(1, runevents.OutcomeComplete, t0+1000+1750, ""),
		save(2, runevents.OutcomeComplete, t0+2000+900, ""),
		save(3, runevents.OutcomeFailed, t0+3000+100, "shard __1_x_0.distcp did not land"),
		save(4, runevents.OutcomeWriting, 0, ""),
	}); err != nil {
		t.Fatal(err)
	}
	out := cli(t, addr, "ckpt", "ls", "--run", id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "STEP") {
		t.Fatalf("ls --run:\n%s", out)
	}
	for i, want := range []string{"1 .* complete .*3.0 MiB .*2 .*process/shared .*250ms .*1.5s .*2027-01-15T08:00:02Z",
		"2 .* complete", "3 .* failed: shard __1_x_0.distcp did not land", "4 .* writing .* - *$"} {
		if !matches(want, lines[i+1]) {
			t.Errorf("line %d: %q does not match %q", i+1, lines[i+1], want)
		}
	}
	if got := strings.TrimSpace(cli(t, addr, "ckpt", "latest", "--run", id)); got != "/Volumes/m/t/ckpt/run/step_2" {
		t.Errorf("latest --run: %q", got)
	}
	st := tracking.StatusKilled
	if err := cl.UpdateRun(ctx, id, tracking.RunUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	if out := cli(t, addr, "ckpt", "ls", "--run", id); !strings.Contains(out, "incomplete") {
		t.Errorf("a save writing when the run was killed is not shown incomplete:\n%s", out)
	}
	other, _ := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	if _, err := tryCLI(t, addr, "ckpt", "latest", "--run", other.Info.RunID); err == nil || !strings.Contains(err.Error(), "no complete checkpoint") {
		t.Errorf("latest of a run without checkpoints: %v", err)
	}
	if _, err := tryCLI(t, addr, "ckpt", "ls", "--run", "0123456789abcdef0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("ls --run of a missing run: %v", err)
	}
}

func matches(re, s string) bool {
	ok, err := regexp.MatchString(re, s)
	return err == nil && ok
}

// TestRunsLsShowsAlerts: a running run the watcher found stalled shows
// its alert in `sextant runs ls`; a watcher with a short stall time (on a
// real server) finds it.
func TestRunsLsShowsAlerts(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir(), "--stall-for", "1s", "--watch-every", "100ms", "--idle-for", "0")
	defer stop()
	ctx := context.Background()
	cl, err := client.New("http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "quiet", StartTimeMs: time.Now().Add(-time.Minute).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "fresh", StartTimeMs: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out = cli(t, addr, "runs", "ls"); strings.Contains(out, "no metrics, output or events for") {
			break
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "ALERT") || !matches(`^quiet .*no metrics, output or events for \S+$`, lines[2]) || !matches(`^fresh .* -$`, lines[1]) {
		t.Fatalf("runs ls:\n%s", out)
	}
	evs, err := cl.AllEvents(ctx, runevents.Query{RunID: quiet.Info.RunID, Kinds: []runevents.Kind{runevents.KindStalled}})
	if err != nil || len(evs) != 1 || !evs[0].Open {
		t.Fatalf("stalled events %+v %v", evs, err)
	}
}
