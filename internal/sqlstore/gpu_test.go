package sqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/pgtest"
	"github.com/sextant/sextant/internal/sqlstore"
)

// MustOpenGPU opens the GPU part of a fresh store of the backend, without
// background pruning or commit delay, and closes it when the test ends.
func MustOpenGPU(tb testing.TB, open func(testing.TB, sqlstore.Options) *sqlstore.Store) *sqlstore.GPUStore {
	tb.Helper()
	s := open(tb, sqlstore.Options{Synchronous: "NORMAL"})
	g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	tb.Cleanup(func() { g.Close(context.Background()) })
	return g
}

// TestGPUStore runs the GPU store tests against every backend.
func TestGPUStore(t *testing.T) {
	tests := map[string]func(*testing.T, func(testing.TB, sqlstore.Options) *sqlstore.Store){
		"AppendIsIdempotentAndMerges": testGPUStoreAppendIsIdempotentAndMerges,
		"Selections":                  testGPUStoreSelections,
		"RunLabelsWinAtOneInstant":    testGPUStoreRunLabelsWinAtOneInstant,
		"Prune":                       testGPUStorePrune,
		"ConcurrentIngestAndPrune":    testGPUStoreConcurrentIngestAndPrune,
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for name, test := range tests {
				t.Run(name, func(t *testing.T) { test(t, b.open) })
			}
		})
	}
}

func gpuSample(ts int64, uuids ...string) gpu.Sample {
	s := gpu.Sample{TimestampMs: ts}
	for i, u := range uuids {
		g := gpu.NewGPU(i, u, "H100")
		g.Values[gpu.FieldUtil] = float64(ts%100 + int64(i))
		g.Values[gpu.FieldMemUsed] = float64(ts * 1000)
		s.GPUs = append(s.GPUs, g)
		s.Processes = append(s.Processes, gpu.Process{GPU: i, PID: 10 + i, Name: "python", MemUsedBytes: 1 << 20})
	}
	return s
}

func mustAppend(tb testing.TB, g *sqlstore.GPUStore, node, run string, samples ...gpu.Sample) {
	tb.Helper()
	if err := g.AppendSamples(context.Background(), &gpu.Batch{Labels: gpu.Labels{Node: node, RunID: run, NodeRank: -1}, Samples: samples}); err != nil {
		tb.Fatalf("append: %v", err)
	}
}

type scanned struct {
	node string
	ts   int64
	run  string
	gpus []string
}

