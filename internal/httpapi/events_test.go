package httpapi_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runevents/runeventstest"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// MustEventServer is a single-user server with run events.
func MustEventServer(tb testing.TB) *httpapi.Server {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, filepath.Join(tb.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close(ctx) })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		tb.Fatal(err)
	}
	es, err := sqlstore.OpenEvents(ctx, store)
	if err != nil {
		tb.Fatal(err)
	}
	blobs, err := blob.OpenDir(filepath.Join(tb.TempDir(), "artifacts"), blob.DirOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4})
	if err := ws.Init(ctx); err != nil {
		tb.Fatal(err)
	}
	return httpapi.New(httpapi.Options{Tracking: tr, Workspace: ws, Files: blobs, Version: "3.7.0",
		Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")}),
		Events:    runevents.NewService(es, runevents.Options{})})
}

func TestEventRoutes(t *testing.T) {
	h := MustEventServer(t)
	run := newRun(t, h)
	r := do(t, h, "POST", "/api/2.0/sextant/events/append", `{"run_id":"`+run+`","events":[
		{"kind":"checkpoint_save","key":"save-100","time_ms":1800000000000,"end_ms":1800000002000,"step":100,
		 "checkpoint":{"path":"/Volumes/a/b/c/run/step_100","bytes":4096,"ranks":2,"mode":"thread","blocked_ms":120}},
		{"kind":"gpu_xid","severity":"error","time_ms":1800000001000,"node":"n1","gpu":3,"message":"Xid 79","attrs":{"xid":"79"}}]}`)
	if r.status != 200 || r.raw != `{"seqs":[1,2]}` {
		t.Fatalf("append: %d %s", r.status, r.raw)
	}
	r = do(t, h, "GET", "/api/2.0/sextant/events/list?run_id="+run, nil)
	want := `{"events":[{"seq":1,"key":"save-100","kind":"checkpoint_save","severity":"info","time_ms":1800000000000,"end_ms":1800000002000,"step":100,` +
		`"checkpoint":{"path":"/Volumes/a/b/c/run/step_100","outcome":"complete","bytes":4096,"ranks":2,"mode":"thread","blocked_ms":120}},` +
		`{"seq":2,"key":"seq-2","kind":"gpu_xid","severity":"error","time_ms":1800000001000,"node":"n1","gpu":3,"message":"Xid 79","attrs":{"xid":"79"}}]}`
	if r.status != 200 || r.raw != want {
		t.Fatalf("list:\n got %d %s\nwant %s", r.status, r.raw, want)
	}
	for q, n := range map[string]int{"kind=gpu_xid,idle": 1, "kind=idle": 0, "after_seq=1": 1, "open=true": 0, "limit=1": 1, "from_ms=1800000001500": 1} {
		r := do(t, h, "GET", "/ajax-api/2.0/sextant/events/list?run_id="+run+"&"+q, nil)
		if got := len(asList(r.body["events"])); r.status != 200 || got != n {
			t.Errorf("%s: %d events (%d %s), want %d", q, got, r.status, r.raw, n)
		}
	}
	if r := do(t, h, "GET", "/api/2.0/sextant/events/list?limit=1&run_id="+run, nil); r.body["next_seq"] != 1.0 {
		t.Errorf("first page of one: next_seq %v", r.body["next_seq"])
	}

	bad := map[string]struct {
		method, target, body string
		status               int
		msg                  string
	}{
		"ErrKind":        {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `","events":[{"kind":"boom","time_ms":1}]}`, 400, "'events[0].kind': expected one of checkpoint_save"},
		"ErrNoKind":      {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `","events":[{"time_ms":1}]}`, 400, "'events[0].kind'"},
		"ErrField":       {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `","events":[{"kind":"note","time_ms":1,"colour":"red"}]}`, 400, "colour"},
		"ErrOutcome":     {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `","events":[{"kind":"checkpoint_save","time_ms":1,"checkpoint":{"path":"/Volumes/a/b/c","outcome":"done"}}]}`, 400, "checkpoint.outcome"},
		"ErrTime":        {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `","events":[{"kind":"note","time_ms":-5}]}`, 400, "time_ms -5 is not a time"},
		"ErrNoEvents":    {"POST", "/api/2.0/sextant/events/append", `{"run_id":"` + run + `"}`, 400, "'events'"},
		"ErrNoRun":       {"POST", "/api/2.0/sextant/events/append", `{"events":[{"kind":"note","time_ms":1}]}`, 400, "'run_id'"},
		"ErrMissingRun":  {"GET", "/api/2.0/sextant/events/list?run_id=0123456789abcdef0123456789abcdef", "", 404, "not found"},
		"ErrOpen":        {"GET", "/api/2.0/sextant/events/list?open=yes&run_id=" + run, "", 400, "'open'"},
		"ErrListKind":    {"GET", "/api/2.0/sextant/events/list?kind=ckpt&run_id=" + run, "", 400, "'kind'"},
		"ErrParam":       {"GET", "/api/2.0/sextant/events/list?since=1&run_id=" + run, "", 400, "unknown query parameter 'since'"},
		"ErrRange":       {"GET", "/api/2.0/sextant/events/list?from_ms=5&to_ms=5&run_id=" + run, "", 400, "must be before to_ms"},
		"ErrNegativeSeq": {"GET", "/api/2.0/sextant/events/list?after_seq=-1&run_id=" + run, "", 400, "0 or more"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := do(t, h, tc.method, tc.target, body)
			if r.status != tc.status || !strings.Contains(r.raw, tc.msg) {
				t.Errorf("%d %s, want %d with %q", r.status, r.raw, tc.status, tc.msg)
			}
		})
	}
}

// TestEventClient: the Go client carries every field of every shape of
// event there and back.
func TestEventClient(t *testing.T) {
	h := MustEventServer(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	run := newRun(t, h)
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := runeventstest.Sample()
	seqs, err := c.AppendEvents(ctx, run, in)
	if err != nil || len(seqs) != len(in) {
		t.Fatalf("append: %v %v", seqs, err)
	}
	got, err := c.AllEvents(ctx, runevents.Query{RunID: run, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].Seq = seqs[i]
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, in)
	}
	open, err := c.ListEvents(ctx, runevents.Query{RunID: run, OpenOnly: true, Kinds: []runevents.Kind{runevents.KindIdle, runevents.KindStalled}})
	if err != nil || len(open.Events) != 1 || open.Events[0].Key != "idle-1" {
		t.Errorf("open spans: %+v %v", open, err)
	}
}
