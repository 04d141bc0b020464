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
		// Two records share each time: the key orders them.
		recs = append(recs, healthRec("n1", string(rune('a'+i)), "xid", int64(1000+(i/2)*1000)))
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
	mustAppendHealth(t, g, []gpu.HealthRecord{healthRec("n1", "a", "xid", 1000), healthRec("n1", "b", "xid", 3000)}, nil)
	n, err := g.PruneHealth(context.Background(), 2000)
	if err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if got := keys(mustListHealth(t, g, gpu.HealthQuery{})); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after prune = %v, want [b]", got)
	}
}
