package tracking

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking/search"
)

// LoggedModelStatus is the upload state of a logged model. The numbers are
// MLflow's enum values and are persisted.
type LoggedModelStatus int32

// The logged model statuses.
const (
	ModelPending      LoggedModelStatus = 1
	ModelReady        LoggedModelStatus = 2
	ModelUploadFailed LoggedModelStatus = 3
)

var modelStatusNames = map[LoggedModelStatus]string{
	ModelPending:      "LOGGED_MODEL_PENDING",
	ModelReady:        "LOGGED_MODEL_READY",
	ModelUploadFailed: "LOGGED_MODEL_UPLOAD_FAILED",
}

// String returns the MLflow name of the status.
func (s LoggedModelStatus) String() string {
	if n, ok := modelStatusNames[s]; ok {
		return n
	}
	return "LOGGED_MODEL_STATUS_UNSPECIFIED"
}

// LoggedModel is an MLflow 3 logged model: a model's files, stored under
// its experiment, with the params, tags and metrics that describe it.
type LoggedModel struct {
	ID                string
	ExperimentID      string
	Name              string
	ModelType         string
	SourceRunID       string
	ArtifactURI       string
	Status            LoggedModelStatus
	StatusMessage     string
	CreationTimeMs    int64
	LastUpdatedTimeMs int64
	LifecycleStage    LifecycleStage
	Tags              []Tag
	Params            []Param
	// Metrics are the latest points of the metrics logged with this
	// model's id, one per (key, dataset).
	Metrics       []MetricWithRun
	Registrations []ModelRegistration
}

// MetricWithRun is a metric point with the run it was logged to.
type MetricWithRun struct {
	Metric
	RunID string
}

// ModelRegistration names a registered model version made from a logged
// model.
type ModelRegistration struct {
	Name    string
	Version string
}

// LoggedModelStore stores logged models.
type LoggedModelStore interface {
	// CreateLoggedModel stores m (ID and ArtifactURI set by the caller) in
	// an active experiment.
	CreateLoggedModel(ctx context.Context, m *LoggedModel) error
	// GetLoggedModel returns a model; deleted ones give errs.NotFound
	// unless allowDeleted.
	GetLoggedModel(ctx context.Context, id string, allowDeleted bool) (*LoggedModel, error)
	// UpdateLoggedModelStatus sets the status of a model that is not deleted.
	UpdateLoggedModelStatus(ctx context.Context, id string, status LoggedModelStatus, nowMs int64) error
	// DeleteLoggedModel soft-deletes a model.
	DeleteLoggedModel(ctx context.Context, id string, nowMs int64) error
	// SetLoggedModelTags upserts tags; DeleteLoggedModelTag removes one
	// (errs.NotFound when missing).
	SetLoggedModelTags(ctx context.Context, id string, tags []Tag, nowMs int64) error
	DeleteLoggedModelTag(ctx context.Context, id, key string, nowMs int64) error
	// LogLoggedModelParams adds params; a key logged again with another
	// value is errs.Invalid, as for runs.
	LogLoggedModelParams(ctx context.Context, id string, params []Param, nowMs int64) error
	// SearchLoggedModels returns one page of models.
	SearchLoggedModels(ctx context.Context, q LoggedModelQuery) (LoggedModelPage, error)
}

// LoggedModelOrder is one order_by item of logged-models/search.
type LoggedModelOrder struct {
	// Field is an attribute name (name, creation_timestamp, ...) or
	// "metrics.<key>".
	Field         string
	Ascending     bool
	DatasetName   string
	DatasetDigest string
}

// LoggedModelQuery selects logged models.
type LoggedModelQuery struct {
	ExperimentIDs []string
	Filter        search.Filter
	// Datasets restricts metric filters to these datasets.
	Datasets   []DatasetRef
	OrderBy    []LoggedModelOrder
	MaxResults int
	PageToken  string
}

// DatasetRef names a dataset by name and digest.
type DatasetRef struct {
	Name   string
	Digest string
}

// LoggedModelPage is one page of logged models.
type LoggedModelPage struct {
	Models        []*LoggedModel
	NextPageToken string
}

// NewLoggedModelID returns an MLflow-style model id: "m-" + 32 hex.
func NewLoggedModelID() string { return "m-" + NewRunID() }

