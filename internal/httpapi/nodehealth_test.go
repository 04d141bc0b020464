package httpapi_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/httpapi"
)

const nodesAPI = "/api/2.0/sextant/nodes"

// TestNodesAPI: a node whose GPU is lost is flagged with the reason, its
// history lists the finding once however often the samples are sent, and
// pages newest first; bad input is a 400.
func TestNodesAPI(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOff)
	// GPU 1 of node-a is lost in every sample: one finding (the first).
	for range 2 {
		if r := s.as(t, "", "POST", gpuAPI+"/samples", gpuBody("node-a", "", 3, "")); r.status != 200 {
			t.Fatalf("ingest: %d %s", r.status, r.raw)
		}
	}
	r := s.as(t, "", "GET", nodesAPI, nil)
	if r.status != 200 {
		t.Fatalf("nodes: %d %s", r.status, r.raw)
	}
	nodes := r.body["nodes"].([]any)
	if len(nodes) != 1 {
		t.Fatalf("nodes: %s", r.raw)
	}
	n := nodes[0].(map[string]any)
	if n["node"] != "node-a" || n["flagged"] != true || !strings.Contains(n["reason"].(string), "lost a GPU") ||
		n["counts_24h"].(map[string]any)["lost"] != float64(1) || len(n["gpus"].([]any)) != 2 {
		t.Fatalf("node-a: %s", r.raw)
	}
	if !strings.Contains(r.body["rule"].(string), "2 or more faults") {
		t.Errorf("rule: %v", r.body["rule"])
	}
	r = s.as(t, "", "GET", nodesAPI+"/health?node=node-a", nil)
	if r.status != 200 {
		t.Fatalf("health: %d %s", r.status, r.raw)
	}
	evs := r.body["events"].([]any)
	if len(evs) != 1 {
		t.Fatalf("events: %s", r.raw)
	}
	ev := evs[0].(map[string]any)
	if ev["kind"] != "lost" || ev["gpu"] != float64(1) || ev["uuid"] != "GPU-1" || !strings.Contains(ev["message"].(string), "GPU is lost") {
		t.Fatalf("event: %s", r.raw)
	}
	if r.body["next_page_token"] != nil {
		t.Errorf("a short page has a next_page_token: %s", r.raw)
	}

	for name, target := range map[string]string{
		"ErrNodeMissing":      "/health",
		"ErrNodeControlChars": "/health?node=" + url.QueryEscape("a\x01b"),
		"ErrMaxResultsZero":   "/health?node=node-a&max_results=0",
		"ErrMaxResultsLarge":  "/health?node=node-a&max_results=1001",
		"ErrMaxResultsNaN":    "/health?node=node-a&max_results=ten",
		"ErrPageToken":        "/health?node=node-a&page_token=%21%21",
		"ErrPageTokenShape":   "/health?node=node-a&page_token=eHl6",
		"ErrUnknownParam":     "/health?node=node-a&nodes=x",
		"ErrUnknownListParam": "?flagged=1",
	} {
		t.Run(name, func(t *testing.T) {
			if r := s.as(t, "", "GET", nodesAPI+target, nil); r.status != 400 {
				t.Fatalf("%d %s, want 400", r.status, r.raw)
			}
		})
	}
}

// TestNodesAPIPaging: a node's history comes in pages, newest first, with
// every finding once.
func TestNodesAPIPaging(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOff)
	// Each batch: GPU 1 is lost, then read again (extra GPU 2 comes and
	// goes), so the findings alternate; simpler: three nodes' worth of
	// lost GPUs on one node through distinct UUIDs.
	extra := `,{"index":2,"uuid":"GPU-2","name":"NVIDIA H100","error":"GPU is lost"},{"index":3,"uuid":"GPU-3","name":"NVIDIA H100","error":"GPU is lost"}`
	if r := s.as(t, "", "POST", gpuAPI+"/samples", gpuBody("node-p", "", 1, extra)); r.status != 200 {
		t.Fatalf("ingest: %d %s", r.status, r.raw)
	}
	seen := map[string]bool{}
	target := nodesAPI + "/health?node=node-p&max_results=2"
	pages := 0
	for target != "" && pages < 5 {
		pages++
		r := s.as(t, "", "GET", target, nil)
		if r.status != 200 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.raw)
		}
		for _, e := range r.body["events"].([]any) {
			u := e.(map[string]any)["uuid"].(string)
			if seen[u] {
				t.Fatalf("%s listed twice", u)
			}
			seen[u] = true
		}
		target = ""
		if tok, ok := r.body["next_page_token"].(string); ok {
			target = nodesAPI + "/health?node=node-p&max_results=2&page_token=" + url.QueryEscape(tok)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("saw %v, want GPU-1, GPU-2 and GPU-3", seen)
	}
}

// TestNodesPermissions: the node routes need a signed-in caller (as the
// GPU pane's), and show a finding's run only to who may read it.
func TestNodesPermissions(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOn)
	folder := "/Users/" + owner + "/nodes"
	mustOK := func(r response) response {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		return r
	}
	mustOK(s.as(t, owner, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": folder}))
	exp := mustOK(s.as(t, owner, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": folder + "/exp"})).body["experiment_id"].(string)
	mustOK(s.as(t, owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + exp, "principal": reader, "level": "CAN_READ"}))
	run := mustOK(s.as(t, owner, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": exp})).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	mustOK(s.as(t, owner, "POST", gpuAPI+"/samples", gpuBody("n1", run, 1, "")))

	for _, target := range []string{nodesAPI, nodesAPI + "/health?node=n1"} {
		if r := s.as(t, "", "GET", target, nil); r.status != 401 {
			t.Errorf("anonymous %s: %d, want 401", target, r.status)
		}
	}
	for user, want := range map[string]int{outsider: 0, reader: 1, owner: 1} {
		r := mustOK(s.as(t, user, "GET", nodesAPI+"/health?node=n1", nil))
		evs := r.body["events"].([]any)
		if len(evs) != 1 {
			t.Fatalf("%s: events %s", user, r.raw)
		}
		runs := evs[0].(map[string]any)["run_ids"].([]any)
		if len(runs) != want || (want == 1 && runs[0] != run) {
			t.Errorf("%s sees runs %v, want %d", user, runs, want)
		}
	}
	for _, rt := range s.h.Routes() {
		if strings.HasPrefix(rt.Path, nodesAPI) && rt.Access != httpapi.Authenticated {
			t.Errorf("%s %s declares %s, want authenticated", rt.Method, rt.Path, rt.Access)
		}
	}
}
