package gpu_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

// testEnv is a GPU service over a real SQLite store, with the tracking
// service for system metrics and a clock the test sets.
type testEnv struct {
	svc   *gpu.Service
	store *sqlstore.GPUStore
	tr    *tracking.Service
	now   time.Time
}

func mustEnv(tb testing.TB) *testEnv {
	tb.Helper()
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, filepath.Join(tb.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		tb.Fatal(err)
	}
	g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	tb.Cleanup(func() {
		g.Close(ctx)
		s.Close(ctx)
	})
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		tb.Fatal(err)
	}
	e := &testEnv{store: g, tr: tr, now: time.UnixMilli(1_800_000_000_000)}
	e.svc = gpu.NewService(g, gpu.ServiceOptions{Runs: tr, Now: func() time.Time { return e.now }})
	return e
}

// simSamples returns n samples of a simulated node, every 10 s up to the
// env's now.
func (e *testEnv) simSamples(n, gpus int, seed uint64) []gpu.Sample {
	var t time.Time
	sim := gpu.NewSim(gpus, seed, func() time.Time { return t })
	out := make([]gpu.Sample, n)
	for i := range n {
		t = e.now.Add(-time.Duration(n-1-i) * 10 * time.Second)
		s, _ := sim.Sample(context.Background())
		s.TimestampMs = t.UnixMilli()
		out[i] = *s
	}
	return out
}

func TestIngestTimeWindow(t *testing.T) {
	e := mustEnv(t)
	ok := e.simSamples(1, 2, 1)[0]
	old, future := ok, ok
	old.TimestampMs = e.now.Add(-3 * time.Hour).UnixMilli()
	future.TimestampMs = e.now.Add(10 * time.Minute).UnixMilli()
	res, err := e.svc.Ingest(t.Context(), &gpu.Batch{Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Samples: []gpu.Sample{old, ok, future}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || len(res.Skipped) != 2 ||
		!strings.Contains(res.Skipped[0].Reason, "retention window") || !strings.Contains(res.Skipped[1].Reason, "ahead of the server's clock") {
		t.Fatalf("result %+v", res)
	}
	for name, s := range map[string]gpu.Sample{"ErrPast": old, "ErrFuture": future} {
		t.Run(name, func(t *testing.T) {
			_, err := e.svc.Ingest(t.Context(), &gpu.Batch{Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Samples: []gpu.Sample{s}})
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "accepted time window") {
				t.Fatalf("err %v, want a clear Invalid", err)
			}
		})
	}
	// Just inside both edges is accepted.
	edge1, edge2 := ok, ok
	edge1.TimestampMs = e.now.Add(-2*time.Hour + time.Second).UnixMilli()
	edge2.TimestampMs = e.now.Add(30*time.Second - time.Second).UnixMilli()
	if res, err := e.svc.Ingest(t.Context(), &gpu.Batch{Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Samples: []gpu.Sample{edge1, edge2}}); err != nil || res.Accepted != 2 {
		t.Fatalf("edges: %+v %v", res, err)
	}
}

func TestIngestBadInput(t *testing.T) {
	e := mustEnv(t)
	good := e.simSamples(1, 1, 1)
	tests := map[string]gpu.Batch{
		"ErrNoNode":       {Labels: gpu.Labels{NodeRank: -1}, Samples: good},
		"ErrNodeControl":  {Labels: gpu.Labels{Node: "a\nb", NodeRank: -1}, Samples: good},
		"ErrNoSamples":    {Labels: gpu.Labels{Node: "n", NodeRank: -1}},
		"ErrBadRun":       {Labels: gpu.Labels{Node: "n", RunID: "../x", NodeRank: -1}, Samples: good},
		"ErrZeroTime":     {Labels: gpu.Labels{Node: "n", NodeRank: -1}, Samples: []gpu.Sample{{TimestampMs: 0}}},
		"ErrNegativeRank": {Labels: gpu.Labels{Node: "n", NodeRank: -7}, Samples: good},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := e.svc.Ingest(t.Context(), &b); !errs.Is(err, errs.Invalid) {
				t.Fatalf("err %v, want Invalid", err)
			}
		})
	}
}

