package goodput

import (
	"math"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/runevents"
)

const t0 = int64(1_700_000_000_000)

func attempt(key string, start, end int64, status string, model string) runevents.Event {
	e := runevents.Event{Kind: runevents.KindAttempt, Key: key, TimeMs: start, EndMs: end, Open: end == 0, Node: "n1", GPU: -1, Step: -1,
		Attrs: map[string]string{"gpus": "2", "gpu_model": model}}
	if status != "" {
		e.Attrs["status"] = status
	}
	return e
}

func span(k runevents.Kind, start, end int64) runevents.Event {
	return runevents.Event{Kind: k, TimeMs: start, EndMs: end, Open: end == 0, GPU: -1, Step: -1}
}

func save(start, end, blockedMs int64, o runevents.Outcome) runevents.Event {
	return runevents.Event{Kind: runevents.KindCheckpointSave, TimeMs: start, EndMs: end, GPU: -1, Step: -1,
		Checkpoint: &runevents.Checkpoint{Path: "/Volumes/c/s/v/ck", Outcome: o, BlockedMs: blockedMs}}
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// steps returns rank's steps: (step, end offset ms, step time s, data wait s).
func steps(rank int, samples float64, rows ...[4]float64) []Step {
	var out []Step
	for _, r := range rows {
		out = append(out, Step{Rank: rank, Step: int64(r[0]), EndMs: t0 + int64(r[1]), StepTimeS: r[2], DataWaitS: r[3], Samples: samples, Tokens: -1})
	}
	return out
}

// TestComputeEveryCategory builds a run of a killed attempt and a running
// one whose every second is accounted for by hand (see the comments).
func TestComputeEveryCategory(t *testing.T) {
	rows := [][4]float64{
		// Attempt 1 [t0, t0+10s], killed:
		{0, 2000, 1.0, 0.25}, // startup 0-1 s; data wait 1-1.25; productive 1.25-2
		{1, 3000, 1.0, -1},   // productive 2-3
		{2, 4500, 1.5, -1},   // save blocks 3-3.5 (checkpoint); 3.5-4.5 lost (after the last complete save)
		{3, 5500, 1.0, -1},   // lost 4.5-5.5; other 5.5-6; stalled 6-9 (hung); other 9-10
		// Attempt 2 [t0+20s, open], now t0+26s:
		{2, 22000, 1.0, -1}, // startup 20-21; productive 21-22; idle 22-23
		{3, 24000, 1.0, -1}, // productive 23-24 (an idle span over it counts as the step); other 24-24.5; idle 24.5-26 (open)
	}
	in := Input{
		Running: true,
		NowMs:   t0 + 26000,
		Events: []runevents.Event{
			attempt("attempt:0:1", t0, t0+10000, "KILLED", "NVIDIA H100 80GB HBM3"),
			attempt("attempt:0:2", t0+20000, 0, "", "NVIDIA H100 80GB HBM3"),
			save(t0+3000, t0+3800, 500, runevents.OutcomeComplete),
			save(t0+5000, t0+5100, 0, runevents.OutcomeIncomplete), // never landed: not a checkpoint to resume from
			span(runevents.KindStalled, t0+6000, t0+9000),
			span(runevents.KindIdle, t0+22000, t0+23500),
			span(runevents.KindIdle, t0+24500, 0),
			span(runevents.KindNote, t0, t0+26000),
		},
		Steps:  append(steps(1, 8, rows...), steps(0, 8, rows...)...),
		Params: map[string]string{ParamFLOPsPerSample: "1e12"},
	}
	rep := Compute(in)
	b := rep.Breakdown
	near(t, "wall", b.Wall, 16)
	near(t, "productive", b.Productive, 0.75+1+1+1)
	near(t, "data_wait", b.DataWait, 0.25)
	near(t, "checkpoint", b.Checkpoint, 0.5)
	near(t, "lost", b.Lost, 2)
	near(t, "hung", b.Hung, 3)
	near(t, "idle", b.Idle, 1+0.5+1.5-0.5)
	near(t, "startup", b.Startup, 2)
	near(t, "other", b.Other, 0.5+1+0.5)
	sum := b.Productive + b.DataWait + b.Checkpoint + b.Lost + b.Hung + b.Idle + b.Startup + b.Other
	near(t, "sum of categories", sum, b.Wall)
	if !rep.Known {
		t.Fatal("goodput unknown")
	}
	near(t, "goodput", rep.Goodput, 3.75/16)
	if rep.ReferenceRank != 0 {
		t.Errorf("reference rank %d, want 0", rep.ReferenceRank)
	}
	// Throughput: per rank Σsamples / Σstep time, summed over ranks.
	near(t, "samples/s", rep.Throughput.SamplesPerS, 2*48/6.5)
	if rep.Throughput.TokensPerS != -1 {
		t.Errorf("tokens/s %v, want -1 (none reported)", rep.Throughput.TokensPerS)
	}
	// The recent window holds the steps of the last minute: all of them.
	near(t, "recent samples/s", rep.Recent.SamplesPerS, 2*48/6.5)
	if len(rep.Ranks) != 2 || rep.Ranks[1].Steps != 6 {
		t.Errorf("ranks %+v", rep.Ranks)
	}
	m := rep.MFU
	if !m.Known {
		t.Fatalf("MFU unknown: %s", m.Reason)
	}
	near(t, "MFU", m.Value, 2*48/6.5*1e12/(2*989.4e12))
	if m.PeakSource != "table: h100 80gb hbm3" || m.DType != "bf16" || m.Devices != 2 || m.Per != "sample" {
		t.Errorf("MFU %+v", m)
	}
	// The series: cumulative goodput at each reference step's end.
	if len(rep.Series) != 6 {
		t.Fatalf("series %+v", rep.Series)
	}
	near(t, "goodput at step 0", rep.Series[0].Goodput, 0.75/2)
	near(t, "goodput at the last step", rep.Series[5].Goodput, 3.75/(10+4))
}

func TestComputeAsyncSaveAndFinishedRun(t *testing.T) {
	// A finished attempt: nothing lost; an async save blocks 0.2 s of a
	// step, whose time is counted once.
	in := Input{
		NowMs: t0 + 99000,
		EndMs: t0 + 4000,
		Events: []runevents.Event{
			attempt("attempt:0:1", t0, t0+4000, "FINISHED", ""),
			save(t0+2000, t0+3500, 200, runevents.OutcomeComplete),
		},
		Steps: steps(3, 4, [4]float64{0, 1000, 1, 0}, [4]float64{1, 2000, 1, 0}, [4]float64{2, 3000, 1, 0.5}),
	}
	rep := Compute(in)
	b := rep.Breakdown
	near(t, "wall", b.Wall, 4)
	near(t, "checkpoint", b.Checkpoint, 0.2)
	near(t, "data_wait", b.DataWait, 0.5-0.2)
	near(t, "productive", b.Productive, 1+1+0.5)
	near(t, "lost", b.Lost, 0)
	near(t, "other", b.Other, 1)
	if rep.ReferenceRank != 3 {
		t.Errorf("reference rank %d, want 3 (the lowest reporting)", rep.ReferenceRank)
	}
	if rep.MFU.Known || !strings.Contains(rep.MFU.Reason, ParamFLOPsPerSample) {
		t.Errorf("MFU without FLOPs: %+v", rep.MFU)
	}
}

func TestComputeFailedWithoutCheckpointLosesEverything(t *testing.T) {
	in := Input{
		EndMs:  t0 + 3000,
		Events: []runevents.Event{attempt("attempt:0:1", t0, t0+3000, "FAILED", "")},
		Steps:  steps(0, 1, [4]float64{0, 1000, 1, 0}, [4]float64{1, 2000, 1, 0}),
	}
	b := Compute(in).Breakdown
	near(t, "lost", b.Lost, 2)
	near(t, "productive", b.Productive, 0)
	near(t, "other", b.Other, 1)
}

func TestComputeNoAttemptsUsesRunBounds(t *testing.T) {
	in := Input{StartMs: t0, EndMs: t0 + 2000, Steps: steps(0, 1, [4]float64{0, 1500, 1, 0})}
	rep := Compute(in)
	near(t, "wall", rep.Breakdown.Wall, 2)
	near(t, "startup", rep.Breakdown.Startup, 0.5)
	near(t, "productive", rep.Breakdown.Productive, 1)
	if rep.MFU.Known {
		t.Error("MFU known without FLOPs")
	}
}

func TestComputeEmpty(t *testing.T) {
	rep := Compute(Input{NowMs: t0})
	if rep.Known || rep.ReferenceRank != -1 || rep.Throughput.SamplesPerS != -1 || len(rep.Series) != 0 {
		t.Errorf("empty run: %+v", rep)
	}
}

func TestMFU(t *testing.T) {
	base := func(model string, params map[string]string) MFU {
		var evs []runevents.Event
		if model != "-" {
			evs = append(evs, attempt("attempt:0:1", t0, t0+2000, "FINISHED", model))
		}
		return Compute(Input{EndMs: t0 + 2000, Events: evs, Steps: steps(0, 10, [4]float64{0, 2000, 2, 0}), Params: params}).MFU
	}
	f := map[string]string{ParamFLOPsPerSample: "2e12"}
	for name, tc := range map[string]struct {
		model  string
		params map[string]string
		want   float64 // 0: unknown
		reason string
	}{
		"TableBF16":          {"NVIDIA A100-SXM4-80GB", f, 10e12 / 312e12, ""},
		"TableFP8":           {"NVIDIA H100 PCIe", map[string]string{ParamFLOPsPerSample: "2e12", ParamDType: "float8_e4m3fn"}, 10e12 / 1513e12, ""},
		"ParamWins":          {"NVIDIA A100-SXM4-80GB", map[string]string{ParamFLOPsPerSample: "2e12", ParamPeakTFLOPS: "100"}, 10e12 / 100e12, ""},
		"PerTokenPreferred":  {"-", map[string]string{ParamFLOPsPerSample: "2e12", ParamFLOPsPerToken: "1", ParamPeakTFLOPS: "1"}, 10e12 / 1e12, ""},
		"ErrNoModel":         {"", f, 0, "no GPU model"},
		"ErrCPUNoModel":      {"-", f, 0, "no GPU model"},
		"ErrUnknownModel":    {"Simulated GPU", f, 0, "not in the peak table"},
		"ErrNoDTypePeak":     {"NVIDIA A100-SXM4-80GB", map[string]string{ParamFLOPsPerSample: "2e12", ParamDType: "fp8"}, 0, "no fp8 peak"},
		"ErrBadDType":        {"NVIDIA A100-SXM4-80GB", map[string]string{ParamFLOPsPerSample: "2e12", ParamDType: "int4"}, 0, "unknown data type"},
		"ErrBadFLOPs":        {"NVIDIA A100-SXM4-80GB", map[string]string{ParamFLOPsPerSample: "-3"}, 0, "not a number above 0"},
		"ErrBadPeak":         {"NVIDIA A100-SXM4-80GB", map[string]string{ParamFLOPsPerSample: "1", ParamPeakTFLOPS: "x"}, 0, "not a number above 0"},
		"ErrTokensNotLogged": {"-", map[string]string{ParamFLOPsPerToken: "1", ParamPeakTFLOPS: "1"}, 0, "no progress reports"},
	} {
		t.Run(name, func(t *testing.T) {
			m := base(tc.model, tc.params)
			if tc.want == 0 {
				if m.Known || !strings.Contains(m.Reason, tc.reason) {
					t.Fatalf("MFU %+v, want unknown with %q", m, tc.reason)
				}
				return
			}
			if !m.Known {
				t.Fatalf("MFU unknown: %s", m.Reason)
			}
			near(t, "MFU", m.Value, tc.want)
		})
	}
}

func TestPeaksFor(t *testing.T) {
	p := DefaultPeaks()
	f := func(model, dtype string, want float64, match string) {
		t.Helper()
		got, part, ok := p.For(model, dtype)
		if want == 0 {
			if ok {
				t.Errorf("%s %s: %v (%s), want none", model, dtype, got, part)
			}
			return
		}
		if !ok || got != want || part != match {
			t.Errorf("%s %s: %v %q %v, want %v %q", model, dtype, got, part, ok, want, match)
		}
	}
	f("NVIDIA H100 80GB HBM3", "bf16", 989.4, "h100 80gb hbm3")
	f("NVIDIA H100 80GB HBM3", "fp8", 1978.9, "h100 80gb hbm3")
	f("NVIDIA H100 80GB HBM3", "fp64", 67, "h100 80gb hbm3")
	f("NVIDIA H100 NVL", "bf16", 835.5, "h100 nvl")
	f("NVIDIA H100 PCIe", "tf32", 378, "h100 pcie")
	f("NVIDIA H100 PCIe", "fp32", 51.2, "h100 pcie")
	f("NVIDIA H200", "bf16", 989.4, "h200")
	f("NVIDIA H200 NVL", "bf16", 835.5, "h200 nvl")
	f("NVIDIA A100-SXM4-40GB", "tf32", 156, "a100")
	f("NVIDIA A100 80GB PCIe", "fp16", 312, "a100")
	f("NVIDIA L40S", "bf16", 362.05, "l40s")
	f("NVIDIA L4", "fp8", 242, "l4")
	f("NVIDIA L40", "bf16", 0, "") // not an L4, not an L40S
	f("NVIDIA A10G", "bf16", 125, "a10g")
	f("NVIDIA A10", "tf32", 62.5, "a10")
	f("NVIDIA B200", "fp8", 4500, "b200")
	f("Simulated GPU", "bf16", 0, "")
	f("", "bf16", 0, "")
}

func TestParsePeaks(t *testing.T) {
	p, err := ParsePeaks("NVIDIA H100 80GB HBM3: bf16=900 ; My Accel X:fp16=12.5,bf16=13")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model, dtype string
		want         float64
	}{
		{"NVIDIA H100 80GB HBM3", "bf16", 900},
		{"NVIDIA H100 80GB HBM3", "fp8", 1978.9}, // kept from the table
		{"my accel x", "fp16", 12.5},
		{"Vendor My Accel X rev2", "bf16", 13},
		{"NVIDIA L4", "bf16", 121},
	} {
		if got, _, ok := p.For(c.model, c.dtype); !ok || got != c.want {
			t.Errorf("%s %s = %v, %v; want %v", c.model, c.dtype, got, ok, c.want)
		}
	}
	for name, spec := range map[string]string{
		"ErrNoColon":    "H100=1",
		"ErrNoDType":    "H100:1",
		"ErrBadDType":   "H100:int8=1",
		"ErrZero":       "H100:bf16=0",
		"ErrNaN":        "H100:bf16=NaN",
		"ErrEmptyModel": ":bf16=1",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParsePeaks(spec); err == nil {
				t.Fatalf("ParsePeaks(%q) took it", spec)
			}
		})
	}
}

func TestThinKeepsLast(t *testing.T) {
	ps := make([]Point, 1234)
	for i := range ps {
		ps[i].Step = int64(i)
	}
	got := thin(ps, MaxSeriesPoints)
	if len(got) != MaxSeriesPoints || got[0].Step != 0 || got[len(got)-1].Step != 1233 {
		t.Fatalf("thin: %d points, first %d, last %d", len(got), got[0].Step, got[len(got)-1].Step)
	}
}
