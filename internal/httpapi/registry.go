package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// The model registry basics that mlflow.register_model and loading
// models:/<name>/<version> need.

type wireModelVersion struct {
	Name                 string    `json:"name"`
	Version              string    `json:"version"`
	CreationTimestamp    int64     `json:"creation_timestamp"`
	LastUpdatedTimestamp int64     `json:"last_updated_timestamp"`
	UserID               string    `json:"user_id,omitempty"`
	CurrentStage         string    `json:"current_stage"`
	Description          string    `json:"description,omitempty"`
	Source               string    `json:"source"`
	RunID                string    `json:"run_id,omitempty"`
	RunLink              string    `json:"run_link,omitempty"`
	ModelID              string    `json:"model_id,omitempty"`
	Status               string    `json:"status"`
	Tags                 []wire.KV `json:"tags,omitempty"`
	Aliases              []string  `json:"aliases,omitempty"`
}

func toWireVersion(v *tracking.ModelVersion) wireModelVersion {
	w := wireModelVersion{
		Name: v.Name, Version: v.Version, CreationTimestamp: v.CreationTimeMs, LastUpdatedTimestamp: v.LastUpdatedTimeMs,
		UserID: v.UserID, CurrentStage: v.CurrentStage, Description: v.Description, Source: v.Source,
		RunID: v.RunID, RunLink: v.RunLink, ModelID: v.ModelID, Status: "READY", Aliases: v.Aliases,
	}
	for _, t := range v.Tags {
		w.Tags = append(w.Tags, wire.KV(t))
	}
	return w
}

type wireRegisteredModel struct {
	Name                 string             `json:"name"`
	CreationTimestamp    int64              `json:"creation_timestamp"`
	LastUpdatedTimestamp int64              `json:"last_updated_timestamp"`
	UserID               string             `json:"user_id,omitempty"`
	Description          string             `json:"description,omitempty"`
	LatestVersions       []wireModelVersion `json:"latest_versions,omitempty"`
	Tags                 []wire.KV          `json:"tags,omitempty"`
	Aliases              []struct {
		Alias   string `json:"alias"`
		Version string `json:"version"`
	} `json:"aliases,omitempty"`
}

func toWireRegistered(m *tracking.RegisteredModel) wireRegisteredModel {
	w := wireRegisteredModel{Name: m.Name, CreationTimestamp: m.CreationTimeMs, LastUpdatedTimestamp: m.LastUpdatedTimeMs, UserID: m.UserID, Description: m.Description}
	for _, v := range m.LatestVersions {
		w.LatestVersions = append(w.LatestVersions, toWireVersion(v))
	}
	for _, t := range m.Tags {
		w.Tags = append(w.Tags, wire.KV(t))
	}
	for _, a := range m.Aliases {
		w.Aliases = append(w.Aliases, struct {
			Alias   string `json:"alias"`
			Version string `json:"version"`
		}{a.Alias, a.Version})
	}
	return w
}

