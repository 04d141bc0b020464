package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/workspace"
)

// The second dimension of the permission matrix: requests that act on one
// object and name another. The owner may act on everything of the
// fixture; a stranger's objects are out of the owner's reach, except those
// in a folder the stranger shared with the owner at CAN_READ.

const stranger = "stranger@example.com"

// world is the stranger's: objects the owner cannot read, and others the
// owner can read but not edit.
type world struct {
	folder, expName, exp, run, model string
	// The same in a folder the owner has CAN_READ on.
	rfolder, rexp, rrun, rmodel string
}

func (a *authServer) strangerWorld() world {
	a.t.Helper()
	a.must(admin, "POST", "/api/2.0/sextant/users", map[string]any{"email": stranger, "password": password})
	var w world
	mk := func(folder string) (exp, run, model string) {
		a.must(stranger, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": folder})
		exp = a.must(stranger, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": folder + "/exp"}).body["experiment_id"].(string)
		run = a.must(stranger, "POST", "/api/2.0/mlflow/runs/create", map[string]any{"experiment_id": exp}).body["run"].(map[string]any)["info"].(map[string]any)["run_id"].(string)
		model = a.must(stranger, "POST", "/api/2.0/mlflow/logged-models", map[string]any{"experiment_id": exp, "name": "theirs", "source_run_id": run}).body["model"].(map[string]any)["info"].(map[string]any)["model_id"].(string)
		return exp, run, model
	}
	w.folder = "/Users/" + stranger + "/secret"
	w.expName = w.folder + "/exp"
	w.exp, w.run, w.model = mk(w.folder)
	w.rfolder = "/Users/" + stranger + "/shared"
	w.rexp, w.rrun, w.rmodel = mk(w.rfolder)
	a.must(stranger, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "folder:" + w.rfolder, "principal": owner, "level": "CAN_READ"})
	return w
}

// refCase builds a request on the fixture whose reference is ref.
type refCase func(f fixture, ref string) (method, target string, body any)

// referenceCases has one case per reference a route declares (Route.Refs),
// keyed "<route> <field>". TestReferenceMatrix fails for a declared
// reference without one.
func referenceCases() map[string]refCase {
	ml := "/api/2.0/mlflow"
	tag := func(ref string) []any { return []any{map[string]any{"key": "mlflow.parentRunId", "value": ref}} }
	return map[string]refCase{
		"POST " + ml + "/experiments/create artifact_location": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/experiments/create", map[string]any{"name": f.folder + "/located", "artifact_location": ref}
		},
		"POST " + ml + "/experiments/update new_name": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/experiments/update", map[string]any{"experiment_id": f.exp, "new_name": ref}
		},
		"POST " + ml + "/runs/create tags[mlflow.parentRunId]": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/create", map[string]any{"experiment_id": f.exp, "tags": tag(ref)}
		},
		"POST " + ml + "/runs/set-tag value (key mlflow.parentRunId)": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/set-tag", map[string]any{"run_id": f.run, "key": "mlflow.parentRunId", "value": ref}
		},
		"POST " + ml + "/runs/log-metric model_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/log-metric", map[string]any{"run_id": f.run, "key": "m", "value": 2, "timestamp": 2, "step": 1, "model_id": ref}
		},
		"POST " + ml + "/runs/log-batch metrics[].model_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/log-batch", map[string]any{"run_id": f.run, "metrics": []any{map[string]any{"key": "m", "value": 3, "timestamp": 3, "step": 2, "model_id": ref}}}
		},
		"POST " + ml + "/runs/log-batch tags[mlflow.parentRunId]": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/log-batch", map[string]any{"run_id": f.run, "tags": tag(ref)}
		},
		"POST " + ml + "/runs/log-inputs models[].model_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/log-inputs", map[string]any{"run_id": f.run, "models": []any{map[string]any{"model_id": ref}}}
		},
		"POST " + ml + "/runs/outputs models[].model_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/outputs", map[string]any{"run_id": f.run, "models": []any{map[string]any{"model_id": ref, "step": 1}}}
		},
		"POST " + ml + "/runs/search experiment_ids": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/runs/search", map[string]any{"experiment_ids": []string{ref}}
		},
		"POST " + ml + "/logged-models source_run_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/logged-models", map[string]any{"experiment_id": f.exp, "name": "m3", "source_run_id": ref}
		},
		"POST " + ml + "/logged-models/search experiment_ids": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/logged-models/search", map[string]any{"experiment_ids": []string{ref}}
		},
		// A source goes with the run_id or model_id that vouches for it,
		// as MLflow requires.
		"POST " + ml + "/model-versions/create source (runs:/)": func(f fixture, ref string) (string, string, any) {
			id, _, _ := strings.Cut(strings.TrimPrefix(ref, "runs:/"), "/")
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": ref, "run_id": id}
		},
		"POST " + ml + "/model-versions/create source (models:/)": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": ref, "model_id": strings.TrimPrefix(ref, "models:/")}
		},
		"POST " + ml + "/model-versions/create source (mlflow-artifacts:/)": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": ref, "run_id": strings.Split(ref, "/")[2]}
		},
		"POST " + ml + "/model-versions/create run_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": "s3://bucket/model", "run_id": ref}
		},
		"POST " + ml + "/model-versions/create model_id": func(f fixture, ref string) (string, string, any) {
			return "POST", ml + "/model-versions/create", map[string]any{"name": f.registered, "source": "s3://bucket/model", "model_id": ref}
		},
	}
}

