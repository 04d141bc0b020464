package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// bearer sends a request with a bearer token.
func (a *authServer) bearer(token, method, target, body string) response {
	a.t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &res.body)
	return res
}

// nodeUtil returns the util of GPU 0 in a node's latest sample, as user.
func (a *authServer) nodeUtil(user, node string) any {
	a.t.Helper()
	res := a.must(user, "GET", "/api/2.0/sextant/gpu/latest?node="+node, nil)
	for _, n := range asList(res.body["nodes"]) {
		nm := n.(map[string]any)
		if nm["node"] != node {
			continue
		}
		for _, g := range asList(nm["gpus"]) {
			if gm := g.(map[string]any); gm["index"] == float64(0) {
				return gm["util"]
			}
		}
	}
	return nil
}

func sampleBody(node, runID string, util int, at time.Time) string {
	run := ""
	if runID != "" {
		run = `"run_id":"` + runID + `",`
	}
	return fmt.Sprintf(`{"node":%q,%s"samples":[{"ts_ms":%d,"gpus":[{"index":0,"uuid":"GPU-0","util":%d}],"processes":[{"gpu":0,"pid":42,"name":"python","mem_used":1000}]}]}`, node, run, at.UnixMilli(), util)
}

// TestNodeTokens: a node's samples come from an identity allowed to report
// for it. An administrator's node token reports for its nodes and does
// nothing else; a user's samples must name a run they can edit, and are
// the node's only while no node token names the node; samples dated
// beyond a small clock skew are refused.
func TestNodeTokens(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	const samples = "/api/2.0/sextant/gpu/samples"

	// Only administrators create node tokens.
	if res := a.as(owner, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "mine", "nodes": []string{"gpu-01"}}); res.status != http.StatusForbidden {
		t.Fatalf("a user created a node token: %d %s", res.status, res.raw)
	}
	if res := a.as(admin, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "none", "nodes": []string{" , "}}); res.status != http.StatusBadRequest {
		t.Fatalf("a node token for no node: %d %s", res.status, res.raw)
	}
	created := a.must(admin, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "agents", "nodes": []string{"gpu-01,gpu-03"}}).body["token"].(map[string]any)
	tok := created["token"].(string)
	if nodes := fmt.Sprint(created["nodes"]); nodes != "[gpu-01 gpu-03]" {
		t.Fatalf("nodes %s", nodes)
	}
	now := time.Now()

	// The node token reports for its nodes, and only there.
	if res := a.bearer(tok, "POST", samples, sampleBody("gpu-01", "", 11, now)); res.status != http.StatusOK {
		t.Fatalf("node token for gpu-01: %d %s", res.status, res.raw)
	}
	for name, c := range map[string]struct {
		method, target, body, want string
	}{
		"ErrOtherNode":   {"POST", samples, sampleBody("gpu-02", "", 12, now), "node token"},
		"ErrRun":         {"POST", samples, sampleBody("gpu-01", f.run, 12, now), "not a run's"},
		"ErrOtherRoute":  {"POST", "/api/2.0/mlflow/experiments/search", `{}`, "only posts the GPU samples"},
		"ErrRunsRead":    {"GET", "/api/2.0/mlflow/runs/get?run_id=" + f.run, "", "only posts the GPU samples"},
		"ErrCreateToken": {"POST", "/api/2.0/sextant/tokens", `{"name":"x"}`, "only posts the GPU samples"},
	} {
		t.Run("NodeToken"+name, func(t *testing.T) {
			res := a.bearer(tok, c.method, c.target, c.body)
			if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" || !strings.Contains(res.raw, c.want) {
				t.Fatalf("%d %s, want 403 mentioning %q", res.status, res.raw, c.want)
			}
		})
	}

	// Users: node-wide samples need a node token, for any node.
	for _, node := range []string{"gpu-01", "gpu-09"} {
		res := a.as(outsider, "POST", samples, sampleBody(node, "", 99, now.Add(time.Second)))
		if res.status != http.StatusForbidden || !strings.Contains(res.raw, "node token") {
			t.Fatalf("outsider spoofs %s: %d %s", node, res.status, res.raw)
		}
	}
	// A user's own run keeps its samples on a node a token reports for,
	// as the run's system metrics; the node's samples stay the token's.
	res := a.as(owner, "POST", samples, sampleBody("gpu-01", f.run, 77, now.Add(2*time.Second)))
	if res.status != http.StatusOK {
		t.Fatalf("owner's run on gpu-01: %d %s", res.status, res.raw)
	}
	if u := a.nodeUtil(admin, "gpu-01"); u != float64(11) {
		t.Fatalf("gpu-01 shows util %v, want the node token's 11", u)
	}
	hist := a.must(owner, "GET", "/api/2.0/mlflow/metrics/get-history?run_id="+f.run+"&metric_key=system/gpu_0_utilization_percentage", nil)
	if !strings.Contains(hist.raw, "77") {
		t.Fatalf("the run's system metrics lack the sample: %s", hist.raw)
	}
	// On a node no token names, a user's run reports as today.
	a.must(owner, "POST", samples, sampleBody("gpu-09", f.run, 55, now))
	if u := a.nodeUtil(admin, "gpu-09"); u != float64(55) {
		t.Fatalf("gpu-09 shows util %v, want 55", u)
	}
	// Nor a run that does not exist: the samples are taken, for the run
	// only, and never stand as the node's.
	if res := a.as(outsider, "POST", samples, sampleBody("gpu-09", "0123456789abcdef0123456789abcdef", 3, now.Add(time.Second))); res.status != http.StatusOK {
		t.Fatalf("outsider names a run that does not exist: %d %s", res.status, res.raw)
	}
	if u := a.nodeUtil(admin, "gpu-09"); u != float64(55) {
		t.Fatalf("gpu-09 shows util %v after samples for no run, want 55", u)
	}
	// Not someone else's run.
	if res := a.as(reader, "POST", samples, sampleBody("gpu-09", f.run, 1, now)); res.status != http.StatusForbidden {
		t.Fatalf("reader posts for the owner's run: %d %s", res.status, res.raw)
	}
	// A sample dated beyond the clock skew is not the node's latest.
	res = a.bearer(tok, "POST", samples, sampleBody("gpu-03", "", 5, now.Add(5*time.Minute)))
	if res.status != http.StatusBadRequest || !strings.Contains(res.raw, "ahead of the server's clock") {
		t.Fatalf("a sample 5 minutes ahead: %d %s", res.status, res.raw)
	}
	// A revoked node token stops at once, and its nodes are free again
	// within the cache's life.
	a.must(admin, "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": created["id"]})
	if res := a.bearer(tok, "POST", samples, sampleBody("gpu-01", "", 13, now.Add(3*time.Second))); res.status != http.StatusUnauthorized {
		t.Fatalf("revoked node token: %d %s", res.status, res.raw)
	}
	// The token lists with its nodes.
	list := a.must(admin, "GET", "/api/2.0/sextant/tokens", nil)
	if !strings.Contains(list.raw, `"nodes":["gpu-01","gpu-03"]`) {
		t.Fatalf("tokens: %s", list.raw)
	}
}