func (s *Server) registerRegistryRoutes() {
	s.handle("POST", "/mlflow/registered-models/create", Authenticated, s.createRegisteredModel)
	s.handle("GET", "/mlflow/registered-models/get", Authenticated, s.getRegisteredModel)
	s.handle("PATCH", "/mlflow/registered-models/update", Authenticated, s.updateRegisteredModel)
	s.handle("POST", "/mlflow/registered-models/rename", Authenticated, s.renameRegisteredModel)
	s.handle("DELETE", "/mlflow/registered-models/delete", Authenticated, s.deleteRegisteredModel)
	s.handle("GET", "/mlflow/registered-models/search", Authenticated, s.searchRegisteredModels)
	s.handle("POST", "/mlflow/registered-models/get-latest-versions", Authenticated, s.getLatestVersions)
	s.handle("GET", "/mlflow/registered-models/get-latest-versions", Authenticated, s.getLatestVersions)
	s.handle("POST", "/mlflow/registered-models/set-tag", Authenticated, s.setRegisteredModelTag)
	s.handle("DELETE", "/mlflow/registered-models/delete-tag", Authenticated, s.deleteRegisteredModelTag)
	s.handle("POST", "/mlflow/registered-models/alias", Authenticated, s.setModelAlias)
	s.handle("DELETE", "/mlflow/registered-models/alias", Authenticated, s.deleteModelAlias)
	s.handle("GET", "/mlflow/registered-models/alias", Authenticated, s.getModelVersionByAlias)
	s.handle("POST", "/mlflow/model-versions/create", Authenticated, s.createModelVersion,
		refVersionSourceRun, refVersionSourceModel, refVersionSourceArtifacts, refVersionRun, refVersionModel)
	s.handle("GET", "/mlflow/model-versions/get", Authenticated, s.getModelVersion)
	s.handle("PATCH", "/mlflow/model-versions/update", Authenticated, s.updateModelVersion)
	s.handle("DELETE", "/mlflow/model-versions/delete", Authenticated, s.deleteModelVersion)
	s.handle("GET", "/mlflow/model-versions/search", Authenticated, s.searchModelVersions)
	s.handle("GET", "/mlflow/model-versions/get-download-uri", Authenticated, s.getModelVersionDownloadURI)
	s.handle("POST", "/mlflow/model-versions/transition-stage", Authenticated, s.transitionModelVersionStage)
	s.handle("POST", "/mlflow/model-versions/set-tag", Authenticated, s.setModelVersionTag)
	s.handle("DELETE", "/mlflow/model-versions/delete-tag", Authenticated, s.deleteModelVersionTag)
}

func registeredResponse(w http.ResponseWriter, m *tracking.RegisteredModel) error {
	return writeJSON(w, map[string]any{"registered_model": toWireRegistered(m)})
}

func versionResponse(w http.ResponseWriter, v *tracking.ModelVersion) error {
	return writeJSON(w, map[string]any{"model_version": toWireVersion(v)})
}

func (s *Server) createRegisteredModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name            string    `json:"name"`
		Tags            []wire.KV `json:"tags"`
		Description     string    `json:"description"`
		DeploymentJobID string    `json:"deployment_job_id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := refusePrompt(req.Tags); err != nil {
		return err
	}
	m, err := s.tr.CreateRegisteredModel(r.Context(), req.Name, req.Description, kvTags(req.Tags))
	if err != nil {
		return err
	}
	return registeredResponse(w, m)
}

func (s *Server) getRegisteredModel(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "name")
	if err != nil {
		return err
	}
	m, err := s.tr.GetRegisteredModel(r.Context(), q.str("name"))
	if err != nil {
		return err
	}
	return registeredResponse(w, m)
}

func (s *Server) updateRegisteredModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name            string  `json:"name"`
		Description     *string `json:"description"`
		DeploymentJobID string  `json:"deployment_job_id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	m, err := s.tr.UpdateRegisteredModel(r.Context(), req.Name, req.Description)
	if err != nil {
		return err
	}
	return registeredResponse(w, m)
}

