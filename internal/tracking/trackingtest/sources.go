package trackingtest

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// testVersionSources checks every form of model-version source MLflow
// 3.17.2 accepts or refuses, what each accepted one resolves to, and the
// mlflow.modelVersions tag of a logged model a version is made from.
func testVersionSources(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/sources")
	run := e.mustRun(exp, "r")
	rid, root := run.Info.RunID, run.Info.ArtifactURI
	m, err := e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{ExperimentID: exp, Name: "model", SourceRunID: rid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateRegisteredModel(e.ctx, "src", "", nil); err != nil {
		t.Fatal(err)
	}
	elsewhere := strings.Repeat("e", 32) // a run on another server
	notRun := func(src string) string {
		return "Invalid model version source: '" + src + "'. The run_id request parameter must identify the resource that contains the source."
	}
	notModel := func(src string) string {
		return "Invalid model version source: '" + src + "'. The model_id request parameter must identify the resource that contains the source."
	}
	relative := func(src string) string {
		return "Invalid model version source: '" + src + "'. If supplying a source as an http, https, local file path, ftp, objectstore, or mlflow-artifacts uri, an absolute path must be provided without relative path references present. Please provide an absolute path."
	}
	local := func(src string) string {
		return "Invalid model version source: '" + src + "'. To use a local path as a model version source, the run_id request parameter has to be specified and the local path has to be contained within the artifact directory of the run specified by the run_id."
	}
	host := func(scheme string) string {
		return "'source' cannot use the '" + scheme + "' scheme"
	}
	var fromModel []string // the tag's entries, in order
	for _, tc := range []struct {
		source, runID, modelID string
		code                   errs.Code // "" accepted
		msg                    string    // the error's message starts with it
		storage                string    // accepted: where the files are
	}{
		// Accepted.
		{source: "runs:/" + rid + "/model", runID: rid, storage: root + "/model"},
		{source: "runs:/" + elsewhere + "/model", runID: elsewhere, storage: "runs:/" + elsewhere + "/model"},
		{source: root + "/model", runID: rid, storage: root + "/model"},
		{source: "models:/" + m.ID, modelID: m.ID, storage: m.ArtifactURI},
		{source: m.ArtifactURI + "/sub", modelID: m.ID, storage: m.ArtifactURI + "/sub"},
		{source: "s3://bucket/models/model", storage: "s3://bucket/models/model"},
		{source: "gs://bucket/path/model", runID: rid, storage: "gs://bucket/path/model"},
		// Refused: runs:/ with no run_id or another one.
		{source: "runs:/" + rid + "/model", code: errs.Invalid, msg: notRun("runs:/" + rid + "/model")},
		{source: "runs:/" + rid + "/model", runID: elsewhere, code: errs.Invalid, msg: notRun("runs:/" + rid + "/model")},
		{source: "runs://host/" + rid + "/model", runID: rid, code: errs.Invalid, msg: notRun("runs://host/" + rid + "/model")},
		{source: "runs:/" + rid + "/../../x", runID: rid, code: errs.Invalid, msg: relative("runs:/" + rid + "/../../x")},
		{source: "runs:/" + rid + "/model", modelID: m.ID, code: errs.Invalid, msg: notModel("runs:/" + rid + "/model")},
		// Local paths, with or without a run: no artifact root here is local.
		{source: "/tmp", code: errs.Invalid, msg: local("/tmp")},
		{source: "/tmp/model", runID: rid, code: errs.Invalid, msg: local("/tmp/model")},
		{source: "file:///etc/passwd", code: errs.Invalid, msg: local("file:///etc/passwd")},
		{source: "relative/path", code: errs.Invalid, msg: local("relative/path")},
		{source: "/tmp", runID: elsewhere, code: errs.Invalid, msg: notRun("/tmp")},
		// Relative path references, plain and encoded.
		{source: "mlflow-artifacts:/1/../../../", runID: rid, code: errs.Invalid, msg: relative("mlflow-artifacts:/1/../../../")},
		{source: "mlflow-artifacts:/..%2f..%2fetc", runID: rid, code: errs.Invalid, msg: relative("mlflow-artifacts:/..%2f..%2fetc")},
		{source: "s3://bucket/models/../../other", code: errs.Invalid, msg: relative("s3://bucket/models/../../other")},
		{source: "s3://bucket/a/./b", code: errs.Invalid, msg: relative("s3://bucket/a/./b")},
		{source: "s3://bucket", code: errs.Invalid, msg: relative("s3://bucket")},
		{source: "s3://bucket/a%00b", code: errs.Invalid, msg: relative("s3://bucket/a%00b")},
		// The artifact proxy: only inside the run's or model's root.
		{source: "mlflow-artifacts:/1/other/artifacts", code: errs.Invalid, msg: notRun("mlflow-artifacts:/1/other/artifacts")},
		{source: "mlflow-artifacts:/0/other/artifacts", runID: rid, code: errs.Invalid, msg: notRun("mlflow-artifacts:/0/other/artifacts")},
		{source: root + "/model", runID: elsewhere, code: errs.Invalid, msg: notRun(root + "/model")},
		{source: root + "/model", modelID: m.ID, code: errs.Invalid, msg: notModel(root + "/model")},
		// Hosts the server would connect to.
		{source: "mlflow-artifacts://host/models/../../../", code: errs.Invalid, msg: host("mlflow-artifacts")},
		{source: "http://host:5000/api/2.0/mlflow-artifacts/artifacts/x", runID: rid, code: errs.Invalid, msg: host("http")},
		{source: "https://example.com/model", code: errs.Invalid, msg: host("https")},
		{source: "ftp://example.com/model", code: errs.Invalid, msg: host("ftp")},
		// models:/ sources.
		{source: "models:/" + m.ID, code: errs.Invalid, msg: notModel("models:/" + m.ID)},
		{source: "models:/" + m.ID, modelID: "m-" + strings.Repeat("0", 32), code: errs.Invalid, msg: notModel("models:/" + m.ID)},
		{source: "models:/m-" + strings.Repeat("0", 32), modelID: "m-" + strings.Repeat("0", 32), code: errs.NotFound},
		{source: "models://host/x/1", code: errs.Invalid, msg: "Invalid model version source: 'models://host/x/1'. Registered model sources must use the active model registry."},
		{source: "models:/a/b/c", code: errs.Invalid, msg: notModel("models:/a/b/c")},
		{source: "models:/missing/1", code: errs.NotFound},
	} {
		v, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "src", Source: tc.source, RunID: tc.runID, ModelID: tc.modelID})
		what := tc.source + " run_id=" + tc.runID + " model_id=" + tc.modelID
		if tc.code == "" {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if v.StorageLocation != tc.storage || v.Source != tc.source {
				t.Fatalf("%s: source %q, storage %q; want storage %q", what, v.Source, v.StorageLocation, tc.storage)
			}
			if tc.modelID != "" {
				fromModel = append(fromModel, `{"name": "src", "version": `+v.Version+`}`)
			}
			continue
		}
		if errs.CodeOf(err) != tc.code || !strings.HasPrefix(errs.MessageOf(err), tc.msg) {
			t.Fatalf("%s: %v (%s), want %s %q", what, err, errs.CodeOf(err), tc.code, tc.msg)
		}
	}

	// A registered version as a source: models:/<name>/<version>, @alias,
	// latest; run_id and model_id come from it and must match it.
	v1, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "src", Source: "models:/" + m.ID, ModelID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetModelAlias(e.ctx, "src", "champion", v1.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateRegisteredModel(e.ctx, "copy", "", nil); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"models:/src/" + v1.Version, "models:/src@champion"} {
		c, err := e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "copy", Source: src})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if c.Source != "models:/src/"+v1.Version || c.ModelID != m.ID || c.RunID != rid || c.StorageLocation != m.ArtifactURI {
			t.Fatalf("%s: %+v", src, c)
		}
	}
	_, err = e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "copy", Source: "models:/src/" + v1.Version, RunID: elsewhere})
	wantCode(t, err, errs.Invalid, "The run_id and model_id request parameters must match the referenced model version.")
	_, err = e.svc.CreateModelVersion(e.ctx, tracking.CreateModelVersionRequest{Name: "copy", Source: "models:/src/Production"})
	wantCode(t, err, errs.NotFound, "No versions of model with name 'src' and stage 'Production' found")

	// The logged model lists the versions made from it, as MLflow writes it.
	got, err := e.svc.GetLoggedModel(e.ctx, m.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	tag := ""
	for _, tg := range got.Tags {
		if tg.Key == "mlflow.modelVersions" {
			tag = tg.Value
		}
	}
	fromModel = append(fromModel, `{"name": "src", "version": `+v1.Version+`}`, `{"name": "copy", "version": 1}`, `{"name": "copy", "version": 2}`)
	want := "[" + strings.Join(fromModel, ", ") + "]"
	if tag != want {
		t.Fatalf("mlflow.modelVersions = %s, want %s", tag, want)
	}
}
