package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// mustHealthServer is a single-user server whose /health reports what
// health returns.
func mustHealthServer(t *testing.T, health func() httpapi.StoreHealth) *httpapi.Server {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	blobs, err := blob.OpenDir(filepath.Join(t.TempDir(), "artifacts"), blob.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.New(httpapi.Options{
		Tracking: tr, Workspace: workspace.NewService(store.Workspace(), workspace.Options{}), Files: blobs,
		Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")}),
		Version:   "3.7.0", Health: health,
	})
}

func TestHealthReadOnly(t *testing.T) {
	var readOnly atomic.Bool
	s := mustHealthServer(t, func() httpapi.StoreHealth {
		if readOnly.Load() {
			return httpapi.StoreHealth{Writable: false, Reason: "the server's disk is full (free disk space under the data directory)", SinceMs: 1700000000000}
		}
		return httpapi.StoreHealth{Writable: true, SinceMs: 1600000000000}
	})
	getJSON := func() (int, map[string]any) {
		req := httptest.NewRequest("GET", "/health", nil)
		req.Header.Set("Accept", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("health JSON: %v: %s", err, rec.Body)
		}
		return rec.Code, body
	}

	if r := do(t, s, "GET", "/health", nil); r.status != 200 || r.raw != "OK" {
		t.Fatalf("health while writable: %d %q", r.status, r.raw)
	}
	if status, body := getJSON(); status != 200 || body["status"] != "OK" || body["database"].(map[string]any)["writable"] != true {
		t.Fatalf("health JSON while writable: %d %v", status, body)
	}

	readOnly.Store(true)
	// Still 200: the server serves reads, and a probe that failed would
	// take it out of service or restart it for nothing.
	if r := do(t, s, "GET", "/health", nil); r.status != 200 || !strings.HasPrefix(r.raw, "READ-ONLY: the server's disk is full") || !strings.Contains(r.raw, "507") {
		t.Fatalf("health while read-only: %d %q", r.status, r.raw)
	}
	status, body := getJSON()
	db, _ := body["database"].(map[string]any)
	if status != 200 || body["status"] != "READ_ONLY" || db["writable"] != false || !strings.Contains(db["reason"].(string), "disk is full") || db["since_ms"] != float64(1700000000000) {
		t.Fatalf("health JSON while read-only: %d %v", status, body)
	}
}

// TestHeaderTooLargeIsJSON sends a 2 MiB URL to a real http.Server set up
// as cmd/sextant sets it up (MaxHeaderBytes, Listener): net/http answers
// before any handler runs, and the answer is a JSON 431 that names the
// limit, not net/http's plain text. It also checks that ordinary requests
// on the wrapped listener are untouched, keep-alive included, and that a
// URL just under the limit reaches the handler.
func TestHeaderTooLargeIsJSON(t *testing.T) {
	s := MustServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, MaxHeaderBytes: httpapi.MaxHeaderBytes, ReadHeaderTimeout: time.Minute}
	go srv.Serve(httpapi.Listener(ln, httpapi.ListenerOptions{}))
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()

	for range 2 { // the second on a kept-alive connection
		resp, err := http.Get(base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "OK" {
			t.Fatalf("health through the listener: %d %q", resp.StatusCode, b)
		}
	}
	// Under the limit: the handler answers (a JSON 400 for the unknown
	// query parameter), not net/http.
	resp, err := http.Get(base + "/api/2.0/mlflow/experiments/get?experiment_id=0&x=" + strings.Repeat("a", httpapi.MaxHeaderBytes-8192))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 431 || !json.Valid(b) {
		t.Fatalf("a URL under the limit: %d %.200s", resp.StatusCode, b)
	}

	// Over the limit, on a raw connection (the request written in the
	// background, the answer read meanwhile).
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go fmt.Fprintf(conn, "GET /api/2.0/mlflow/experiments/get?experiment_id=%s HTTP/1.1\r\nHost: x\r\n\r\n", strings.Repeat("1", 2<<20))
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to a 2 MiB URL: %v", err)
	}
	b, _ = io.ReadAll(resp.Body)
	var e struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}
	if resp.StatusCode != 431 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &e) != nil ||
		e.ErrorCode != "RESOURCE_LIMIT_EXCEEDED" || !strings.Contains(e.Message, fmt.Sprint(httpapi.MaxHeaderBytes)) {
		t.Fatalf("a 2 MiB URL: %d %q %s, want a JSON 431 naming the limit", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