func (s *Server) renameRegisteredModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name    string `json:"name"`
		NewName string `json:"new_name"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	m, err := s.tr.RenameRegisteredModel(r.Context(), req.Name, req.NewName)
	if err != nil {
		return err
	}
	return registeredResponse(w, m)
}

func (s *Server) deleteRegisteredModel(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.DeleteRegisteredModel(r.Context(), req.Name); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// registrySearchQuery reads the GET parameters of the registry searches.
func registrySearchQuery(r *http.Request, limit int) (tracking.RegistrySearch, error) {
	q, err := parseQuery(r, "filter", "max_results", "order_by", "page_token")
	if err != nil {
		return tracking.RegistrySearch{}, err
	}
	max, set, err := q.int("max_results")
	if err != nil {
		return tracking.RegistrySearch{}, err
	}
	// MLflow's words: its store's below 1, its handler's above the limit.
	if set && max <= 0 {
		return tracking.RegistrySearch{}, invalid("Invalid value for max_results. It must be a positive integer, but got %d", max)
	}
	if max > int64(limit) {
		return tracking.RegistrySearch{}, wire.InvalidValue("max_results", max)
	}
	return tracking.RegistrySearch{Filter: q.str("filter"), OrderBy: q.list("order_by"), MaxResults: clampInt(max), PageToken: q.str("page_token")}, nil
}

// searchRegistry answers a registry search: its GET parameters are read
// with registrySearchQuery, and the page comes back in its wire form
// (never nil, so that an empty page is a JSON []) with the next page's
// token.
func searchRegistry[T, W any](r *http.Request, limit int, find func(context.Context, tracking.RegistrySearch) ([]T, string, error), toWire func(T) W) ([]W, string, error) {
	q, err := registrySearchQuery(r, limit)
	if err != nil {
		return nil, "", err
	}
	items, next, err := find(r.Context(), q)
	if err != nil {
		return nil, "", err
	}
	out := make([]W, 0, len(items))
	for _, it := range items {
		out = append(out, toWire(it))
	}
	return out, next, nil
}

func (s *Server) searchRegisteredModels(w http.ResponseWriter, r *http.Request) error {
	models, next, err := searchRegistry(r, s.tr.Limits().SearchMaxResults, s.tr.SearchRegisteredModels, toWireRegistered)
	if err != nil {
		return err
	}
	return writeJSON(w, struct {
		RegisteredModels []wireRegisteredModel `json:"registered_models"`
		NextPageToken    string                `json:"next_page_token,omitempty"`
	}{models, next})
}

func (s *Server) getLatestVersions(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name   string   `json:"name"`
		Stages []string `json:"stages"`
	}
	if r.Method == http.MethodGet {
		q, err := parseQuery(r, "name", "stages")
		if err != nil {
			return err
		}
		req.Name, req.Stages = q.str("name"), q.list("stages")
	} else if err := s.decode(w, r, &req); err != nil {
		return err
	}
	versions, err := s.tr.LatestVersions(r.Context(), req.Name, req.Stages)
	if err != nil {
		return err
	}
	out := make([]wireModelVersion, 0, len(versions))
	for _, v := range versions {
		out = append(out, toWireVersion(v))
	}
	return writeJSON(w, map[string]any{"model_versions": out})
}

func (s *Server) setRegisteredModelTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name  string `json:"name"`
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.SetRegisteredModelTag(r.Context(), req.Name, tracking.Tag{Key: req.Key, Value: req.Value}); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteRegisteredModelTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.DeleteRegisteredModelTag(r.Context(), req.Name, req.Key); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) setModelAlias(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name    string `json:"name"`
		Alias   string `json:"alias"`
		Version string `json:"version"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.SetModelAlias(r.Context(), req.Name, req.Alias, req.Version); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteModelAlias(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name  string `json:"name"`
		Alias string `json:"alias"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.DeleteModelAlias(r.Context(), req.Name, req.Alias); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) getModelVersionByAlias(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "name", "alias")
	if err != nil {
		return err
	}
	v, err := s.tr.GetModelVersionByAlias(r.Context(), q.str("name"), q.str("alias"))
	if err != nil {
		return err
	}
	return versionResponse(w, v)
}

func (s *Server) createModelVersion(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name        string    `json:"name"`
		Source      string    `json:"source"`
		RunID       string    `json:"run_id"`
		Tags        []wire.KV `json:"tags"`
		RunLink     string    `json:"run_link"`
		Description string    `json:"description"`
		ModelID     string    `json:"model_id"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := refusePrompt(req.Tags); err != nil {
		return err
	}
	// What is registered must be readable by whoever registers it: the
	// registry is shared, and a version's download URI points at its files.
	for _, ref := range []Ref{refVersionSourceRun, refVersionSourceModel, refVersionSourceArtifacts} {
		if err := s.allowRef(r, ref, req.Source); err != nil {
			return err
		}
	}
	if err := s.allowRef(r, refVersionRun, req.RunID); err != nil {
		return err
	}
	if err := s.allowRef(r, refVersionModel, req.ModelID); err != nil {
		return err
	}
	v, err := s.tr.CreateModelVersion(r.Context(), tracking.CreateModelVersionRequest{
		Name: req.Name, Source: req.Source, RunID: req.RunID, RunLink: req.RunLink,
		Description: req.Description, ModelID: req.ModelID, Tags: kvTags(req.Tags),
	})
	if err != nil {
		return err
	}
	return versionResponse(w, v)
}

func (s *Server) getModelVersion(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "name", "version")
	if err != nil {
		return err
	}
	v, err := s.tr.GetModelVersion(r.Context(), q.str("name"), q.str("version"))
	if err != nil {
		return err
	}
	return versionResponse(w, v)
}

