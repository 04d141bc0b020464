package sqlstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/sqlstore"
)

// TestGPUStoreReadsVersion1Samples: a database written before the packed
// sample format changed (version 1: eight fields) is read after it, its
// latest samples and its history, and a new sample for a stored instant
// merges into the old one.
func TestGPUStoreReadsVersion1Samples(t *testing.T) {
	v1, err := os.ReadFile("../gpu/testdata/sample-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
			g := sqlstore.OpenGPU(s, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
			defer g.Close(ctx)
			now := int64(1_796_215_660_000)
			mustAppend(t, g, "old", "", gpuSample(now-20_000, "GPU-x"), gpuSample(now-10_000, "GPU-x"))
			// What the old binary left: every stored sample of node "old", and
			// its latest, in version 1.
			if err := s.ExecForTest(ctx, `UPDATE gpu_samples SET data = ? WHERE node_pk = (SELECT node_pk FROM gpu_nodes WHERE name = 'old')`, v1); err != nil {
				t.Fatal(err)
			}
			if err := s.ExecForTest(ctx, `UPDATE gpu_nodes SET latest_data = ? WHERE name = 'old'`, v1); err != nil {
				t.Fatal(err)
			}
			latest, err := g.Latest(ctx, gpu.Selection{Nodes: []string{"old"}})
			if err != nil || len(latest) != 1 {
				t.Fatalf("latest: %+v %v", latest, err)
			}
			if gs := latest[0].GPUs; len(gs) != 3 || gs[0].Values[gpu.FieldSMClock] != 1980 || !gpu.IsMissing(gs[0].Values[gpu.FieldThrottleReasons]) || gs[2].Err == "" {
				t.Errorf("latest of a version 1 node: %+v", gs)
			}
			n := 0
			err = g.Scan(ctx, gpu.Selection{Nodes: []string{"old"}}, 0, now+1, func(ns *gpu.NodeSample) error {
				n++
				if len(ns.GPUs) != 3 || ns.GPUs[0].Values[gpu.FieldPower] != 689.5 || ns.GPUs[1].Values[gpu.FieldUtil] != 12 {
					t.Errorf("scanned %+v", ns.GPUs)
				}
				return nil
			})
			if err != nil || n != 2 {
				t.Fatalf("scan: %d samples, %v", n, err)
			}
			// A second agent's sample for a stored instant adds its GPU to the
			// old sample, with the new fields.
			add := gpu.Sample{TimestampMs: now - 10_000}
			ng := gpu.NewGPU(5, "GPU-new", "H100")
			ng.Values[gpu.FieldThrottleReasons] = float64(gpu.ThrottleHwThermal)
			ng.Values[gpu.FieldXid] = 79
			add.GPUs = []gpu.GPU{ng}
			mustAppend(t, g, "old", "", add)
			var merged []gpu.GPU
			err = g.Scan(ctx, gpu.Selection{Nodes: []string{"old"}}, now-10_000, now-9_999, func(ns *gpu.NodeSample) error {
				merged = append([]gpu.GPU(nil), ns.GPUs...)
				return nil
			})
			if err != nil || len(merged) != 4 || merged[3].Values[gpu.FieldXid] != 79 || merged[0].Values[gpu.FieldTemp] != 71 {
				t.Errorf("merged into a version 1 sample: %+v %v", merged, err)
			}
		})
	}
}
