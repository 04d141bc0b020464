package gpu_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpu/gputest"
)

// runAgent runs an agent inside the current synctest bubble for d of fake
// time and returns it after it stopped.
func runAgent(t *testing.T, opts gpu.AgentOptions, d time.Duration) *gpu.Agent {
	t.Helper()
	a, err := gpu.NewAgent(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	time.Sleep(d)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
	return a
}

// expectEvery checks that ts holds every multiple of 10 s from start to
// end exactly once, in increasing order.
func expectEvery(t *testing.T, ts []int64, start, end time.Time) {
	t.Helper()
	want := int(end.Sub(start)/(10*time.Second)) + 1
	if len(ts) != want {
		t.Fatalf("%d samples delivered, want %d", len(ts), want)
	}
	for i, v := range ts {
		if exp := start.Add(time.Duration(i) * 10 * time.Second).UnixMilli(); v != exp {
			t.Fatalf("sample %d at %d, want %d (ordered, each once)", i, v, exp)
		}
	}
}

// TestAgentSpoolsWhileServerIsDown simulates 30 minutes of sampling in
// which the server is unreachable from minute 5 to minute 15: the agent
// spools, then catches up, and the server sees every sample once, in
// order.
func TestAgentSpoolsWhileServerIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		down := func() bool {
			el := time.Since(start)
			return el >= 5*time.Minute && el < 15*time.Minute
		}
		var failures atomic.Int64
		sink := &gputest.Sink{Fail: func(*gpu.Batch) error {
			if down() {
				failures.Add(1)
				return errs.E(errs.Unavailable, "connection refused")
			}
			return nil
		}}
		var logs bytes.Buffer
		a := runAgent(t, gpu.AgentOptions{
			Source: gpu.NewSim(4, 1, nil), Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Logger: newLogger(&logs),
		}, 30*time.Minute+time.Second)
		expectEvery(t, sink.Timestamps(), start, start.Add(30*time.Minute))
		if f := failures.Load(); f < 55 || f > 65 {
			t.Errorf("%d failed sends during 10 minutes of outage, want one per tick", f)
		}
		for _, b := range sink.Batches() {
			if len(b.Samples) > 20 {
				t.Errorf("batch of %d samples, above MaxBatchSamples", len(b.Samples))
			}
			for _, s := range b.Samples {
				if len(s.GPUs) != 4 {
					t.Fatalf("sample with %d GPUs", len(s.GPUs))
				}
			}
		}
		st := a.Stats()
		if st.Spooled != 0 || st.Sent != 181 || st.Samples != 181 {
			t.Errorf("stats %+v", st)
		}
		if n := strings.Count(logs.String(), "spooling them"); n != 1 {
			t.Errorf("the outage was logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

// TestAgentKeepsSamplesOfUnauthenticatedAgent: a server refusing the
// agent's credentials does not make it drop samples; once the credentials
// are accepted, everything arrives.
func TestAgentKeepsSamplesOfUnauthenticatedAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		sink := &gputest.Sink{Fail: func(*gpu.Batch) error {
			if time.Since(start) < 3*time.Minute {
				return errs.E(errs.Unauthenticated, "authentication required")
			}
			return nil
		}}
		var logs bytes.Buffer
		runAgent(t, gpu.AgentOptions{
			Source: gpu.NewSim(2, 1, nil), Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Logger: newLogger(&logs),
		}, 5*time.Minute+time.Second)
		expectEvery(t, sink.Timestamps(), start, start.Add(5*time.Minute))
		if !strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("refused credentials were not logged as an error:\n%s", logs.String())
		}
	})
}

