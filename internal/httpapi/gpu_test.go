package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// gpuServer is an API server with GPU monitoring over a fresh store.
type gpuServer struct {
	h  *httpapi.Server
	tr *tracking.Service
	ws *workspace.Service
}

// mustGPUServer returns a server with GPU monitoring, with authentication
// on or off, and the users of the permission tests when it is on.
func mustGPUServer(tb testing.TB, auth httpapi.AuthMode) *gpuServer {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(tb.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		tb.Fatal(err)
	}
	g := sqlstore.OpenGPU(store, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	tb.Cleanup(func() {
		g.Close(ctx)
		store.Close(ctx)
	})
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		tb.Fatal(err)
	}
	blobs, err := blob.OpenDir(filepath.Join(tb.TempDir(), "artifacts"), blob.DirOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	files, err := blob.OpenDir(filepath.Join(tb.TempDir(), "files"), blob.DirOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4})
	if err := ws.Init(ctx); err != nil {
		tb.Fatal(err)
	}
	if auth == httpapi.AuthOn {
		for _, p := range people {
			if _, err := ws.CreateUser(ctx, nil, p, password, p == admin); err != nil {
				tb.Fatal(err)
			}
		}
	}
	h := httpapi.New(httpapi.Options{
		Tracking: tr, Workspace: ws, Files: files, Auth: auth, Version: "3.7.0", MaxBodyBytes: 1 << 20,
		Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")}),
		GPU:       gpu.NewService(g, gpu.ServiceOptions{Runs: tr, Health: gpu.HealthOptions{History: g}}),
	})
	return &gpuServer{h: h, tr: tr, ws: ws}
}

// as sends a request as user (Basic; "" is anonymous).
func (s *gpuServer) as(tb testing.TB, user, method, target string, body any) response {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, target, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &res.body)
	return res
}

const gpuAPI = "/api/2.0/sextant/gpu"

// gpuBody returns an ingest body with n samples 10 s apart ending now.
func gpuBody(node, runID string, n int, extra string) string {
	now := time.Now().UnixMilli()
	var samples []string
	for i := range n {
		ts := now - int64(n-1-i)*10_000
		samples = append(samples, fmt.Sprintf(`{"ts_ms":%d,"gpus":[
			{"index":0,"uuid":"GPU-0","name":"NVIDIA H100","util":%d,"mem_util":40,"mem_used":1073741824,"mem_total":85899345920,"temp":60,"power":"NaN","power_limit":700,"sm_clock":null},
			{"index":1,"uuid":"GPU-1","name":"NVIDIA H100","error":"GPU is lost"}%s],
			"processes":[{"gpu":0,"pid":42,"name":"python","mem_used":1000}]}`, ts, 50+i, extra))
	}
	run := ""
	if runID != "" {
		run = `"run_id":"` + runID + `","node_rank":1,"num_nodes":2,`
	}
	return `{"node":"` + node + `",` + run + `"samples":[` + strings.Join(samples, ",") + `]}`
}

