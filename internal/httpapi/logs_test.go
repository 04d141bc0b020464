package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// MustLogServer returns an API server with run logs over a fresh SQLite
// store, and its log service.
func MustLogServer(tb testing.TB) (*httpapi.Server, *runlogs.Service) {
	return mustLogServer(tb, 2*time.Second)
}

func mustLogServer(tb testing.TB, maxWait time.Duration) (*httpapi.Server, *runlogs.Service) {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(tb.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		tb.Fatal(err)
	}
	logStore, err := sqlstore.OpenLogs(ctx, store, sqlstore.LogOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	logs := runlogs.NewService(logStore, runlogs.Options{PollInterval: 20 * time.Millisecond, MaxWait: maxWait})
	tb.Cleanup(func() {
		logs.Close()
		logStore.Close(ctx)
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
	art := artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")})
	return httpapi.New(httpapi.Options{Tracking: tr, Artifacts: art, Workspace: ws, Files: files, RunLogs: logs, Version: "3.7.0", MaxBodyBytes: 1 << 20}), logs
}

func newRun(tb testing.TB, s http.Handler) string {
	tb.Helper()
	r := do(tb, s, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": "0"})
	if r.status != 200 {
		tb.Fatalf("create run: %d %s", r.status, r.raw)
	}
	return r.body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
}

func appendBody(run, source string, seq int, texts ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"run_id":%q,"source":%q,"first_seq":%d,"node":1,"lines":[`, run, source, seq)
	for i, t := range texts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"timestamp":%d,"stream":"stdout","text":%q}`, 1700000000000+i, t)
	}
	b.WriteString("]}")
	return b.String()
}

func TestLogRoutes(t *testing.T) {
	s, _ := MustLogServer(t)
	run := newRun(t, s)
	r := do(t, s, "POST", "/api/2.0/sextant/logs/append", `{"run_id":"`+run+`","source":"n0","first_seq":0,"local_rank":2,"lines":[
		{"timestamp":1700000000000,"stream":"stdout","text":"hello \u001b[1mworld\u001b[0m"},
		{"timestamp":1700000000001,"stream":"stderr","text":" 50%","cr":true,"node":3,"local_rank":-1},
		{"timestamp":1700000000002,"stream":"stderr","text":"cut","partial":true}]}`)
	if r.status != 200 || r.raw != `{"first_line":1,"stored":3,"duplicates":0,"next_seq":3}` {
		t.Fatalf("append: %d %s", r.status, r.raw)
	}
	// The same request again (a retry): stored once.
	r = do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "n0", 0, "x", "y", "z"))
	if r.status != 200 || r.raw != `{"first_line":0,"stored":0,"duplicates":3,"next_seq":3}` {
		t.Fatalf("retried append: %d %s", r.status, r.raw)
	}
	r = do(t, s, "GET", "/api/2.0/sextant/logs/get?run_id="+run, nil)
	want := `{"lines":[` +
		`{"line":1,"timestamp":1700000000000,"stream":"stdout","node":0,"local_rank":2,"text":"hello \u001b[1mworld\u001b[0m"},` +
		`{"line":2,"timestamp":1700000000001,"stream":"stderr","node":3,"local_rank":-1,"cr":true,"text":" 50%"},` +
		`{"line":3,"timestamp":1700000000002,"stream":"stderr","node":0,"local_rank":2,"partial":true,"text":"cut"}` +
		`],"next_line":4,"total_lines":3,"run_status":"RUNNING"}`
	if r.status != 200 || r.raw != want {
		t.Fatalf("get:\n got %s\nwant %s", r.raw, want)
	}
	// The same routes are served under /ajax-api.
	if r := do(t, s, "GET", "/ajax-api/2.0/sextant/logs/get?run_id="+run+"&from_line=2&limit=1&stream=stderr", nil); r.status != 200 || !strings.Contains(r.raw, `"line":2,`) || strings.Contains(r.raw, `"line":3`) {
		t.Fatalf("ajax get: %d %s", r.status, r.raw)
	}
	r = do(t, s, "GET", "/api/2.0/sextant/logs/search?run_id="+run+"&regex=w.rld", nil)
	if r.status != 200 || len(r.body["lines"].([]any)) != 1 {
		t.Fatalf("search: %d %s", r.status, r.raw)
	}
	r = do(t, s, "GET", "/api/2.0/sextant/logs/search?run_id="+run+"&q=50%25&node=3", nil)
	if r.status != 200 || len(r.body["lines"].([]any)) != 1 {
		t.Fatalf("search q: %d %s", r.status, r.raw)
	}
}

func TestLogRouteErrors(t *testing.T) {
	s, _ := MustLogServer(t)
	run := newRun(t, s)
	missing := "ffffffffffffffffffffffffffffffff"
	for name, tc := range map[string]struct {
		method, target, body string
		status               int
		code                 string
	}{
		"ErrStream":       {"POST", "/api/2.0/sextant/logs/append", `{"run_id":"` + run + `","source":"s","first_seq":0,"lines":[{"timestamp":1,"stream":"stdin","text":"x"}]}`, 400, "INVALID_PARAMETER_VALUE"},
		"ErrNoSeq":        {"POST", "/api/2.0/sextant/logs/append", `{"run_id":"` + run + `","source":"s","lines":[{"timestamp":1,"stream":"stdout","text":"x"}]}`, 400, "INVALID_PARAMETER_VALUE"},
		"ErrNoTimestamp":  {"POST", "/api/2.0/sextant/logs/append", `{"run_id":"` + run + `","source":"s","first_seq":0,"lines":[{"stream":"stdout","text":"x"}]}`, 400, "INVALID_PARAMETER_VALUE"},
		"ErrUnknownField": {"POST", "/api/2.0/sextant/logs/append", `{"run_id":"` + run + `","source":"s","first_seq":0,"colour":1}`, 400, "INVALID_PARAMETER_VALUE"},
		"ErrMissingRun":   {"POST", "/api/2.0/sextant/logs/append", appendBody(missing, "s", 0, "x"), 404, "RESOURCE_DOES_NOT_EXIST"},
		"ErrGetNoRun":     {"GET", "/api/2.0/sextant/logs/get", "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrGetMissing":   {"GET", "/api/2.0/sextant/logs/get?run_id=" + missing, "", 404, "RESOURCE_DOES_NOT_EXIST"},
		"ErrUnknownParam": {"GET", "/api/2.0/sextant/logs/get?run_id=" + run + "&colour=1", "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrSearchNoQ":    {"GET", "/api/2.0/sextant/logs/search?run_id=" + run, "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrBadRegex":     {"GET", "/api/2.0/sextant/logs/search?run_id=" + run + "&regex=(", "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrLimit":        {"GET", "/api/2.0/sextant/logs/get?run_id=" + run + "&limit=1000000", "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrTailAfter":    {"GET", "/api/2.0/sextant/logs/tail?run_id=" + run + "&after_line=-1", "", 400, "INVALID_PARAMETER_VALUE"},
		"ErrTailWait":     {"GET", "/api/2.0/sextant/logs/tail?run_id=" + run + "&wait_ms=x", "", 400, "INVALID_PARAMETER_VALUE"},
	} {
		t.Run(name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := do(t, s, tc.method, tc.target, body)
			if r.status != tc.status || r.body["error_code"] != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.raw, tc.status, tc.code)
			}
		})
	}
	// A deleted run's log is neither written nor read.
	do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 0, "before"))
	if r := do(t, s, "POST", "/api/2.0/mlflow/runs/delete", map[string]any{"run_id": run}); r.status != 200 {
		t.Fatal(r.raw)
	}
	if r := do(t, s, "GET", "/api/2.0/sextant/logs/get?run_id="+run, nil); r.status != 404 {
		t.Fatalf("read of a deleted run: %d %s", r.status, r.raw)
	}
	if r := do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 1, "after")); r.status != 400 {
		t.Fatalf("append to a deleted run: %d %s", r.status, r.raw)
	}
}