// TestIngestNaNAndDuplicates: NaN and infinite readings are stored as
// missing; a sample sent twice, in one batch or two, is stored once.
func TestIngestNaNAndDuplicates(t *testing.T) {
	e := mustEnv(t)
	s := e.simSamples(1, 2, 1)[0]
	s.GPUs[0].Values[gpu.FieldUtil] = math.NaN()
	s.GPUs[0].Values[gpu.FieldTemp] = math.Inf(-1)
	s.GPUs = append(s.GPUs, s.GPUs[1]) // the same GPU twice
	b := &gpu.Batch{Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Samples: []gpu.Sample{s, s}}
	for range 2 {
		if _, err := e.svc.Ingest(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.svc.Series(t.Context(), gpu.SeriesQuery{Fields: []gpu.Field{gpu.FieldUtil, gpu.FieldTemp, gpu.FieldPower}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GPUs) != 2 {
		t.Fatalf("%d GPUs, want 2", len(res.GPUs))
	}
	g0 := res.GPUs[0]
	if len(g0.Series[0]) != 0 || len(g0.Series[1]) != 0 || len(g0.Series[2]) != 1 {
		t.Fatalf("GPU 0 series %+v: NaN and -Inf must be missing, power present once", g0.Series)
	}
	if n := len(res.GPUs[1].Series[0]); n != 1 {
		t.Fatalf("GPU 1 has %d utilisation points, want 1", n)
	}
}

// TestSeriesDownsampling compares the service's buckets with a direct
// computation over the raw samples.
func TestSeriesDownsampling(t *testing.T) {
	e := mustEnv(t)
	const n = 720 // two hours at 10 s
	for node, seed := range map[string]uint64{"n1": 1, "n2": 2} {
		samples := e.simSamples(n, 4, seed)
		// A GPU that fails for a while leaves empty buckets, not zeros.
		for i := 100; i < 160; i++ {
			samples[i].GPUs[3].Err = "lost"
			samples[i].GPUs[3].Values = gpu.NewGPU(3, "", "").Values
		}
		for i := 0; i < n; i += 100 {
			if _, err := e.svc.Ingest(t.Context(), &gpu.Batch{Labels: gpu.Labels{Node: node, NodeRank: -1}, Samples: samples[i:min(i+100, n)]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fields := []gpu.Field{gpu.FieldUtil, gpu.FieldMemUsed, gpu.FieldTemp}
	raw, err := e.svc.Series(t.Context(), gpu.SeriesQuery{Points: 0, Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	if raw.BucketMs != 0 || len(raw.GPUs) != 8 || len(raw.GPUs[0].Series[0]) != n || len(raw.GPUs[3].Series[0]) != n-60 {
		t.Fatalf("raw: %d GPUs, %d and %d points", len(raw.GPUs), len(raw.GPUs[0].Series[0]), len(raw.GPUs[3].Series[0]))
	}
	for _, points := range []int{360, 100, 7, 1} {
		res, err := e.svc.Series(t.Context(), gpu.SeriesQuery{Points: points, Fields: fields, Agg: gpu.AggMinAvgMax})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GPUs) != 8 || res.BucketMs <= 0 {
			t.Fatalf("points=%d: %d GPUs, bucket %d", points, len(res.GPUs), res.BucketMs)
		}
		for gi, gs := range res.GPUs {
			for fi := range fields {
				got := gs.Series[fi]
				if len(got) > points {
					t.Fatalf("points=%d: %d points", points, len(got))
				}
				// Recompute from the raw samples.
				type agg struct {
					sum, min, max float64
					n             int
				}
				want := map[int64]*agg{}
				for _, p := range raw.GPUs[gi].Series[fi] {
					b := p.TimestampMs - ((p.TimestampMs%res.BucketMs)+res.BucketMs)%res.BucketMs
					a := want[b]
					if a == nil {
						a = &agg{min: math.Inf(1), max: math.Inf(-1)}
						want[b] = a
					}
					a.sum += p.Value
					a.n++
					a.min, a.max = math.Min(a.min, p.Value), math.Max(a.max, p.Value)
				}
				if len(got) != len(want) {
					t.Fatalf("points=%d GPU %d %s: %d buckets, want %d", points, gi, fields[fi], len(got), len(want))
				}
				for i, p := range got {
					a := want[p.TimestampMs]
					if a == nil || (i > 0 && p.TimestampMs <= got[i-1].TimestampMs) {
						t.Fatalf("bucket at %d not aligned or not in order", p.TimestampMs)
					}
					if math.Abs(p.Value-a.sum/float64(a.n)) > 1e-6*math.Max(1, math.Abs(p.Value)) || p.Min != a.min || p.Max != a.max {
						t.Fatalf("points=%d bucket %d: %+v, want avg %v min %v max %v", points, p.TimestampMs, p, a.sum/float64(a.n), a.min, a.max)
					}
				}
			}
		}
	}
	// A window sliding by one sample keeps its bucket boundaries.
	q := gpu.SeriesQuery{Points: 360, ToMs: e.now.UnixMilli() - 20_000, FromMs: e.now.Add(-time.Hour).UnixMilli() - 20_000}
	a, _ := e.svc.Series(t.Context(), q)
	q.FromMs += 10_000
	q.ToMs += 10_000
	b, _ := e.svc.Series(t.Context(), q)
	if a.BucketMs != b.BucketMs {
		t.Fatalf("bucket width changed with the window: %d, %d", a.BucketMs, b.BucketMs)
	}
	pa, pb := a.GPUs[0].Series[0], b.GPUs[0].Series[0]
	same := func(x, y gpu.SeriesPoint) bool {
		return x.TimestampMs == y.TimestampMs && x.Value == y.Value && x.Min == y.Min && x.Max == y.Max
	}
	if len(pa) != 360 || len(pb) != 360 || !same(pa[180], pb[179]) {
		t.Fatalf("points of a window sliding by one sample moved: %d, %d points; %+v vs %+v", len(pa), len(pb), pa[180], pb[179])
	}
}

func TestSeriesTrimsToRetentionAndSelects(t *testing.T) {
	e := mustEnv(t)
	for _, node := range []string{"a", "b"} {
		if _, err := e.svc.Ingest(t.Context(), &gpu.Batch{Labels: gpu.Labels{Node: node, NodeRank: -1}, Samples: e.simSamples(100, 2, 9)}); err != nil {
			t.Fatal(err)
		}
	}
	e.now = e.now.Add(2*time.Hour - 5*time.Minute) // only the last 5 minutes are still within 2 h
	res, err := e.svc.Series(t.Context(), gpu.SeriesQuery{Selection: gpu.Selection{Nodes: []string{"b"}}, FromMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GPUs) != 2 || res.GPUs[0].Node != "b" {
		t.Fatalf("selection: %+v", res.GPUs)
	}
	if n := len(res.GPUs[0].Series[0]); n > 31 || n < 29 {
		t.Fatalf("%d points left after the window moved, want the last 5 minutes", n)
	}
	for name, q := range map[string]gpu.SeriesQuery{
		"ErrPoints":    {Points: 1 << 20},
		"ErrNegative":  {FromMs: -5},
		"ErrBadNode":   {Selection: gpu.Selection{Nodes: []string{""}}},
		"ErrBadRunID":  {Selection: gpu.Selection{RunID: "a b"}},
		"ErrNegPoints": {Points: -1},
	} {
		if _, err := e.svc.Series(t.Context(), q); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSystemMetrics(t *testing.T) {
	e := mustEnv(t)
	start := e.now.Add(-time.Hour).UnixMilli()
	run, err := e.tr.CreateRun(t.Context(), tracking.CreateRunRequest{StartTimeMs: start})
	if err != nil {
		t.Fatal(err)
	}
	samples := e.simSamples(6, 2, 4)
	samples[5].GPUs[1].Err = "lost"
	b := &gpu.Batch{Labels: gpu.Labels{Node: "worker-1", RunID: run.Info.RunID, NodeRank: 1, NumNodes: 2}, Samples: samples}
	for range 2 { // a resend logs nothing new
		res, err := e.svc.Ingest(t.Context(), b)
		if err != nil || res.SystemMetricsErr != "" {
			t.Fatalf("ingest: %+v %v", res, err)
		}
	}
	key := func(gpuIndex int, name string) string {
		return "system/node_1/gpu_" + string(rune('0'+gpuIndex)) + "_" + name
	}
	page, err := e.tr.MetricHistory(t.Context(), run.Info.RunID, key(0, "memory_usage_megabytes"), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Points) != 6 {
		t.Fatalf("%d points of memory_usage_megabytes, want 6 (once each)", len(page.Points))
	}
	for i, p := range page.Points {
		s := samples[i]
		wantStep := (s.TimestampMs - start) / 1000
		want := math.Round(s.GPUs[0].Values[gpu.FieldMemUsed]/1e6*10) / 10
		if p.Step != wantStep || p.TimestampMs != s.TimestampMs || p.Value != want {
			t.Fatalf("point %d = %+v, want step %d ts %d value %v", i, p.Point, wantStep, s.TimestampMs, want)
		}
	}
	r, err := e.tr.GetRun(t.Context(), run.Info.RunID)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, m := range r.Data.Metrics {
		have[m.Key] = m.Value
	}
	last := samples[5].GPUs[0].Values
	for name, v := range map[string]float64{
		"utilization_percentage":  last[gpu.FieldUtil],
		"memory_usage_percentage": last[gpu.FieldMemUsed] / last[gpu.FieldMemTotal] * 100,
		"power_usage_watts":       last[gpu.FieldPower],
		"power_usage_percentage":  last[gpu.FieldPower] / last[gpu.FieldPowerLimit] * 100,
		"temperature_celsius":     last[gpu.FieldTemp],
	} {
		if got, ok := have[key(0, name)]; !ok || got != math.Round(v*10)/10 {
			t.Errorf("%s = %v (present %v), want %v", key(0, name), got, ok, math.Round(v*10)/10)
		}
	}
	if len(have) != 12 {
		t.Errorf("%d system metric keys, want 6 per GPU for 2 GPUs: %v", len(have), have)
	}

	// An unknown run keeps the samples and says why nothing was logged.
	b.RunID = "0123456789abcdef0123456789abcdef"
	b.Samples = e.simSamples(1, 1, 5)
	res, err := e.svc.Ingest(t.Context(), b)
	if err != nil || res.Accepted != 1 || !strings.Contains(res.SystemMetricsErr, "not found") {
		t.Fatalf("unknown run: %+v %v", res, err)
	}
}

func TestSystemMetricPrefix(t *testing.T) {
	tests := map[string]struct {
		l    gpu.Labels
		want string
	}{
		"SingleNode":        {gpu.Labels{Node: "h", NodeRank: -1}, "system/"},
		"RankZeroUnknownN":  {gpu.Labels{Node: "h", NodeRank: 0}, "system/"},
		"RankZeroOfTwo":     {gpu.Labels{Node: "h", NodeRank: 0, NumNodes: 2}, "system/node_0/"},
		"RankOneUnknownN":   {gpu.Labels{Node: "h", NodeRank: 1}, "system/node_1/"},
		"MultiNodeNoRank":   {gpu.Labels{Node: "gpu-07.cluster", NodeRank: -1, NumNodes: 4}, "system/gpu-07.cluster/"},
		"NodeNameSanitised": {gpu.Labels{Node: "a b/c", NodeRank: -1, NumNodes: 4}, "system/a_b_c/"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := gpu.SystemMetricPrefix(tc.l); got != tc.want {
				t.Fatalf("prefix %q, want %q", got, tc.want)
			}
			if err := tracking.ValidateKey("metric", tc.want+"gpu_0_utilization_percentage", 250); err != nil {
				t.Fatalf("not a valid MLflow key: %v", err)
			}
		})
	}
}

// BenchmarkSeries measures the pane's query: 64 GPUs (8 nodes of 8) over
// two hours at 10 s, downsampled to 360 points, three fields.
//
//	go test -run '^$' -bench Series -benchmem ./internal/gpu/
func BenchmarkSeries(b *testing.B) {
	e := mustEnv(b)
	rng := rand.New(rand.NewPCG(1, 2))
	for node := range 8 {
		samples := e.simSamples(720, 8, rng.Uint64())
		for i := 0; i < 720; i += 100 {
			if _, err := e.svc.Ingest(b.Context(), &gpu.Batch{Labels: gpu.Labels{Node: "node-" + string(rune('a'+node)), NodeRank: -1}, Samples: samples[i:min(i+100, 720)]}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.svc.Series(b.Context(), gpu.SeriesQuery{Points: 360})
		if err != nil || len(res.GPUs) != 64 {
			b.Fatal(len(res.GPUs), err)
		}
	}
}
