package progress_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/progress"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
)

func TestKeys(t *testing.T) {
	f := func(key string, rank int, field string, ok bool) {
		t.Helper()
		r, fl, o := progress.ParseKey(key)
		if o != ok || ok && (r != rank || fl != field) {
			t.Errorf("ParseKey(%q) = %d, %q, %v", key, r, fl, o)
		}
	}
	f(progress.Key(7, progress.FieldStepTime), 7, "step_time_s", true)
	f("sextant/progress/rank_0/tokens", 0, "tokens", true)
	f("sextant/progress/rank_07/tokens", 0, "", false)
	f("sextant/progress/rank_-1/tokens", 0, "", false)
	f("sextant/progress/rank_x/tokens", 0, "", false)
	f("sextant/progress/rank_3", 0, "", false)
	f("loss", 0, "", false)
}

// TestRecentStepTimes: the watcher's reading keeps each rank's step times
// from the time asked on, with the rank's node and GPU.
func TestRecentStepTimes(t *testing.T) {
	ctx := t.Context()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", StartTimeMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := run.Info.RunID
	t0 := int64(1_800_000_000_000)
	svc := progress.NewService(tr, func() time.Time { return time.UnixMilli(t0 + 10_000) })
	var reps []progress.Report
	for step := range 10 {
		for rank := range 2 {
			reps = append(reps, progress.Report{Rank: rank, GPU: rank, Step: int64(step), TimeMs: t0 + int64(step)*1000,
				StepTimeS: float64(1+rank) + float64(step)/100, DataWaitS: -1, Samples: 8, Tokens: -1})
		}
	}
	if err := svc.Ingest(ctx, progress.Batch{RunID: id, Node: "n1", Reports: reps}); err != nil {
		t.Fatal(err)
	}
	got, err := svc.RecentStepTimes(ctx, id, t0+7000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d ranks", len(got))
	}
	for rank, r := range got {
		slices.Sort(r.Seconds)
		want := []float64{float64(1+rank) + 0.07, float64(1+rank) + 0.08, float64(1+rank) + 0.09}
		if r.Rank != rank || r.Node != "n1" || r.GPU != rank || !slices.Equal(r.Seconds, want) {
			t.Errorf("rank %d: %+v, want seconds %v", rank, r, want)
		}
	}
	// Interleaved ranks' reports (sorted by rank before the store sees
	// them) are all stored, under their own rank's keys, and only the
	// fields reported.
	for rank := range 2 {
		h, err := tr.MetricHistory(ctx, id, progress.Key(rank, progress.FieldSamples), 0, "")
		if err != nil || len(h.Points) != 10 {
			t.Fatalf("rank %d samples: %v, %d points", rank, err, len(h.Points))
		}
		for i, p := range h.Points {
			if p.Step != int64(i) || p.Value != 8 || p.TimestampMs != t0+int64(i)*1000 {
				t.Fatalf("rank %d samples point %d: %+v", rank, i, p)
			}
		}
		if h, err := tr.MetricHistory(ctx, id, progress.Key(rank, progress.FieldDataWait), 0, ""); err == nil && len(h.Points) > 0 {
			t.Fatalf("rank %d: data_wait_s stored though not reported", rank)
		}
	}
	// A run without progress has no ranks.
	other, err := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", StartTimeMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := svc.RecentStepTimes(ctx, other.Info.RunID, 0); err != nil || len(got) != 0 {
		t.Fatalf("run without progress: %v, %v", got, err)
	}
}
