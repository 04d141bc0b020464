package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/tracking"
)

// TestRunsLsShowsGoodput: `sextant runs ls` gets a GOODPUT column when a
// listed run reported progress; a run without progress shows "-", and a
// list of runs none of which reported progress has no column. The run's
// 10 steps of 1 s each fill 10 s of its 20 s (start to end): 50%.
func TestRunsLsShowsGoodput(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	ctx := context.Background()
	cl, err := client.New("http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	if _, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "idle", StartTimeMs: t0 - 1000}); err != nil {
		t.Fatal(err)
	}
	if out := cli(t, addr, "runs", "ls"); strings.Contains(out, "GOODPUT") {
		t.Fatalf("no run reported progress, yet runs ls has GOODPUT:\n%s", out)
	}

	run, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "train", StartTimeMs: t0})
	if err != nil {
		t.Fatal(err)
	}
	id := run.Info.RunID
	var reports []string
	for i := range 10 {
		reports = append(reports, fmt.Sprintf(`{"rank": 0, "step": %d, "time_ms": %d, "step_time_s": 1, "samples": 32}`, i, t0+int64(i+1)*1000))
	}
	postJSON(t, "http://"+addr+"/api/2.0/sextant/progress", fmt.Sprintf(`{"run_id": %q, "node": "n1", "reports": [%s]}`, id, strings.Join(reports, ",")))
	status, end := tracking.StatusFinished, t0+20_000
	if err := cl.UpdateRun(ctx, id, tracking.RunUpdate{Status: &status, EndTimeMs: &end}); err != nil {
		t.Fatal(err)
	}
	g, err := cl.Goodput(ctx, id)
	if err != nil || g.Goodput == nil || math.Abs(*g.Goodput-0.5) > 1e-9 {
		t.Fatalf("goodput of the run: %+v %v (want 0.5: 10 s of steps in 20 s)", g, err)
	}

	out := cli(t, addr, "runs", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "GOODPUT") || !matches(`^train .* 50%$`, lines[1]) || !matches(`^idle .* -$`, lines[2]) {
		t.Fatalf("runs ls:\n%s", out)
	}
	// Over goodputMaxRuns listed runs the column is left out (one request
	// per run would be too many).
	for i := range goodputMaxRuns {
		if _, err := cl.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: fmt.Sprintf("more-%d", i), StartTimeMs: t0 - 2000}); err != nil {
			t.Fatal(err)
		}
	}
	if out := cli(t, addr, "runs", "ls", "--limit", "100"); strings.Contains(out, "GOODPUT") || !strings.Contains(out, "train") {
		t.Fatalf("runs ls of %d runs:\n%s", goodputMaxRuns+2, out)
	}
	if out := cli(t, addr, "runs", "ls", "--limit", "2"); !strings.Contains(out, "GOODPUT") {
		t.Fatalf("runs ls --limit 2 (train is among the newest two):\n%s", out)
	}
}
