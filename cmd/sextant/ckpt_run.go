package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// ckptCommandOrRun is ckptCommand with --run RUN_ID instead of a path.
func ckptCommandOrRun(sub string, do func(ctx context.Context, c *CkptCommand, cl *client.Client, dir string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	return func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
		var a apiFlags
		a.bind(fs, m.Getenv)
		run := fs.String("run", "", "the checkpoints this run recorded, instead of a directory's")
		pos, err := parseInterleaved(fs, args)
		if err != nil {
			return err
		}
		c := &CkptCommand{main: m}
		if *run != "" {
			return c.runCheckpoints(ctx, a, sub, *run, pos)
		}
		if len(pos) != 1 || !client.IsVolumePath(pos[0]) {
			return usageError("%s takes one /Volumes path or --run RUN_ID (see 'sextant %s -h')", fs.Name(), fs.Name())
		}
		cl, err := m.newClient(a.server, "sextant")
		if err != nil {
			return err
		}
		return do(ctx, c, cl, strings.TrimRight(pos[0], "/"))
	}
}

// runCheckpoints is `sextant ckpt ls|latest --run RUN_ID`: the checkpoints a
// run's VolumeWriter recorded as events.
func (c *CkptCommand) runCheckpoints(ctx context.Context, a apiFlags, sub, runID string, rest []string) error {
	m := c.main
	if len(rest) != 0 {
		return fmt.Errorf("ckpt %s --run takes no path (got %q)", sub, rest[0])
	}
	if sub != "ls" && sub != "latest" {
		return fmt.Errorf("--run goes with ckpt ls or ckpt latest, not %s", sub)
	}
	cl, err := m.newClient(a.server, "sextant-ckpt")
	if err != nil {
		return err
	}
	run, err := cl.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	evs, err := cl.AllEvents(ctx, runevents.Query{RunID: runID, Kinds: []runevents.Kind{runevents.KindCheckpointSave}})
	if err != nil {
		return err
	}
	saves := runevents.Checkpoints(evs)
	if sub == "latest" {
		ev, ok := runevents.LatestComplete(saves)
		if !ok {
			return &exitError{code: 1, err: fmt.Errorf("run %s recorded no complete checkpoint (`sextant ckpt ls --run %s` lists what it saved)", runID, runID)}
		}
		fmt.Fprintln(m.Stdout, ev.Checkpoint.Path)
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tCHECKPOINT\tSTATUS\tSIZE\tRANKS\tMODE\tBLOCKED\tUPLOAD\tLANDED")
	for _, ev := range saves {
		fmt.Fprintln(tw, checkpointRow(&ev, run.Info.Status))
	}
	return tw.Flush()
}

// checkpointRow is one line of `ckpt ls --run`. A save still "writing"
// when the run is no longer RUNNING was cut off: incomplete.
func checkpointRow(ev *runevents.Event, status tracking.RunStatus) string {
	ck := ev.Checkpoint
	st := ck.Outcome.String()
	if ck.Outcome == runevents.OutcomeWriting && status != tracking.StatusRunning {
		st = "incomplete"
	}
	if ck.Outcome == runevents.OutcomeFailed && ck.Error != "" {
		st = "failed: " + errs.Truncate(strings.ReplaceAll(ck.Error, "\n", " "), 60)
	}
	step := "-"
	if ev.Step >= 0 {
		step = fmt.Sprint(ev.Step)
	}
	dash := func(ok bool, s string) string {
		if !ok {
			return "-"
		}
		return s
	}
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).Round(time.Millisecond).String() }
	upload := "-"
	if ev.EndMs > 0 && ck.BlockedMs >= 0 && ck.Mode != "sync" {
		upload = ms(max(ev.EndMs-ev.TimeMs-ck.BlockedMs, 0))
	}
	landed := "-"
	if ev.EndMs > 0 && ck.Outcome == runevents.OutcomeComplete {
		landed = time.UnixMilli(ev.EndMs).UTC().Format(time.RFC3339)
	}
	mode := ck.Mode
	if ck.Staging != "" {
		mode += "/" + ck.Staging
	}
	return strings.Join([]string{step, ck.Path, st, dash(ck.Bytes > 0, humanBytes(ck.Bytes)), dash(ck.Ranks > 0, fmt.Sprint(ck.Ranks)),
		dash(mode != "", mode), dash(ck.BlockedMs >= 0, ms(ck.BlockedMs)), upload, landed}, "\t")
}
