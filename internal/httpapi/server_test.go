package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/ui"
	"github.com/sextant/sextant/internal/workspace"
)

// MustServer returns an API server over a fresh SQLite store.
func MustServer(tb testing.TB) *httpapi.Server {
	tb.Helper()
	s, _ := mustServerStore(tb)
	return s
}

// mustServerStore returns MustServer's server and its store.
func mustServerStore(tb testing.TB) (*httpapi.Server, *sqlstore.Store) {
	tb.Helper()
	return mustServerWith(tb, nil)
}

// mustServerWith is mustServerStore with the options changed by set.
func mustServerWith(tb testing.TB, set func(*httpapi.Options)) (*httpapi.Server, *sqlstore.Store) {
	tb.Helper()
	store, err := sqlstore.Open(context.Background(), filepath.Join(tb.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close(context.Background()) })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(context.Background()); err != nil {
		tb.Fatal(err)
	}
	blobs, err := blob.OpenDir(filepath.Join(tb.TempDir(), "artifacts"), blob.DirOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	art := artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")})
	files, err := blob.OpenDir(filepath.Join(tb.TempDir(), "files"), blob.DirOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4})
	if err := ws.Init(context.Background()); err != nil {
		tb.Fatal(err)
	}
	opts := httpapi.Options{Tracking: tr, Artifacts: art, Workspace: ws, Files: files, Version: "3.7.0", MaxBodyBytes: 1 << 20, UI: ui.MustNew()}
	if set != nil {
		set(&opts)
	}
	return httpapi.New(opts), store
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(tb testing.TB, h http.Handler, method, target string, body any) response {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, target, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &res.body)
	return res
}

func TestEveryRouteDeclaresAccess(t *testing.T) {
	s := MustServer(t)
	routes := s.Routes()
	if len(routes) < 30 {
		t.Fatalf("only %d routes registered", len(routes))
	}
	assets := 0
	for _, r := range routes {
		if r.Access == httpapi.Assets {
			// Only the web UI's static files may be served as assets.
			if r.Method != "GET" || (r.Path != "/" && r.Path != "/assets/{path...}") {
				t.Errorf("%s %s is declared Assets; only the UI's routes may be", r.Method, r.Path)
			}
			assets++
		}
		if r.Access.String() == "undeclared" {
			t.Errorf("%s %s declares no access level", r.Method, r.Path)
		}
		if r.Access == httpapi.Public && !strings.HasPrefix(r.Path, "/health") && r.Path != "/version" && r.Path != "/api/3.0/mlflow/server-info" && r.Path != "/api/2.0/sextant/auth/login" {
			t.Errorf("%s %s is public; only probes may be", r.Method, r.Path)
		}
	}
	if assets != 2 {
		t.Errorf("%d UI asset routes registered, want 2", assets)
	}
}

// TestUIRoutes checks that the UI is served for client-side routes with its
// security headers, and never for API paths.
func TestUIRoutes(t *testing.T) {
	s := MustServer(t)
	for _, p := range []string{"/", "/experiments/1", "/runs/abc?tab=logs", "/workspace/Users/a@b.c"} {
		r := do(t, s, "GET", p, nil)
		if r.status != 200 || !strings.Contains(r.raw, "<!doctype html>") {
			t.Fatalf("GET %s: %d %.80q", p, r.status, r.raw)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: no nosniff", p)
		}
	}
	// Only the UI's own pages answer HTML: /metrics on a server without
	// metrics, a favicon probe or a typo is a 404.
	for _, p := range []string{"/api/2.0/mlflow/nope", "/api/2.0/sextant/nope", "/ajax-api/2.0/mlflow/nope", "/api/", "/assets/app-MISSING.js",
		"/metrics", "/favicon.ico", "/experiment/1", "/runs/abc/def", "/index.html"} {
		if r := do(t, s, "GET", p, nil); r.status != 404 || strings.Contains(r.raw, "<html") {
			t.Fatalf("GET %s: %d %.80q, want a 404 that is not the UI", p, r.status, r.raw)
		}
	}
	// The UI answers GET and HEAD only; writes to unknown paths stay refused.
	if r := do(t, s, "POST", "/experiments/1", "{}"); r.status != 405 {
		t.Fatalf("POST to a UI path: %d", r.status)
	}
}

