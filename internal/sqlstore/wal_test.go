package sqlstore

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// TestWALStaysBoundedUnderContinuousWrites writes without pause, as an
// ingesting server does, so that background checkpoints never find the
// WAL fully copied at a moment when no write is under way: the WAL only
// starts over from its head when the checkpoint loop pauses the writer for
// it. Without that its file only grows; with it, the file is cut back to
// journal_size_limit (the restart threshold, here 1 MiB) after each
// restart, while every acknowledged point stays.
func TestWALStaysBoundedUnderContinuousWrites(t *testing.T) {
	old := walRestartBytes
	walRestartBytes = 1 << 20
	t.Cleanup(func() { walRestartBytes = old })

	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sextant.db")
	s, err := Open(ctx, path, Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	svc := tracking.NewService(s.Tracking(), tracking.Options{})
	if err := svc.Init(ctx); err != nil {
		t.Fatal(err)
	}
	exp, err := svc.CreateExperiment(ctx, "/Shared/wal", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 4
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		acked   [writers]int64
		runs    [writers]string
		walMax  atomic.Int64
		written atomic.Int64
		shrunk  int // times the WAL file was seen smaller than before
		last    int64
	)
	for w := range writers {
		r, err := svc.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: exp})
		if err != nil {
			t.Fatal(err)
		}
		runs[w] = r.Info.RunID
	}
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				b := tracking.Batch{}
				for i := range int64(1000) {
					st := acked[w] + i
					b.Metrics = append(b.Metrics, tracking.Metric{Key: "loss", Point: metrics.Point{Step: st, TimestampMs: st, Value: rng.Float64()}})
				}
				if err := svc.LogBatch(ctx, runs[w], b); err != nil {
					t.Error(err)
					return
				}
				acked[w] += 1000
				written.Add(8000)
			}
		})
	}
	// The writers run for an amount of work, not for a fixed time: on a
	// busy machine 4 s of writes were once too few to show anything. They
	// stop once the WAL file was seen cut back twice after at least
	// minWork bytes, or fail the test at maxWork bytes without that.
	const minWork, maxWork = 8 << 20, 96 << 20
	for deadline := time.Now().Add(10 * time.Minute); written.Load() < minWork || shrunk < 2; {
		if written.Load() >= maxWork || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
		if fi, err := os.Stat(path + "-wal"); err == nil {
			walMax.Store(max(walMax.Load(), fi.Size()))
			if fi.Size() < last {
				shrunk++
			}
			last = fi.Size()
		}
	}
	stop.Store(true)
	wg.Wait()
	if written.Load() < minWork {
		t.Fatalf("only %d bytes of values written in 10 minutes", written.Load())
	}
	if shrunk < 2 {
		t.Errorf("the WAL file was cut back %d times in %d bytes of values written (largest %d bytes): it does not restart at %d", shrunk, written.Load(), walMax.Load(), walRestartBytes)
	}
	for w, id := range runs {
		var n int64
		for tok := ""; ; {
			page, err := svc.MetricHistory(ctx, id, "loss", 0, tok)
			if err != nil {
				t.Fatal(err)
			}
			n += int64(len(page.Points))
			if tok = page.NextPageToken; tok == "" {
				break
			}
		}
		if n != acked[w] {
			t.Fatalf("run %d: %d points stored of %d acknowledged", w, n, acked[w])
		}
	}
	t.Logf("%d bytes of values written, WAL file at most %d bytes, cut back %d times", written.Load(), walMax.Load(), shrunk)
}