func mustScan(tb testing.TB, g *sqlstore.GPUStore, q gpu.Selection, from, to int64) []scanned {
	tb.Helper()
	var out []scanned
	err := g.Scan(context.Background(), q, from, to, func(ns *gpu.NodeSample) error {
		s := scanned{node: ns.Node, ts: ns.TimestampMs, run: ns.RunID}
		for _, x := range ns.GPUs {
			s.gpus = append(s.gpus, x.UUID)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func testGPUStoreAppendIsIdempotentAndMerges(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	g := MustOpenGPU(t, open)
	mustAppend(t, g, "n1", "", gpuSample(1000, "GPU-a", "GPU-b"), gpuSample(2000, "GPU-a", "GPU-b"))
	// A resend changes nothing.
	mustAppend(t, g, "n1", "", gpuSample(2000, "GPU-a", "GPU-b"), gpuSample(1000, "GPU-a", "GPU-b"))
	// The same (node, ts) with a GPU the stored sample lacks adds it.
	extra := gpuSample(2000, "GPU-a", "GPU-b", "GPU-c")
	extra.GPUs = extra.GPUs[2:]
	extra.Processes = extra.Processes[2:]
	mustAppend(t, g, "n1", "", extra)
	got := mustScan(t, g, gpu.Selection{}, 0, 1<<62)
	if len(got) != 2 || got[0].ts != 1000 || got[1].ts != 2000 {
		t.Fatalf("scan %+v, want the two samples once each", got)
	}
	if fmt.Sprint(got[1].gpus) != "[GPU-a GPU-b GPU-c]" || fmt.Sprint(got[0].gpus) != "[GPU-a GPU-b]" {
		t.Fatalf("merged GPUs: %+v", got)
	}
	latest, err := g.Latest(t.Context(), gpu.Selection{})
	if err != nil || len(latest) != 1 || latest[0].TimestampMs != 2000 || len(latest[0].GPUs) != 3 || len(latest[0].Processes) != 3 {
		t.Fatalf("latest %+v %v", latest, err)
	}
	// An older sample arriving late does not replace the latest.
	mustAppend(t, g, "n1", "", gpuSample(500, "GPU-a"))
	latest, _ = g.Latest(t.Context(), gpu.Selection{Nodes: []string{"n1"}})
	if latest[0].TimestampMs != 2000 {
		t.Fatalf("latest moved back to %d", latest[0].TimestampMs)
	}
}

func testGPUStoreSelections(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	g := MustOpenGPU(t, open)
	for ts := int64(1); ts <= 10; ts++ {
		run := "run1"
		if ts > 6 {
			run = "run2"
		}
		mustAppend(t, g, "n2", run, gpuSample(ts*1000, "GPU-x"))
		mustAppend(t, g, "n1", "run1", gpuSample(ts*1000, "GPU-y"))
		mustAppend(t, g, "n3", "", gpuSample(ts*1000, "GPU-z"))
	}
	tests := map[string]struct {
		q        gpu.Selection
		from, to int64
		want     int
		nodes    string
	}{
		"All":           {gpu.Selection{}, 0, 1 << 62, 30, "n1,n2,n3"},
		"Range":         {gpu.Selection{}, 3000, 5000, 6, "n1,n2,n3"},
		"Nodes":         {gpu.Selection{Nodes: []string{"n3", "n1"}}, 0, 1 << 62, 20, "n1,n3"},
		"Run":           {gpu.Selection{RunID: "run1"}, 0, 1 << 62, 16, "n1,n2"},
		"RunAndNode":    {gpu.Selection{RunID: "run2", Nodes: []string{"n2"}}, 0, 1 << 62, 4, "n2"},
		"UnknownNode":   {gpu.Selection{Nodes: []string{"nope"}}, 0, 1 << 62, 0, ""},
		"RunOutOfRange": {gpu.Selection{RunID: "run2"}, 0, 7000, 0, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := mustScan(t, g, tc.q, tc.from, tc.to)
			if len(got) != tc.want {
				t.Fatalf("%d samples, want %d", len(got), tc.want)
			}
			seen := map[string]bool{}
			var nodes []string
			for i, s := range got {
				if i > 0 && s.node == got[i-1].node && s.ts <= got[i-1].ts {
					t.Fatalf("not in (node, ts) order: %+v", got)
				}
				if i > 0 && s.node != got[i-1].node && seen[s.node] {
					t.Fatalf("node %s comes back: not grouped by node", s.node)
				}
				if !seen[s.node] {
					seen[s.node] = true
					nodes = append(nodes, s.node)
				}
				if s.ts < tc.from || s.ts >= tc.to || (tc.q.RunID != "" && s.run != tc.q.RunID) {
					t.Fatalf("sample %+v outside the selection", s)
				}
			}
			if len(tc.nodes) > 0 {
				// Nodes come in the order they were first stored (n2 first).
				for _, n := range nodes {
					if !slices.Contains(strings.Split(tc.nodes, ","), n) {
						t.Fatalf("node %s not selected", n)
					}
				}
			}
		})
	}
	latest, err := g.Latest(t.Context(), gpu.Selection{RunID: "run1"})
	if err != nil || len(latest) != 2 || latest[0].Node != "n1" || latest[0].TimestampMs != 10000 || latest[1].Node != "n2" || latest[1].TimestampMs != 6000 {
		t.Fatalf("latest of run1: %+v %v", latest, err)
	}
}

func testGPUStorePrune(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	g := MustOpenGPU(t, open)
	for ts := int64(1); ts <= 10; ts++ {
		mustAppend(t, g, "old", "", gpuSample(ts*1000, "GPU-o"))
		mustAppend(t, g, "new", "", gpuSample(ts*10000, "GPU-n"))
	}
	n, err := g.Prune(t.Context(), 20_000)
	if err != nil || n != 10+1 {
		t.Fatalf("prune deleted %d (%v), want 11", n, err)
	}
	if n, _ := g.Prune(t.Context(), 20_000); n != 0 {
		t.Fatalf("a second prune deleted %d, want 0", n)
	}
	got := mustScan(t, g, gpu.Selection{}, 0, 1<<62)
	if len(got) != 9 || got[0].ts != 20_000 {
		t.Fatalf("after prune: %+v", got)
	}
	latest, _ := g.Latest(t.Context(), gpu.Selection{})
	if len(latest) != 1 || latest[0].Node != "new" {
		t.Fatalf("the node without samples is still listed: %+v", latest)
	}
	// The node comes back with new samples.
	mustAppend(t, g, "old", "", gpuSample(200_000, "GPU-o"))
	if latest, _ := g.Latest(t.Context(), gpu.Selection{}); len(latest) != 2 {
		t.Fatalf("node not recreated: %+v", latest)
	}
}

// TestGPUStoreConcurrentIngestAndPrune runs writers and pruners at once
// (run it with -race): every sample newer than the cutoff survives.
func testGPUStoreConcurrentIngestAndPrune(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	// With the commit delay on: concurrent requests share transactions.
	s := open(t, sqlstore.Options{Synchronous: "NORMAL"})
	g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: 5 * time.Millisecond})
	defer g.Close(t.Context())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for ts := int64(1); ts <= 50; ts++ {
				mustAppend(t, g, fmt.Sprintf("n%d", w), "", gpuSample(ts*1000, "GPU-a", "GPU-b"))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 20 {
				if _, err := g.Prune(t.Context(), 10_000); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if _, err := g.Prune(t.Context(), 10_000); err != nil {
		t.Fatal(err)
	}
	if got := mustScan(t, g, gpu.Selection{}, 0, 1<<62); len(got) != 8*41 {
		t.Fatalf("%d samples after concurrent prunes, want %d", len(got), 8*41)
	}
}

func TestGPUStorePrunesInTheBackground(t *testing.T) {
	s := MustOpen(t, sqlstore.Options{Synchronous: "NORMAL"})
	now := time.UnixMilli(100_000)
	g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{Retention: 30 * time.Second, PruneEvery: 5 * time.Millisecond, CommitDelay: -1, Now: func() time.Time { return now }})
	defer g.Close(t.Context())
	for ts := int64(1); ts <= 100; ts++ {
		mustAppend(t, g, "n", "", gpuSample(ts*1000, "GPU-a"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := mustScan(t, g, gpu.Selection{}, 0, 1<<62); len(got) == 31 && got[0].ts == 70_000 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("background pruning did not trim to the window: %d samples left", len(mustScan(t, g, gpu.Selection{}, 0, 1<<62)))
}

// testGPUStoreRunLabelsWinAtOneInstant: a node-wide agent (no run) and the
// launcher of a run on the node sample at the same instants; whichever
// arrives first, the stored sample is the run's. A sample of another run
// does not take it over.
func testGPUStoreRunLabelsWinAtOneInstant(t *testing.T, open func(testing.TB, sqlstore.Options) *sqlstore.Store) {
	g := MustOpenGPU(t, open)
	mustAppend(t, g, "n1", "", gpuSample(1000, "GPU-a"), gpuSample(2000, "GPU-a"))
	mustAppend(t, g, "n1", "run1", gpuSample(2000, "GPU-a"), gpuSample(1000, "GPU-a"))
	mustAppend(t, g, "n1", "run1", gpuSample(3000, "GPU-a"))
	mustAppend(t, g, "n1", "", gpuSample(3000, "GPU-a"))
	mustAppend(t, g, "n1", "run2", gpuSample(3000, "GPU-a"))
	got := mustScan(t, g, gpu.Selection{RunID: "run1"}, 0, 1<<62)
	if len(got) != 3 || got[0].ts != 1000 || got[2].ts != 3000 {
		t.Fatalf("run1's samples: %+v, want those at 1000, 2000 and 3000", got)
	}
	if got := mustScan(t, g, gpu.Selection{RunID: "run2"}, 0, 1<<62); len(got) != 0 {
		t.Fatalf("run2 took over run1's samples: %+v", got)
	}
	latest, err := g.Latest(t.Context(), gpu.Selection{RunID: "run1"})
	if err != nil || len(latest) != 1 || latest[0].TimestampMs != 3000 || latest[0].RunID != "run1" {
		t.Fatalf("latest of run1: %+v, %v", latest, err)
	}
	// The latest sample of the node, stored first without a run, becomes
	// the run's too.
	mustAppend(t, g, "n2", "", gpuSample(5000, "GPU-b"))
	mustAppend(t, g, "n2", "run1", gpuSample(5000, "GPU-b"))
	latest, err = g.Latest(t.Context(), gpu.Selection{Nodes: []string{"n2"}})
	if err != nil || len(latest) != 1 || latest[0].RunID != "run1" {
		t.Fatalf("latest of n2: %+v, %v", latest, err)
	}
}

// TestGPUStoreTwoSamplersOfOneInstant: a node-wide agent and a run's
// sampler send the same instants of one node at once, through two
// replicas of one PostgreSQL database (and through one SQLite store): one
// sample per node and instant is stored, labelled with the run.
func TestGPUStoreTwoSamplersOfOneInstant(t *testing.T) {
	twoStores := map[string]func(t *testing.T) [2]*sqlstore.Store{
		"SQLite": func(t *testing.T) [2]*sqlstore.Store {
			s := MustOpen(t, sqlstore.Options{Synchronous: "NORMAL"})
			return [2]*sqlstore.Store{s, s}
		},
		"PostgreSQL": func(t *testing.T) [2]*sqlstore.Store {
			dsn := pgtest.NewDatabase(t)
			var out [2]*sqlstore.Store
			for i := range out {
				s, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close(context.Background()) })
				out[i] = s
			}
			return out
		},
	}
	for name, open := range twoStores {
		t.Run(name, func(t *testing.T) {
			stores := open(t)
			var wg sync.WaitGroup
			for i, run := range []string{"", "run1"} {
				g := sqlstore.OpenGPU(stores[i], sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
				defer g.Close(context.Background())
				wg.Go(func() {
					for ts := int64(1); ts <= 100; ts++ {
						mustAppend(t, g, "n1", run, gpuSample(ts*1000, "GPU-a", "GPU-b"))
					}
				})
			}
			wg.Wait()
			g := sqlstore.OpenGPU(stores[0], sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
			defer g.Close(context.Background())
			got := mustScan(t, g, gpu.Selection{Nodes: []string{"n1"}}, 0, 1<<62)
			if len(got) != 100 {
				t.Fatalf("%d samples stored, want one per instant (100)", len(got))
			}
			for i, s := range got {
				if s.ts != int64(i+1)*1000 || s.run != "run1" || fmt.Sprint(s.gpus) != "[GPU-a GPU-b]" {
					t.Fatalf("sample %d: %+v, want at %d, of run1, GPUs a and b once", i, s, (i+1)*1000)
				}
			}
		})
	}
}