func TestHealthAndVersion(t *testing.T) {
	s := MustServer(t)
	if r := do(t, s, "GET", "/health", nil); r.status != 200 || r.raw != "OK" {
		t.Fatalf("health: %d %q", r.status, r.raw)
	}
	if r := do(t, s, "GET", "/version", nil); r.status != 200 || r.raw != "3.7.0" {
		t.Fatalf("version: %d %q", r.status, r.raw)
	}
}

func TestWireShapes(t *testing.T) {
	s := MustServer(t)
	r := do(t, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0", "run_name": "shape", "start_time": "1700000000000"})
	if r.status != 200 {
		t.Fatalf("create run: %d %s", r.status, r.raw)
	}
	info := r.body["run"].(map[string]any)["info"].(map[string]any)
	id := info["run_id"].(string)
	if info["run_uuid"] != id || info["status"] != "RUNNING" || info["start_time"] != float64(1700000000000) || info["lifecycle_stage"] != "active" {
		t.Fatalf("run info: %v", info)
	}
	if _, ok := info["end_time"]; ok {
		t.Fatalf("end_time present on a running run: %v", info)
	}
	// NaN and infinities go out as strings; int64 as numbers.
	r = do(t, s, "POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"`+id+`","metrics":[
		{"key":"a","value":"NaN","timestamp":1,"step":0},
		{"key":"b","value":"-Infinity","timestamp":"2","step":"9007199254740991"}]}`)
	if r.status != 200 || r.raw != "{}" {
		t.Fatalf("log-batch: %d %s", r.status, r.raw)
	}
	r = do(t, s, "GET", "/api/2.0/mlflow/runs/get?run_id="+id, nil)
	ms := r.body["run"].(map[string]any)["data"].(map[string]any)["metrics"].([]any)
	if len(ms) != 2 || ms[0].(map[string]any)["value"] != "NaN" || ms[1].(map[string]any)["value"] != "-Infinity" || ms[1].(map[string]any)["step"] != 9007199254740991.0 {
		t.Fatalf("metrics: %v", ms)
	}
	// The same routes are served under /ajax-api.
	if r := do(t, s, "GET", "/ajax-api/2.0/mlflow/runs/get?run_uuid="+id, nil); r.status != 200 {
		t.Fatalf("ajax-api: %d", r.status)
	}
	// get-by-name of a missing experiment: JSON 404, which the client
	// turns into "no such experiment".
	r = do(t, s, "GET", "/api/2.0/mlflow/experiments/get-by-name?experiment_name=nope", nil)
	if r.status != 404 || r.body["error_code"] != "RESOURCE_DOES_NOT_EXIST" {
		t.Fatalf("get-by-name: %d %s", r.status, r.raw)
	}
	// Unknown routes: 404 ENDPOINT_NOT_FOUND in a JSON body, which the
	// client raises as a RestException (its endpoint fallbacks catch that).
	if r := do(t, s, "GET", "/api/2.0/mlflow/nope", nil); r.status != 404 || r.body["error_code"] != "ENDPOINT_NOT_FOUND" {
		t.Fatalf("unknown route: %d %q", r.status, r.raw)
	}
}

func TestErrors(t *testing.T) {
	s := MustServer(t)
	id := do(t, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0"}).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	tests := map[string]struct {
		method, path string
		body         any
		contentType  string
		status       int
		code         string
		contains     string
	}{
		"MalformedJSON":     {"POST", "/api/2.0/mlflow/experiments/create", `{"name":`, "", 400, "INVALID_PARAMETER_VALUE", "malformed JSON"},
		"WrongType":         {"POST", "/api/2.0/mlflow/experiments/create", `{"name": 5}`, "", 400, "INVALID_PARAMETER_VALUE", "'name'"},
		"UnknownField":      {"POST", "/api/2.0/mlflow/experiments/create", `{"name": "x", "nmae": "y"}`, "", 400, "INVALID_PARAMETER_VALUE", `"nmae"`},
		"UnknownQueryParam": {"GET", "/api/2.0/mlflow/runs/get?run_id=" + id + "&x=1", nil, "", 400, "INVALID_PARAMETER_VALUE", "'x'"},
		"InvalidUTF8":       {"POST", "/api/2.0/mlflow/experiments/create", []byte("{\"name\": \"\xff\"}"), "", 400, "INVALID_PARAMETER_VALUE", "UTF-8"},
		"TooLarge":          {"POST", "/api/2.0/mlflow/experiments/create", `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, "", 413, "RESOURCE_LIMIT_EXCEEDED", "limit"},
		"NotJSONType":       {"POST", "/api/2.0/mlflow/experiments/create", `{"name": "x"}`, "text/plain", 400, "INVALID_PARAMETER_VALUE", "Content-Type"},
		"BadValue":          {"POST", "/api/2.0/mlflow/runs/log-metric", `{"run_id":"` + id + `","key":"k","value":"abc","timestamp":1}`, "", 400, "INVALID_PARAMETER_VALUE", "value"},
		"MissingValue":      {"POST", "/api/2.0/mlflow/runs/log-metric", `{"run_id":"` + id + `","key":"k","timestamp":1}`, "", 400, "INVALID_PARAMETER_VALUE", "'value'"},
		"StepOutOfRange":    {"POST", "/api/2.0/mlflow/runs/log-metric", `{"run_id":"` + id + `","key":"k","value":1,"timestamp":1,"step":-9007199254740992}`, "", 400, "INVALID_PARAMETER_VALUE", "outside the accepted range"},
		"MissingRun":        {"GET", "/api/2.0/mlflow/runs/get?run_id=" + strings.Repeat("a", 32), nil, "", 404, "RESOURCE_DOES_NOT_EXIST", strings.Repeat("a", 32)},
		"BadFilter":         {"POST", "/api/2.0/mlflow/runs/search", `{"experiment_ids":["0"],"filter":"metrics.x <"}`, "", 400, "INVALID_PARAMETER_VALUE", "position"},
		"BadViewType":       {"POST", "/api/2.0/mlflow/runs/search", `{"experiment_ids":["0"],"run_view_type":"SOME"}`, "", 400, "INVALID_PARAMETER_VALUE", "ACTIVE_ONLY"},
		"Duplicate":         {"POST", "/api/2.0/mlflow/experiments/create", `{"name":"Default"}`, "", 400, "RESOURCE_ALREADY_EXISTS", "Default"},
		// A batch names the point at fault; a key checked for one point is
		// not taken as checked for a different key after it.
		"BatchMissingTimestamp": {"POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"` + id + `","metrics":[{"key":"a","value":1,"timestamp":1},{"key":"a","value":2}]}`, "", 400, "INVALID_PARAMETER_VALUE", "'metrics[1].timestamp'"},
		"BatchStepOutOfRange":   {"POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"` + id + `","metrics":[{"key":"a","value":1,"timestamp":1},{"key":"a","value":1,"timestamp":1,"step":-3},{"key":"a","value":1,"timestamp":1,"step":9007199254740992}]}`, "", 400, "INVALID_PARAMETER_VALUE", "metrics[2] 'a': step 9007199254740992 is outside"},
		"BatchBadSecondKey":     {"POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"` + id + `","metrics":[{"key":"a","value":1,"timestamp":1},{"key":"a","value":1,"timestamp":2},{"key":"a/../b","value":1,"timestamp":1}]}`, "", 400, "INVALID_PARAMETER_VALUE", "'a/../b'"},
		"BatchBadKeyRepeated":   {"POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"` + id + `","metrics":[{"key":"a b!","value":1,"timestamp":1},{"key":"a b!","value":1,"timestamp":2}]}`, "", 400, "INVALID_PARAMETER_VALUE", "'a b!'"},
		"BatchTooBig":           {"POST", "/api/2.0/mlflow/runs/log-batch", `{"run_id":"` + id + `","params":[` + strings.TrimSuffix(strings.Repeat(`{"key":"k","value":"v"},`, 101), ",") + `]}`, "", 400, "RESOURCE_LIMIT_EXCEEDED", "100 params"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var rd io.Reader
			switch b := tc.body.(type) {
			case string:
				rd = strings.NewReader(b)
			case []byte:
				rd = bytes.NewReader(b)
			}
			req := httptest.NewRequest(tc.method, tc.path, rd)
			ct := tc.contentType
			if ct == "" && rd != nil {
				ct = "application/json"
			}
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			var body map[string]string
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != tc.status || body["error_code"] != tc.code || !strings.Contains(body["message"], tc.contains) {
				t.Fatalf("got %d %s, want %d %s containing %q", rec.Code, rec.Body.String(), tc.status, tc.code, tc.contains)
			}
		})
	}
}

// FuzzRequests sends arbitrary bodies and query strings to every route:
// no request may produce a 5xx (the mlflow client retries those for
// minutes) or crash the server.
func FuzzRequests(f *testing.F) {
	s := MustServer(f)
	run := do(f, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0"}).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
	var routes []httpapi.Route
	for _, r := range s.Routes() {
		if strings.HasPrefix(r.Path, "/api/") {
			routes = append(routes, r)
		}
	}
	seeds := []string{
		`{}`, `{"run_id":"` + run + `"}`, `{"experiment_id":"0","name":"x"}`,
		`{"run_id":"` + run + `","metrics":[{"key":"a","value":1,"timestamp":1,"step":2}]}`,
		`{"run_id":"` + run + `","key":"k","value":"v"}`, `{"experiment_ids":["0"],"filter":"metrics.a > 1","order_by":["metrics.a DESC"]}`,
		`null`, `"{}"`, `[]`, `{"run_id":5}`,
	}
	for i, sd := range seeds {
		f.Add(uint8(i), sd, "run_id="+run+"&metric_key=a")
	}
	f.Fuzz(func(t *testing.T, which uint8, body, query string) {
		r := routes[int(which)%len(routes)]
		target := r.Path
		if r.Method == "GET" {
			target += "?" + query
		}
		var rd io.Reader
		if r.Method != "GET" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(r.Method, "http://sextant"+target, rd)
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		start := time.Now()
		s.ServeHTTP(rec, req)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s %s with body %q took %v", r.Method, target, body, d)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s with body %q: %d %s", r.Method, target, body, rec.Code, rec.Body.String())
		}
	})
}

// TestUnknownAPIPathsAnswerJSON: a request under an API prefix that no
// route takes gets the JSON error body every API error has: 404
// ENDPOINT_NOT_FOUND, or 405 ENDPOINT_NOT_FOUND with Allow when the path is
// served for other methods. The web UI's fallback and real routes are unaffected.
func TestUnknownAPIPathsAnswerJSON(t *testing.T) {
	s := MustServer(t)
	for _, c := range []struct {
		method, target string
		status         int
		code, allow    string
	}{
		{"GET", "/api/2.0/mlflow/nope", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/api/2.0/fs/create-download-url?path=/Volumes/a/b/c/d", 404, "ENDPOINT_NOT_FOUND", ""},
		{"GET", "/api/2.0/fs/endpoints", 404, "ENDPOINT_NOT_FOUND", ""},
		{"GET", "/.well-known/nope", 404, "ENDPOINT_NOT_FOUND", ""},
		{"OPTIONS", "/ajax-api/2.0/mlflow/nope", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/api/2.0/mlflow/experiments/get", 405, "ENDPOINT_NOT_FOUND", "GET, HEAD"},
		{"DELETE", "/ajax-api/2.0/mlflow/runs/create", 405, "ENDPOINT_NOT_FOUND", "POST"},
		// MLflow's API families Sextant does not implement (docs/api.md).
		{"POST", "/graphql", 404, "ENDPOINT_NOT_FOUND", ""},
		{"GET", "/graphql", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/api/3.0/mlflow/traces", 404, "ENDPOINT_NOT_FOUND", ""},
		{"GET", "/api/2.0/mlflow/traces", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/ajax-api/3.0/mlflow/gateway/chat", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/api/3.0/mlflow/datasets/search", 404, "ENDPOINT_NOT_FOUND", ""},
		{"GET", "/api/3.0/mlflow/scorers/list", 404, "ENDPOINT_NOT_FOUND", ""},
		{"POST", "/api/3.0/mlflow/issues/search", 404, "ENDPOINT_NOT_FOUND", ""},
	} {
		r := do(t, s, c.method, c.target, nil)
		if r.status != c.status || r.body["error_code"] != c.code || r.header.Get("Content-Type") != "application/json" || r.header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %v %q, Allow %q; want %d %s, Allow %q", c.method, c.target, r.status, r.header.Get("Content-Type"), r.raw, r.header.Get("Allow"), c.status, c.code, c.allow)
		}
		if msg, _ := r.body["message"].(string); !strings.Contains(msg, strings.SplitN(c.target, "?", 2)[0]) {
			t.Errorf("%s %s: message %q does not name the path", c.method, c.target, msg)
		}
	}
	if r := do(t, s, "HEAD", "/api/2.0/nope", nil); r.status != 404 {
		t.Errorf("HEAD of an unknown API path: %d", r.status)
	}
	if r := do(t, s, "GET", "/experiments/1", nil); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Errorf("UI route: %d %q", r.status, r.header.Get("Content-Type"))
	}
	if r := do(t, s, "GET", "/api/2.0/mlflow/experiments/get?experiment_id=0", nil); r.status != 200 {
		t.Errorf("a real route: %d %s", r.status, r.raw)
	}
}