// CreateLoggedModelRequest is what logged-models (POST) carries.
type CreateLoggedModelRequest struct {
	ExperimentID string
	Name         string
	ModelType    string
	SourceRunID  string
	Params       []Param
	Tags         []Tag
}

// CreateLoggedModel creates a PENDING logged model; its files go under
// <experiment artifact location>/models/<id>/artifacts.
func (s *Service) CreateLoggedModel(ctx context.Context, req CreateLoggedModelRequest) (*LoggedModel, error) {
	if err := ValidateExperimentID(req.ExperimentID); err != nil {
		return nil, err
	}
	name := req.Name
	if name == "" {
		name = GenerateRunName()
	}
	if err := validateModelName(name); err != nil {
		return nil, err
	}
	if len(req.ModelType) > 500 {
		return nil, invalidf("model_type exceeds 500 characters")
	}
	for _, p := range req.Params {
		if err := ValidateKey("param", p.Key, s.limits.KeyLength); err != nil {
			return nil, err
		}
		if err := ValidateValueLength("param", p.Key, p.Value, s.limits.ParamValueLength); err != nil {
			return nil, err
		}
	}
	for _, t := range req.Tags {
		if err := s.validateTag(t); err != nil {
			return nil, err
		}
	}
	exp, err := s.store.GetExperiment(ctx, req.ExperimentID)
	if err != nil {
		return nil, err
	}
	if exp.LifecycleStage != Active {
		return nil, invalidf("The experiment %s must be in the 'active' state. Current state is %s.", exp.ID, exp.LifecycleStage)
	}
	if req.SourceRunID != "" {
		if err := ValidateRunID(req.SourceRunID); err != nil {
			return nil, err
		}
	}
	now := s.nowMs()
	id := NewLoggedModelID()
	m := &LoggedModel{
		ID:                id,
		ExperimentID:      exp.ID,
		Name:              name,
		ModelType:         req.ModelType,
		SourceRunID:       req.SourceRunID,
		ArtifactURI:       strings.TrimRight(exp.ArtifactLocation, "/") + "/models/" + id + "/artifacts",
		Status:            ModelPending,
		CreationTimeMs:    now,
		LastUpdatedTimeMs: now,
		LifecycleStage:    Active,
		Tags:              dedupTags(req.Tags),
		Params:            dedupParams(req.Params),
	}
	if err := s.store.CreateLoggedModel(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// validateModelName applies MLflow's rule for logged model names.
func validateModelName(name string) error {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > 500 {
		return invalidf("Invalid model name %q: it must be 1 to 500 characters of valid UTF-8", errs.Truncate(name, 80))
	}
	if strings.ContainsAny(name, "/:.%\"'") {
		return invalidf("Invalid model name %q: names cannot contain '/', ':', '.', '%%', '\"' or \"'\"", errs.Truncate(name, 80))
	}
	return nil
}

func validateModelID(id string) error {
	if id == "" {
		return invalidf("Missing value for required parameter 'model_id'. See the API docs for more information about request parameters.")
	}
	if !idShape(id, 256) {
		return invalidf("Invalid model ID: '%s'", errs.Truncate(id, 80))
	}
	return nil
}

// GetLoggedModel returns a logged model.
func (s *Service) GetLoggedModel(ctx context.Context, id string, allowDeleted bool) (*LoggedModel, error) {
	if err := validateModelID(id); err != nil {
		return nil, err
	}
	return s.store.GetLoggedModel(ctx, id, allowDeleted)
}

// FinalizeLoggedModel records the outcome of a model's upload.
func (s *Service) FinalizeLoggedModel(ctx context.Context, id string, status LoggedModelStatus) (*LoggedModel, error) {
	if err := validateModelID(id); err != nil {
		return nil, err
	}
	if status != ModelReady && status != ModelUploadFailed {
		return nil, invalidf("status must be LOGGED_MODEL_READY or LOGGED_MODEL_UPLOAD_FAILED, got %s", status)
	}
	if err := s.store.UpdateLoggedModelStatus(ctx, id, status, s.nowMs()); err != nil {
		return nil, err
	}
	return s.store.GetLoggedModel(ctx, id, false)
}

// DeleteLoggedModel soft-deletes a logged model.
func (s *Service) DeleteLoggedModel(ctx context.Context, id string) error {
	if err := validateModelID(id); err != nil {
		return err
	}
	return s.store.DeleteLoggedModel(ctx, id, s.nowMs())
}

// SetLoggedModelTags upserts tags on a logged model.
func (s *Service) SetLoggedModelTags(ctx context.Context, id string, tags []Tag) error {
	if err := validateModelID(id); err != nil {
		return err
	}
	for _, t := range tags {
		if err := s.validateTag(t); err != nil {
			return err
		}
	}
	return s.store.SetLoggedModelTags(ctx, id, dedupTags(tags), s.nowMs())
}

// DeleteLoggedModelTag removes a tag from a logged model.
func (s *Service) DeleteLoggedModelTag(ctx context.Context, id, key string) error {
	if err := validateModelID(id); err != nil {
		return err
	}
	if key == "" {
		return invalidf("Missing value for required parameter 'tag_key'. See the API docs for more information about request parameters.")
	}
	return s.store.DeleteLoggedModelTag(ctx, id, key, s.nowMs())
}

// LogLoggedModelParams adds params to a logged model.
func (s *Service) LogLoggedModelParams(ctx context.Context, id string, params []Param) error {
	if err := validateModelID(id); err != nil {
		return err
	}
	if len(params) > s.limits.BatchParams {
		return batchLimit(len(params), s.limits.BatchParams, "params")
	}
	for _, p := range params {
		if err := ValidateKey("param", p.Key, s.limits.KeyLength); err != nil {
			return err
		}
		if err := ValidateValueLength("param", p.Key, p.Value, s.limits.ParamValueLength); err != nil {
			return err
		}
	}
	return s.store.LogLoggedModelParams(ctx, id, dedupParams(params), s.nowMs())
}

// LoggedModelSearch is a logged-models/search request.
type LoggedModelSearch struct {
	ExperimentIDs []string
	Filter        string
	Datasets      []DatasetRef
	OrderBy       []LoggedModelOrder
	MaxResults    int
	PageToken     string
}

// loggedModelOrderFields are the attributes logged models can be ordered by.
var loggedModelOrderFields = map[string]string{
	"name": "name", "model_id": "model_id", "model_type": "model_type", "status": "status",
	"source_run_id": "source_run_id", "creation_timestamp": "creation_timestamp", "creation_time": "creation_timestamp",
	"last_updated_timestamp": "last_updated_timestamp", "last_updated_time": "last_updated_timestamp",
}

// SearchLoggedModels returns one page of logged models. With no
// experiment ids (the caller may read none of those asked for) the page is
// empty once the request is found valid.
func (s *Service) SearchLoggedModels(ctx context.Context, q LoggedModelSearch) (LoggedModelPage, error) {
	for _, id := range q.ExperimentIDs {
		if err := ValidateExperimentID(id); err != nil {
			return LoggedModelPage{}, err
		}
	}
	f, err := search.ParseLoggedModelFilter(q.Filter)
	if err != nil {
		return LoggedModelPage{}, err
	}
	for _, d := range q.Datasets {
		if d.Name == "" {
			return LoggedModelPage{}, invalidf("`dataset_name` in the `datasets` clause must be specified.")
		}
	}
	order := make([]LoggedModelOrder, 0, len(q.OrderBy))
	for _, o := range q.OrderBy {
		switch {
		case strings.HasPrefix(o.Field, "metrics."):
			if err := ValidateKey("metric", strings.TrimPrefix(o.Field, "metrics."), s.limits.KeyLength); err != nil {
				return LoggedModelPage{}, err
			}
		case loggedModelOrderFields[o.Field] != "":
			o.Field = loggedModelOrderFields[o.Field]
		default:
			return LoggedModelPage{}, errs.Errorf(errs.Invalid, "invalid order_by field_name %q: use one of name, model_id, model_type, status, source_run_id, creation_timestamp, last_updated_timestamp or metrics.<key>", o.Field)
		}
		order = append(order, o)
	}
	max := q.MaxResults
	if max == 0 {
		max = 100
	}
	if max < 0 || max > s.limits.SearchMaxResults {
		return LoggedModelPage{}, invalidf("max_results must be between 1 and %d, got %d", s.limits.SearchMaxResults, max)
	}
	if len(q.ExperimentIDs) == 0 {
		return LoggedModelPage{}, nil
	}
	return s.store.SearchLoggedModels(ctx, LoggedModelQuery{
		ExperimentIDs: q.ExperimentIDs, Filter: f, Datasets: q.Datasets, OrderBy: order,
		MaxResults: max, PageToken: q.PageToken,
	})
}
