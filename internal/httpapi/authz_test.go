package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/blob/blobtest"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/ui"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/workspace"
)

// The people of the permission tests: an owner of a folder and its
// experiment, a reader and an editor the owner granted the experiment to,
// an outsider, and an administrator.
const (
	owner    = "owner@example.com"
	reader   = "reader@example.com"
	editor   = "editor@example.com"
	outsider = "outsider@example.com"
	admin    = "admin@example.com"
	password = "correct horse battery"
)

var people = []string{owner, reader, editor, outsider, admin}

// authServer is a multi-user server with the five people.
type authServer struct {
	t     *testing.T
	h     *httpapi.Server
	store *sqlstore.Store
	reg   *prometheus.Registry // the server's and its store's metrics
	seq   atomic.Int64
}

func mustAuthServer(t *testing.T) *authServer {
	t.Helper()
	return mustAuthServerOn(t, dirBlobs)
}

// dirBlobs opens a blob store in a new local directory; name says what it
// holds (artifacts, files, volumes).
func dirBlobs(t *testing.T, name string) blob.Store {
	t.Helper()
	st, err := blob.OpenDir(filepath.Join(t.TempDir(), name), blob.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// s3Blobs returns a blob opener for mustAuthServerOn that opens each store
// in a fresh prefix of a MinIO server's bucket (blobtest.MustS3Server).
func s3Blobs(t *testing.T) func(*testing.T, string) blob.Store {
	srv := blobtest.MustS3Server(t)
	return func(t *testing.T, _ string) blob.Store { return srv.MustOpen(t) }
}

// mustAuthServerOn is mustAuthServer with its artifacts, workspace files
// and volumes in the blob stores openBlobs opens.
func mustAuthServerOn(t *testing.T, openBlobs func(t *testing.T, name string) blob.Store) *authServer {
	t.Helper()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "sextant.db"), sqlstore.Options{Synchronous: "NORMAL", Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(ctx) })
	tr := tracking.NewService(store.Tracking(), tracking.Options{})
	if err := tr.Init(ctx); err != nil {
		t.Fatal(err)
	}
	blobs, files, volBlobs := openBlobs(t, "artifacts"), openBlobs(t, "files"), openBlobs(t, "volumes")
	vols := volumes.NewService(store.Volumes(), volBlobs, volumes.Options{})
	ws := workspace.NewService(store.Workspace(), workspace.Options{BcryptCost: 4, Resources: vols})
	if err := ws.Init(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range people {
		if _, err := ws.CreateUser(ctx, nil, p, password, p == admin); err != nil {
			t.Fatal(err)
		}
	}
	gpuStore := sqlstore.OpenGPU(store, sqlstore.GPUOptions{})
	t.Cleanup(func() { gpuStore.Close(ctx) })
	logStore, err := sqlstore.OpenLogs(ctx, store, sqlstore.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logStore.Close(ctx) })
	eventStore, err := sqlstore.OpenEvents(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Options{
		Events:   runevents.NewService(eventStore, runevents.Options{}),
		GPUHours: httpapi.GPUHoursOptions{Store: eventStore},
		Tracking: tr, Workspace: ws, Files: files, Auth: httpapi.AuthOn, Version: "3.7.0", Volumes: vols,
		GPU:       gpu.NewService(gpuStore, gpu.ServiceOptions{Runs: tr}),
		RunLogs:   runlogs.NewService(logStore, runlogs.Options{}),
		Artifacts: artifacts.New(blobs, artifacts.Options{Secret: []byte("0123456789abcdef0123456789abcdef")}),
		UI:        ui.MustNew(),
		Metrics:   reg, Gatherer: reg,
	})
	return &authServer{t: t, h: h, store: store, reg: reg}
}

// as sends a request as user (Basic), or anonymously when user is "".
func (a *authServer) as(user, method, target string, body any) response {
	a.t.Helper()
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
	a.h.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &res.body)
	return res
}

func (a *authServer) must(user, method, target string, body any) response {
	a.t.Helper()
	r := a.as(user, method, target, body)
	if r.status >= 300 {
		a.t.Fatalf("%s %s %s: %d %s", user, method, target, r.status, r.raw)
	}
	return r
}

// fixture is the owner's world, fresh for each request under test.
type fixture struct {
	folder, expName, exp, run, model, artifact, registered string
	comment                                                int64
	// catalog (the admin's; the owner may create schemas in it), schema
	// (the owner's) and volume (the owner's, readable by reader and
	// writable by editor) with file data.bin.
	catalog, schema, volume string
}

// volumePath is the fixture volume's /Volumes path.
func (f fixture) volumePath() string { return "/Volumes/" + strings.ReplaceAll(f.volume, ".", "/") }

