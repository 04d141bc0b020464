package gpu_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/sqlstore"
)

func TestFlagRule(t *testing.T) {
	tests := map[string]struct {
		rule   gpu.FlagRule
		lost   int
		counts gpu.HealthCounts
		want   bool
		reason string
	}{
		"OKNoFaults":            {counts: gpu.HealthCounts{}, want: false},
		"OKOneXid":              {counts: gpu.HealthCounts{Xid: 1}, want: false},
		"OKThrottlingAlone":     {counts: gpu.HealthCounts{Throttle: 50}, want: false},
		"FlaggedTwoFaults":      {counts: gpu.HealthCounts{Xid: 1, ECC: 1, Throttle: 3}, want: true, reason: "2 faults in 7 days (1 Xid, 1 ECC)"},
		"FlaggedLostRecently":   {lost: 1, counts: gpu.HealthCounts{Lost: 1}, want: true, reason: "lost a GPU in the last 24 hours"},
		"OKLostOldOnce":         {lost: 0, counts: gpu.HealthCounts{Lost: 1}, want: false},
		"OKLostRuleOff":         {rule: gpu.FlagRule{LostWindow: -1}, lost: 1, counts: gpu.HealthCounts{Lost: 1}, want: false},
		"OKBelowRaisedMax":      {rule: gpu.FlagRule{MaxFaults: 3}, counts: gpu.HealthCounts{Xid: 2}, want: false},
		"FlaggedAtRaisedMax":    {rule: gpu.FlagRule{MaxFaults: 3, Window: 48 * time.Hour}, counts: gpu.HealthCounts{Xid: 2, Lost: 1}, want: true, reason: "3 faults in 2 days (2 Xid, 1 lost GPU)"},
		"FlaggedBothReasonsSay": {lost: 2, counts: gpu.HealthCounts{Lost: 2}, want: true, reason: "lost a GPU in the last 24 hours; 2 faults in 7 days (2 lost GPU)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, why := tc.rule.Flag(tc.lost, tc.counts)
			if got != tc.want || why != tc.reason {
				t.Fatalf("Flag = %v %q, want %v %q", got, why, tc.want, tc.reason)
			}
		})
	}
}

func TestSummarizeWindows(t *testing.T) {
	now := int64(100 * 24 * 3600 * 1000)
	h := int64(3600 * 1000)
	recs := []gpu.HealthRecord{
		{Key: "1", Node: "a", Kind: "xid", TimeMs: now - 1*h, GPUIndex: 0},
		{Key: "2", Node: "a", Kind: "ecc", TimeMs: now - 30*h, GPUIndex: 1},
		{Key: "3", Node: "a", Kind: "throttle", TimeMs: now - 2*h, GPUIndex: 1},
		{Key: "4", Node: "b", Kind: "xid", TimeMs: now - 8*24*h, GPUIndex: 0}, // outside 7 days
		{Key: "5", Node: "b", Kind: "lost", TimeMs: now - 48*h, GPUIndex: 0},
	}
	latest := []gpu.NodeSample{{Labels: gpu.Labels{Node: "c"}, Sample: gpu.Sample{TimestampMs: now - 5000, GPUs: []gpu.GPU{gpu.NewGPU(0, "GPU-c0", "H100")}}}}
	got := gpu.DefaultFlagRule().Summarize(now, latest, recs)
	if len(got) != 3 || got[0].Node != "a" || got[1].Node != "b" || got[2].Node != "c" {
		t.Fatalf("nodes = %+v", got)
	}
	a, b, c := got[0], got[1], got[2]
	if a.Counts7d != (gpu.HealthCounts{Xid: 1, ECC: 1, Throttle: 1}) || a.Counts24h != (gpu.HealthCounts{Xid: 1, Throttle: 1}) || !a.Flagged || a.LastFaultMs != now-h {
		t.Errorf("a = %+v", a)
	}
	if b.Counts7d != (gpu.HealthCounts{Lost: 1}) || b.Flagged {
		t.Errorf("b (one lost GPU two days ago, an old Xid) = %+v, want 1 lost and not flagged", b)
	}
	if c.Flagged || c.LastSeenMs != now-5000 || len(c.GPUs) != 1 || c.GPUs[0].Model != "H100" {
		t.Errorf("c = %+v", c)
	}
}

