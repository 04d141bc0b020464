package httpapi

import (
	"net/http"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// loggedModelStatusNames maps MLflow's names of logged-model statuses to
// statuses.
var loggedModelStatusNames = map[string]int64{
	"LOGGED_MODEL_PENDING":       int64(tracking.ModelPending),
	"LOGGED_MODEL_READY":         int64(tracking.ModelReady),
	"LOGGED_MODEL_UPLOAD_FAILED": int64(tracking.ModelUploadFailed),
}

// MLflow 3 logged models (/api/2.0/mlflow/logged-models). Every
// mlflow.<flavor>.log_model and autolog depend on these: without them the
// client logs nothing.

type wireLoggedModel struct {
	Info struct {
		ModelID                string    `json:"model_id"`
		ExperimentID           string    `json:"experiment_id"`
		Name                   string    `json:"name"`
		CreationTimestampMs    int64     `json:"creation_timestamp_ms"`
		LastUpdatedTimestampMs int64     `json:"last_updated_timestamp_ms"`
		ArtifactURI            string    `json:"artifact_uri"`
		Status                 string    `json:"status"`
		ModelType              string    `json:"model_type,omitempty"`
		SourceRunID            string    `json:"source_run_id,omitempty"`
		StatusMessage          string    `json:"status_message,omitempty"`
		Tags                   []wire.KV `json:"tags,omitempty"`
		Registrations          []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"registrations,omitempty"`
	} `json:"info"`
	Data struct {
		Params  []wire.KV     `json:"params,omitempty"`
		Metrics []wire.Metric `json:"metrics,omitempty"`
	} `json:"data"`
}

func toWireLoggedModel(m *tracking.LoggedModel) *wireLoggedModel {
	w := &wireLoggedModel{}
	i := &w.Info
	i.ModelID, i.ExperimentID, i.Name = m.ID, m.ExperimentID, m.Name
	i.CreationTimestampMs, i.LastUpdatedTimestampMs = m.CreationTimeMs, m.LastUpdatedTimeMs
	i.ArtifactURI, i.Status, i.ModelType = m.ArtifactURI, m.Status.String(), m.ModelType
	i.SourceRunID, i.StatusMessage = m.SourceRunID, m.StatusMessage
	for _, t := range m.Tags {
		i.Tags = append(i.Tags, wire.KV(t))
	}
	for _, r := range m.Registrations {
		i.Registrations = append(i.Registrations, struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}{r.Name, r.Version})
	}
	for _, p := range m.Params {
		w.Data.Params = append(w.Data.Params, wire.KV(p))
	}
	for _, mt := range m.Metrics {
		w.Data.Metrics = append(w.Data.Metrics, wire.Metric{
			Key: mt.Key, Value: wire.Double(mt.Value), Timestamp: mt.TimestampMs, Step: mt.Step,
			DatasetName: mt.DatasetName, DatasetDigest: mt.DatasetDigest, ModelID: mt.ModelID, RunID: mt.RunID,
		})
	}
	return w
}

func (s *Server) registerModelRoutes() {
	s.handle("POST", "/mlflow/logged-models", EditExperiment, s.createLoggedModel, refModelSourceRun)
	s.handle("POST", "/mlflow/logged-models/search", Authenticated, s.searchLoggedModels, refSearchExperiments)
	s.handle("GET", "/mlflow/logged-models/{model_id}", ReadExperiment, s.getLoggedModel)
	s.handle("PATCH", "/mlflow/logged-models/{model_id}", EditExperiment, s.finalizeLoggedModel)
	s.handle("DELETE", "/mlflow/logged-models/{model_id}", ManageExperiment, s.deleteLoggedModel)
	s.handle("PATCH", "/mlflow/logged-models/{model_id}/tags", EditExperiment, s.setLoggedModelTags)
	s.handle("DELETE", "/mlflow/logged-models/{model_id}/tags/{tag_key...}", EditExperiment, s.deleteLoggedModelTag)
	s.handle("POST", "/mlflow/logged-models/{model_id}/params", EditExperiment, s.logLoggedModelParams)
}

func (s *Server) createLoggedModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ExperimentID string    `json:"experiment_id"`
		Name         string    `json:"name"`
		ModelType    string    `json:"model_type"`
		SourceRunID  string    `json:"source_run_id"`
		Params       []wire.KV `json:"params"`
		Tags         []wire.KV `json:"tags"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	params := make([]tracking.Param, len(req.Params))
	for i, p := range req.Params {
		params[i] = tracking.Param(p)
	}
	if err := s.allowExperimentID(r, req.ExperimentID); err != nil {
		return err
	}
	if err := s.allowRef(r, refModelSourceRun, req.SourceRunID); err != nil {
		return err
	}
	m, err := s.tr.CreateLoggedModel(r.Context(), tracking.CreateLoggedModelRequest{
		ExperimentID: req.ExperimentID, Name: req.Name, ModelType: req.ModelType,
		SourceRunID: req.SourceRunID, Params: params, Tags: kvTags(req.Tags),
	})
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"model": toWireLoggedModel(m)})
}