func (a *authServer) newFixture() fixture {
	n := a.seq.Add(1)
	f := fixture{folder: fmt.Sprintf("/Users/%s/proj%d", owner, n)}
	f.expName = f.folder + "/exp"
	a.must(owner, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": f.folder})
	f.exp = a.must(owner, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": f.expName}).body["experiment_id"].(string)
	for who, lvl := range map[string]string{reader: "CAN_READ", editor: "CAN_EDIT"} {
		a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + f.exp, "principal": who, "level": lvl})
	}
	run := a.must(owner, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": f.exp}).body["run"].(map[string]any)["info"].(map[string]any)
	f.run = run["run_id"].(string)
	a.must(owner, "POST", "/api/2.0/mlflow/runs/log-batch", map[string]any{"run_id": f.run,
		"metrics": []any{map[string]any{"key": "m", "value": 1, "timestamp": 1, "step": 0}},
		"params":  []any{map[string]any{"key": "p", "value": "1"}},
		"tags":    []any{map[string]any{"key": "t", "value": "1"}}})
	f.model = a.must(owner, "POST", "/api/2.0/mlflow/logged-models", map[string]any{"experiment_id": f.exp, "name": "model"}).body["model"].(map[string]any)["info"].(map[string]any)["model_id"].(string)
	a.must(owner, "PATCH", "/api/2.0/mlflow/logged-models/"+f.model+"/tags", map[string]any{"tags": []any{map[string]any{"key": "k", "value": "v"}}})
	f.artifact = f.exp + "/" + f.run + "/artifacts/a.txt"
	a.must(owner, "PUT", "/api/2.0/mlflow-artifacts/artifacts/"+f.artifact, "hello")
	f.comment = int64(a.must(owner, "POST", "/api/2.0/sextant/comments", map[string]any{"target_kind": "run", "target_id": f.run, "body": "first"}).body["comment"].(map[string]any)["id"].(float64))
	f.registered = fmt.Sprintf("reg%d", n)
	a.must(owner, "POST", "/api/2.0/mlflow/registered-models/create", map[string]any{"name": f.registered})
	a.must(owner, "POST", "/api/2.0/mlflow/model-versions/create", map[string]any{"name": f.registered, "source": "models:/" + f.model, "model_id": f.model})
	f.catalog = fmt.Sprintf("cat%d", n)
	f.schema, f.volume = f.catalog+".team", f.catalog+".team.ckpt"
	a.must(admin, "POST", "/api/2.1/unity-catalog/catalogs", map[string]any{"name": f.catalog})
	a.must(admin, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "catalog:" + f.catalog, "principal": owner, "level": "CAN_EDIT"})
	a.must(owner, "POST", "/api/2.1/unity-catalog/schemas", map[string]any{"catalog_name": f.catalog, "name": "team"})
	a.must(owner, "POST", "/api/2.1/unity-catalog/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "ckpt"})
	for who, lvl := range map[string]string{reader: "CAN_READ", editor: "CAN_EDIT"} {
		a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "volume:" + f.volume, "principal": who, "level": lvl})
	}
	a.must(owner, "PUT", "/api/2.0/fs/files"+f.volumePath()+"/data.bin", "0123456789")
	return f
}

// Who may do what, by the owner's grants on the fixture's experiment.
var (
	readers   = []string{reader, editor, owner, admin}
	editors   = []string{editor, owner, admin}
	managers  = []string{owner, admin}
	everyone  = people
	adminOnly = []string{admin}
)

type routeCase struct {
	allow []string
	// req returns the request to send against the fixture, as user.
	req func(f fixture, user string) (method, target string, body any)
}

func get(target string) func(fixture, string) (string, string, any) {
	return func(fixture, string) (string, string, any) { return "GET", target, nil }
}