// TestAgentLogsRefusalAfterOutage: a server that comes back from an outage
// refusing the agent's credentials (restarted with sign-in on) is logged
// once, as an error that says what to do, and not again at every tick.
func TestAgentLogsRefusalAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		sink := &gputest.Sink{Fail: func(*gpu.Batch) error {
			switch el := time.Since(start); {
			case el < 2*time.Minute:
				return errs.E(errs.Unavailable, "connection refused")
			case el < 6*time.Minute:
				return errs.E(errs.Unauthenticated, "authentication required")
			}
			return nil
		}}
		var logs bytes.Buffer
		runAgent(t, gpu.AgentOptions{
			Source: gpu.NewSim(1, 1, nil), Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Logger: newLogger(&logs),
		}, 8*time.Minute+time.Second)
		expectEvery(t, sink.Timestamps(), start, start.Add(8*time.Minute))
		out := logs.String()
		if n := strings.Count(out, "refused the agent's credentials"); n != 1 {
			t.Errorf("the refusal was logged %d times, want once:\n%s", n, out)
		}
		if !strings.Contains(out, "MLFLOW_TRACKING_TOKEN") || !strings.Contains(out, "level=ERROR") {
			t.Errorf("the refusal does not say what to do, as an error:\n%s", out)
		}
		if n := strings.Count(out, "spooling them until the server takes them"); n != 1 {
			t.Errorf("the outage was logged %d times, want once:\n%s", n, out)
		}
	})
}

// TestAgentDropsOnlyRefusedSamples: when the server refuses a batch, the
// agent sends its samples one by one and drops only those refused.
func TestAgentDropsOnlyRefusedSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		bad := start.Add(2 * time.Minute).UnixMilli()
		sink := &gputest.Sink{Fail: func(b *gpu.Batch) error {
			if time.Since(start) < 4*time.Minute {
				return errs.E(errs.Unavailable, "down")
			}
			for _, s := range b.Samples {
				if s.TimestampMs == bad {
					return errs.E(errs.Invalid, "bad sample")
				}
			}
			return nil
		}}
		runAgent(t, gpu.AgentOptions{
			Source: gpu.NewSim(1, 1, nil), Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1},
		}, 6*time.Minute+time.Second)
		ts := sink.Timestamps()
		if len(ts) != 36 {
			t.Fatalf("%d samples delivered, want 37 - 1", len(ts))
		}
		for i, v := range ts {
			if v == bad || (i > 0 && v <= ts[i-1]) {
				t.Fatalf("delivered %v", ts)
			}
		}
	})
}

// TestAgentGPUDisappears: one GPU fails mid-job; the others' series go on
// without a gap, and the failing GPU is reported with its error.
func TestAgentGPUDisappears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		sim := gpu.NewSim(4, 3, nil)
		go func() {
			time.Sleep(time.Minute + 5*time.Second)
			sim.Fail(2, "nvml: ERROR_GPU_IS_LOST")
		}()
		sink := &gputest.Sink{}
		runAgent(t, gpu.AgentOptions{
			Source: sim, Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1},
		}, 3*time.Minute+time.Second)
		var n int
		for _, b := range sink.Batches() {
			for _, s := range b.Samples {
				n++
				if len(s.GPUs) != 4 {
					t.Fatalf("sample with %d GPUs", len(s.GPUs))
				}
				lost := s.TimestampMs > start.Add(time.Minute+5*time.Second).UnixMilli()
				for _, g := range s.GPUs {
					switch {
					case g.Index == 2 && lost:
						if g.Err == "" || !gpu.IsMissing(g.Values[gpu.FieldUtil]) {
							t.Fatalf("lost GPU reported as %+v", g)
						}
					case g.Err != "" || gpu.IsMissing(g.Values[gpu.FieldUtil]):
						t.Fatalf("GPU %d has a gap at %d: %+v", g.Index, s.TimestampMs, g)
					}
				}
			}
		}
		if n != 19 {
			t.Fatalf("%d samples, want 19", n)
		}
	})
}

// slowSource takes its time to answer: delay(n) for the n-th sample.
type slowSource struct {
	gpu.Source
	n     int
	delay func(n int) time.Duration
}

func (s *slowSource) Sample(ctx context.Context) (*gpu.Sample, error) {
	s.n++
	time.Sleep(s.delay(s.n))
	return s.Source.Sample(ctx)
}

