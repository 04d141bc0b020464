package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// patientStore is a store whose writer holds patient writes for wait.
func patientStore(t *testing.T, wait time.Duration) (*Store, *tracking.Service, string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), Options{Synchronous: "NORMAL", CompactAfter: 1 << 30, PatientWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	tr := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	return s, tr, run.Info.RunID
}

func onePoint(key string) tracking.Batch {
	return tracking.Batch{Metrics: []tracking.Metric{{Key: key, Point: metrics.Point{Step: 1, TimestampMs: 1, Value: 1}}}}
}

// TestPatientWritesShareACommit: a patient write waits for the next one,
// submitted within PatientWait, and both are committed in one group, each
// stored when its call returns; another write ends the wait at once.
func TestPatientWritesShareACommit(t *testing.T) {
	const wait = 10 * time.Second
	s, tr, runID := patientStore(t, wait)
	ctx := context.Background()
	patient := tracking.Patient(ctx)

	for _, second := range []struct {
		name string
		ctx  context.Context
	}{{"patient", patient}, {"other", ctx}} {
		t.Run(second.name, func(t *testing.T) {
			g0 := s.w.groups.Load()
			start := time.Now()
			first := make(chan error, 1)
			go func() { first <- tr.LogBatch(patient, runID, onePoint("a_"+second.name)) }()
			// The second write goes once the writer holds the first (not
			// after a time: on a busy machine the first may come later).
			for deadline := time.Now().Add(wait / 2); !s.w.lingering.Load(); {
				if time.Now().After(deadline) {
					t.Fatal("the writer did not hold a lone patient write")
				}
				time.Sleep(time.Millisecond)
			}
			if err := tr.LogBatch(second.ctx, runID, onePoint("b_"+second.name)); err != nil {
				t.Fatal(err)
			}
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if n := s.w.groups.Load() - g0; n != 1 {
				t.Errorf("the two writes took %d groups, want 1", n)
			}
			if second.ctx == ctx && took > wait*3/4 {
				t.Errorf("a write that is not patient did not end the wait: %v", took)
			}
			for _, k := range []string{"a_" + second.name, "b_" + second.name} {
				h, err := tr.MetricHistory(ctx, runID, k, 0, "")
				if err != nil || len(h.Points) != 1 {
					t.Fatalf("%s: %v, %+v", k, err, h)
				}
			}
		})
	}
}

// TestPatientWaitIsBounded: a patient write alone is committed about
// PatientWait after it was submitted, not later.
func TestPatientWaitIsBounded(t *testing.T) {
	const wait = 100 * time.Millisecond
	_, tr, runID := patientStore(t, wait)
	start := time.Now()
	if err := tr.LogBatch(tracking.Patient(context.Background()), runID, onePoint("a")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < wait || took > 50*wait { // 5 s: a busy machine's commit, not a wait that forgot to end
		t.Fatalf("a lone patient write took %v, want about %v", took, wait)
	}
}
