package httpapi_test

import (
	"math"
	"net/http"
	"net/url"
	"testing"
)

// TestGPUHoursAccess checks that GPU-hours follow the experiment's
// permissions, and that a folder's totals count only what the caller can
// read.
func TestGPUHoursAccess(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	const start = 1_800_000_000_000
	a.must(owner, "POST", "/api/2.0/sextant/events/append", map[string]any{"run_id": f.run, "events": []any{
		map[string]any{"kind": "attempt", "key": "attempt:0:1", "time_ms": start, "end_ms": start + 3_600_000, "node": "n1",
			"attrs": map[string]any{"gpus": "2", "gpu_model": "NVIDIA H100 80GB HBM3", "status": "KILLED"}},
		map[string]any{"kind": "attempt", "key": "attempt:0:2", "time_ms": start + 7_200_000, "end_ms": start + 9_000_000, "node": "n1",
			"attrs": map[string]any{"gpus": "2", "gpu_model": "NVIDIA H100 80GB HBM3", "status": "FINISHED"}},
	}})
	hours := func(user, params string, status int) map[string]any {
		t.Helper()
		r := a.as(user, "GET", "/api/2.0/sextant/gpu-hours?"+params, nil)
		if r.status != status {
			t.Fatalf("%s ?%s: %d %s, want %d", user, params, r.status, r.raw, status)
		}
		return r.body
	}
	near := func(v any, want float64) bool { x, ok := v.(float64); return ok && math.Abs(x-want) < 1e-9 }
	run := hours(reader, "run_id="+f.run, http.StatusOK)
	if !near(run["gpu_hours"], 3) {
		t.Fatalf("run: %v, want 3 GPU-hours (2 GPUs × 1 h + 2 GPUs × 0.5 h)", run)
	}
	if _, ok := run["cost"]; ok {
		t.Fatalf("a cost without prices: %v", run)
	}
	atts := run["runs"].([]any)[0].(map[string]any)["attempts"].([]any)
	if len(atts) != 2 || !near(atts[0].(map[string]any)["gpu_hours"], 2) || atts[0].(map[string]any)["status"] != "KILLED" {
		t.Fatalf("attempts %v", atts)
	}
	// What the outsider may not read answers as missing (docs/auth.md, Enumeration).
	hours(outsider, "run_id="+f.run, http.StatusNotFound)
	hours(outsider, "experiment_id="+f.exp, http.StatusNotFound)
	if exp := hours(editor, "experiment_id="+f.exp, http.StatusOK); !near(exp["gpu_hours"], 3) {
		t.Fatalf("experiment: %v", exp)
	}
	folder := "folder=" + url.QueryEscape(f.folder)
	if got := hours(reader, folder, http.StatusOK); !near(got["gpu_hours"], 3) || len(got["experiments"].([]any)) != 1 {
		t.Fatalf("reader's folder: %v", got)
	}
	if got := hours(outsider, folder, http.StatusOK); !near(got["gpu_hours"], 0) || got["experiments"] != nil {
		t.Fatalf("outsider's folder counts what they cannot read: %v", got)
	}
	hours(reader, "", http.StatusBadRequest)
	hours(reader, "run_id="+f.run+"&"+folder, http.StatusBadRequest)
}