func TestGPUAPI(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOff)
	body := gpuBody("node-a", "", 6, "")
	r := s.as(t, "", "POST", gpuAPI+"/samples", body)
	if r.status != 200 || r.body["accepted"] != float64(6) {
		t.Fatalf("ingest: %d %s", r.status, r.raw)
	}
	// The same samples again: stored once.
	if r := s.as(t, "", "POST", gpuAPI+"/samples", body); r.status != 200 {
		t.Fatalf("resend: %d %s", r.status, r.raw)
	}
	r = s.as(t, "", "GET", gpuAPI+"/latest?node=node-a", nil)
	if r.status != 200 {
		t.Fatalf("latest: %d %s", r.status, r.raw)
	}
	nodes := r.body["nodes"].([]any)
	n0 := nodes[0].(map[string]any)
	g0 := n0["gpus"].([]any)[0].(map[string]any)
	g1 := n0["gpus"].([]any)[1].(map[string]any)
	if len(nodes) != 1 || n0["node"] != "node-a" || n0["run_id"] != nil || g0["util"] != float64(55) || g0["power"] != nil || g0["mem_used"] != float64(1<<30) || g1["error"] != "GPU is lost" || g1["util"] != nil {
		t.Fatalf("latest body: %s", r.raw)
	}
	if p := n0["processes"].([]any)[0].(map[string]any); p["pid"] != float64(42) || p["mem_used"] != float64(1000) {
		t.Fatalf("processes: %v", p)
	}

	r = s.as(t, "", "GET", gpuAPI+"/series?node=node-a&points=0&fields=util,power", nil)
	if r.status != 200 || r.body["agg"] != "raw" {
		t.Fatalf("raw series: %d %s", r.status, r.raw)
	}
	gs := r.body["gpus"].([]any)
	series := gs[0].(map[string]any)["series"].(map[string]any)
	util := series["util"].([]any)
	if len(gs) != 2 || len(util) != 6 || len(series["power"].([]any)) != 0 || len(gs[1].(map[string]any)["series"].(map[string]any)["util"].([]any)) != 0 {
		t.Fatalf("raw series body: %s", r.raw)
	}
	for i, p := range util {
		pt := p.([]any)
		if len(pt) != 2 || pt[1] != float64(50+i) {
			t.Fatalf("point %d = %v", i, pt)
		}
	}
	r = s.as(t, "", "GET", gpuAPI+"/series?points=2&fields=util&agg=minavgmax&from_ms="+fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli()), nil)
	if r.status != 200 || r.body["bucket_ms"].(float64) < 1_800_000 {
		t.Fatalf("downsampled: %d %s", r.status, r.raw)
	}
	pts := r.body["gpus"].([]any)[0].(map[string]any)["series"].(map[string]any)["util"].([]any)
	if len(pts) < 1 || len(pts) > 2 {
		t.Fatalf("%d points for points=2", len(pts))
	}
	last := pts[len(pts)-1].([]any)
	if len(last) != 4 || last[1].(float64) > last[2].(float64) || last[2].(float64) > last[3].(float64) {
		t.Fatalf("[ts, min, avg, max] = %v", last)
	}

	bad := map[string]struct {
		method, target, body, want string
		status                     int
	}{
		"ErrUnknownField":   {"POST", "/samples", `{"node":"n","samples":[],"colour":1}`, "unknown field", 400},
		"ErrNoNode":         {"POST", "/samples", gpuBody("", "", 1, ""), "node", 400},
		"ErrNoIndex":        {"POST", "/samples", `{"node":"n","samples":[{"ts_ms":` + fmt.Sprint(time.Now().UnixMilli()) + `,"gpus":[{"util":1}]}]}`, "index", 400},
		"ErrTooOld":         {"POST", "/samples", `{"node":"n","samples":[{"ts_ms":1000,"gpus":[]}]}`, "time window", 400},
		"ErrFuture":         {"POST", "/samples", `{"node":"n","samples":[{"ts_ms":` + fmt.Sprint(time.Now().Add(time.Hour).UnixMilli()) + `,"gpus":[]}]}`, "ahead of the server's clock", 400},
		"ErrNotJSON":        {"POST", "/samples", `{"node":`, "malformed", 400},
		"ErrValueType":      {"POST", "/samples", `{"node":"n","samples":[{"ts_ms":1,"gpus":[{"index":0,"util":true}]}]}`, "util", 400},
		"ErrSeriesField":    {"GET", "/series?fields=util,colour", "", "unknown field 'colour'", 400},
		"ErrSeriesAgg":      {"GET", "/series?agg=median", "", "agg", 400},
		"ErrSeriesParam":    {"GET", "/series?nodes=a", "", "unknown query parameter", 400},
		"ErrSeriesPoints":   {"GET", "/series?points=-1", "", "points", 400},
		"ErrLatestRunShape": {"GET", "/latest?run_id=a%20b", "", "Invalid run ID", 400},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := s.as(t, "", tc.method, gpuAPI+tc.target, body)
			if r.status != tc.status || !strings.Contains(r.raw, tc.want) {
				t.Fatalf("%d %s, want %d mentioning %q", r.status, r.raw, tc.status, tc.want)
			}
		})
	}

	// Some samples outside the window: the others are stored, the
	// skipped ones listed.
	mixed := strings.Replace(gpuBody("node-b", "", 2, ""), `"samples":[`, `"samples":[{"ts_ms":1000,"gpus":[]},`, 1)
	r = s.as(t, "", "POST", gpuAPI+"/samples", mixed)
	if r.status != 200 || r.body["accepted"] != float64(2) || len(r.body["skipped"].([]any)) != 1 {
		t.Fatalf("mixed: %d %s", r.status, r.raw)
	}
}

