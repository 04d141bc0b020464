package httpapi

import (
	"net/http"
	"path"
	"strings"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/workspace"
)

// References: a request that acts on one object and names another (a
// metric logged to a logged model, a run's parent, a model version's
// source) needs the route's level on the first and the reference's level
// on the second. Pointing at something needs CAN_READ on it; writing into
// it needs CAN_EDIT. The routes declare these in the route table, and the
// permission matrix tests each one (authz_test.go).
//
// A reference to a run or logged model that does not exist is accepted:
// their ids are random and never reused, so it protects nothing (the
// route still fails where it must resolve the object, as model-versions
// create does). A reference to an experiment must name one that exists,
// since experiment ids are sequential and a future experiment would
// inherit it.

// The references, by route.
var (
	// runs/create, runs/set-tag and runs/log-batch: the parent of a
	// nested run (MLflow's mlflow.parentRunId tag).
	refParentRunTag = Ref{Field: "tags[" + tracking.TagParentRunID + "]", Kind: RefRun, Need: workspace.CanRead}
	refParentRunSet = Ref{Field: "value (key " + tracking.TagParentRunID + ")", Kind: RefRun, Need: workspace.CanRead}
	// runs/log-metric and runs/log-batch: the logged model a metric is
	// also recorded on (the metric is written into the model).
	refMetricModel      = Ref{Field: "model_id", Kind: RefModel, Need: workspace.CanEdit}
	refBatchMetricModel = Ref{Field: "metrics[].model_id", Kind: RefModel, Need: workspace.CanEdit}
	// runs/log-inputs and runs/outputs: models a run used or produced.
	refInputModel  = Ref{Field: "models[].model_id", Kind: RefModel, Need: workspace.CanRead}
	refOutputModel = Ref{Field: "models[].model_id", Kind: RefModel, Need: workspace.CanRead}
	// logged-models (create): the run that produced the model.
	refModelSourceRun = Ref{Field: "source_run_id", Kind: RefRun, Need: workspace.CanRead}
	// model-versions/create: what is registered.
	refVersionSourceRun       = Ref{Field: "source (runs:/)", Kind: RefRunURI, Need: workspace.CanRead}
	refVersionSourceModel     = Ref{Field: "source (models:/)", Kind: RefModelURI, Need: workspace.CanRead}
	refVersionSourceArtifacts = Ref{Field: "source (mlflow-artifacts:/)", Kind: RefArtifactURI, Need: workspace.CanRead}
	refVersionRun             = Ref{Field: "run_id", Kind: RefRun, Need: workspace.CanRead}
	refVersionModel           = Ref{Field: "model_id", Kind: RefModel, Need: workspace.CanRead}
	// experiments/create: where the experiment's runs keep their files
	// (they are written there).
	refArtifactLocation = Ref{Field: "artifact_location", Kind: RefArtifactURI, Need: workspace.CanEdit}
	// experiments/update: the folder an experiment is moved into. Moving
	// also needs CAN_MANAGE on the experiment itself (updateExperiment).
	refNewName = Ref{Field: "new_name", Kind: RefFolder, Need: workspace.CanEdit}
	// runs/search and logged-models/search: the experiments searched;
	// those the caller cannot read are left out.
	refSearchExperiments = Ref{Field: "experiment_ids", Kind: RefExperiment, Need: workspace.CanRead, Filtered: true}
)

// allowRef checks ref's level on the object value names (see Ref): the
// policy's OpReadReference or OpWriteReference. An empty value names
// nothing. The policy lets administrators reference anything, so they
// skip resolving the object (in single-user mode this costs nothing).
func (s *Server) allowRef(r *http.Request, ref Ref, value string) error {
	sub := SubjectFromContext(r.Context())
	if value == "" || sub.IsActiveAdmin() {
		return nil
	}
	if err := s.checkRef(r, sub, ref, value); err != nil {
		return refError(ref, value, err)
	}
	return nil
}

func (s *Server) checkRef(r *http.Request, sub *workspace.Subject, ref Ref, value string) error {
	ctx := r.Context()
	var exp string
	switch ref.Kind {
	case RefRun:
		if err := tracking.ValidateRunID(value); err != nil {
			return err
		}
		e, err := s.runExperiment(ctx, value)
		if errs.Is(err, errs.NotFound) {
			return nil
		} else if err != nil {
			return err
		}
		exp = e
	case RefModel:
		e, err := s.modelExperiment(ctx, value)
		if errs.Is(err, errs.NotFound) {
			return nil
		} else if err != nil {
			return err
		}
		exp = e
	case RefExperiment:
		if err := tracking.ValidateExperimentID(value); err != nil {
			return err
		}
		exp = value
	case RefRunURI:
		rest, ok := strings.CutPrefix(value, "runs:/")
		if !ok {
			return nil
		}
		id, _, _ := strings.Cut(rest, "/")
		return s.checkRef(r, sub, Ref{Kind: RefRun, Need: ref.Need}, id)
	case RefModelURI:
		id, ok := strings.CutPrefix(value, "models:/")
		if !ok || !strings.HasPrefix(id, "m-") || strings.Contains(id, "/") {
			return nil // a registered model (models:/<name>/<version>): the registry is shared
		}
		return s.checkRef(r, sub, Ref{Kind: RefModel, Need: ref.Need}, id)
	case RefArtifactURI:
		p, ok := artifactStorePath(value)
		if !ok {
			return nil // somewhere outside this server
		}
		if q := strings.TrimSuffix(p, "/"); (q != path.Clean(q) && q != "") || strings.Contains(p, "..") {
			return errs.E(errs.Invalid, "must not contain '.', '..' or empty path segments")
		}
		if exp = artifacts.ExperimentOf(p); exp == "" {
			return s.ws.Authorize(ctx, sub, workspace.OpReachArtifactStore, workspace.Resource{})
		}
	case RefFolder:
		p, err := workspace.NormalizePath(value)
		if err != nil {
			return err
		}
		return s.ws.Authorize(ctx, sub, ref.operation(), workspace.Resource{Kind: workspace.ResourceFolder, Key: workspace.Parent(p)})
	default:
		return errs.Errorf(errs.Internal, "reference %s has no kind", ref.Field)
	}
	return s.ws.Authorize(ctx, sub, ref.operation(), workspace.Resource{Kind: workspace.ResourceExperiment, Key: exp})
}

// operation is the policy's operation for a reference: pointing at an
// object (CAN_READ) or writing into it (CAN_EDIT).
func (ref Ref) operation() workspace.Operation {
	if ref.Need >= workspace.CanEdit {
		return workspace.OpWriteReference
	}
	return workspace.OpReadReference
}

// artifactStorePath returns the artifact-store path of an
// mlflow-artifacts: URI ("mlflow-artifacts:/5/x", or with an authority,
// "mlflow-artifacts://host:port/5/x"), with its leading slash.
func artifactStorePath(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, "mlflow-artifacts:")
	if !ok {
		return "", false
	}
	if auth, ok := strings.CutPrefix(rest, "//"); ok {
		i := strings.IndexByte(auth, '/')
		if i < 0 {
			return "/", true
		}
		rest = auth[i:]
	}
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return rest, true
}

// refError says which reference a refusal is about, keeping its code.
func refError(ref Ref, value string, err error) error {
	code := errs.CodeOf(err)
	if code == errs.Internal {
		return err
	}
	return &errs.Error{Code: code, Msg: ref.Field + " " + errs.Truncate(value, 120) + ": " + errs.MessageOf(err), Err: err}
}
