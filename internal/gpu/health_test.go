package gpu_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// healthEnv is a GPU service that records health events on runs, over a
// real SQLite store.
func healthEnv(t *testing.T) (*gpu.Service, *runevents.Service, string, *time.Time) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	t.Cleanup(func() {
		g.Close(ctx)
		s.Close(ctx)
	})
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := sqlstore.OpenEvents(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ev := runevents.NewService(es, runevents.Options{})
	now := time.UnixMilli(1_800_000_000_000)
	svc := gpu.NewService(g, gpu.ServiceOptions{Runs: tr, Events: ev, Now: func() time.Time { return now }})
	run, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", StartTimeMs: now.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	return svc, ev, run.Info.RunID, &now
}

// TestHealthEventsFromSim: Xid errors, throttling, ECC errors and a GPU
// falling off the bus, injected into the simulated source, become the
// run's events; sending every sample again changes nothing.
func TestHealthEventsFromSim(t *testing.T) {
	svc, ev, run, now := healthEnv(t)
	ctx := context.Background()
	sim := gpu.NewSim(4, 3, func() time.Time { return *now })
	var batches []*gpu.Batch
	ts := map[int]int64{}
	for step := range 10 {
		switch step {
		case 3:
			sim.InjectXid(1, 79)
		case 4:
			sim.SetThrottle(2, gpu.ThrottleHwThermal)
		case 5:
			sim.AddECC(0, 3, 1)
		case 6:
			sim.Fail(3, "GPU has fallen off the bus")
		case 7:
			sim.SetThrottle(2, 0)
		}
		*now = now.Add(10 * time.Second)
		smp, err := sim.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		smp.TimestampMs = now.UnixMilli()
		ts[step] = smp.TimestampMs
		b := &gpu.Batch{Labels: gpu.Labels{Node: "gpu-07", RunID: run, NodeRank: 0}, Samples: []gpu.Sample{*smp}}
		if _, err := svc.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	check := func(when string) {
		t.Helper()
		evs, err := ev.All(ctx, runevents.Query{RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			kind     runevents.Kind
			gpu      int
			at, end  int64
			open     bool
			severity runevents.Severity
		}
		var got []row
		for _, e := range evs {
			got = append(got, row{e.Kind, e.GPU, e.TimeMs, e.EndMs, e.Open, e.Severity})
		}
		slices.SortFunc(got, func(a, b row) int { return int(a.at - b.at) })
		want := []row{
			{runevents.KindGPUXid, 1, ts[3], 0, false, runevents.SeverityError},
			{runevents.KindGPUThrottle, 2, ts[4], ts[7], false, runevents.SeverityWarning},
			{runevents.KindGPUECC, 0, ts[5], 0, false, runevents.SeverityError},
			{runevents.KindGPULost, 3, ts[6], 0, false, runevents.SeverityError},
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: events\n got %+v\nwant %+v", when, got, want)
		}
		for _, e := range evs {
			if e.Node != "gpu-07" || e.Attrs["uuid"] == "" || e.Message == "" {
				t.Errorf("%s: event %+v lacks its node, GPU or message", when, e)
			}
			switch e.Kind {
			case runevents.KindGPUXid:
				if e.Attrs["xid"] != "79" || !strings.Contains(e.Message, "fallen off the bus") {
					t.Errorf("xid event %+v", e)
				}
			case runevents.KindGPUThrottle:
				if e.Attrs["reasons"] != "hw_thermal" || !strings.Contains(e.Message, "SM clock 1188 MHz of 1980") {
					t.Errorf("throttle event %+v", e)
				}
			case runevents.KindGPUECC:
				if !strings.Contains(e.Message, "1 uncorrected and 3 corrected") {
					t.Errorf("ecc event %+v", e)
				}
			}
		}
	}
	check("after the samples")
	for _, b := range batches { // an agent resending its spool
		if _, err := svc.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	check("after sending every sample again")
}

// TestHealthFromNvidiaSMI: readings recorded from nvidia-smi on a GPU that
// starts throttling for heat, counts ECC errors and is then lost give the
// findings of each step.
func TestHealthFromNvidiaSMI(t *testing.T) {
	var seq [][]gpu.GPU
	for _, name := range []string{"health-0", "health-1", "health-2"} {
		gs, err := gpu.ParseQueryGPU(readSMI(t, "535-h100-health", name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, gs)
	}
	kinds := func(step int) []string {
		var out []string
		for i := range seq[step] {
			var prev *gpu.GPU
			if step > 0 {
				prev = &seq[step-1][i]
			}
			for _, f := range gpu.Health("n1", prev, &seq[step][i], int64(step)) {
				out = append(out, f.Kind.String()+"@"+f.Event.Attrs["uuid"][:8])
			}
		}
		return out
	}
	if got := kinds(0); len(got) != 0 {
		t.Errorf("first sample: %v", got)
	}
	if got, want := kinds(1), []string{"ecc@GPU-aa11", "throttle@GPU-bb22"}; !slices.Equal(got, want) {
		t.Errorf("second sample: %v, want %v", got, want)
	}
	if got, want := kinds(2), []string{"throttle_end@GPU-bb22", "lost@GPU-cc33"}; !slices.Equal(got, want) {
		t.Errorf("third sample: %v, want %v", got, want)
	}
	g := seq[1][1]
	if r := gpu.ThrottleReason(g.Values[gpu.FieldThrottleReasons]); r != gpu.ThrottleHwThermal|gpu.ThrottleSwPowerCap {
		t.Errorf("throttle reasons %v", r)
	}
	if g.Values[gpu.FieldMemClock] != 2619 || g.Values[gpu.FieldSMClockMax] != 1980 || g.Values[gpu.FieldPowerLimitDefault] != 700 {
		t.Errorf("clocks and limits %+v", g.Values)
	}
	if a := seq[1][0]; a.Values[gpu.FieldECCCorrected] != 12 || a.Values[gpu.FieldECCUncorrected] != 1 {
		t.Errorf("ECC counts %+v", a.Values)
	}
}

func readSMI(t *testing.T, driver, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/smi", driver, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHealthLostWhileThrottled: a GPU lost while it slows down ends its
// slowdown span with the loss (found by scripts/gpu-check.sh --fake: the
// span stayed open).
func TestHealthLostWhileThrottled(t *testing.T) {
	prev := gpu.NewGPU(1, "GPU-x", "H100")
	prev.Values[gpu.FieldThrottleReasons] = float64(gpu.ThrottleHwThermal)
	cur := gpu.NewGPU(1, "GPU-x", "H100")
	cur.Err = "GPU has fallen off the bus"
	var kinds []string
	for _, f := range gpu.Health("n1", &prev, &cur, 5) {
		kinds = append(kinds, f.Kind.String())
	}
	if !slices.Equal(kinds, []string{"lost", "throttle_end"}) {
		t.Errorf("findings %v", kinds)
	}
}
