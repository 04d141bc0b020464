package httpapi_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/httpapi"
)

// The rules of docs/auth.md that are not one route's level: moving an
// experiment, the Default experiment, what a model version discloses,
// listings, and how long a replica trusts a password.

// TestMoveNeedsManage: an editor of someone's experiment may rename it
// within its folder but not move it, not even into their own home (where
// they would manage it) or /Shared (where everyone would); its manager may
// move it into a folder they can edit; the audit log records the move.
func TestMoveNeedsManage(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	update := func(user, name string) response {
		return a.as(user, "POST", "/api/2.0/mlflow/experiments/update", map[string]any{"experiment_id": f.exp, "new_name": name})
	}
	for _, dest := range []string{"/Users/" + editor + "/mine", "/Shared/ours", "/Workspace/Users/" + editor + "/mine"} {
		res := update(editor, dest)
		if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" || !strings.Contains(res.raw, "CAN_MANAGE") {
			t.Fatalf("editor moved the experiment to %s: %d %s", dest, res.status, res.raw)
		}
	}
	// Still governed by the owner's folder: the outsider cannot read it.
	if res := a.as(outsider, "GET", "/api/2.0/mlflow/experiments/get?experiment_id="+f.exp, nil); res.status != http.StatusNotFound {
		t.Fatalf("outsider reads the experiment: %d %s", res.status, res.raw)
	}
	a.must(editor, "POST", "/api/2.0/mlflow/experiments/update", map[string]any{"experiment_id": f.exp, "new_name": f.folder + "/renamed"})
	// A manager needs CAN_EDIT on the destination too.
	if res := update(owner, "/Users/"+outsider+"/theirs"); res.status != http.StatusForbidden || !strings.Contains(res.raw, "new_name") {
		t.Fatalf("owner moved the experiment into the outsider's home: %d %s", res.status, res.raw)
	}
	dest := "/Users/" + owner + "/elsewhere"
	a.must(owner, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": dest})
	a.must(owner, "POST", "/api/2.0/mlflow/experiments/update", map[string]any{"experiment_id": f.exp, "new_name": dest + "/moved"})
	got := a.must(reader, "GET", "/api/2.0/mlflow/experiments/get?experiment_id="+f.exp, nil)
	if name := got.body["experiment"].(map[string]any)["name"]; name != dest+"/moved" {
		t.Fatalf("name after the move: %v", name)
	}
	audit := a.must(admin, "GET", "/api/2.0/sextant/audit", nil).raw
	for _, want := range []string{`"action":"experiment.rename"`, `"action":"experiment.move"`, f.folder + `/renamed -\u003e ` + dest + "/moved"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %s: %s", want, audit)
		}
	}
}

// TestDefaultExperimentIsTheAdmins: no user, not even one an administrator
// made a manager of it, may rename, delete, restore or change the
// permissions of the Default experiment; every user keeps logging to it.
func TestDefaultExperimentIsTheAdmins(t *testing.T) {
	a := mustAuthServer(t)
	a.must(admin, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:0", "principal": reader, "level": "CAN_MANAGE"})
	a.must(outsider, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": "/Users/" + outsider + "/taken"})
	for _, user := range []string{outsider, reader} {
		for _, req := range []struct {
			method, target string
			body           map[string]any
		}{
			{"POST", "/api/2.0/mlflow/experiments/update", map[string]any{"experiment_id": "0", "new_name": "/Users/" + outsider + "/taken/default"}},
			{"POST", "/api/2.0/mlflow/experiments/update", map[string]any{"experiment_id": "0", "new_name": "Mine"}},
			{"POST", "/api/2.0/mlflow/experiments/delete", map[string]any{"experiment_id": "0"}},
			{"POST", "/api/2.0/mlflow/experiments/restore", map[string]any{"experiment_id": "0"}},
			{"PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:0", "principal": "group:users", "level": "NO_PERMISSIONS"}},
			{"PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:00", "principal": "group:users", "level": "NO_PERMISSIONS"}},
		} {
			res := a.as(user, req.method, req.target, req.body)
			if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" {
				t.Errorf("%s: %s %s %v: %d %s, want 403", user, req.method, req.target, req.body, res.status, res.raw)
			}
		}
	}
	for _, user := range []string{outsider, reader, editor} {
		run := a.must(user, "POST", "/api/2.0/mlflow/runs/create", map[string]any{}).body["run"].(map[string]any)["info"].(map[string]any)
		if run["experiment_id"] != "0" {
			t.Fatalf("run created in %v", run["experiment_id"])
		}
	}
	if got := a.must(outsider, "GET", "/api/2.0/mlflow/experiments/get?experiment_id=0", nil); got.body["experiment"].(map[string]any)["name"] != "Default" {
		t.Fatalf("Default renamed: %s", got.raw)
	}
	// Administrators may.
	a.must(admin, "POST", "/api/2.0/mlflow/experiments/delete", map[string]any{"experiment_id": "0"})
	a.must(admin, "POST", "/api/2.0/mlflow/experiments/restore", map[string]any{"experiment_id": "0"})
	a.must(admin, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:0", "principal": reader, "level": "NO_PERMISSIONS"})
}