// TestAgentStampsGridInstants: an agent started between two instants of
// its interval's grid takes its first sample at the next one, and stamps
// every sample with its instant, whatever the source's delay; an instant
// missed because the source took longer than the interval is skipped, and
// sampling goes on on the grid.
func TestAgentStampsGridInstants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(1690 * time.Millisecond) // the start seen in issue 20: 1,690 ms past a 2 s grid
		start := time.Now()
		src := &slowSource{Source: gpu.NewSim(2, 1, nil), delay: func(n int) time.Duration {
			if n == 4 {
				return 5 * time.Second // the sample of 8 s ends at 13 s: 10 s and 12 s are missed
			}
			return time.Duration(n) * 37 * time.Millisecond
		}}
		sink := &gputest.Sink{}
		runAgent(t, gpu.AgentOptions{
			Source: src, Sink: sink, Spool: MustOpenSpool(t, t.TempDir(), gpu.SpoolOptions{}),
			Labels: gpu.Labels{Node: "n1", NodeRank: -1}, Interval: 2 * time.Second,
		}, 16*time.Second)
		grid := start.Truncate(2 * time.Second).UnixMilli()
		var got []int64
		for _, ts := range sink.Timestamps() {
			got = append(got, ts-grid)
		}
		want := []int64{2000, 4000, 6000, 8000, 14000, 16000}
		if !slices.Equal(got, want) {
			t.Fatalf("samples at %v ms past the grid instant before the start, want %v", got, want)
		}
	})
}

// flakySource fails as a whole after a few samples.
type flakySource struct {
	gpu.Source
	n, failAfter int
}

func (f *flakySource) Sample(ctx context.Context) (*gpu.Sample, error) {
	f.n++
	if f.n > f.failAfter {
		return nil, errors.New("nvidia-smi did not answer within 5s")
	}
	return f.Source.Sample(ctx)
}

func TestAgentReportsKnownGPUsWhenSourceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, err := gpu.NewAgent(gpu.AgentOptions{Source: &flakySource{Source: gpu.NewSim(2, 1, nil), failAfter: 1}, Labels: gpu.Labels{Node: "n"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Take(t.Context(), time.Now()); err != nil {
			t.Fatal(err)
		}
		s, err := a.Take(t.Context(), time.Now())
		if err != nil || len(s.GPUs) != 2 {
			t.Fatalf("after the source failed: %+v %v", s, err)
		}
		for _, g := range s.GPUs {
			if !strings.Contains(g.Err, "did not answer") || g.UUID == "" {
				t.Fatalf("GPU %+v, want the source's error", g)
			}
		}
	})
}

// expositionLine matches one series line; modelName is on the DCGM
// series only, kind on sextant_gpu_health_events_total.
var expositionLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{gpu="(\d+)",UUID="([^"]*)",(?:modelName="([^"]*)",)?Hostname="((?:[^"\\]|\\.)*)"(?:,kind="([a-z]+)")?\})? (\S+)$`)