func TestGPURunLinkedSystemMetrics(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOff)
	run, err := s.tr.CreateRun(t.Context(), tracking.CreateRunRequest{StartTimeMs: time.Now().Add(-time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	id := run.Info.RunID
	r := s.as(t, "", "POST", gpuAPI+"/samples", gpuBody("worker-1", id, 3, ""))
	if r.status != 200 || r.body["system_metrics_error"] != nil {
		t.Fatalf("ingest: %d %s", r.status, r.raw)
	}
	r = s.as(t, "", "GET", "/api/2.0/mlflow/metrics/get-history?run_id="+id+"&metric_key=system/node_1/gpu_0_utilization_percentage", nil)
	if r.status != 200 || len(r.body["metrics"].([]any)) != 3 {
		t.Fatalf("system metric history: %d %s", r.status, r.raw)
	}
	r = s.as(t, "", "GET", gpuAPI+"/series?run_id="+id+"&points=0", nil)
	if r.status != 200 || len(r.body["gpus"].([]any)) != 2 || r.body["gpus"].([]any)[0].(map[string]any)["run_id"] != id {
		t.Fatalf("series of the run: %d %s", r.status, r.raw)
	}
}

// TestGPUPermissions: posting samples needs a signed-in caller, and
// CAN_EDIT on the run when the samples name one; reading a run's samples
// needs CAN_READ; node-wide reads hide the runs the caller cannot read.
func TestGPUPermissions(t *testing.T) {
	s := mustGPUServer(t, httpapi.AuthOn)
	folder := "/Users/" + owner + "/gpu"
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

	tests := map[string]struct {
		user, method, target, body string
		status                     int
	}{
		"AnonymousIngest":          {"", "POST", "/samples", gpuBody("n1", "", 1, ""), 401},
		"AnonymousLatest":          {"", "GET", "/latest", "", 401},
		"OutsiderIngestNodeOnly":   {outsider, "POST", "/samples", gpuBody("n2", "", 1, ""), 403},
		"OutsiderIngestOthersRun":  {outsider, "POST", "/samples", gpuBody("n3", run, 1, ""), 404},
		"ReaderIngestRun":          {reader, "POST", "/samples", gpuBody("n3", run, 1, ""), 403},
		"OwnerIngestRun":           {owner, "POST", "/samples", gpuBody("n1", run, 1, ""), 200},
		"ReaderSeriesOfRun":        {reader, "GET", "/series?run_id=" + run, "", 200},
		"OutsiderSeriesOfRun":      {outsider, "GET", "/series?run_id=" + run, "", 404},
		"OutsiderLatestOfRun":      {outsider, "GET", "/latest?run_id=" + run, "", 404},
		"IngestForRunThatIsNotYet": {outsider, "POST", "/samples", gpuBody("n4", "0123456789abcdef0123456789abcdef", 1, ""), 200},
	}
	for _, name := range []string{"AnonymousIngest", "AnonymousLatest", "OutsiderIngestNodeOnly", "OutsiderIngestOthersRun", "ReaderIngestRun", "OwnerIngestRun", "ReaderSeriesOfRun", "OutsiderSeriesOfRun", "OutsiderLatestOfRun", "IngestForRunThatIsNotYet"} {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			if r := s.as(t, tc.user, tc.method, gpuAPI+tc.target, body); r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.raw, tc.status)
			}
		})
	}
	// Node-wide: the outsider sees node n1's GPUs but not its run.
	for user, want := range map[string]any{outsider: nil, reader: run, owner: run} {
		r := mustOK(s.as(t, user, "GET", gpuAPI+"/latest?node=n1", nil))
		if got := r.body["nodes"].([]any)[0].(map[string]any)["run_id"]; got != want {
			t.Errorf("%s sees run_id %v, want %v", user, got, want)
		}
	}
	for _, rt := range s.h.Routes() {
		if strings.HasPrefix(rt.Path, gpuAPI) && rt.Access != httpapi.Authenticated {
			t.Errorf("%s %s declares %s, want authenticated", rt.Method, rt.Path, rt.Access)
		}
	}
}