// routeCases has one case per route pattern (with /ajax-api folded into
// /api). TestPermissionMatrix fails for a route without one, so a new
// route cannot escape the matrix.
func routeCases() map[string]routeCase {
	ml := "/api/2.0/mlflow"
	uc := "/api/2.1/unity-catalog"
	gpu := "/api/2.0/sextant/gpu"
	return map[string]routeCase{
		"GET /health": {everyone, get("/health")},
		// The web UI's pages and assets hold no data: anyone may load them.
		"GET /":                 {everyone, get("/experiments/1")},
		"GET /assets/{path...}": {everyone, get("/assets/" + uiAsset())},
		"GET /version":          {everyone, get("/version")},
		// Prometheus metrics: counts and sizes, no names; any signed-in
		// user or token (docs/deploy.md), never anonymous.
		"GET /metrics":                       {everyone, get("/metrics")},
		"GET /.well-known/databricks-config": {everyone, get("/.well-known/databricks-config")},
		"GET /api/3.0/mlflow/server-info":    {everyone, get("/api/3.0/mlflow/server-info")},
		"POST " + ml + "/experiments/create": {managers, func(f fixture, u string) (string, string, any) {
			return "POST", ml + "/experiments/create", map[string]any{"name": f.folder + "/new-" + strings.Split(u, "@")[0]}
		}},
		"GET " + ml + "/experiments/get": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/experiments/get?experiment_id=" + f.exp, nil
		}},
		"GET " + ml + "/experiments/get-by-name": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/experiments/get-by-name?experiment_name=" + f.expName, nil
		}},
		"POST " + ml + "/experiments/search": {everyone, func(fixture, string) (string, string, any) {
			return "POST", ml + "/experiments/search", map[string]any{}
		}},
		"GET " + ml + "/experiments/search": {everyone, get(ml + "/experiments/search")},
		"POST " + ml + "/experiments/update": {editors, func(f fixture, u string) (string, string, any) {
			return "POST", ml + "/experiments/update", map[string]any{"experiment_id": f.exp, "new_name": f.expName}
		}},
		"POST " + ml + "/experiments/delete": {managers, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/experiments/delete", map[string]any{"experiment_id": f.exp}
		}},
		"POST " + ml + "/experiments/restore": {managers, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/experiments/restore", map[string]any{"experiment_id": f.exp}
		}},
		"POST " + ml + "/experiments/set-experiment-tag": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/experiments/set-experiment-tag", map[string]any{"experiment_id": f.exp, "key": "k", "value": "v"}
		}},
		"POST " + ml + "/experiments/delete-experiment-tag": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/experiments/delete-experiment-tag", map[string]any{"experiment_id": f.exp, "key": "k"}
		}},
		"POST " + ml + "/runs/create": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/create", map[string]any{"experiment_id": f.exp}
		}},
		"GET " + ml + "/runs/get": {readers, func(f fixture, _ string) (string, string, any) { return "GET", ml + "/runs/get?run_id=" + f.run, nil }},
		"POST " + ml + "/runs/update": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/update", map[string]any{"run_id": f.run, "status": "FINISHED"}
		}},
		"POST " + ml + "/runs/delete": {managers, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/delete", map[string]any{"run_id": f.run}
		}},
		"POST " + ml + "/runs/restore": {managers, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/restore", map[string]any{"run_id": f.run}
		}},
		"POST " + ml + "/runs/log-metric": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/log-metric", map[string]any{"run_id": f.run, "key": "m", "value": 2, "timestamp": 2, "step": 1}
		}},
		"POST " + ml + "/runs/log-parameter": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/log-parameter", map[string]any{"run_id": f.run, "key": "p2", "value": "x"}
		}},
		"POST " + ml + "/runs/set-tag": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/set-tag", map[string]any{"run_id": f.run, "key": "t2", "value": "x"}
		}},
		"POST " + ml + "/runs/delete-tag": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/delete-tag", map[string]any{"run_id": f.run, "key": "t"}
		}},
		"POST " + ml + "/runs/log-batch": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/log-batch", map[string]any{"run_id": f.run, "metrics": []any{map[string]any{"key": "m", "value": 3, "timestamp": 3, "step": 2}}}
		}},
		"POST " + ml + "/runs/log-inputs": {editors, func(f fixture, _ string) (string, string, any) {
			// A dataset too, so that TestReferenceProbe probes the fields
			// of an object two levels down (datasets[].dataset).
			return "POST", ml + "/runs/log-inputs", map[string]any{"run_id": f.run, "models": []any{map[string]any{"model_id": f.model}},
				"datasets": []any{map[string]any{"tags": []any{map[string]any{"key": "mlflow.data.context", "value": "train"}},
					"dataset": map[string]any{"name": "d", "digest": "abc", "source_type": "local", "source": `{"uri": "/data/d.csv"}`}}}}
		}},
		"POST " + ml + "/runs/outputs": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/outputs", map[string]any{"run_id": f.run, "models": []any{map[string]any{"model_id": f.model, "step": 1}}}
		}},
		"POST " + ml + "/runs/search": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/runs/search", map[string]any{"experiment_ids": []string{f.exp}}
		}},
		"GET " + ml + "/metrics/get-history": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/metrics/get-history?run_id=" + f.run + "&metric_key=m", nil
		}},
		"GET " + ml + "/metrics/get-history-bulk-interval": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/metrics/get-history-bulk-interval?run_ids=" + f.run + "&metric_key=m", nil
		}},
		"GET /ajax-api/2.0/mlflow/metrics/get-history-bulk": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk?run_id=" + f.run + "&metric_key=m", nil
		}},
		"POST " + ml + "/logged-models": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/logged-models", map[string]any{"experiment_id": f.exp, "name": "m2"}
		}},
		"POST " + ml + "/logged-models/search": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/logged-models/search", map[string]any{"experiment_ids": []string{f.exp}}
		}},
		"GET " + ml + "/logged-models/{model_id}": {readers, func(f fixture, _ string) (string, string, any) { return "GET", ml + "/logged-models/" + f.model, nil }},
		"PATCH " + ml + "/logged-models/{model_id}": {editors, func(f fixture, _ string) (string, string, any) {
			return "PATCH", ml + "/logged-models/" + f.model, map[string]any{"status": "LOGGED_MODEL_READY"}
		}},
		"DELETE " + ml + "/logged-models/{model_id}": {managers, func(f fixture, _ string) (string, string, any) {
			return "DELETE", ml + "/logged-models/" + f.model, map[string]any{}
		}},
		"PATCH " + ml + "/logged-models/{model_id}/tags": {editors, func(f fixture, _ string) (string, string, any) {
			return "PATCH", ml + "/logged-models/" + f.model + "/tags", map[string]any{"tags": []any{map[string]any{"key": "a", "value": "b"}}}
		}},
		"DELETE " + ml + "/logged-models/{model_id}/tags/{tag_key...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "DELETE", ml + "/logged-models/" + f.model + "/tags/k", nil
		}},
		"POST " + ml + "/logged-models/{model_id}/params": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/logged-models/" + f.model + "/params", map[string]any{"params": []any{map[string]any{"key": "a", "value": "b"}}}
		}},
		// The registry is shared by every signed-in user.
		"POST " + ml + "/registered-models/create": {everyone, func(f fixture, u string) (string, string, any) {
			return "POST", ml + "/registered-models/create", map[string]any{"name": f.registered + "-" + u}
		}},
		"GET " + ml + "/registered-models/get": {everyone, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/registered-models/get?name=" + f.registered, nil
		}},
		"PATCH " + ml + "/registered-models/update": {everyone, func(f fixture, _ string) (string, string, any) {
			return "PATCH", ml + "/registered-models/update", map[string]any{"name": f.registered, "description": "d"}
		}},
		"POST " + ml + "/registered-models/rename": {everyone, func(f fixture, u string) (string, string, any) {
			return "POST", ml + "/registered-models/rename", map[string]any{"name": f.registered, "new_name": f.registered + "-r-" + u}
		}},
		"DELETE " + ml + "/registered-models/delete": {everyone, func(f fixture, _ string) (string, string, any) {
			return "DELETE", ml + "/registered-models/delete", map[string]any{"name": f.registered}
		}},
		"GET " + ml + "/registered-models/search": {everyone, get(ml + "/registered-models/search")},
		"POST " + ml + "/registered-models/get-latest-versions": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/registered-models/get-latest-versions", map[string]any{"name": f.registered}
		}},
		"GET " + ml + "/registered-models/get-latest-versions": {everyone, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/registered-models/get-latest-versions?name=" + f.registered, nil
		}},
		"POST " + ml + "/registered-models/set-tag": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/registered-models/set-tag", map[string]any{"name": f.registered, "key": "k", "value": "v"}
		}},
		"DELETE " + ml + "/registered-models/delete-tag": {everyone, func(f fixture, u string) (string, string, any) {
			return "DELETE", ml + "/registered-models/delete-tag", map[string]any{"name": f.registered, "key": "nope-" + u}
		}},
		"POST " + ml + "/registered-models/alias": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/registered-models/alias", map[string]any{"name": f.registered, "alias": "champion", "version": "1"}
		}},
		"DELETE " + ml + "/registered-models/alias": {everyone, func(f fixture, _ string) (string, string, any) {
			return "DELETE", ml + "/registered-models/alias", map[string]any{"name": f.registered, "alias": "champion"}
		}},
		"GET " + ml + "/registered-models/alias": {everyone, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/registered-models/alias?name=" + f.registered + "&alias=none", nil
		}},
		"POST " + ml + "/model-versions/create": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": "s3://bucket/model"}
		}},
		"GET " + ml + "/model-versions/get": {everyone, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/model-versions/get?name=" + f.registered + "&version=1", nil
		}},
		"PATCH " + ml + "/model-versions/update": {everyone, func(f fixture, _ string) (string, string, any) {
			return "PATCH", ml + "/model-versions/update", map[string]any{"name": f.registered, "version": "1", "description": "d"}
		}},
		"DELETE " + ml + "/model-versions/delete": {everyone, func(f fixture, _ string) (string, string, any) {
			return "DELETE", ml + "/model-versions/delete", map[string]any{"name": f.registered, "version": "1"}
		}},
		"GET " + ml + "/model-versions/search": {everyone, get(ml + "/model-versions/search")},
		// The download URI names where the version's files are: for those
		// who can read the logged model or run it was registered from.
		"GET " + ml + "/model-versions/get-download-uri": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/model-versions/get-download-uri?name=" + f.registered + "&version=1", nil
		}},
		"POST " + ml + "/model-versions/transition-stage": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/model-versions/transition-stage", map[string]any{"name": f.registered, "version": "1", "stage": "Staging"}
		}},
		"POST " + ml + "/model-versions/set-tag": {everyone, func(f fixture, _ string) (string, string, any) {
			return "POST", ml + "/model-versions/set-tag", map[string]any{"name": f.registered, "version": "1", "key": "k", "value": "v"}
		}},
		"DELETE " + ml + "/model-versions/delete-tag": {everyone, func(f fixture, u string) (string, string, any) {
			return "DELETE", ml + "/model-versions/delete-tag", map[string]any{"name": f.registered, "version": "1", "key": "nope-" + u}
		}},
		"GET " + ml + "/artifacts/list": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", ml + "/artifacts/list?run_id=" + f.run, nil
		}},
		"PUT /api/2.0/mlflow-artifacts/artifacts/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/mlflow-artifacts/artifacts/" + f.exp + "/" + f.run + "/artifacts/b.txt", "data"
		}},
		"GET /api/2.0/mlflow-artifacts/artifacts/{path...}": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/mlflow-artifacts/artifacts/" + f.artifact, nil
		}},
		"GET /api/2.0/mlflow-artifacts/artifacts": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/mlflow-artifacts/artifacts?path=" + f.exp + "/" + f.run + "/artifacts", nil
		}},
		"DELETE /api/2.0/mlflow-artifacts/artifacts/{path...}": {managers, func(f fixture, _ string) (string, string, any) {
			return "DELETE", "/api/2.0/mlflow-artifacts/artifacts/" + f.artifact, nil
		}},
		"POST /api/2.0/mlflow-artifacts/mpu/create/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/mlflow-artifacts/mpu/create/" + f.exp + "/" + f.run + "/artifacts", map[string]any{"path": "/tmp/big.bin", "num_parts": 2}
		}},
		"POST /api/2.0/mlflow-artifacts/mpu/complete/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/mlflow-artifacts/mpu/complete/" + f.exp + "/" + f.run + "/artifacts", map[string]any{"path": "/tmp/big.bin", "upload_id": "0123", "parts": []any{}}
		}},
		"POST /api/2.0/mlflow-artifacts/mpu/abort/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/mlflow-artifacts/mpu/abort/" + f.exp + "/" + f.run + "/artifacts", map[string]any{"path": "/tmp/big.bin", "upload_id": "0123"}
		}},
		// Part uploads are authorised by their signed token, not a user:
		// without a valid token everyone is refused.
		"PUT /api/2.0/mlflow-artifacts/mpu/part/{path...}": {nil, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/mlflow-artifacts/mpu/part/" + f.exp + "/x?upload_id=1&part_number=1", "x"
		}},
		"POST /api/2.0/sextant/auth/login": {everyone, func(fixture, string) (string, string, any) { return "GET", "/health", nil }},
		"POST /api/2.0/sextant/auth/logout": {everyone, func(fixture, string) (string, string, any) {
			return "POST", "/api/2.0/sextant/auth/logout", map[string]any{}
		}},
		"GET /api/2.0/sextant/auth/whoami": {everyone, get("/api/2.0/sextant/auth/whoami")},
		"POST /api/2.0/sextant/users": {adminOnly, func(f fixture, u string) (string, string, any) {
			return "POST", "/api/2.0/sextant/users", map[string]any{"email": fmt.Sprintf("new-%s-%s@example.com", strings.Split(u, "@")[0], strings.ReplaceAll(f.folder, "/", "")), "password": password}
		}},
		"GET /api/2.0/sextant/users": {adminOnly, get("/api/2.0/sextant/users")},
		"PATCH /api/2.0/sextant/users": {adminOnly, func(fixture, string) (string, string, any) {
			return "PATCH", "/api/2.0/sextant/users", map[string]any{"email": outsider, "display_name": "Outsider"}
		}},
		"POST /api/2.0/sextant/users/password": {adminOnly, func(fixture, string) (string, string, any) {
			return "POST", "/api/2.0/sextant/users/password", map[string]any{"email": reader, "new_password": password}
		}},
		"POST /api/2.0/sextant/tokens": {everyone, func(fixture, string) (string, string, any) {
			return "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "ci"}
		}},
		"GET /api/2.0/sextant/tokens": {everyone, get("/api/2.0/sextant/tokens")},
		// Everyone may revoke their own tokens (an unknown id is a 404).
		"DELETE /api/2.0/sextant/tokens": {everyone, func(fixture, string) (string, string, any) {
			return "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": 999999}
		}},
		"POST /api/2.0/sextant/groups": {adminOnly, func(f fixture, u string) (string, string, any) {
			return "POST", "/api/2.0/sextant/groups", map[string]any{"name": "g" + strings.ReplaceAll(f.folder, "/", "") + strings.Split(u, "@")[0]}
		}},
		"GET /api/2.0/sextant/groups": {everyone, get("/api/2.0/sextant/groups")},
		"POST /api/2.0/sextant/groups/members": {adminOnly, func(fixture, string) (string, string, any) {
			return "POST", "/api/2.0/sextant/groups/members", map[string]any{"group": "team", "email": reader}
		}},
		"GET /api/2.0/sextant/permissions": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/permissions?resource=experiment:" + f.exp, nil
		}},
		"PUT /api/2.0/sextant/permissions": {managers, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + f.exp, "principal": outsider, "level": "CAN_READ"}
		}},
		"POST /api/2.0/sextant/workspace/mkdirs": {managers, func(f fixture, u string) (string, string, any) {
			return "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": f.folder + "/sub-" + strings.Split(u, "@")[0]}
		}},
		"GET /api/2.0/sextant/workspace/list": {managers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/workspace/list?path=" + f.folder, nil
		}},
		"POST /api/2.0/sextant/comments": {readers, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/sextant/comments", map[string]any{"target_kind": "run", "target_id": f.run, "body": "nice"}
		}},
		"GET /api/2.0/sextant/comments": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/comments?target_kind=run&target_id=" + f.run, nil
		}},
		// Only the author edits; the author or a manager deletes.
		"PATCH /api/2.0/sextant/comments": {[]string{owner}, func(f fixture, _ string) (string, string, any) {
			return "PATCH", "/api/2.0/sextant/comments", map[string]any{"id": f.comment, "body": "edited"}
		}},
		"DELETE /api/2.0/sextant/comments": {managers, func(f fixture, _ string) (string, string, any) {
			return "DELETE", "/api/2.0/sextant/comments", map[string]any{"id": f.comment}
		}},
		"GET /api/2.0/sextant/audit": {adminOnly, get("/api/2.0/sextant/audit")},
		"PUT /api/2.0/fs/files/Workspace/{path...}": {managers, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/fs/files/Workspace" + f.folder + "/helper.py", "print(1)"
		}},
		"GET /api/2.0/fs/files/Workspace/{path...}": {managers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/fs/files/Workspace" + f.folder + "/missing.py", nil
		}},
		"DELETE /api/2.0/fs/files/Workspace/{path...}": {managers, func(f fixture, _ string) (string, string, any) {
			return "DELETE", "/api/2.0/fs/files/Workspace" + f.folder + "/missing.py", nil
		}},
		"GET /api/2.0/fs/directories/Workspace/{path...}": {managers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/fs/directories/Workspace" + f.folder, nil
		}},
		"PUT /api/2.0/fs/directories/Workspace/{path...}": {managers, func(f fixture, u string) (string, string, any) {
			return "PUT", "/api/2.0/fs/directories/Workspace" + f.folder + "/d-" + strings.Split(u, "@")[0], nil
		}},
		// GPU samples: any signed-in agent may post and read node-wide
		// samples; naming a run needs CAN_EDIT to post (the samples become
		// the run's system metrics) and CAN_READ to read.
		"POST " + gpu + "/samples": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", gpu + "/samples", map[string]any{"node": "n1", "run_id": f.run, "samples": []any{
				map[string]any{"ts_ms": time.Now().UnixMilli(), "gpus": []any{map[string]any{"index": 0, "util": 50}}}}}
		}},
		"GET " + gpu + "/latest": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", gpu + "/latest?run_id=" + f.run, nil
		}},
		// Node health: node-wide, as the GPU pane's node-wide reads (a
		// finding's runs are shown to their readers only).
		"GET /api/2.0/sextant/nodes":        {everyone, get("/api/2.0/sextant/nodes")},
		"GET /api/2.0/sextant/nodes/health": {everyone, get("/api/2.0/sextant/nodes/health?node=n1")},
		"GET " + gpu + "/series": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", gpu + "/series?run_id=" + f.run + "&points=10", nil
		}},
		// Run logs follow the run's experiment.
		"POST /api/2.0/sextant/logs/append": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/sextant/logs/append", map[string]any{"run_id": f.run, "first_seq": 0,
				"lines": []any{map[string]any{"timestamp": 1, "stream": "stdout", "text": "hello"}}}
		}},
		"GET /api/2.0/sextant/logs/get": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/logs/get?run_id=" + f.run, nil
		}},
		"GET /api/2.0/sextant/logs/search": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/logs/search?q=x&run_id=" + f.run, nil
		}},
		"GET /api/2.0/sextant/logs/tail": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/logs/tail?wait_ms=0&run_id=" + f.run, nil
		}},
		"GET /api/2.0/sextant/logs/density": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/logs/density?buckets=10&run_id=" + f.run, nil
		}},
		// Run events follow the run's experiment.
		"POST /api/2.0/sextant/events/append": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/sextant/events/append", map[string]any{"run_id": f.run, "events": []any{
				map[string]any{"kind": "checkpoint_save", "time_ms": 1_800_000_000_000, "step": 10, "key": "save-10",
					"checkpoint": map[string]any{"path": f.volumePath() + "/step_10", "outcome": "complete", "bytes": 10}}}}
		}},
		"GET /api/2.0/sextant/events/list": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/events/list?kind=checkpoint_save&run_id=" + f.run, nil
		}},
		// Progress follows the run's experiment.
		"POST /api/2.0/sextant/progress": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/sextant/progress", map[string]any{"run_id": f.run, "node": "n1", "reports": []any{
				map[string]any{"rank": 0, "step": 1, "step_time_s": 0.5}}}
		}},
		"GET /api/2.0/sextant/progress": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/progress?run_id=" + f.run, nil
		}},
		// Goodput follows the run's experiment.
		"GET /api/2.0/sextant/goodput": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/goodput?run_id=" + f.run, nil
		}},
		// GPU-hours follow the run's experiment (a folder's count only
		// what the caller can read: gpuhours_test.go).
		"GET /api/2.0/sextant/gpu-hours": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/sextant/gpu-hours?run_id=" + f.run, nil
		}},
		// Volumes: catalogs are the administrators'; the owner may create
		// schemas in the fixture's catalog and owns its schema and volume;
		// reader and editor have grants on the volume only, which lets them
		// see the catalog and schema that hold it.
		"POST " + uc + "/catalogs": {adminOnly, func(f fixture, u string) (string, string, any) {
			return "POST", uc + "/catalogs", map[string]any{"name": f.catalog + "-" + strings.Split(u, "@")[0]}
		}},
		"GET " + uc + "/catalogs":        {everyone, get(uc + "/catalogs")},
		"GET " + uc + "/catalogs/{name}": {readers, func(f fixture, _ string) (string, string, any) { return "GET", uc + "/catalogs/" + f.catalog, nil }},
		"DELETE " + uc + "/catalogs/{name}": {adminOnly, func(f fixture, _ string) (string, string, any) {
			return "DELETE", uc + "/catalogs/" + f.catalog + "?force=true", nil
		}},
		"POST " + uc + "/schemas": {managers, func(f fixture, u string) (string, string, any) {
			return "POST", uc + "/schemas", map[string]any{"catalog_name": f.catalog, "name": "s-" + strings.Split(u, "@")[0]}
		}},
		"GET " + uc + "/schemas": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", uc + "/schemas?catalog_name=" + f.catalog, nil
		}},
		"GET " + uc + "/schemas/{full_name}": {readers, func(f fixture, _ string) (string, string, any) { return "GET", uc + "/schemas/" + f.schema, nil }},
		"DELETE " + uc + "/schemas/{full_name}": {managers, func(f fixture, _ string) (string, string, any) {
			return "DELETE", uc + "/schemas/" + f.schema + "?force=true", nil
		}},
		"POST " + uc + "/volumes": {managers, func(f fixture, u string) (string, string, any) {
			return "POST", uc + "/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "v-" + strings.Split(u, "@")[0], "volume_type": "MANAGED"}
		}},
		"GET " + uc + "/volumes": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", uc + "/volumes?catalog_name=" + f.catalog + "&schema_name=team", nil
		}},
		"GET " + uc + "/volumes/{full_name}":    {readers, func(f fixture, _ string) (string, string, any) { return "GET", uc + "/volumes/" + f.volume, nil }},
		"DELETE " + uc + "/volumes/{full_name}": {managers, func(f fixture, _ string) (string, string, any) { return "DELETE", uc + "/volumes/" + f.volume, nil }},
		"PATCH " + uc + "/catalogs/{name}": {adminOnly, func(f fixture, u string) (string, string, any) {
			return "PATCH", uc + "/catalogs/" + f.catalog, map[string]any{"comment": "by " + u}
		}},
		"PATCH " + uc + "/schemas/{full_name}": {managers, func(f fixture, u string) (string, string, any) {
			return "PATCH", uc + "/schemas/" + f.schema, map[string]any{"comment": "by " + u}
		}},
		"PATCH " + uc + "/volumes/{full_name}": {managers, func(f fixture, u string) (string, string, any) {
			return "PATCH", uc + "/volumes/" + f.volume, map[string]any{"comment": "by " + u, "new_name": "ckpt"}
		}},
		"PUT /api/2.0/fs/files/Volumes/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/fs/files" + f.volumePath() + "/step_1/__0_0.distcp", "shard"
		}},
		"POST /api/2.0/fs/files/Volumes/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "POST", "/api/2.0/fs/files" + f.volumePath() + "/big.bin?action=initiate-upload", nil
		}},
		"GET /api/2.0/fs/endpoints": {everyone, get("/api/2.0/fs/endpoints")},
		"GET /api/2.0/fs/files/Volumes/{path...}": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/fs/files" + f.volumePath() + "/data.bin", nil
		}},
		"HEAD /api/2.0/fs/files/Volumes/{path...}": {readers, func(f fixture, _ string) (string, string, any) {
			return "HEAD", "/api/2.0/fs/files" + f.volumePath() + "/data.bin", nil
		}},
		"DELETE /api/2.0/fs/files/Volumes/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "DELETE", "/api/2.0/fs/files" + f.volumePath() + "/data.bin", nil
		}},
		"PUT /api/2.0/fs/directories/Volumes/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "PUT", "/api/2.0/fs/directories" + f.volumePath() + "/a/b", nil
		}},
		"GET /api/2.0/fs/directories/Volumes/{path...}": {readers, func(f fixture, _ string) (string, string, any) {
			return "GET", "/api/2.0/fs/directories" + f.volumePath(), nil
		}},
		"HEAD /api/2.0/fs/directories/Volumes/{path...}": {readers, func(f fixture, _ string) (string, string, any) {
			return "HEAD", "/api/2.0/fs/directories" + f.volumePath(), nil
		}},
		"DELETE /api/2.0/fs/directories/Volumes/{path...}": {editors, func(f fixture, _ string) (string, string, any) {
			return "DELETE", "/api/2.0/fs/directories" + f.volumePath() + "/missing", nil
		}},
	}
}

