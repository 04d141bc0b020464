package httpapi

import (
	"bytes"
	"net/http"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
	"github.com/sextant/sextant/internal/workspace"
)

var viewTypes = map[string]int64{"ACTIVE_ONLY": 1, "DELETED_ONLY": 2, "ALL": 3}

func (s *Server) registerExperimentRoutes() {
	s.handle("POST", "/mlflow/experiments/create", Authenticated, s.createExperiment, refArtifactLocation)
	s.handle("GET", "/mlflow/experiments/get", ReadExperiment, s.getExperiment)
	s.handle("GET", "/mlflow/experiments/get-by-name", ReadExperiment, s.getExperimentByName)
	s.handle("POST", "/mlflow/experiments/search", Authenticated, s.searchExperiments)
	s.handle("GET", "/mlflow/experiments/search", Authenticated, s.searchExperiments)
	s.handle("POST", "/mlflow/experiments/update", EditExperiment, s.updateExperiment, refNewName)
	s.handle("POST", "/mlflow/experiments/delete", ManageExperiment, s.deleteExperiment)
	s.handle("POST", "/mlflow/experiments/restore", ManageExperiment, s.restoreExperiment)
	s.handle("POST", "/mlflow/experiments/set-experiment-tag", EditExperiment, s.setExperimentTag)
	s.handle("POST", "/mlflow/experiments/delete-experiment-tag", EditExperiment, s.deleteExperimentTag)
}

func kvTags(in []wire.KV) []tracking.Tag {
	out := make([]tracking.Tag, len(in))
	for i, t := range in {
		out[i] = tracking.Tag(t)
	}
	return out
}

func (s *Server) createExperiment(w http.ResponseWriter, r *http.Request) error {
	var req wire.CreateExperimentRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	ctx, sub := r.Context(), SubjectFromContext(r.Context())
	name := workspace.CanonicalName(req.Name)
	if s.multiUser() && req.Name != "" {
		var err error
		if name, err = s.ws.PrepareExperimentName(ctx, sub, req.Name); err != nil {
			return err
		}
	}
	if err := s.ws.CheckNoFolderAt(ctx, name); err != nil {
		return err
	}
	if err := s.allowRef(r, refArtifactLocation, req.ArtifactLocation); err != nil {
		return err
	}
	id, err := s.tr.CreateExperiment(ctx, name, req.ArtifactLocation, kvTags(req.Tags))
	if err != nil {
		return err
	}
	if err := s.ws.ExperimentCreated(ctx, sub, id); err != nil {
		return err
	}
	return writeJSON(w, map[string]string{"experiment_id": id})
}

func (s *Server) getExperiment(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "experiment_id")
	if err != nil {
		return err
	}
	id := q.str("experiment_id")
	if err := tracking.ValidateExperimentID(id); err != nil {
		return err
	}
	if err := s.allowExperiment(r, id); err != nil {
		return err
	}
	e, err := s.tr.GetExperiment(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"experiment": wire.ToExperiment(e)})
}

func (s *Server) getExperimentByName(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "experiment_name")
	if err != nil {
		return err
	}
	name := workspace.CanonicalName(q.str("experiment_name"))
	e, err := s.tr.GetExperimentByName(r.Context(), name)
	if err != nil {
		return err
	}
	if err := s.allowExperiment(r, e.ID); err != nil {
		return workspace.AsMissing(err, tracking.ExperimentNameNotFound(name))
	}
	return writeJSON(w, map[string]any{"experiment": wire.ToExperiment(e)})
}

func (s *Server) searchExperiments(w http.ResponseWriter, r *http.Request) error {
	var req wire.SearchExperimentsRequest
	if r.Method == http.MethodGet {
		q, err := parseQuery(r, "max_results", "page_token", "filter", "order_by", "view_type")
		if err != nil {
			return err
		}
		n, set, err := q.int("max_results")
		if err != nil {
			return err
		}
		req.MaxResults = wire.Int{V: n, Set: set}
		req.PageToken, req.Filter, req.OrderBy = q.str("page_token"), q.str("filter"), q.list("order_by")
		if q.has("view_type") {
			req.ViewType = wire.Enum{Name: q.str("view_type"), Set: true}
		}
	} else if err := s.decode(w, r, &req); err != nil {
		return err
	}
	vt, err := req.ViewType.Resolve("view_type", viewTypes)
	if err != nil {
		return err
	}
	if req.MaxResults.Set && req.MaxResults.V <= 0 {
		return invalid("Invalid value %d for parameter 'max_results' supplied. It must be a positive integer", req.MaxResults.V)
	}
	if lim := s.tr.Limits().SearchMaxResults; req.MaxResults.V > int64(lim) {
		return invalid("Invalid value %d for parameter 'max_results' supplied. It must be at most %d", req.MaxResults.V, lim)
	}
	q := tracking.ExperimentSearch{
		Filter: req.Filter, OrderBy: req.OrderBy, ViewType: tracking.ViewType(vt),
		MaxResults: clampInt(req.MaxResults.V), PageToken: req.PageToken,
	}
	if ids, all, err := s.ws.ReadableExperimentIDs(r.Context(), SubjectFromContext(r.Context())); err != nil {
		return err
	} else if !all {
		q.OnlyIDs = ids
		if q.OnlyIDs == nil {
			q.OnlyIDs = []string{}
		}
	}
	page, err := s.tr.SearchExperiments(r.Context(), q)
	if err != nil {
		return err
	}
	resp := struct {
		Experiments   []wire.Experiment `json:"experiments"`
		NextPageToken string            `json:"next_page_token,omitempty"`
	}{Experiments: make([]wire.Experiment, 0, len(page.Experiments)), NextPageToken: page.NextPageToken}
	for _, e := range page.Experiments {
		resp.Experiments = append(resp.Experiments, wire.ToExperiment(e))
	}
	return writeJSON(w, resp)
}