func TestLogTailLongPoll(t *testing.T) {
	// Waits of up to a minute: an answer within half of that came from the
	// append (or a poll), not from the wait running out, on any machine.
	s, _ := mustLogServer(t, time.Minute)
	run := newRun(t, s)
	do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 0, "one"))
	// Lines already there come back at once.
	r := do(t, s, "GET", "/api/2.0/sextant/logs/tail?run_id="+run+"&after_line=0", nil)
	if r.status != 200 || r.body["next_line"] != float64(2) {
		t.Fatalf("tail: %d %s", r.status, r.raw)
	}
	// A waiting tail wakes when a line lands. (Should the append come
	// before the tail starts waiting, the tail answers at once: the same.)
	got := make(chan response, 1)
	start := time.Now()
	go func() {
		got <- do(t, s, "GET", "/api/2.0/sextant/logs/tail?run_id="+run+"&after_line=1&wait_ms=60000", nil)
	}()
	time.Sleep(100 * time.Millisecond)
	do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 1, "two"))
	select {
	case r := <-got:
		if r.status != 200 || !strings.Contains(r.raw, `"text":"two"`) || time.Since(start) > 30*time.Second {
			t.Fatalf("woken tail: %d %s after %v", r.status, r.raw, time.Since(start))
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("tail did not answer")
	}
	// wait_ms=0 answers at once, not after the minute.
	start = time.Now()
	if r := do(t, s, "GET", "/api/2.0/sextant/logs/tail?run_id="+run+"&after_line=2&wait_ms=0", nil); r.status != 200 || time.Since(start) > 30*time.Second {
		t.Fatalf("tail without wait: %d %s after %v", r.status, r.raw, time.Since(start))
	}
}

