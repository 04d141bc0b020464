package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestEnumerationParity: an object the caller may not read answers
// exactly as one that does not exist (status, error_code and message, with
// the name swapped), so that names, emails and ids cannot be confirmed by
// asking; an object the caller can read but not change is refused with
// 403.
func TestEnumerationParity(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	const missingRun, missingModel = "0123456789abcdef0123456789abcdef", "m-0123456789abcdef0123456789abcdef"
	missingCatalog := "nocatalog"
	type req struct{ method, target, name string }
	get := func(target, name string) req { return req{"GET", target, name} }
	for name, c := range map[string]struct {
		hidden, missing req
		body            func(name string) any
	}{
		"ExperimentByID": {
			get("/api/2.0/mlflow/experiments/get?experiment_id="+f.exp, f.exp),
			get("/api/2.0/mlflow/experiments/get?experiment_id=999999", "999999"), nil},
		"ExperimentByName": {
			get("/api/2.0/mlflow/experiments/get-by-name?experiment_name="+url.QueryEscape(f.expName), f.expName),
			get("/api/2.0/mlflow/experiments/get-by-name?experiment_name="+url.QueryEscape(f.folder+"/nope"), f.folder+"/nope"), nil},
		"Run": {
			get("/api/2.0/mlflow/runs/get?run_id="+f.run, f.run),
			get("/api/2.0/mlflow/runs/get?run_id="+missingRun, missingRun), nil},
		"RunLogBatch": {
			req{"POST", "/api/2.0/mlflow/runs/log-batch", f.run},
			req{"POST", "/api/2.0/mlflow/runs/log-batch", missingRun},
			func(id string) any {
				return map[string]any{"run_id": id, "params": []any{map[string]any{"key": "a", "value": "b"}}}
			}},
		"LoggedModel": {
			get("/api/2.0/mlflow/logged-models/"+f.model, f.model),
			get("/api/2.0/mlflow/logged-models/"+missingModel, missingModel), nil},
		"Folder": {
			get("/api/2.0/sextant/workspace/list?path="+f.folder, f.folder),
			get("/api/2.0/sextant/workspace/list?path="+f.folder+"-nope", f.folder+"-nope"), nil},
		"OthersHome": {
			get("/api/2.0/sextant/workspace/list?path=/Users/"+owner, owner),
			get("/api/2.0/sextant/workspace/list?path=/Users/nobody@example.com", "nobody@example.com"), nil},
		"ExperimentInOthersHome": {
			req{"POST", "/api/2.0/mlflow/experiments/create", "/Users/" + owner},
			req{"POST", "/api/2.0/mlflow/experiments/create", "/Users/nobody@example.com"},
			func(home string) any { return map[string]any{"name": home + "/exp"} }},
		"Permissions": {
			get("/api/2.0/sextant/permissions?resource=experiment:"+f.exp, f.exp),
			get("/api/2.0/sextant/permissions?resource=experiment:999999", "999999"), nil},
		"Comments": {
			get("/api/2.0/sextant/comments?target_kind=run&target_id="+f.run, f.run),
			get("/api/2.0/sextant/comments?target_kind=run&target_id="+missingRun, missingRun), nil},
		"Catalog": {
			get("/api/2.1/unity-catalog/catalogs/"+f.catalog, f.catalog),
			get("/api/2.1/unity-catalog/catalogs/"+missingCatalog, missingCatalog), nil},
		"Volume": {
			get("/api/2.1/unity-catalog/volumes/"+f.volume, f.volume),
			get("/api/2.1/unity-catalog/volumes/"+f.catalog+".team.nope", f.catalog+".team.nope"), nil},
		"VolumeFile": {
			get("/api/2.0/fs/files"+f.volumePath()+"/data.bin", f.volume),
			get("/api/2.0/fs/files/Volumes/"+f.catalog+"/team/nope/data.bin", f.catalog+".team.nope"), nil},
		"Artifact": {
			get("/api/2.0/mlflow-artifacts/artifacts/"+f.artifact, f.exp),
			get("/api/2.0/mlflow-artifacts/artifacts/999999/"+missingRun+"/artifacts/a.txt", "999999"), nil},
	} {
		t.Run(name, func(t *testing.T) {
			send := func(r req) response {
				var body any
				if c.body != nil {
					body = c.body(r.name)
				}
				return a.as(outsider, r.method, r.target, body)
			}
			h, m := send(c.hidden), send(c.missing)
			if h.status != http.StatusNotFound || h.status != m.status || h.body["error_code"] != m.body["error_code"] {
				t.Fatalf("unreadable: %d %s; missing: %d %s", h.status, h.raw, m.status, m.raw)
			}
			hm, _ := h.body["message"].(string)
			mm, _ := m.body["message"].(string)
			if strings.ReplaceAll(hm, c.hidden.name, "NAME") != strings.ReplaceAll(mm, c.missing.name, "NAME") {
				t.Fatalf("messages differ:\n unreadable: %s\n missing:    %s", hm, mm)
			}
		})
	}
	// Readable but not writable: a refusal, not a secret.
	res := a.as(reader, "POST", "/api/2.0/mlflow/runs/log-batch", map[string]any{"run_id": f.run, "params": []any{map[string]any{"key": "a", "value": "b"}}})
	if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" {
		t.Fatalf("reader writes a run: %d %s, want 403", res.status, res.raw)
	}
	res = a.as(reader, "DELETE", "/api/2.1/unity-catalog/volumes/"+f.volume, nil)
	if res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED" {
		t.Fatalf("reader deletes a volume: %d %s, want 403", res.status, res.raw)
	}
}

// TestGroupsListShowsOwnGroups: a user sees the groups they belong to,
// with their members; an administrator sees every group.
func TestGroupsListShowsOwnGroups(t *testing.T) {
	a := mustAuthServer(t)
	for _, g := range []string{"team", "secret"} {
		a.must(admin, "POST", "/api/2.0/sextant/groups", map[string]any{"name": g})
	}
	a.must(admin, "POST", "/api/2.0/sextant/groups/members", map[string]any{"group": "team", "email": reader})
	a.must(admin, "POST", "/api/2.0/sextant/groups/members", map[string]any{"group": "secret", "email": owner})
	for user, want := range map[string][]string{reader: {"team"}, owner: {"secret"}, outsider: nil, admin: {"team", "secret"}} {
		res := a.must(user, "GET", "/api/2.0/sextant/groups", nil)
		var got []string
		for _, g := range asList(res.body["groups"]) {
			got = append(got, g.(map[string]any)["name"].(string))
		}
		for _, g := range []string{"team", "secret"} {
			if contains(want, g) != contains(got, g) {
				t.Errorf("%s sees groups %v, want %v (%s)", user, got, want, res.raw)
			}
		}
		if user == outsider && (strings.Contains(res.raw, reader) || strings.Contains(res.raw, owner)) {
			t.Errorf("outsider sees members: %s", res.raw)
		}
	}
}