// routeKey names a route as routeCases does: /ajax-api folded into /api.
func routeKey(r httpapi.Route) string {
	if r.Path == "/ajax-api/2.0/mlflow/metrics/get-history-bulk" {
		return r.Method + " " + r.Path
	}
	return r.Method + " " + strings.Replace(r.Path, "/ajax-api/", "/api/", 1)
}

// uiAsset names one asset of the embedded UI build.
func uiAsset() string {
	for p := range ui.MustNew().Sizes() {
		if name, ok := strings.CutPrefix(p, "assets/"); ok {
			return name
		}
	}
	return "missing.js"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// seers returns who may read the object a route's request names: a
// refusal answers them 403 PERMISSION_DENIED, and anyone else exactly as
// an object that does not exist, 404 (docs/auth.md, "Enumeration"). The
// fixture's experiment and volume are read by readers; its folder only by
// its managers (the others' grants are on the experiment); routes that
// name no object of the fixture refuse with 403.
func seers(r httpapi.Route) []string {
	switch r.Path {
	case "PUT /api/2.0/fs/directories/Workspace/{path...}", "POST /api/2.0/sextant/workspace/mkdirs":
		// mkdir -p: the folder's hidden parents count as missing, up to
		// /Users, which everyone knows.
		return everyone
	case "POST /api/2.0/mlflow/experiments/create", "GET /api/2.0/sextant/workspace/list",
		"PUT /api/2.0/fs/files/Workspace/{path...}", "GET /api/2.0/fs/files/Workspace/{path...}",
		"DELETE /api/2.0/fs/files/Workspace/{path...}", "GET /api/2.0/fs/directories/Workspace/{path...}":
		return managers
	case "POST /api/2.0/sextant/gpu/samples", "GET /api/2.0/sextant/gpu/latest", "GET /api/2.0/sextant/gpu/series",
		"GET /api/2.0/sextant/permissions", "PUT /api/2.0/sextant/permissions":
		return readers
	}
	switch r.Access {
	case httpapi.ReadExperiment, httpapi.EditExperiment, httpapi.ManageExperiment, httpapi.ReadVolume, httpapi.WriteVolume, httpapi.ManageVolume:
		return readers
	}
	return everyone
}

// TestPermissionMatrix sends every route's request as each of the five
// people against a fresh fixture, and checks that it is allowed exactly
// where the table says and refused elsewhere: with 403 PERMISSION_DENIED
// to those who may read the object (seers), and as a missing object (404)
// to those who may not; anonymous requests to non-public routes get 401.
func TestPermissionMatrix(t *testing.T) {
	a := mustAuthServer(t)
	// A group the groups/members case can use.
	a.must(admin, "POST", "/api/2.0/sextant/groups", map[string]any{"name": "team"})
	cases := routeCases()
	seen := map[string]bool{}
	var routes []httpapi.Route
	for _, r := range a.h.Routes() {
		key := routeKey(r)
		if seen[key] {
			continue
		}
		seen[key] = true
		if _, ok := cases[key]; !ok {
			t.Errorf("route %s has no case in the permission matrix: add one to routeCases", key)
			continue
		}
		routes = append(routes, httpapi.Route{Method: r.Method, Path: key, Access: r.Access})
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Path < routes[j].Path })
	for _, r := range routes {
		c := cases[r.Path]
		t.Run(r.Path, func(t *testing.T) {
			for _, user := range people {
				f := a.newFixture()
				method, target, body := c.req(f, user)
				res := a.as(user, method, target, body)
				allowed := contains(c.allow, user)
				switch {
				case allowed && (res.status == http.StatusForbidden || res.status == http.StatusUnauthorized):
					t.Errorf("%s: %s %s refused (%d %s), want allowed", user, method, target, res.status, res.raw)
				case allowed && res.status >= 500:
					t.Errorf("%s: %s %s failed (%d %s)", user, method, target, res.status, res.raw)
				case !allowed && contains(seers(r), user) && res.status != http.StatusForbidden:
					t.Errorf("%s: %s %s answered %d %s, want 403", user, method, target, res.status, res.raw)
				case !allowed && contains(seers(r), user) && res.body["error_code"] != "PERMISSION_DENIED":
					t.Errorf("%s: %s %s: error_code %v, want PERMISSION_DENIED", user, method, target, res.body["error_code"])
				case !allowed && !contains(seers(r), user) && (res.status != http.StatusNotFound || (res.body["error_code"] != "RESOURCE_DOES_NOT_EXIST" && res.body["error_code"] != "NOT_FOUND")):
					t.Errorf("%s: %s %s answered %d %s, want 404 as for an object that does not exist", user, method, target, res.status, res.raw)
				}
			}
			if r.Access == httpapi.Assets {
				// The UI's static files load without credentials (the login page needs them).
				method, target, body := c.req(a.newFixture(), "")
				if res := a.as("", method, target, body); res.status != http.StatusOK {
					t.Errorf("anonymous %s %s: %d, want 200", method, target, res.status)
				}
			} else if r.Access != httpapi.Public && r.Access != httpapi.SignedCapability {
				f := a.newFixture()
				method, target, body := c.req(f, "")
				if res := a.as("", method, target, body); res.status != http.StatusUnauthorized && !contains(c.allow, "") && method == r.Method {
					t.Errorf("anonymous %s %s: %d, want 401", method, target, res.status)
				}
			}
		})
	}
}

