package client_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
)

// TestGPUSink sends samples to the real API through the client the agent
// uses: credentials as the mlflow client sends them, the server's refusals
// mapped by the one error table (a refusal of the batch is errs.Invalid or
// errs.LimitExceeded, which the agent drops; anything else is kept and
// sent again), one attempt per call (the agent spools and retries).
func TestGPUSink(t *testing.T) {
	api := mustServer(t)
	var authHeader string
	status, calls := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authHeader = r.Header.Get("Authorization")
		calls++
		if status != 0 {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error_code":"X","message":"refused"}`)
			return
		}
		api.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	now := time.Now().UnixMilli()
	g := gpu.NewGPU(0, "GPU-0", "H100")
	g.Values[gpu.FieldUtil] = 12.5
	b := &gpu.Batch{Labels: gpu.Labels{Node: "c1", NodeRank: 0, NumNodes: 1}, Samples: []gpu.Sample{{TimestampMs: now, GPUs: []gpu.GPU{g}, Processes: []gpu.Process{{GPU: 0, PID: 1, MemUsedBytes: -1}}}}}

	sink := mustClient(t, srv.URL+"/", client.Options{Token: "tok123"}).GPUSink()
	res, err := sink.Send(t.Context(), b)
	if err != nil || res.Accepted != 1 || authHeader != "Bearer tok123" {
		t.Fatalf("send: %+v %v, Authorization %q", res, err, authHeader)
	}
	sink = mustClient(t, srv.URL, client.Options{Username: "u", Password: "p"}).GPUSink()
	if _, err := sink.Send(t.Context(), b); err != nil || authHeader != "Basic "+base64.StdEncoding.EncodeToString([]byte("u:p")) {
		t.Fatalf("basic: %v %q", err, authHeader)
	}
	for st, code := range map[int]errs.Code{400: errs.Invalid, 401: errs.Unauthenticated, 403: errs.PermissionDenied, 413: errs.LimitExceeded,
		404: errs.NotFound, 503: errs.Unavailable, 500: errs.Unavailable, 429: errs.Throttled} {
		status, calls = st, 0
		_, err := sink.Send(t.Context(), b)
		if errs.CodeOf(err) != code || !strings.Contains(err.Error(), "refused") {
			t.Errorf("HTTP %d: %v (%s), want %s", st, err, errs.CodeOf(err), code)
		}
		if calls != 1 {
			t.Errorf("HTTP %d: sent %d times, want once", st, calls)
		}
	}
	status = 0
	srv.Close()
	if _, err := sink.Send(t.Context(), b); !errs.Is(err, errs.Unavailable) {
		t.Errorf("server gone: %v, want Unavailable", err)
	}
	for _, bad := range []string{"", "file:///tmp/mlruns", "databricks", "http://"} {
		if _, err := client.New(bad, client.Options{}); err == nil {
			t.Errorf("client.New(%q) accepted", bad)
		}
	}
}
