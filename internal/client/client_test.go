package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

func mustClient(tb testing.TB, url string, opts client.Options) *client.Client {
	tb.Helper()
	c, err := client.New(url, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestRetries(t *testing.T) {
	var calls atomic.Int32
	failures := int32(2)
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n <= failures {
			w.WriteHeader(status)
			w.Write([]byte(`{"error_code":"TEMPORARILY_UNAVAILABLE","message":"busy"}`))
			return
		}
		w.Write([]byte(`{"experiment_id":"7"}`))
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL, client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	id, err := c.CreateExperiment(context.Background(), "/Shared/x")
	if err != nil || id != "7" || calls.Load() != 3 {
		t.Fatalf("got %q, %v after %d calls", id, err, calls.Load())
	}
	// 429 is retried too.
	calls.Store(0)
	status = http.StatusTooManyRequests
	if _, err := c.CreateExperiment(context.Background(), "/Shared/x"); err != nil || calls.Load() != 3 {
		t.Fatalf("429: %v after %d calls", err, calls.Load())
	}
	// Retries stop after RetryFor, with the server's error.
	calls.Store(0)
	failures = 1000
	status = http.StatusBadGateway
	c = mustClient(t, srv.URL, client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, RetryFor: 100 * time.Millisecond})
	_, err = c.CreateExperiment(context.Background(), "/Shared/x")
	if !errs.Transient(err) || calls.Load() < 3 {
		t.Fatalf("got %v after %d calls", err, calls.Load())
	}
	// No retries at all with a negative RetryFor.
	calls.Store(0)
	c = mustClient(t, srv.URL, client.Options{RetryFor: -1})
	if _, err := c.CreateExperiment(context.Background(), "/Shared/x"); err == nil || calls.Load() != 1 {
		t.Fatalf("no retries: %v after %d calls", err, calls.Load())
	}
}

func TestClientErrors(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Path {
		case "/api/2.0/mlflow/experiments/get-by-name":
			w.WriteHeader(404)
			w.Write([]byte(`{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"Could not find experiment"}`))
		case "/api/2.0/mlflow/experiments/create":
			w.WriteHeader(400)
			w.Write([]byte(`{"error_code":"RESOURCE_ALREADY_EXISTS","message":"exists"}`))
		default:
			w.WriteHeader(403)
			w.Write([]byte(`not json`))
		}
	}))
	defer srv.Close()
	c := mustClient(t, srv.URL, client.Options{MinBackoff: time.Millisecond})
	ctx := context.Background()
	if _, err := c.GetExperimentByName(ctx, "/x"); errs.CodeOf(err) != errs.NotFound || errs.MessageOf(err) != "Could not find experiment" {
		t.Fatalf("404: %v", err)
	}
	if _, err := c.CreateExperiment(ctx, "/x"); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("exists: %v", err)
	}
	if _, err := c.GetRun(ctx, "r"); errs.CodeOf(err) != errs.PermissionDenied || errs.Transient(err) {
		t.Fatalf("403: %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("client errors were retried: %d calls", calls.Load())
	}
	// Nobody listening: Unavailable, transient.
	c = mustClient(t, "http://127.0.0.1:1", client.Options{RetryFor: -1})
	if _, err := c.GetRun(ctx, "r"); errs.CodeOf(err) != errs.Unavailable || !errs.Transient(err) {
		t.Fatalf("connection refused: %v", err)
	}
	if _, err := client.New("file:///tmp/mlruns", client.Options{}); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("file URI: %v", err)
	}
}

