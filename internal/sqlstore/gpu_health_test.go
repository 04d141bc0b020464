package sqlstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/sqlstore"
)

// TestGPUHealthHistory runs the node health history tests against every
// backend.
func TestGPUHealthHistory(t *testing.T) {
	tests := map[string]func(*testing.T, *sqlstore.GPUStore){
		"ResendStoresOnce":      testHealthResendStoresOnce,
		"ThrottleSpanCloses":    testHealthThrottleSpanCloses,
		"PagesNewestFirst":      testHealthPagesNewestFirst,
		"RunIDsAddedWhenLacked": testHealthRunIDsAddedWhenLacked,
		"Prune":                 testHealthPrune,
		"SameFaultKeptOnce":     testHealthSameFaultKeptOnce,
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for name, test := range tests {
				t.Run(name, func(t *testing.T) { test(t, MustOpenGPU(t, b.open)) })
			}
		})
	}
}

func healthRec(node, key, kind string, ts int64, runs ...string) gpu.HealthRecord {
	return gpu.HealthRecord{Key: key, Node: node, GPUIndex: 1, GPUUUID: "GPU-1", GPUModel: "H100", Kind: kind, TimeMs: ts,
		Open: kind == "throttle", Message: kind + " at " + key, RunIDs: runs}
}

func mustAppendHealth(tb testing.TB, g *sqlstore.GPUStore, recs []gpu.HealthRecord, ends []gpu.HealthEnd) {
	tb.Helper()
	if err := g.AppendHealth(context.Background(), recs, ends); err != nil {
		tb.Fatalf("append health: %v", err)
	}
}

func mustListHealth(tb testing.TB, g *sqlstore.GPUStore, q gpu.HealthQuery) []gpu.HealthRecord {
	tb.Helper()
	recs, err := g.ListHealth(context.Background(), q)
	if err != nil {
		tb.Fatalf("list health: %v", err)
	}
	return recs
}

func keys(recs []gpu.HealthRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}

func testHealthResendStoresOnce(t *testing.T, g *sqlstore.GPUStore) {
	recs := []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000, "run1"), healthRec("n1", "b", "ecc", 2000)}
	recs[0].Xid = 79
	mustAppendHealth(t, g, recs, nil)
	mustAppendHealth(t, g, recs, nil)
	got := mustListHealth(t, g, gpu.HealthQuery{Node: "n1"})
	if !slices.Equal(keys(got), []string{"b", "a"}) {
		t.Fatalf("keys = %v, want [b a]", keys(got))
	}
	a := got[1]
	if a.Xid != 79 || a.Kind != "xid" || a.GPUUUID != "GPU-1" || a.GPUModel != "H100" || a.GPUIndex != 1 || !slices.Equal(a.RunIDs, []string{"run1"}) || a.Message != "xid at a" {
		t.Fatalf("record a = %+v", a)
	}
}

func testHealthThrottleSpanCloses(t *testing.T, g *sqlstore.GPUStore) {
	start := healthRec("n1", "t1", "throttle", 1000)
	other := healthRec("n1", "t2", "throttle", 1000)
	other.GPUIndex, other.GPUUUID = 2, "GPU-2"
	mustAppendHealth(t, g, []gpu.HealthRecord{start, other}, nil)
	mustAppendHealth(t, g, nil, []gpu.HealthEnd{{Node: "n1", GPUUUID: "GPU-1", GPUIndex: 1, TimeMs: 5000}})
	// The agent resends the start after the span closed: it stays closed.
	mustAppendHealth(t, g, []gpu.HealthRecord{start}, nil)
	got := mustListHealth(t, g, gpu.HealthQuery{Node: "n1"})
	by := map[string]gpu.HealthRecord{}
	for _, r := range got {
		by[r.Key] = r
	}
	if r := by["t1"]; r.Open || r.EndMs != 5000 {
		t.Fatalf("span of GPU 1 = open %v end %d, want closed at 5000", r.Open, r.EndMs)
	}
	if r := by["t2"]; !r.Open || r.EndMs != 0 {
		t.Fatalf("span of GPU 2 = open %v end %d, want still open", r.Open, r.EndMs)
	}
}