func TestLogTailEventStream(t *testing.T) {
	s, _ := MustLogServer(t)
	run := newRun(t, s)
	srv := httptest.NewServer(s)
	defer srv.Close()
	do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 0, "a", "b"))
	req, _ := http.NewRequest("GET", srv.URL+"/api/2.0/sextant/logs/tail?run_id="+run, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1") // seen line 1 already
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		do(t, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 2, "c"))
		do(t, s, "POST", "/api/2.0/mlflow/runs/update", map[string]any{"run_id": run, "status": "FINISHED"})
	}()
	sc := bufio.NewScanner(resp.Body)
	var events []string
	// Only turns a stream that never ends into a failure.
	deadline := time.AfterFunc(2*time.Minute, func() { resp.Body.Close() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			events = append(events, strings.TrimPrefix(line, "event: "))
		}
		if strings.HasPrefix(line, "data: {\"lines\"") {
			events = append(events, line)
		}
	}
	joined := strings.Join(events, "\n")
	if !strings.Contains(joined, `"text":"b"`) || strings.Contains(joined, `"text":"a"`) || !strings.Contains(joined, `"text":"c"`) || !strings.HasSuffix(joined, "end") {
		t.Fatalf("events:\n%s", joined)
	}
}

// FuzzLogRequests sends arbitrary bodies and query strings to the log
// routes: no request may produce a 5xx or take long.
func FuzzLogRequests(f *testing.F) {
	s, _ := mustLogServer(f, 50*time.Millisecond)
	run := newRun(f, s)
	var routes []httpapi.Route
	for _, r := range s.Routes() {
		if strings.HasPrefix(r.Path, "/api/2.0/sextant/logs/") {
			routes = append(routes, r)
		}
	}
	do(f, s, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "seed", 0, "a", "b", "c"))
	f.Add(uint8(0), appendBody(run, "s", 0, "x\u0000y", "é"), "run_id="+run)
	f.Add(uint8(1), `{"run_id":"`+run+`","source":"s","first_seq":9223372036854775807,"lines":[{"timestamp":1,"stream":"stdout","text":"x"}]}`, "run_id="+run+"&from_line=-5&limit=3&node=0&stream=stderr")
	f.Add(uint8(2), `{}`, "run_id="+run+"&regex=(a|b)*c&from_line=2")
	f.Add(uint8(3), `null`, "run_id="+run+"&after_line=1&wait_ms=10&q=b")
	f.Add(uint8(0), `{"run_id":"`+run+`","source":"s","first_seq":0,"node":-1,"lines":[{"timestamp":-1,"stream":"stdout","text":"x","local_rank":-9}]}`, "")
	f.Fuzz(func(t *testing.T, which uint8, body, query string) {
		r := routes[int(which)%len(routes)]
		target := r.Path
		var rd io.Reader
		if r.Method == "GET" {
			target += "?" + query
		} else {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(r.Method, "http://sextant"+target, rd)
		if err != nil {
			return
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

func TestLogDensity(t *testing.T) {
	h, _ := MustLogServer(t)
	run := newRun(t, h)
	if r := do(t, h, "POST", "/api/2.0/sextant/logs/append", appendBody(run, "s", 0, "a", "b", "c", "d")); r.status != 200 {
		t.Fatalf("append: %d %s", r.status, r.raw)
	}
	r := do(t, h, "GET", "/api/2.0/sextant/logs/density?buckets=4&run_id="+run, nil)
	if r.status != 200 || r.body["total_lines"] != 4.0 {
		t.Fatalf("density: %d %s", r.status, r.raw)
	}
	var sum float64
	for _, n := range asList(r.body["lines"]) {
		sum += n.(float64)
	}
	if sum != 4 || len(asList(r.body["first_lines"])) != len(asList(r.body["lines"])) {
		t.Errorf("density %s", r.raw)
	}
	for q, want := range map[string]string{"buckets=-1": "buckets must be", "buckets=x": "for parameter 'buckets' supplied", "from_ms=9&to_ms=3": "from before to", "bucket=2": "unknown query parameter"} {
		if r := do(t, h, "GET", "/api/2.0/sextant/logs/density?run_id="+run+"&"+q, nil); r.status != 400 || !strings.Contains(r.raw, want) {
			t.Errorf("%s: %d %s", q, r.status, r.raw)
		}
	}
}