func TestAuthHeaders(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"run":{"info":{"run_id":"r","status":"RUNNING"}}}`))
	}))
	defer srv.Close()
	for name, tc := range map[string]struct {
		opts client.Options
		want string
	}{
		"Token":   {client.Options{Token: "t0k", Username: "u", Password: "p"}, "Bearer t0k"},
		"Basic":   {client.Options{Username: "alice@example.com", Password: "pw"}, "Basic YWxpY2VAZXhhbXBsZS5jb206cHc="},
		"NoCreds": {client.Options{}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := mustClient(t, srv.URL+"/", tc.opts)
			run, err := c.GetRun(context.Background(), "r")
			if err != nil || run.Info.Status != tracking.StatusRunning {
				t.Fatal(err)
			}
			if got.Load() != tc.want {
				t.Fatalf("Authorization %q, want %q", got.Load(), tc.want)
			}
		})
	}
}

func TestArtifactPath(t *testing.T) {
	f := func(uri, want string, ok bool) {
		t.Helper()
		got, err := client.ArtifactPath(uri)
		if got != want || (err == nil) != ok {
			t.Errorf("ArtifactPath(%q) = %q, %v", uri, got, err)
		}
	}
	f("mlflow-artifacts:/1/abc/artifacts", "1/abc/artifacts", true)
	f("mlflow-artifacts://host:5000/1/abc/artifacts", "1/abc/artifacts", true)
	f("s3://bucket/1/abc/artifacts", "", false)
}

// mustServer starts the real HTTP API, in single-user mode, on a fresh
// SQLite store with run logs and GPU samples.
func mustServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	ls, err := sqlstore.OpenLogs(ctx, store, sqlstore.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ls.Close(ctx) })
	g := sqlstore.OpenGPU(store, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	t.Cleanup(func() { g.Close(ctx) })
	logs := runlogs.NewService(ls, runlogs.Options{PollInterval: 20 * time.Millisecond})
	t.Cleanup(func() { logs.Close() })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	blobs, _ := blob.OpenDir(filepath.Join(t.TempDir(), "a"), blob.DirOptions{})
	files, _ := blob.OpenDir(filepath.Join(t.TempDir(), "f"), blob.DirOptions{})
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4})
	if err := ws.Init(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Tracking: tr, Workspace: ws, Files: files, RunLogs: logs,
		GPU:       gpu.NewService(g, gpu.ServiceOptions{Runs: tr}),
		Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")})})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv
}

// TestAgainstServer runs the log calls against the real HTTP API.
func TestAgainstServer(t *testing.T) {
	ctx := context.Background()
	srv := mustServer(t)
	c := mustClient(t, srv.URL, client.Options{})

	id, err := c.CreateExperiment(ctx, "/Shared/client")
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: id, RunName: "r", Tags: []tracking.Tag{{Key: "sextant.job_id", Value: "j"}}})
	if err != nil || run.Info.RunName != "r" {
		t.Fatalf("create run: %+v, %v", run, err)
	}
	found, err := c.SearchRuns(ctx, []string{id}, "tags.`sextant.job_id` = 'j'", []string{"attributes.start_time ASC"}, 1)
	if err != nil || len(found) != 1 || found[0].Info.RunID != run.Info.RunID {
		t.Fatalf("search: %v, %v", found, err)
	}
	lines := []runlogs.Line{{TimestampMs: 1, Stream: runlogs.Stdout, LocalRank: -1, Text: "one \x1b[1m\"q\""}, {TimestampMs: 2, Stream: runlogs.Stderr, Node: 1, LocalRank: 0, Flags: runlogs.FlagCR, Text: "two"}}
	res, err := c.AppendLogs(ctx, run.Info.RunID, runlogs.Batch{Source: "s", Lines: lines})
	if err != nil || res.Stored != 2 || res.FirstLine != 1 {
		t.Fatalf("append: %+v, %v", res, err)
	}
	page, err := c.ReadLogs(ctx, runlogs.Query{RunID: run.Info.RunID})
	if err != nil || len(page.Lines) != 2 || page.Lines[0].Text != lines[0].Text || page.Lines[1].Flags != runlogs.FlagCR || page.Lines[1].Node != 1 || !page.Done() {
		t.Fatalf("read: %+v, %v", page, err)
	}
	page, err = c.ReadLogs(ctx, runlogs.Query{RunID: run.Info.RunID, Regexp: "^tw"})
	if err != nil || len(page.Lines) != 1 || page.Lines[0].Number != 2 {
		t.Fatalf("search: %+v, %v", page, err)
	}
	st := tracking.StatusFinished
	if err := c.UpdateRun(ctx, run.Info.RunID, tracking.RunUpdate{Status: &st}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	page, err = c.TailLogs(ctx, runlogs.Query{RunID: run.Info.RunID, FromLine: 3}, 5*time.Second)
	if err != nil || len(page.Lines) != 0 || page.Head.RunStatus != tracking.StatusFinished || time.Since(start) > 2*time.Second {
		t.Fatalf("tail of a finished run: %+v, %v", page, err)
	}
	if err := c.SetTags(ctx, run.Info.RunID, tracking.Tag{Key: "k", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTag(ctx, run.Info.RunID, "k"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetRun(ctx, run.Info.RunID); err != nil || slices.ContainsFunc(got.Data.Tags, func(t tracking.Tag) bool { return t.Key == "k" }) {
		t.Fatalf("tag k after DeleteTag: %+v, %v", got, err)
	}
	body := strings.NewReader("hello\n")
	path, _ := client.ArtifactPath(run.Info.ArtifactURI)
	if err := c.PutArtifact(ctx, path+"/logs/output.txt", body, 6); err != nil {
		t.Fatal(err)
	}
	// PutRunArtifact puts the file under the run's artifacts, where the
	// proxy serves it back.
	dump := `{"entries": []}`
	if err := c.PutRunArtifact(ctx, run.Info.ArtifactURI, "sextant/hang/x/fr.json", strings.NewReader(dump), int64(len(dump))); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/api/2.0/mlflow-artifacts/artifacts/" + path + "/sextant/hang/x/fr.json")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != dump {
		t.Fatalf("the artifact read back: %d %q", resp.StatusCode, got)
	}
	if err := c.PutRunArtifact(ctx, "s3://bucket/1/x/artifacts", "a.json", strings.NewReader(dump), int64(len(dump))); err == nil {
		t.Fatal("PutRunArtifact to a run whose artifacts the proxy does not serve")
	}
}

// TestUnreachableServer: a request to a closed port says at once that the
// server cannot be reached (Options.Unreachable, once per client), gives up
// after RetryFor, and the error names the URL and what to check.
func TestUnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	var told atomic.Int32
	var retryFor time.Duration
	c := mustClient(t, url, client.Options{
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, RetryFor: 200 * time.Millisecond,
		Unreachable: func(err error, d time.Duration) { told.Add(1); retryFor = d },
	})
	for range 2 {
		_, err := c.CreateExperiment(t.Context(), "/Shared/x")
		if !errs.Is(err, errs.Unavailable) {
			t.Fatalf("got %v, want Unavailable", err)
		}
		msg := err.Error()
		for _, want := range []string{"cannot reach the server at " + url, "retried for", "MLFLOW_TRACKING_URI"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
	}
	if told.Load() != 1 || retryFor != 200*time.Millisecond {
		t.Errorf("Unreachable called %d times with %s, want once with 200ms", told.Load(), retryFor)
	}
}

// TestRetryUntilReached: a client that never reached the server gives up
// after RetryUntilReached; one that did (the server answered, then went
// away: a restart) retries for RetryFor.
func TestRetryUntilReached(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"experiment_id":"7"}`))
	}))
	url := srv.URL
	opts := func(got *time.Duration) client.Options {
		return client.Options{
			MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, RetryFor: 600 * time.Millisecond, RetryUntilReached: 50 * time.Millisecond,
			Unreachable: func(_ error, d time.Duration) { *got = d },
		}
	}
	var reachedSaid, neverSaid time.Duration
	reached := mustClient(t, url, opts(&reachedSaid))
	if _, err := reached.CreateExperiment(t.Context(), "/Shared/x"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	never := mustClient(t, url, opts(&neverSaid))
	if _, err := never.CreateExperiment(t.Context(), "/Shared/x"); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("never reached: %v", err)
	}
	start := time.Now()
	if _, err := reached.CreateExperiment(t.Context(), "/Shared/x"); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("reached before: %v", err)
	}
	if neverSaid != 50*time.Millisecond || reachedSaid != 600*time.Millisecond {
		t.Errorf("retry budgets told: %s for a server never reached, %s for one reached before; want 50ms and 600ms", neverSaid, reachedSaid)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a server reached before was retried for %s only", d)
	}
}