// TestDownloadURIDiscloses nothing to those who cannot read the source:
// registering another's run or logged model is refused, and the download
// URI of a version registered from a private run is refused without
// naming the run, its experiment or where its files are.
func TestDownloadURIDisclosesNothing(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	for _, src := range []string{"runs:/" + f.run + "/model", "models:/" + f.model, "mlflow-artifacts:/" + f.exp + "/" + f.run + "/artifacts/model"} {
		if res := a.as(outsider, "POST", "/api/2.0/mlflow/model-versions/create", map[string]any{"name": f.registered, "source": src}); res.status != http.StatusForbidden {
			t.Errorf("outsider registered %s: %d %s", src, res.status, res.raw)
		}
	}
	a.must(owner, "POST", "/api/2.0/mlflow/model-versions/create", map[string]any{"name": f.registered, "source": "runs:/" + f.run + "/model", "run_id": f.run})
	for _, v := range []string{"1", "2"} {
		target := "/api/2.0/mlflow/model-versions/get-download-uri?name=" + f.registered + "&version=" + v
		res := a.as(outsider, "GET", target, nil)
		if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" {
			t.Fatalf("outsider: version %s download URI: %d %s", v, res.status, res.raw)
		}
		for _, secret := range []string{f.run, f.model, "mlflow-artifacts", "experiment " + f.exp} {
			if strings.Contains(res.raw, secret) {
				t.Errorf("the refusal discloses %q: %s", secret, res.raw)
			}
		}
		if got := a.must(reader, "GET", target, nil).body["artifact_uri"].(string); !strings.HasPrefix(got, "mlflow-artifacts:/"+f.exp+"/") {
			t.Errorf("reader: version %s download URI %q", v, got)
		}
	}
}

// TestListingsOnlyShowReadable: searches over experiments the caller
// cannot read answer an empty 200, as runs/search does.
func TestListingsOnlyShowReadable(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	res := a.must(outsider, "POST", "/api/2.0/mlflow/logged-models/search", map[string]any{"experiment_ids": []string{f.exp}})
	if res.raw != `{"models":[]}` {
		t.Fatalf("outsider: logged-models/search: %s", res.raw)
	}
	res = a.must(outsider, "POST", "/api/2.0/mlflow/runs/search", map[string]any{"experiment_ids": []string{f.exp}})
	if strings.Contains(res.raw, f.run) {
		t.Fatalf("outsider: runs/search: %s", res.raw)
	}
	if res := a.must(reader, "POST", "/api/2.0/mlflow/logged-models/search", map[string]any{"experiment_ids": []string{f.exp, "0"}}); !strings.Contains(res.raw, f.model) {
		t.Fatalf("reader: logged-models/search: %s", res.raw)
	}
	for body, want := range map[string]string{`{}`: "experiment_ids", `{"experiment_ids": ["../1"]}`: "Invalid experiment ID"} {
		if res := a.as(outsider, "POST", "/api/2.0/mlflow/logged-models/search", body); res.status != http.StatusBadRequest || !strings.Contains(res.raw, want) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, res.status, res.raw, want)
		}
	}
}

// TestPublicProbes: /version and server-info answer without credentials
// and say only what every Sextant server says (docs/auth.md).
func TestPublicProbes(t *testing.T) {
	a := mustAuthServer(t)
	if res := a.as("", "GET", "/version", nil); res.status != 200 || res.raw != "3.7.0" {
		t.Errorf("/version: %d %q", res.status, res.raw)
	}
	if res := a.as("", "GET", "/api/3.0/mlflow/server-info", nil); res.status != 200 || res.raw != `{"store_type":"SqlStore","workspaces_enabled":false}` {
		t.Errorf("server-info: %d %q", res.status, res.raw)
	}
}

// TestPublicRoutesDocumented ties the table "Routes without credentials" of
// docs/auth.md to the route table: every route that answers without
// credentials (Public, SignedCapability, Assets) on a server with every
// service wired is a row of the table, and every route the table names is
// one of them.
func TestPublicRoutesDocumented(t *testing.T) {
	documented := docRoutes(t, "../../docs/auth.md", "## Routes without credentials")
	open := map[string]bool{}
	for _, r := range mustAuthServer(t).h.Routes() {
		switch r.Access {
		case httpapi.Public, httpapi.SignedCapability, httpapi.Assets:
			key := routeKey(r)
			if open[key] {
				continue // the same route under /ajax-api
			}
			open[key] = true
			if !documented[key] {
				t.Errorf("%s answers without credentials (%s) but docs/auth.md's table does not list it", key, r.Access)
			}
		}
	}
	for key := range documented {
		if !open[key] {
			t.Errorf("docs/auth.md lists %s as answering without credentials, but no such route does", key)
		}
	}
	if len(documented) < 5 {
		t.Errorf("found %d routes in docs/auth.md's table, want its rows: %v", len(documented), documented)
	}
}

// docRoutes returns the routes ("METHOD /path", /ajax-api folded into
// /api as routeKey does) quoted in the first column of the table under
// heading in the markdown file at name.
func docRoutes(t *testing.T, name, heading string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", name, heading)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	route := regexp.MustCompile("`((?:GET|HEAD|POST|PUT|PATCH|DELETE) /[^`]*)`")
	out := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range route.FindAllStringSubmatch(cells[1], -1) {
			out[strings.Replace(m[1], " /ajax-api/", " /api/", 1)] = true
		}
	}
	return out
}