func (s *Server) updateModelVersion(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name        string  `json:"name"`
		Version     string  `json:"version"`
		Description *string `json:"description"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	v, err := s.tr.UpdateModelVersion(r.Context(), req.Name, req.Version, req.Description)
	if err != nil {
		return err
	}
	return versionResponse(w, v)
}

func (s *Server) deleteModelVersion(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.DeleteModelVersion(r.Context(), req.Name, req.Version); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) searchModelVersions(w http.ResponseWriter, r *http.Request) error {
	versions, next, err := searchRegistry(r, s.tr.Limits().SearchMaxResults, s.tr.SearchModelVersions, toWireVersion)
	if err != nil {
		return err
	}
	return writeJSON(w, struct {
		ModelVersions []wireModelVersion `json:"model_versions"`
		NextPageToken string             `json:"next_page_token,omitempty"`
	}{versions, next})
}

func (s *Server) getModelVersionDownloadURI(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "name", "version")
	if err != nil {
		return err
	}
	v, err := s.tr.GetModelVersion(r.Context(), q.str("name"), q.str("version"))
	if err != nil {
		return err
	}
	if err := s.allowVersionFiles(r, v); err != nil {
		return err
	}
	return writeJSON(w, map[string]string{"artifact_uri": v.StorageLocation})
}

func (s *Server) transitionModelVersionStage(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name                    string `json:"name"`
		Version                 string `json:"version"`
		Stage                   string `json:"stage"`
		ArchiveExistingVersions bool   `json:"archive_existing_versions"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	v, err := s.tr.TransitionModelVersionStage(r.Context(), req.Name, req.Version, req.Stage, req.ArchiveExistingVersions)
	if err != nil {
		return err
	}
	return versionResponse(w, v)
}

func (s *Server) setModelVersionTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Key     string `json:"key"`
		Value   string `json:"value"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.SetModelVersionTag(r.Context(), req.Name, req.Version, tracking.Tag{Key: req.Key, Value: req.Value}); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

func (s *Server) deleteModelVersionTag(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Key     string `json:"key"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := s.tr.DeleteModelVersionTag(r.Context(), req.Name, req.Version, req.Key); err != nil {
		return err
	}
	return writeRaw(w, emptyObject)
}

// allowVersionFiles checks that the caller may read where a version's
// files are: the logged model or run it was registered from, and the
// experiment its storage location is in. The registry itself is shared,
// but the download URI names the run, its experiment and where its files
// are, which are for those who can read them.
func (s *Server) allowVersionFiles(r *http.Request, v *tracking.ModelVersion) error {
	err := s.allowRef(r, refVersionModel, v.ModelID)
	if err == nil {
		err = s.allowRef(r, refVersionRun, v.RunID)
	}
	if err == nil {
		err = s.allowRef(r, refVersionSourceArtifacts, v.StorageLocation)
	}
	if errs.Is(err, errs.PermissionDenied) {
		// Say what is missing without naming the run, model or experiment.
		who := SubjectFromContext(r.Context()).User.Email
		return errs.Errorf(errs.PermissionDenied, "CAN_READ is required on the run or logged model that version %s of registered model %s was registered from; %s does not have it", v.Version, v.Name, who)
	}
	return err
}

// refusePrompt refuses what the mlflow client sends to register a prompt
// (mlflow.genai.register_prompt): a registered model or version tagged
// mlflow.prompt.is_prompt=true. Sextant does not implement MLflow's prompt
// registry; like its other unimplemented APIs (docs/api.md) the answer is
// 404 ENDPOINT_NOT_FOUND, which the client does not retry. The tag value
// is read as MLflow reads it: the last one wins, "true" in any case.
func refusePrompt(tags []wire.KV) error {
	prompt := false
	for _, t := range tags {
		if t.Key == "mlflow.prompt.is_prompt" {
			prompt = strings.EqualFold(t.Value, "true")
		}
	}
	if !prompt {
		return nil
	}
	return &routeError{http.StatusNotFound, "Prompts are not served: Sextant does not implement MLflow's prompt registry (mlflow.genai.register_prompt, prompts:/ URIs); see docs/api.md"}
}