func (s *Server) getLoggedModel(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "allow_deleted", "model_id")
	if err != nil {
		return err
	}
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	m, err := s.tr.GetLoggedModel(r.Context(), r.PathValue("model_id"), q.str("allow_deleted") == "true" || q.str("allow_deleted") == "True")
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"model": toWireLoggedModel(m)})
}

func (s *Server) finalizeLoggedModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ModelID string    `json:"model_id"`
		Status  wire.Enum `json:"status"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if !req.Status.Set {
		return invalid("Missing value for required parameter 'status'. See the API docs for more information about request parameters.")
	}
	st, err := req.Status.Resolve("status", loggedModelStatusNames)
	if err != nil {
		return err
	}
	if err := samePathModel(r, req.ModelID); err != nil {
		return err
	}
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	m, err := s.tr.FinalizeLoggedModel(r.Context(), r.PathValue("model_id"), tracking.LoggedModelStatus(st))
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"model": toWireLoggedModel(m)})
}

func (s *Server) deleteLoggedModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ModelID string `json:"model_id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := samePathModel(r, req.ModelID); err != nil {
		return err
	}
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	if err := s.tr.DeleteLoggedModel(r.Context(), r.PathValue("model_id")); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) setLoggedModelTags(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ModelID string    `json:"model_id"`
		Tags    []wire.KV `json:"tags"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := samePathModel(r, req.ModelID); err != nil {
		return err
	}
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	if err := s.tr.SetLoggedModelTags(r.Context(), r.PathValue("model_id"), kvTags(req.Tags)); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteLoggedModelTag(w http.ResponseWriter, r *http.Request) error {
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	if err := s.tr.DeleteLoggedModelTag(r.Context(), r.PathValue("model_id"), r.PathValue("tag_key")); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) logLoggedModelParams(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ModelID string    `json:"model_id"`
		Params  []wire.KV `json:"params"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	params := make([]tracking.Param, len(req.Params))
	for i, p := range req.Params {
		params[i] = tracking.Param(p)
	}
	if err := samePathModel(r, req.ModelID); err != nil {
		return err
	}
	if err := s.allowModel(r, r.PathValue("model_id")); err != nil {
		return err
	}
	if err := s.tr.LogLoggedModelParams(r.Context(), r.PathValue("model_id"), params); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) searchLoggedModels(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ExperimentIDs []string `json:"experiment_ids"`
		Filter        string   `json:"filter"`
		Datasets      []struct {
			DatasetName   string `json:"dataset_name"`
			DatasetDigest string `json:"dataset_digest"`
		} `json:"datasets"`
		MaxResults wire.Int `json:"max_results"`
		OrderBy    []struct {
			FieldName     string `json:"field_name"`
			Ascending     *bool  `json:"ascending"`
			DatasetName   string `json:"dataset_name"`
			DatasetDigest string `json:"dataset_digest"`
		} `json:"order_by"`
		PageToken string `json:"page_token"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if len(req.ExperimentIDs) == 0 {
		return invalid("Missing value for required parameter 'experiment_ids'. See the API docs for more information about request parameters.")
	}
	for _, id := range req.ExperimentIDs {
		if err := tracking.ValidateExperimentID(id); err != nil {
			return err
		}
	}
	// Experiments the caller cannot read are left out; if that leaves
	// none, the answer is empty, as runs/search's.
	q := tracking.LoggedModelSearch{ExperimentIDs: s.readableExperiments(r.Context(), req.ExperimentIDs), Filter: req.Filter, MaxResults: clampInt(req.MaxResults.V), PageToken: req.PageToken}
	if req.MaxResults.Set && req.MaxResults.V <= 0 {
		return invalid("max_results must be positive, got %d", req.MaxResults.V)
	}
	for _, d := range req.Datasets {
		q.Datasets = append(q.Datasets, tracking.DatasetRef{Name: d.DatasetName, Digest: d.DatasetDigest})
	}
	for _, o := range req.OrderBy {
		asc := true
		if o.Ascending != nil {
			asc = *o.Ascending
		}
		q.OrderBy = append(q.OrderBy, tracking.LoggedModelOrder{Field: o.FieldName, Ascending: asc, DatasetName: o.DatasetName, DatasetDigest: o.DatasetDigest})
	}
	page, err := s.tr.SearchLoggedModels(r.Context(), q)
	if err != nil {
		return err
	}
	resp := struct {
		Models        []*wireLoggedModel `json:"models"`
		NextPageToken string             `json:"next_page_token,omitempty"`
	}{Models: []*wireLoggedModel{}, NextPageToken: page.NextPageToken}
	for _, m := range page.Models {
		resp.Models = append(resp.Models, toWireLoggedModel(m))
	}
	return writeJSON(w, resp)
}

// samePathModel refuses a body model_id that differs from the path's: the
// path names the model acted on, and a second id would name nothing.
func samePathModel(r *http.Request, bodyID string) error {
	if bodyID != "" && bodyID != r.PathValue("model_id") {
		return invalid("model_id '%s' in the body differs from '%s' in the path: send the path's or none", errs.Truncate(bodyID, 80), errs.Truncate(r.PathValue("model_id"), 80))
	}
	return nil
}