// clampInt converts a request integer to int, saturating so that range
// checks further in see an out-of-range value rather than a wrapped one.
func clampInt(v int64) int {
	const maxInt = int64(^uint(0) >> 1)
	if v > maxInt {
		return int(maxInt)
	}
	if v < -maxInt {
		return int(-maxInt)
	}
	return int(v)
}

func (s *Server) updateExperiment(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ExperimentID string `json:"experiment_id"`
		NewName      string `json:"new_name"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := tracking.ValidateExperimentID(req.ExperimentID); err != nil {
		return err
	}
	if err := s.allowExperimentOp(r, req.ExperimentID, workspace.OpRenameExperiment); err != nil {
		return err
	}
	ctx, sub := r.Context(), SubjectFromContext(r.Context())
	cur, err := s.tr.GetExperiment(ctx, req.ExperimentID)
	if err != nil {
		return err
	}
	name := workspace.CanonicalName(req.NewName)
	if s.multiUser() && req.NewName != "" {
		if name, err = workspace.NormalizePath(req.NewName); err != nil {
			return refError(refNewName, req.NewName, err)
		}
		// The policy says what a rename that leaves the folder is
		// (workspace.RenameOperation): a move, on the experiment and on
		// the destination folder.
		if workspace.RenameOperation(cur.Name, name) == workspace.OpMoveExperiment {
			if err := s.allowExperimentOp(r, req.ExperimentID, workspace.OpMoveExperiment); err != nil {
				return &errs.Error{Code: errs.CodeOf(err), Msg: "moving an experiment to another folder: " + errs.MessageOf(err), Err: err}
			}
			if err := s.allowRef(r, refNewName, req.NewName); err != nil {
				return err
			}
			if name, err = s.ws.PrepareExperimentName(ctx, sub, req.NewName); err != nil {
				return refError(refNewName, req.NewName, err)
			}
		}
	}
	if err := s.ws.CheckNoFolderAt(ctx, name); err != nil {
		return refError(refNewName, req.NewName, err)
	}
	if err := s.tr.RenameExperiment(ctx, req.ExperimentID, name); err != nil {
		return err
	}
	s.ws.ExperimentRenamed(ctx, sub, req.ExperimentID, cur.Name, name)
	return writeRaw(w, emptyObject)
}

type experimentIDRequest struct {
	ExperimentID string `json:"experiment_id"`
}

func (s *Server) deleteExperiment(w http.ResponseWriter, r *http.Request) error {
	var req experimentIDRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := tracking.ValidateExperimentID(req.ExperimentID); err != nil {
		return err
	}
	if err := s.allowExperimentOp(r, req.ExperimentID, workspace.OpDeleteExperiment); err != nil {
		return err
	}
	if err := s.tr.DeleteExperiment(r.Context(), req.ExperimentID); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) restoreExperiment(w http.ResponseWriter, r *http.Request) error {
	var req experimentIDRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := tracking.ValidateExperimentID(req.ExperimentID); err != nil {
		return err
	}
	if err := s.allowExperimentOp(r, req.ExperimentID, workspace.OpDeleteExperiment); err != nil {
		return err
	}
	if err := s.tr.RestoreExperiment(r.Context(), req.ExperimentID); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) setExperimentTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ExperimentID string `json:"experiment_id"`
		Key          string `json:"key"`
		Value        string `json:"value"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.allowExperimentID(r, req.ExperimentID); err != nil {
		return err
	}
	if err := s.tr.SetExperimentTag(r.Context(), req.ExperimentID, tracking.Tag{Key: req.Key, Value: req.Value}); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteExperimentTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ExperimentID string `json:"experiment_id"`
		Key          string `json:"key"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.allowExperimentID(r, req.ExperimentID); err != nil {
		return err
	}
	if err := s.tr.DeleteExperimentTag(r.Context(), req.ExperimentID, req.Key); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// decode reads and strictly decodes a JSON body into dst.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, dst any) error {
	return s.decodeLimited(w, r, dst, s.opts.MaxBodyBytes)
}

// decodeLimited is decode taking a body of at most limit bytes.
func (s *Server) decodeLimited(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	body, err := s.readBodyInto(w, r, new(bytes.Buffer), min(limit, s.opts.MaxBodyBytes))
	if err != nil {
		return err
	}
	return wire.Decode(body, dst)
}
