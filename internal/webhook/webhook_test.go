package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/webhook"
)

// receiver is a webhook on loopback: it answers the first fail requests
// with 500 and hands every body it accepts to got.
func receiver(t *testing.T, fail int32) (*httptest.Server, chan webhook.Body, *atomic.Int32) {
	t.Helper()
	got := make(chan webhook.Body, 16)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		raw, _ := io.ReadAll(r.Body)
		if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook request %s %s", r.Method, r.Header.Get("Content-Type"))
		}
		if i <= fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var b webhook.Body
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("webhook body %s: %v", raw, err)
		}
		got <- b
	}))
	t.Cleanup(srv.Close)
	return srv, got, &n
}

func wait(t *testing.T, got chan webhook.Body) webhook.Body {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook arrived")
	}
	return webhook.Body{}
}

func TestRetriesThenDelivers(t *testing.T) {
	srv, got, n := receiver(t, 2)
	s, err := webhook.New(webhook.Options{URL: srv.URL, Backoff: time.Millisecond, RunURL: "https://sx.example/#/experiments/%s/runs/%s"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Notify(runevents.Notification{Run: runevents.RunActivity{RunID: "r1", RunName: "brisk", ExperimentID: "7"},
		Event: runevents.Event{Kind: runevents.KindStalled, TimeMs: 1, GPU: -1, Step: -1, Message: "no metrics, output or events for 15m0s", Open: true}})
	b := wait(t, got)
	if n.Load() != 3 || b.State != "open" || b.Event.Kind != "stalled" || b.Run.URL != "https://sx.example/#/experiments/7/runs/r1" ||
		b.Text != "Run brisk (r1): no metrics, output or events for 15m0s" {
		t.Errorf("after %d requests: %+v", n.Load(), b)
	}
}

// TestGivesUp: a receiver that always fails gets Attempts requests, then
// the notification is dropped; a full queue drops new ones at once.
func TestGivesUp(t *testing.T) {
	srv, _, n := receiver(t, 1<<30)
	s, err := webhook.New(webhook.Options{URL: srv.URL, Backoff: time.Millisecond, Attempts: 3, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 { // the queue holds one; the rest are dropped, never block
		s.Notify(runevents.Notification{Event: runevents.Event{Kind: runevents.KindIdle, Message: "x"}})
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	if got := n.Load(); got < 3 || got > 6 {
		t.Errorf("%d requests for at most two notifications of 3 attempts each", got)
	}
	if _, err := webhook.New(webhook.Options{URL: "ftp://x"}); err == nil {
		t.Error("an ftp URL was taken")
	}
}

// TestIdleAndStalledRuns: the watcher, over a real store, the GPU service
// and the tracking service, with thresholds of a minute: a running run
// whose GPUs drop under 5% is idle after 60 s, one that logs nothing for
// 90 s is stalled; each gets its event, its sextant.alert tag, and a
// webhook on loopback; new output ends the stall.
func TestIdleAndStalledRuns(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	tr := tracking.NewService(st.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := sqlstore.OpenEvents(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	events := runevents.NewService(es, runevents.Options{})
	now := time.Now().Truncate(time.Second)
	gs := sqlstore.OpenGPU(st, sqlstore.GPUOptions{PruneEvery: -1, CommitDelay: -1})
	defer gs.Close(ctx)
	g := gpu.NewService(gs, gpu.ServiceOptions{Runs: tr, Events: events, Now: func() time.Time { return now }})
	srv, got, _ := receiver(t, 0)
	send, err := webhook.New(webhook.Options{URL: srv.URL, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	idleRun, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "idle-one", StartTimeMs: now.UnixMilli()})
	quietRun, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "quiet-one", StartTimeMs: now.UnixMilli()})
	done, _ := tr.CreateRun(ctx, tracking.CreateRunRequest{ExperimentID: "0", RunName: "finished", StartTimeMs: now.UnixMilli()})
	fin := tracking.StatusFinished
	if _, err := tr.UpdateRun(ctx, done.Info.RunID, tracking.RunUpdate{Status: &fin}); err != nil {
		t.Fatal(err)
	}
	w := runevents.NewWatcher(events, es, runevents.WatchOptions{IdleFor: time.Minute, StallFor: 90 * time.Second, Every: 10 * time.Second,
		GPUs: g, Tags: tags{tr}, Notifier: send, Now: func() time.Time { return now }})
	tick := func(util float64) {
		t.Helper()
		now = now.Add(10 * time.Second)
		smp := gpu.Sample{TimestampMs: now.UnixMilli()}
		for i := range 2 {
			gg := gpu.NewGPU(i, "GPU-"+string(rune('a'+i)), "H100")
			gg.Values[gpu.FieldUtil] = util
			smp.GPUs = append(smp.GPUs, gg)
		}
		if _, err := g.Ingest(ctx, &gpu.Batch{Labels: gpu.Labels{Node: "n1", RunID: idleRun.Info.RunID, NodeRank: 0}, Samples: []gpu.Sample{smp}}); err != nil {
			t.Fatal(err)
		}
		// The idle run keeps logging; the quiet one logs nothing.
		if err := tr.LogBatch(ctx, idleRun.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{{Key: "loss", Point: metrics.Point{Step: now.Unix(), TimestampMs: now.UnixMilli(), Value: 1}}}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		tick(95)
	}
	for range 6 {
		tick(1)
	}
	b := wait(t, got)
	if b.State != "open" || b.Event.Kind != "idle" || b.Run.RunName != "idle-one" || !strings.Contains(b.Text, "GPUs idle for 1m0s") {
		t.Fatalf("first webhook: %+v", b)
	}
	if r, _ := tr.GetRun(ctx, idleRun.Info.RunID); tagOf(r, runevents.TagAlert) == "" {
		t.Error("the idle run has no alert tag")
	}
	for range 3 {
		tick(1)
	}
	b = wait(t, got)
	if b.State != "open" || b.Event.Kind != "stalled" || b.Run.RunName != "quiet-one" || !strings.Contains(b.Text, "no metrics, output or events for 1m30s") {
		t.Fatalf("second webhook: %+v", b)
	}
	// The quiet run logs again: its stall ends, with a webhook.
	if err := tr.LogBatch(ctx, quietRun.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{{Key: "loss", Point: metrics.Point{Step: 1, TimestampMs: now.UnixMilli() + 1, Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	tick(1)
	b = wait(t, got)
	if b.State != "closed" || b.Event.Kind != "stalled" || b.Event.EndMs != now.Add(-10*time.Second).UnixMilli()+1 {
		t.Fatalf("third webhook: %+v (now %d)", b, now.UnixMilli())
	}
	if r, _ := tr.GetRun(ctx, quietRun.Info.RunID); tagOf(r, runevents.TagAlert) != "" {
		t.Error("the quiet run keeps its alert tag after it logged again")
	}
	// A finished run is never watched.
	if evs, _ := events.All(ctx, runevents.Query{RunID: done.Info.RunID}); len(evs) != 0 {
		t.Errorf("a finished run got events: %+v", evs)
	}
	select {
	case b := <-got:
		t.Errorf("an unexpected webhook: %+v", b)
	default:
	}
}

type tags struct{ tr *tracking.Service }

func (t tags) SetRunTag(ctx context.Context, id, k, v string) error {
	return t.tr.SetTag(ctx, id, tracking.Tag{Key: k, Value: v})
}
func (t tags) DeleteRunTag(ctx context.Context, id, k string) error {
	return t.tr.DeleteTag(ctx, id, k)
}

func tagOf(r *tracking.Run, k string) string {
	for _, t := range r.Data.Tags {
		if t.Key == k {
			return t.Value
		}
	}
	return ""
}

// TestLogsNoSecretAndEscapesText: a failing delivery logs the webhook's
// scheme and host, never its path or query (a Slack or Teams webhook URL
// is its own secret), whether the receiver answers 500 or cannot be
// reached; and a run name's '<', '>' and '&' reach the text escaped, so
// that "<!channel>" notifies no one and no link is forged.
func TestLogsNoSecretAndEscapesText(t *testing.T) {
	const secret = "/services/T000/B000/XXXXsecretXXXX?sig=hidden"
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer failing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close() // connection refused: the client's error quotes the URL
	for name, base := range map[string]string{"Status500": failing.URL, "Unreachable": goneURL} {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			var mu sync.Mutex
			log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
			s, err := webhook.New(webhook.Options{URL: base + secret, Backoff: time.Millisecond, Attempts: 2, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			s.Notify(runevents.Notification{Run: runevents.RunActivity{RunID: "r1", RunName: "x"}, Event: runevents.Event{Kind: runevents.KindIdle, Message: "m"}})
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				out := logs.String()
				mu.Unlock()
				if strings.Contains(out, "webhook failed") {
					if strings.Contains(out, "XXXXsecretXXXX") || strings.Contains(out, "hidden") || strings.Contains(out, "/services/") {
						t.Fatalf("the log shows the webhook's path or query:\n%s", out)
					}
					if host := strings.TrimPrefix(base, "http://"); !strings.Contains(out, host) {
						t.Fatalf("the log does not name the webhook's host %s:\n%s", host, out)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no failure logged:\n%s", out)
				}
				time.Sleep(5 * time.Millisecond)
			}
			s.Close()
		})
	}
	if _, err := webhook.New(webhook.Options{URL: "ftp://hooks.example" + secret}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad URL's error shows its path: %v", err)
	}

	s, err := webhook.New(webhook.Options{URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.BodyOf(runevents.Notification{Run: runevents.RunActivity{RunID: "r1", RunName: "<!channel> <http://x|y> & z"},
		Event: runevents.Event{Kind: runevents.KindStalled, Message: "no metrics for 1m0s", Open: true}})
	if want := "Run &lt;!channel&gt; &lt;http://x|y&gt; &amp; z (r1): no metrics for 1m0s"; b.Text != want {
		t.Errorf("text %q, want %q", b.Text, want)
	}
	if b.Run.RunName != "<!channel> <http://x|y> & z" {
		t.Errorf("run_name %q: the JSON field keeps the name as it is", b.Run.RunName)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