// refValue is what a reference of kind k looks like for an experiment,
// run, model and folder.
func refValue(k httpapi.RefKind, exp, run, model, folder string) string {
	switch k {
	case httpapi.RefRun:
		return run
	case httpapi.RefModel:
		return model
	case httpapi.RefExperiment:
		return exp
	case httpapi.RefFolder:
		return folder + "/moved"
	case httpapi.RefRunURI:
		return "runs:/" + run + "/model"
	case httpapi.RefModelURI:
		return "models:/" + model
	case httpapi.RefArtifactURI:
		return "mlflow-artifacts:/" + exp + "/" + run + "/artifacts/model"
	}
	panic(fmt.Sprintf("reference kind %d has no value in the test", k))
}

// declaredRefs returns every declared reference by its case key.
func declaredRefs(a *authServer) map[string]httpapi.Ref {
	out := map[string]httpapi.Ref{}
	for _, r := range a.h.Routes() {
		for _, ref := range r.Refs {
			out[routeKey(r)+" "+ref.Field] = ref
		}
	}
	return out
}

// TestReferenceMatrix sends every declared reference as the owner, who may
// act on the fixture, pointing at three objects of its kind: one of the
// stranger's that the owner cannot read (refused with 403
// PERMISSION_DENIED, or left out of a listing), one the owner can read but
// not edit (allowed where the reference needs CAN_READ, refused where it
// needs CAN_EDIT), and the fixture's own (allowed). It fails for a
// declared reference without a case and for a case without a declaration.
func TestReferenceMatrix(t *testing.T) {
	a := mustAuthServer(t)
	w := a.strangerWorld()
	cases := referenceCases()
	refs := declaredRefs(a)
	var keys []string
	for k := range refs {
		if _, ok := cases[k]; !ok {
			t.Errorf("reference %s has no case: add one to referenceCases", k)
			continue
		}
		keys = append(keys, k)
	}
	for k := range cases {
		if _, ok := refs[k]; !ok {
			t.Errorf("referenceCases has %s, which no route declares", k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		ref, c := refs[k], cases[k]
		t.Run(k, func(t *testing.T) {
			targets := []struct {
				name            string
				value           func(f fixture) string
				canRead, canUse bool
				ids             []string // what a listing shows of it
			}{
				{"unreadable", func(fixture) string { return refValue(ref.Kind, w.exp, w.run, w.model, w.folder) }, false, false, []string{w.run, w.model}},
				{"readable", func(fixture) string { return refValue(ref.Kind, w.rexp, w.rrun, w.rmodel, w.rfolder) }, true, ref.Need <= workspace.CanRead, []string{w.rrun, w.rmodel}},
				{"own", func(f fixture) string {
					a.must(owner, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": f.folder + "/dest"})
					return refValue(ref.Kind, f.exp, f.run, f.model, f.folder+"/dest")
				}, true, true, nil},
			}
			for _, tg := range targets {
				f := a.newFixture()
				ids := tg.ids
				if ids == nil {
					ids = []string{f.run, f.model}
				}
				method, target, body := c(f, tg.value(f))
				res := a.as(owner, method, target, body)
				switch {
				case res.status >= 500:
					t.Errorf("%s: %s %s failed: %d %s", tg.name, method, target, res.status, res.raw)
				case ref.Filtered && res.status != http.StatusOK:
					t.Errorf("%s: listing answered %d %s, want 200", tg.name, res.status, res.raw)
				case ref.Filtered && tg.canRead != containsAny(res.raw, ids):
					t.Errorf("%s: listing shows the referenced objects: %v, want %v (%s)", tg.name, !tg.canRead, tg.canRead, res.raw)
				case ref.Filtered:
				case tg.canUse && res.status >= 300:
					t.Errorf("%s: %s %s refused (%d %s), want allowed", tg.name, method, target, res.status, res.raw)
				case !tg.canUse && (res.status != http.StatusForbidden || res.body["error_code"] != "PERMISSION_DENIED"):
					t.Errorf("%s: %s %s answered %d %s, want 403 PERMISSION_DENIED", tg.name, method, target, res.status, res.raw)
				case !tg.canUse && !strings.Contains(res.raw, ref.Field):
					t.Errorf("%s: the refusal does not name the reference %q: %s", tg.name, ref.Field, res.raw)
				}
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// probeExempt lists requests that carry one of the stranger's ids and are
// rightly answered with success: the id names nothing there. Each says
// why. An entry no probe uses fails the test, so the list stays true.
var probeExempt = map[string]string{
	"POST /api/2.0/sextant/logs/append set source":                                     "a log batch's source is the launcher's own id (free text), not a URI",
	"POST /api/2.0/mlflow/experiments/create tags[mlflow.parentRunId]":                 "experiment tags: mlflow.parentRunId names nothing on an experiment",
	"POST /api/2.0/mlflow/experiments/set-experiment-tag key/value mlflow.parentRunId": "experiment tags: mlflow.parentRunId names nothing on an experiment",
	"POST /api/2.0/mlflow/runs/log-parameter key/value mlflow.parentRunId":             "a param, not a tag: MLflow reads the parent only from tags",
	"POST /api/2.0/mlflow/runs/log-inputs set datasets[].dataset.source":               "a dataset's source is the client's description of where its data came from (MLflow's DatasetSource JSON), stored as text and never resolved, shown or followed",
	"POST /api/2.0/mlflow/logged-models tags[mlflow.parentRunId]":                      "logged-model tags: the parent of a run names nothing on a model",
	"PATCH /api/2.0/mlflow/logged-models/{model_id}/tags tags[mlflow.parentRunId]":     "logged-model tags: the parent of a run names nothing on a model",
	"POST /api/2.0/mlflow/registered-models/create tags[mlflow.parentRunId]":           "registry tags are free text",
	"POST /api/2.0/mlflow/registered-models/set-tag key/value mlflow.parentRunId":      "registry tags are free text",
	"POST /api/2.0/mlflow/model-versions/create tags[mlflow.parentRunId]":              "registry tags are free text",
	"POST /api/2.0/mlflow/model-versions/set-tag key/value mlflow.parentRunId":         "registry tags are free text",
}

// probeKeys are id-shaped request fields, set to one of the stranger's
// objects in every request that the probe sends; every declared
// reference's field is added.
func probeKeys(w world) map[string]any {
	return map[string]any{
		"run_id": w.run, "run_uuid": w.run, "source_run_id": w.run, "parent_run_id": w.run,
		"run_ids": []string{w.run}, "model_id": w.model, "experiment_id": w.exp, "experiment_ids": []string{w.exp},
		"new_name": w.expName + "-moved", "source": "runs:/" + w.run + "/model", "artifact_location": "mlflow-artifacts:/" + w.exp,
		"target_id": w.run,
	}
}

type probe struct {
	label, field string
	method       string
	target       string
	body         any
}

// TestReferenceProbe finds references that no route declares: it sends
// every route's matrix request, as a user the route allows, with each
// id-shaped value in it (query, path, body) swapped for the stranger's
// object of that kind, and with every id-shaped field (probeKeys, in
// every object of the body at any depth and in the query) and a
// mlflow.parentRunId tag set to the stranger's. Each must be refused (a
// 4xx), except where a listing leaves the stranger's objects out or
// probeExempt says why the id names nothing. A new route that takes a reference and does not check it
// fails here until it declares and checks it.
func TestReferenceProbe(t *testing.T) {
	a := mustAuthServer(t)
	a.must(admin, "POST", "/api/2.0/sextant/groups", map[string]any{"name": "team"})
	w := a.strangerWorld()
	cases := routeCases()
	keys := probeKeys(w)
	filtered := map[string]map[string]bool{}
	for _, r := range a.h.Routes() {
		for _, ref := range r.Refs {
			field := ref.Field
			if i := strings.LastIndex(field, "[]."); i >= 0 {
				field = field[i+3:]
			}
			if !strings.ContainsAny(field, "[ ") {
				if _, ok := keys[field]; !ok {
					keys[field] = refValue(ref.Kind, w.exp, w.run, w.model, w.folder)
				}
			}
			if ref.Filtered {
				if filtered[routeKey(r)] == nil {
					filtered[routeKey(r)] = map[string]bool{}
				}
				filtered[routeKey(r)][ref.Field] = true
			}
		}
	}
	used := map[string]bool{}
	seen := map[string]bool{}
	for _, r := range a.h.Routes() {
		key := routeKey(r)
		c, ok := cases[key]
		if seen[key] || !ok || r.Access == httpapi.Public || r.Access == httpapi.Assets || r.Access == httpapi.SignedCapability {
			continue // TestPermissionMatrix reports routes without a case
		}
		seen[key] = true
		caller := ""
		for _, u := range []string{owner, editor, reader, outsider} {
			if contains(c.allow, u) {
				caller = u
				break
			}
		}
		if caller == "" {
			continue // administrators may reference anything
		}
		t.Run(key, func(t *testing.T) {
			f := a.newFixture()
			probes := probesFor(f, w, keys, c, caller)
			for _, p := range probes {
				res := a.as(caller, p.method, p.target, p.body)
				label := key + " " + p.label
				switch {
				case res.status >= 500:
					t.Errorf("%s: %s %s failed: %d %s", p.label, p.method, p.target, res.status, res.raw)
				case res.status >= 300:
				case filtered[key][p.field]:
					if containsAny(res.raw, []string{w.run, w.model, w.expName}) {
						t.Errorf("%s: the listing shows the stranger's objects: %s", p.label, res.raw)
					}
				case probeExempt[label] != "":
					used[label] = true
				default:
					t.Errorf("%s: %s %s %s accepted (%d %s) although it names the stranger's object: declare the reference (a Ref in the route table), check it with allowRef and add a referenceCases case, or add it to probeExempt saying why it names nothing",
						p.label, p.method, p.target, compact(p.body), res.status, truncateTest(res.raw))
				}
			}
		})
	}
	for label := range probeExempt {
		if !used[label] {
			t.Errorf("probeExempt has %q, which no probe needed: remove it", label)
		}
	}
}

// probesFor returns the probes of one route's request.
func probesFor(f fixture, w world, keys map[string]any, c routeCase, caller string) []probe {
	n := 0
	base := func() (string, string, any) {
		n++
		// A fresh name for each request, so that a probe that creates
		// something does not make the next fail for a taken name.
		return c.req(f, fmt.Sprintf("%s-p%d@example.com", strings.Split(caller, "@")[0], n))
	}
	sw := swapper(f, w)
	var out []probe
	add := func(label, field, method, target string, body any) {
		out = append(out, probe{label: label, field: field, method: method, target: target, body: body})
	}
	// 1. The path, with every id of the fixture swapped at once.
	_, target, _ := base()
	pth, query, _ := strings.Cut(target, "?")
	if sp := sw.path(pth); sp != pth {
		m, tg, body := base()
		_, q, _ := strings.Cut(tg, "?")
		add("path", "", m, withQuery(sp, q), body)
	}
	// 2. Each query value holding an id, swapped; each id-shaped query
	// parameter set.
	if qv, err := url.ParseQuery(query); err == nil {
		for k, vs := range qv {
			for i, v := range vs {
				if sv := sw.value(k, v); sv != v {
					m, tg, body := base()
					p, q, _ := strings.Cut(tg, "?")
					qq, _ := url.ParseQuery(q)
					qq[k][i] = sv
					add("query "+k, k, m, withQuery(p, qq.Encode()), body)
				}
			}
		}
		// Set id-shaped parameters where the route reads its query.
		if query != "" {
			for k, v := range keys {
				m, tg, body := base()
				p, q, _ := strings.Cut(tg, "?")
				qq, _ := url.ParseQuery(q)
				qq.Set(k, firstString(v))
				add("query set "+k, k, m, withQuery(p, qq.Encode()), body)
			}
		}
	}
	// 3. The body.
	_, _, body := base()
	obj, isObj := body.(map[string]any)
	if !isObj {
		return out
	}
	for _, lp := range leafPaths(obj, nil) {
		v := getPath(obj, lp).(string)
		if sv := sw.value(lastKey(lp), v); sv != v {
			m, tg, b := base()
			b2 := clone(b)
			setPath(b2, lp, sv)
			add("body "+fmtPath(lp), fmt.Sprint(lp[0]), m, tg, b2)
		}
	}
	// Every id-shaped field set in every object of the body, at any
	// depth (the body itself, items of its lists, objects inside those:
	// datasets[].dataset), so that a reference nested deep is probed too.
	for _, op := range objectPaths(clone(obj), nil) {
		for k, v := range keys {
			m, tg, b := base()
			b2 := clone(b)
			getPath(b2, op).(map[string]any)[k] = v
			label, field := "set "+k, k
			if len(op) > 0 {
				label, field = "set "+fmtPath(op)+"."+k, op[0].(string)
			}
			add(label, field, m, tg, b2)
		}
	}
	parent := map[string]any{"key": "mlflow.parentRunId", "value": w.run}
	{
		m, tg, b := base()
		b2 := clone(b).(map[string]any)
		tags, _ := b2["tags"].([]any)
		b2["tags"] = append(tags, parent)
		add("tags[mlflow.parentRunId]", "tags", m, tg, b2)
	}
	if _, ok := obj["key"].(string); ok {
		if _, ok := obj["value"].(string); ok {
			m, tg, b := base()
			b2 := clone(b).(map[string]any)
			b2["key"], b2["value"] = "mlflow.parentRunId", w.run
			add("key/value mlflow.parentRunId", "value", m, tg, b2)
		}
	}
	return out
}

// swap turns the fixture's ids into the stranger's: runs, models and
// folders wherever they appear, an experiment id where a value is one
// (by its key, or as "experiment:<id>", "<id>/..." or
// "mlflow-artifacts:/<id>...").
type swap struct {
	r        *strings.Replacer
	exp, wex string
}

func swapper(f fixture, w world) swap {
	return swap{r: strings.NewReplacer(f.run, w.run, f.model, w.model, f.folder, w.folder), exp: f.exp, wex: w.exp}
}

func (s swap) value(key, v string) string {
	out := s.r.Replace(v)
	switch {
	case out == s.exp && strings.Contains(key, "experiment"):
		return s.wex
	case strings.HasSuffix(out, ":"+s.exp):
		return strings.TrimSuffix(out, s.exp) + s.wex
	case strings.HasPrefix(out, s.exp+"/"):
		return s.wex + strings.TrimPrefix(out, s.exp)
	case strings.HasPrefix(out, "mlflow-artifacts:/"+s.exp+"/"):
		return "mlflow-artifacts:/" + s.wex + strings.TrimPrefix(out, "mlflow-artifacts:/"+s.exp)
	}
	return out
}

// path swaps ids in a URL path: runs, models and folders, and an
// experiment id segment in a path that names one of its runs or models
// (artifact paths: <experiment>/<run>/...).
func (s swap) path(p string) string {
	out := s.r.Replace(p)
	if out == p {
		return p
	}
	segs := strings.Split(out, "/")
	for i, seg := range segs {
		if seg == s.exp {
			segs[i] = s.wex
		}
	}
	return strings.Join(segs, "/")
}

func withQuery(p, q string) string {
	if q == "" {
		return p
	}
	return p + "?" + q
}

func firstString(v any) string {
	if l, ok := v.([]string); ok {
		return l[0]
	}
	return v.(string)
}

// leafPaths lists the paths (keys and indexes) of v's string leaves.
func leafPaths(v any, prefix []any) [][]any {
	var out [][]any
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, leafPaths(x[k], append(append([]any{}, prefix...), k))...)
		}
	case []any:
		for i, e := range x {
			out = append(out, leafPaths(e, append(append([]any{}, prefix...), i))...)
		}
	case []string:
		for i := range x {
			out = append(out, append(append([]any{}, prefix...), i))
		}
	case string:
		out = append(out, prefix)
	}
	return out
}

// objectPaths lists the paths (keys and indexes) of the objects in v, v
// itself included, at any depth.
func objectPaths(v any, prefix []any) [][]any {
	var out [][]any
	switch x := v.(type) {
	case map[string]any:
		out = append(out, prefix)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, objectPaths(x[k], append(append([]any{}, prefix...), k))...)
		}
	case []any:
		for i, e := range x {
			out = append(out, objectPaths(e, append(append([]any{}, prefix...), i))...)
		}
	}
	return out
}

func getPath(v any, p []any) any {
	for _, k := range p {
		switch x := v.(type) {
		case map[string]any:
			v = x[k.(string)]
		case []any:
			v = x[k.(int)]
		case []string:
			v = x[k.(int)]
		}
	}
	return v
}

func setPath(v any, p []any, s string) {
	parent := getPath(v, p[:len(p)-1])
	switch x := parent.(type) {
	case map[string]any:
		x[p[len(p)-1].(string)] = s
	case []any:
		x[p[len(p)-1].(int)] = s
	}
}

func lastKey(p []any) string {
	for i := len(p) - 1; i >= 0; i-- {
		if k, ok := p[i].(string); ok {
			return k
		}
	}
	return ""
}

func fmtPath(p []any) string {
	var b strings.Builder
	for _, k := range p {
		switch x := k.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(x)
		case int:
			b.WriteString("[]")
		}
	}
	return b.String()
}

// clone deep-copies a JSON body through encoding/json (lists of strings
// become []any).
func clone(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

func compact(v any) string {
	raw, _ := json.Marshal(v)
	return truncateTest(string(raw))
}

func truncateTest(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
