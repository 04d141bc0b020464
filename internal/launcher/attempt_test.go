package launcher_test

import (
	"context"
	"testing"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/launcher"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// gpuSampler is a Sampler that reports n GPUs at once.
type gpuSampler struct{ n int }

func (s gpuSampler) Start(_ context.Context, job launcher.SampledJob) (func(context.Context) error, error) {
	if job.OnGPUs != nil {
		job.OnGPUs("node-a", s.n, "NVIDIA H100 80GB HBM3")
	}
	return func(context.Context) error { return nil }, nil
}

// TestAttemptsRecorded: each launch records one attempt on the run, with
// the GPUs its sampler saw and how it ended, a killed one included; the
// run's GPU-hours are the sum of both.
func TestAttemptsRecorded(t *testing.T) {
	f := newFakeServer()
	first := launch(t, f, sh(`sleep 0.1; kill -9 $$`), withEvents(f, func(o *launcher.Options) { o.Sampler = gpuSampler{n: 2} }))
	if first.res.Status != tracking.StatusKilled {
		t.Fatalf("the first attempt ended %+v", first.res)
	}
	second := launch(t, f, sh(`sleep 0.1`), withEvents(f, func(o *launcher.Options) {
		o.Sampler, o.Resume = gpuSampler{n: 2}, first.res.RunID
	}))
	if second.res.Status != tracking.StatusFinished {
		t.Fatalf("the second attempt ended %+v", second.res)
	}
	evs, err := f.events.All(context.Background(), runevents.Query{RunID: first.res.RunID, Kinds: []runevents.Kind{runevents.KindAttempt}})
	if err != nil || len(evs) != 2 {
		t.Fatalf("attempts %+v %v", evs, err)
	}
	want := 0.0
	for i, st := range []string{"KILLED", "FINISHED"} {
		e := evs[i]
		if e.Open || e.EndMs < e.TimeMs || e.Node != "node-a" || e.Attrs[gpuhours.AttrGPUs] != "2" || e.Attrs[gpuhours.AttrStatus] != st {
			t.Errorf("attempt %d: %+v, want closed on node-a with 2 GPUs, %s", i, e, st)
		}
		want += 2 * float64(e.EndMs-e.TimeMs) / 3_600_000
	}
	if evs[0].EndMs > evs[1].TimeMs {
		t.Errorf("the attempts overlap: %+v", evs)
	}
	u := gpuhours.Compute(gpuhours.Run{Attempts: evs}, nil, 0)
	if u.GPUHours != want || want == 0 {
		t.Errorf("GPU-hours %v, want %v", u.GPUHours, want)
	}
}