func testHealthPagesNewestFirst(t *testing.T, g *sqlstore.GPUStore) {
	var recs []gpu.HealthRecord
	for i := range 7 {
		// Two records share each time: the key orders them. Each on its
		// own GPU (the same fault of a GPU within minutes is one).
		r := healthRec("n1", string(rune('a'+i)), "xid", int64(1000+(i/2)*1000))
		r.GPUIndex = i
		recs = append(recs, r)
	}
	recs = append(recs, healthRec("n2", "z", "lost", 9000))
	mustAppendHealth(t, g, recs, nil)
	var all []string
	q := gpu.HealthQuery{Node: "n1", Limit: 3}
	for range 10 {
		page := mustListHealth(t, g, q)
		all = append(all, keys(page)...)
		if len(page) < q.Limit {
			break
		}
		q.BeforeMs, q.BeforeKey = page[len(page)-1].TimeMs, page[len(page)-1].Key
	}
	if want := []string{"g", "f", "e", "d", "c", "b", "a"}; !slices.Equal(all, want) {
		t.Fatalf("pages = %v, want %v", all, want)
	}
	if got := keys(mustListHealth(t, g, gpu.HealthQuery{FromMs: 4000})); !slices.Equal(got, []string{"z", "g"}) {
		t.Fatalf("every node from 4000 = %v, want [z g]", got)
	}
}

func testHealthRunIDsAddedWhenLacked(t *testing.T, g *sqlstore.GPUStore) {
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000)}, nil)
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000, "run1")}, nil)
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000, "run2")}, nil)
	got := mustListHealth(t, g, gpu.HealthQuery{Node: "n1"})
	if len(got) != 1 || !slices.Equal(got[0].RunIDs, []string{"run1"}) {
		t.Fatalf("records = %+v, want one with run1", got)
	}
}

func testHealthPrune(t *testing.T, g *sqlstore.GPUStore) {
	b := healthRec("n1", "b", "xid", 3000)
	b.GPUIndex = 2
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000), b}, nil)
	n, err := g.PruneHealth(context.Background(), 2000)
	if err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if got := keys(mustListHealth(t, g, gpu.HealthQuery{})); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after prune = %v, want [b]", got)
	}
}

// testHealthSameFaultKeptOnce: the same fault of a GPU seen by two
// samplers of the node (different keys, close in time) is kept once, with
// the run of either; a different code, GPU or a later repeat is another
// fault; a throttle start while the GPU's span is open opens no other.
func testHealthSameFaultKeptOnce(t *testing.T, g *sqlstore.GPUStore) {
	xid := func(key string, ts int64, code, gpuIndex int, runs ...string) gpu.HealthRecord {
		r := healthRec("n1", key, "xid", ts, runs...)
		r.Xid, r.GPUIndex = code, gpuIndex
		return r
	}
	mustAppendHealth(t, g, []gpu.HealthRecord{xid("agent", 100_000, 79, 1)}, nil)
	mustAppendHealth(t, g, []gpu.HealthRecord{
		xid("launcher", 104_000, 79, 1, "run1"),                // the same Xid, from the run's sampler
		xid("other-code", 104_000, 13, 1),                      // another Xid code
		xid("other-gpu", 104_000, 79, 2),                       // another GPU
		xid("later", 100_000+gpu.HealthMergeWindowMs+1, 79, 1), // a repeat minutes later
	}, nil)
	got := mustListHealth(t, g, gpu.HealthQuery{Node: "n1"})
	if want := []string{"later", "other-gpu", "other-code", "agent"}; !slices.Equal(keys(got), want) {
		t.Fatalf("keys = %v, want %v", keys(got), want)
	}
	if runs := got[3].RunIDs; !slices.Equal(runs, []string{"run1"}) {
		t.Errorf("the Xid kept once has runs %v, want the launcher's run1", runs)
	}
	span := healthRec("n2", "span", "throttle", 1000)
	mustAppendHealth(t, g, []gpu.HealthRecord{span}, nil)
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n2", "while-open", "throttle", 1000+10*gpu.HealthMergeWindowMs)}, nil)
	mustAppendHealth(t, g, nil, []gpu.HealthEnd{{Node: "n2", GPUUUID: "GPU-1", GPUIndex: 1, TimeMs: 1000 + 11*gpu.HealthMergeWindowMs}})
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n2", "after", "throttle", 1000+20*gpu.HealthMergeWindowMs)}, nil)
	if got := keys(mustListHealth(t, g, gpu.HealthQuery{Node: "n2"})); !slices.Equal(got, []string{"after", "span"}) {
		t.Fatalf("throttle spans = %v, want [after span]", got)
	}
}