// TestNodeHealthHistoryFromSim: the faults of a node's simulated GPUs,
// from batches of no run and of a run, are kept in the node's history
// once each (a resent batch adds nothing), the throttle span is closed,
// and the node is flagged.
func TestNodeHealthHistoryFromSim(t *testing.T) {
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
	now := time.UnixMilli(1_800_000_000_000)
	svc := gpu.NewService(g, gpu.ServiceOptions{Health: gpu.HealthOptions{History: g}, Now: func() time.Time { return now }})
	sim := gpu.NewSim(4, 3, func() time.Time { return now })
	const run = "0123456789abcdef0123456789abcdef"
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
		now = now.Add(10 * time.Second)
		smp, err := sim.Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		smp.TimestampMs = now.UnixMilli()
		ts[step] = smp.TimestampMs
		b := &gpu.Batch{Labels: gpu.Labels{Node: "gpu-07", NodeRank: -1}, Samples: []gpu.Sample{*smp}}
		if step >= 5 {
			// A run's sampler reports from here on: the findings are
			// the node's, with the run.
			b.Labels.RunID = run
		}
		if _, err := svc.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	check := func(when string) {
		t.Helper()
		recs, err := svc.NodeHealthHistory(ctx, gpu.HealthQuery{Node: "gpu-07"})
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			kind    string
			gpu     int
			at, end int64
			open    bool
			runs    string
		}
		var got []row
		for _, r := range recs {
			got = append(got, row{r.Kind, r.GPUIndex, r.TimeMs, r.EndMs, r.Open, strings.Join(r.RunIDs, ",")})
			if r.Message == "" || r.GPUUUID == "" || r.GPUModel == "" {
				t.Errorf("%s: record %+v lacks its message, GPU or model", when, r)
			}
			if r.Kind == "xid" && r.Xid != 79 {
				t.Errorf("%s: xid record %+v", when, r)
			}
		}
		want := []row{ // newest first
			{"lost", 3, ts[6], 0, false, run},
			{"ecc", 0, ts[5], 0, false, run},
			{"throttle", 2, ts[4], ts[7], false, ""},
			{"xid", 1, ts[3], 0, false, ""},
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: history\n got %+v\nwant %+v", when, got, want)
		}
		nodes, err := svc.NodesHealth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 1 || !nodes[0].Flagged || nodes[0].Counts24h != (gpu.HealthCounts{Xid: 1, ECC: 1, Throttle: 1, Lost: 1}) || len(nodes[0].GPUs) != 4 {
			t.Errorf("%s: nodes = %+v, want gpu-07 flagged with one fault of each kind and 4 GPUs", when, nodes)
		} else if r := nodes[0].Reason; !strings.Contains(r, "lost a GPU") || !strings.Contains(r, "3 faults in 7 days") {
			t.Errorf("%s: reason %q", when, r)
		}
	}
	check("first")
	for _, b := range batches {
		if _, err := svc.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	check("after a resend")
}

func TestNodeHealthHistoryBadInput(t *testing.T) {
	e := mustEnv(t)
	ctx := context.Background()
	for name, q := range map[string]gpu.HealthQuery{
		"ErrNodeControlChars": {Node: "a\x00b"},
		"ErrLimitNegative":    {Limit: -1},
		"ErrLimitTooLarge":    {Limit: gpu.MaxHealthPage + 1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.svc.NodeHealthHistory(ctx, q); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestNodeHealthHistoryIgnoresRunOnly: a batch that speaks for its run
// only (a user's samples for a node a node token reports for) adds nothing
// to the node's history.
func TestNodeHealthHistoryIgnoresRunOnly(t *testing.T) {
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
	now := time.UnixMilli(1_800_000_000_000)
	svc := gpu.NewService(g, gpu.ServiceOptions{Health: gpu.HealthOptions{History: g}, Now: func() time.Time { return now }})
	lost := gpu.GPU{Index: 0, UUID: "GPU-0", Name: "H100", Err: "GPU is lost"}
	for _, runOnly := range []bool{true, false} {
		b := &gpu.Batch{Labels: gpu.Labels{Node: "n1", RunID: "0123456789abcdef0123456789abcdef", NodeRank: -1}, RunOnly: runOnly,
			Samples: []gpu.Sample{{TimestampMs: now.UnixMilli(), GPUs: []gpu.GPU{lost}}}}
		if _, err := svc.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
		recs, err := svc.NodeHealthHistory(ctx, gpu.HealthQuery{Node: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[runOnly]; len(recs) != want {
			t.Fatalf("run only %v: %d records, want %d", runOnly, len(recs), want)
		}
		now = now.Add(10 * time.Minute)
	}
}