func TestAgentMetrics(t *testing.T) {
	sim := gpu.NewSim(3, 5, func() time.Time { return time.Unix(1_800_000_000, 0) })
	sim.Fail(1, "GPU is lost")
	a, err := gpu.NewAgent(gpu.AgentOptions{Source: sim, Labels: gpu.Labels{Node: `node "7"`}})
	if err != nil {
		t.Fatal(err)
	}
	smp, err := a.Take(t.Context(), time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.WriteMetrics(&buf); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		m := expositionLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not an exposition line: %q", line)
		}
		if m[2] != "" && m[6] != `node \"7\"` {
			t.Fatalf("Hostname label not escaped: %q", line)
		}
		if dcgm := strings.HasPrefix(m[1], "DCGM_"); m[2] != "" && dcgm != (m[5] != "") {
			t.Fatalf("modelName belongs on the DCGM series, and only there: %q", line)
		}
		v, err := strconv.ParseFloat(m[8], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		key := m[1] + "/" + m[3]
		if m[7] != "" {
			key += "/" + m[7]
		}
		got[key] = v
	}
	g0 := smp.GPUs[0].Values
	want := map[string]float64{
		"DCGM_FI_DEV_GPU_UTIL/0":       g0[gpu.FieldUtil],
		"DCGM_FI_DEV_MEM_COPY_UTIL/0":  g0[gpu.FieldMemUtil],
		"DCGM_FI_DEV_FB_USED/0":        math.Round(g0[gpu.FieldMemUsed] / (1 << 20)),
		"DCGM_FI_DEV_FB_FREE/0":        math.Round((g0[gpu.FieldMemTotal] - g0[gpu.FieldMemUsed]) / (1 << 20)),
		"DCGM_FI_DEV_GPU_TEMP/0":       g0[gpu.FieldTemp],
		"DCGM_FI_DEV_POWER_USAGE/0":    g0[gpu.FieldPower],
		"DCGM_FI_DEV_SM_CLOCK/0":       g0[gpu.FieldSMClock],
		"sextant_gpu_up/0":             1,
		"sextant_gpu_up/1":             0,
		"sextant_agent_samples_total/": 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if _, ok := got["DCGM_FI_DEV_GPU_UTIL/1"]; ok {
		t.Error("the failed GPU has a utilisation line")
	}
	if _, ok := got["DCGM_FI_DEV_GPU_UTIL/2"]; !ok {
		t.Error("GPU 2 has no utilisation line")
	}
}

func TestNewAgentNeedsSourceNodeAndSpool(t *testing.T) {
	src := gpu.NewSim(1, 1, nil)
	for name, opts := range map[string]gpu.AgentOptions{
		"ErrNoSource": {Labels: gpu.Labels{Node: "n"}},
		"ErrNoNode":   {Source: src},
		"ErrNoSpool":  {Source: src, Labels: gpu.Labels{Node: "n"}, Sink: &gputest.Sink{}},
	} {
		if _, err := gpu.NewAgent(opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func newLogger(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestAgentHealthMetrics: the agent counts the health events of each GPU
// (injected into the simulated source) and reports the last Xid and the
// throttle reasons under dcgm-exporter's names.
func TestAgentHealthMetrics(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	sim := gpu.NewSim(3, 5, func() time.Time { return at })
	a, err := gpu.NewAgent(gpu.AgentOptions{Source: sim, Labels: gpu.Labels{Node: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	take := func() {
		at = at.Add(10 * time.Second)
		if _, err := a.Take(t.Context(), at); err != nil {
			t.Fatal(err)
		}
	}
	take()
	sim.InjectXid(0, 79)
	sim.SetThrottle(1, gpu.ThrottleHwThermal)
	sim.AddECC(1, 0, 2)
	take()
	sim.Fail(2, "GPU has fallen off the bus")
	take()
	take()
	var buf bytes.Buffer
	if err := a.WriteMetrics(&buf); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if m := expositionLine.FindStringSubmatch(line); m != nil {
			key := m[1] + "/" + m[3]
			if m[7] != "" {
				key += "/" + m[7]
			}
			got[key] = m[8]
		}
	}
	for k, want := range map[string]string{
		"DCGM_FI_DEV_XID_ERRORS/0": "79", "DCGM_FI_DEV_XID_ERRORS/1": "0",
		"sextant_gpu_health_events_total/0/xid": "1", "sextant_gpu_health_events_total/0/throttle": "0",
		"sextant_gpu_health_events_total/1/throttle": "1", "sextant_gpu_health_events_total/1/ecc": "1",
		"sextant_gpu_health_events_total/2/lost": "1", "sextant_gpu_health_events_total/2/xid": "0",
		"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL/1": "2", "DCGM_FI_DEV_MEM_CLOCK/0": "2619",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %s", k, got[k], want)
		}
	}
	if r, _ := strconv.ParseUint(got["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS/1"], 10, 64); gpu.ThrottleReason(r)&gpu.ThrottleHwThermal == 0 {
		t.Errorf("throttle reasons of GPU 1: %q", got["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS/1"])
	}
}