// TestSearchesOnlyShowReadable checks that searches and listings leave out
// what the caller may not read.
func TestSearchesOnlyShowReadable(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	res := a.must(outsider, "POST", "/api/2.0/mlflow/experiments/search", map[string]any{"max_results": 1000})
	for _, e := range asList(res.body["experiments"]) {
		if e.(map[string]any)["experiment_id"] == f.exp {
			t.Fatalf("outsider sees the owner's experiment in experiments/search")
		}
	}
	res = a.must(reader, "POST", "/api/2.0/mlflow/experiments/search", map[string]any{"max_results": 1000})
	found := false
	for _, e := range asList(res.body["experiments"]) {
		found = found || e.(map[string]any)["experiment_id"] == f.exp
	}
	if !found {
		t.Fatalf("reader does not see the experiment granted to them")
	}
	res = a.must(outsider, "POST", "/api/2.0/mlflow/runs/search", map[string]any{"experiment_ids": []string{f.exp}})
	if len(asList(res.body["runs"])) != 0 {
		t.Fatalf("outsider sees runs: %s", res.raw)
	}
	res = a.must(reader, "POST", "/api/2.0/mlflow/runs/search", map[string]any{"experiment_ids": []string{f.exp}})
	if len(asList(res.body["runs"])) != 1 {
		t.Fatalf("reader sees %d runs", len(asList(res.body["runs"])))
	}
	res = a.must(outsider, "GET", "/api/2.0/sextant/workspace/list?path=/Users", nil)
	for _, fo := range asList(res.body["folders"]) {
		if p := fo.(map[string]any)["path"]; p != "/Users/"+outsider {
			t.Fatalf("outsider lists someone else's home: %v", p)
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
