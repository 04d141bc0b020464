package tracking

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking/search"
)

// RegisteredModel is a named model in the registry, with numbered versions.
type RegisteredModel struct {
	Name              string
	Description       string
	UserID            string
	CreationTimeMs    int64
	LastUpdatedTimeMs int64
	Tags              []Tag
	Aliases           []ModelAlias
	// LatestVersions holds the newest version of each stage.
	LatestVersions []*ModelVersion
}

// ModelAlias points a name such as "champion" at a version.
type ModelAlias struct {
	Alias   string
	Version string
}

// ModelVersion is one version of a registered model.
type ModelVersion struct {
	Name              string
	Version           string
	CreationTimeMs    int64
	LastUpdatedTimeMs int64
	UserID            string
	CurrentStage      string
	Description       string
	// Source is what the client registered (models:/m-..., runs:/..., a
	// URI); StorageLocation is where its files are, which is what a
	// download resolves to.
	Source          string
	StorageLocation string
	RunID           string
	RunLink         string
	ModelID         string
	Tags            []Tag
	Aliases         []string
}

// Model version stages, as MLflow names them.
var modelStages = map[string]string{
	"none": "None", "staging": "Staging", "production": "Production", "archived": "Archived",
}

// RegistryStore stores registered models and their versions. Missing
// models or versions give errs.NotFound.
type RegistryStore interface {
	CreateRegisteredModel(ctx context.Context, m *RegisteredModel) error
	GetRegisteredModel(ctx context.Context, name string) (*RegisteredModel, error)
	UpdateRegisteredModel(ctx context.Context, name string, description *string, nowMs int64) error
	RenameRegisteredModel(ctx context.Context, name, newName string, nowMs int64) error
	DeleteRegisteredModel(ctx context.Context, name string) error
	SearchRegisteredModels(ctx context.Context, q RegistryQuery) ([]*RegisteredModel, string, error)
	SetRegisteredModelTag(ctx context.Context, name string, t Tag, nowMs int64) error
	DeleteRegisteredModelTag(ctx context.Context, name, key string) error
	SetModelAlias(ctx context.Context, name, alias, version string, nowMs int64) error
	DeleteModelAlias(ctx context.Context, name, alias string) error
	// CreateModelVersion assigns v.Version (the next number).
	CreateModelVersion(ctx context.Context, v *ModelVersion) error
	GetModelVersion(ctx context.Context, name, version string) (*ModelVersion, error)
	GetModelVersionByAlias(ctx context.Context, name, alias string) (*ModelVersion, error)
	UpdateModelVersion(ctx context.Context, name, version string, description *string, stage *string, archiveOthers bool, nowMs int64) error
	DeleteModelVersion(ctx context.Context, name, version string) error
	SearchModelVersions(ctx context.Context, q RegistryQuery) ([]*ModelVersion, string, error)
	SetModelVersionTag(ctx context.Context, name, version string, t Tag, nowMs int64) error
	DeleteModelVersionTag(ctx context.Context, name, version, key string) error
}

// RegistryQuery selects registered models or model versions.
type RegistryQuery struct {
	Filter     search.Filter
	OrderBy    []search.OrderKey
	MaxResults int
	PageToken  string
}

func validateRegisteredName(name string) error {
	if name == "" {
		return invalidf("Missing value for required parameter 'name'. See the API docs for more information about request parameters.")
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 256 {
		return invalidf("Invalid registered model name %q: at most 256 characters of valid UTF-8", errs.Truncate(name, 80))
	}
	if strings.ContainsAny(name, "/\x00") {
		return invalidf("Invalid registered model name %q: names cannot contain '/'", errs.Truncate(name, 80))
	}
	return nil
}

func validateVersion(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return invalidf("Invalid model version %q: versions are positive integers", errs.Truncate(v, 40))
	}
	return nil
}

// CreateRegisteredModel creates a registered model.
func (s *Service) CreateRegisteredModel(ctx context.Context, name, description string, tags []Tag) (*RegisteredModel, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	for _, t := range tags {
		if err := s.validateTag(t); err != nil {
			return nil, err
		}
	}
	now := s.nowMs()
	m := &RegisteredModel{Name: name, Description: description, CreationTimeMs: now, LastUpdatedTimeMs: now, Tags: dedupTags(tags)}
	if err := s.store.CreateRegisteredModel(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// GetRegisteredModel returns a registered model with its latest versions.
func (s *Service) GetRegisteredModel(ctx context.Context, name string) (*RegisteredModel, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	return s.store.GetRegisteredModel(ctx, name)
}

// UpdateRegisteredModel changes a registered model's description.
func (s *Service) UpdateRegisteredModel(ctx context.Context, name string, description *string) (*RegisteredModel, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	if err := s.store.UpdateRegisteredModel(ctx, name, description, s.nowMs()); err != nil {
		return nil, err
	}
	return s.store.GetRegisteredModel(ctx, name)
}

// RenameRegisteredModel renames a registered model.
func (s *Service) RenameRegisteredModel(ctx context.Context, name, newName string) (*RegisteredModel, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	if err := validateRegisteredName(newName); err != nil {
		return nil, err
	}
	if err := s.store.RenameRegisteredModel(ctx, name, newName, s.nowMs()); err != nil {
		return nil, err
	}
	return s.store.GetRegisteredModel(ctx, newName)
}

// DeleteRegisteredModel deletes a registered model and its versions.
func (s *Service) DeleteRegisteredModel(ctx context.Context, name string) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	return s.store.DeleteRegisteredModel(ctx, name)
}

// RegistrySearch is a registered-models or model-versions search request.
type RegistrySearch struct {
	Filter     string
	OrderBy    []string
	MaxResults int
	PageToken  string
}

// registryQuery parses a registry search with its search's grammar
// (filter and order_by) and page size when max_results is not given.
func (s *Service) registryQuery(q RegistrySearch, parseFilter func(string) (search.Filter, error), parseOrder func([]string) ([]search.OrderKey, error), defaultMax int) (RegistryQuery, error) {
	f, err := parseFilter(q.Filter)
	if err != nil {
		return RegistryQuery{}, err
	}
	order, err := parseOrder(q.OrderBy)
	if err != nil {
		return RegistryQuery{}, err
	}
	max, err := s.maxResults(q.MaxResults, defaultMax)
	if err != nil {
		return RegistryQuery{}, err
	}
	return RegistryQuery{Filter: f, OrderBy: order, MaxResults: max, PageToken: q.PageToken}, nil
}

// SearchRegisteredModels returns one page of registered models.
func (s *Service) SearchRegisteredModels(ctx context.Context, q RegistrySearch) ([]*RegisteredModel, string, error) {
	rq, err := s.registryQuery(q, search.ParseRegisteredModelFilter, search.ParseRegisteredModelOrderBy, 100)
	if err != nil {
		return nil, "", err
	}
	return s.store.SearchRegisteredModels(ctx, rq)
}

// SetRegisteredModelTag upserts a tag on a registered model.
func (s *Service) SetRegisteredModelTag(ctx context.Context, name string, t Tag) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	if err := s.validateTag(t); err != nil {
		return err
	}
	return s.store.SetRegisteredModelTag(ctx, name, t, s.nowMs())
}

// DeleteRegisteredModelTag removes a tag from a registered model.
func (s *Service) DeleteRegisteredModelTag(ctx context.Context, name, key string) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	return s.store.DeleteRegisteredModelTag(ctx, name, key)
}

// SetModelAlias points alias at a version.
func (s *Service) SetModelAlias(ctx context.Context, name, alias, version string) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	if err := validateAlias(alias); err != nil {
		return err
	}
	if err := validateVersion(version); err != nil {
		return err
	}
	return s.store.SetModelAlias(ctx, name, alias, version, s.nowMs())
}

func validateAlias(alias string) error {
	if alias == "" {
		return invalidf("Missing value for required parameter 'alias'. See the API docs for more information about request parameters.")
	}
	if len(alias) > 255 || strings.ContainsAny(alias, "/@ ") {
		return invalidf("Invalid alias %q: at most 255 characters, without '/', '@' or spaces", errs.Truncate(alias, 60))
	}
	if strings.EqualFold(alias, "latest") || (alias[0] == 'v' || alias[0] == 'V') && isDigits(alias[1:]) {
		return invalidf("Invalid alias %q: 'latest' and 'v<number>' are reserved", alias)
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// DeleteModelAlias removes an alias.
func (s *Service) DeleteModelAlias(ctx context.Context, name, alias string) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	if err := validateAlias(alias); err != nil {
		return err
	}
	return s.store.DeleteModelAlias(ctx, name, alias)
}

// CreateModelVersionRequest is what model-versions/create carries.
type CreateModelVersionRequest struct {
	Name        string
	Source      string
	RunID       string
	RunLink     string
	Description string
	ModelID     string
	Tags        []Tag
}

// CreateModelVersion registers a new version. Its source is checked as
// MLflow 3.17.2 checks it and resolves to where its files are (see
// source.go). A version made from a logged model is added to the model's
// mlflow.modelVersions tag, as MLflow does.
func (s *Service) CreateModelVersion(ctx context.Context, req CreateModelVersionRequest) (*ModelVersion, error) {
	if err := validateRegisteredName(req.Name); err != nil {
		return nil, err
	}
	if req.Source == "" {
		return nil, invalidf("Missing value for required parameter 'source'. See the API docs for more information about request parameters.")
	}
	if utf8.RuneCountInString(req.Source) > 4000 {
		return nil, invalidf("source exceeds 4000 characters")
	}
	for _, t := range req.Tags {
		if err := s.validateTag(t); err != nil {
			return nil, err
		}
	}
	src, err := s.checkVersionSource(ctx, req.Source, req.RunID, req.ModelID)
	if err != nil {
		return nil, err
	}
	var model *LoggedModel
	if src.modelID != "" {
		// MLflow tags the model after it made the version, and answers
		// 404 for a model it does not have; Sextant looks first.
		if model, err = s.GetLoggedModel(ctx, src.modelID, false); err != nil {
			return nil, err
		}
		if src.runID == "" {
			src.runID = model.SourceRunID
		}
	}
	if src.runID != "" {
		if err := ValidateRunID(src.runID); err != nil {
			return nil, err
		}
	}
	now := s.nowMs()
	v := &ModelVersion{
		Name: req.Name, CreationTimeMs: now, LastUpdatedTimeMs: now, CurrentStage: "None",
		Description: req.Description, Source: src.source, StorageLocation: src.storage,
		RunID: src.runID, RunLink: req.RunLink, ModelID: src.modelID, Tags: dedupTags(req.Tags),
	}
	if err := s.store.CreateModelVersion(ctx, v); err != nil {
		return nil, err
	}
	if model != nil {
		if err := s.tagModelVersion(ctx, model, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// tagModelVersion adds v to the mlflow.modelVersions tag of the logged
// model it was made from. Two versions made from one model at once may
// race here; the later write keeps both only if it read the earlier.
func (s *Service) tagModelVersion(ctx context.Context, m *LoggedModel, v *ModelVersion) error {
	old := ""
	for _, t := range m.Tags {
		if t.Key == modelVersionsTag {
			old = t.Value
		}
	}
	val := appendModelVersion(old, v.Name, v.Version)
	if val == old {
		return nil
	}
	if err := s.store.SetLoggedModelTags(ctx, m.ID, []Tag{{Key: modelVersionsTag, Value: val}}, s.nowMs()); err != nil {
		return fmt.Errorf("tag logged model %s with version %s of %s: %w", m.ID, v.Version, v.Name, err)
	}
	return nil
}

// GetModelVersion returns one version.
func (s *Service) GetModelVersion(ctx context.Context, name, version string) (*ModelVersion, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	if err := validateVersion(version); err != nil {
		return nil, err
	}
	return s.store.GetModelVersion(ctx, name, version)
}

// GetModelVersionByAlias returns the version an alias points at.
func (s *Service) GetModelVersionByAlias(ctx context.Context, name, alias string) (*ModelVersion, error) {
	if err := validateRegisteredName(name); err != nil {
		return nil, err
	}
	if alias == "" {
		return nil, invalidf("Missing value for required parameter 'alias'. See the API docs for more information about request parameters.")
	}
	return s.store.GetModelVersionByAlias(ctx, name, alias)
}

// ModelVersionDownloadURI returns where a version's files can be read.
func (s *Service) ModelVersionDownloadURI(ctx context.Context, name, version string) (string, error) {
	v, err := s.GetModelVersion(ctx, name, version)
	if err != nil {
		return "", err
	}
	return v.StorageLocation, nil
}

// UpdateModelVersion changes a version's description.
func (s *Service) UpdateModelVersion(ctx context.Context, name, version string, description *string) (*ModelVersion, error) {
	if _, err := s.GetModelVersion(ctx, name, version); err != nil {
		return nil, err
	}
	if err := s.store.UpdateModelVersion(ctx, name, version, description, nil, false, s.nowMs()); err != nil {
		return nil, err
	}
	return s.store.GetModelVersion(ctx, name, version)
}

// TransitionModelVersionStage moves a version to a stage (a deprecated
// MLflow feature that older client code still calls).
func (s *Service) TransitionModelVersionStage(ctx context.Context, name, version, stage string, archiveOthers bool) (*ModelVersion, error) {
	canonical, ok := modelStages[strings.ToLower(stage)]
	if !ok {
		return nil, invalidf("Invalid Model Version stage: %q. Value must be one of None, Staging, Production, Archived.", errs.Truncate(stage, 40))
	}
	if _, err := s.GetModelVersion(ctx, name, version); err != nil {
		return nil, err
	}
	if err := s.store.UpdateModelVersion(ctx, name, version, nil, &canonical, archiveOthers, s.nowMs()); err != nil {
		return nil, err
	}
	return s.store.GetModelVersion(ctx, name, version)
}

// DeleteModelVersion deletes one version.
func (s *Service) DeleteModelVersion(ctx context.Context, name, version string) error {
	if err := validateRegisteredName(name); err != nil {
		return err
	}
	if err := validateVersion(version); err != nil {
		return err
	}
	return s.store.DeleteModelVersion(ctx, name, version)
}

// SearchModelVersions returns one page of model versions.
func (s *Service) SearchModelVersions(ctx context.Context, q RegistrySearch) ([]*ModelVersion, string, error) {
	rq, err := s.registryQuery(q, search.ParseModelVersionFilter, search.ParseModelVersionOrderBy, 10000)
	if err != nil {
		return nil, "", err
	}
	return s.store.SearchModelVersions(ctx, rq)
}

// SetModelVersionTag upserts a tag on a version.
func (s *Service) SetModelVersionTag(ctx context.Context, name, version string, t Tag) error {
	if err := validateVersion(version); err != nil {
		return err
	}
	if err := s.validateTag(t); err != nil {
		return err
	}
	return s.store.SetModelVersionTag(ctx, name, version, t, s.nowMs())
}

// DeleteModelVersionTag removes a tag from a version.
func (s *Service) DeleteModelVersionTag(ctx context.Context, name, version, key string) error {
	if err := validateVersion(version); err != nil {
		return err
	}
	return s.store.DeleteModelVersionTag(ctx, name, version, key)
}

// LatestVersions returns the newest version in each of the stages (all
// stages when none are given).
func (s *Service) LatestVersions(ctx context.Context, name string, stages []string) ([]*ModelVersion, error) {
	m, err := s.GetRegisteredModel(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(stages) == 0 {
		return m.LatestVersions, nil
	}
	want := map[string]bool{}
	for _, st := range stages {
		c, ok := modelStages[strings.ToLower(st)]
		if !ok {
			return nil, invalidf("Invalid Model Version stage: %q", errs.Truncate(st, 40))
		}
		want[c] = true
	}
	var out []*ModelVersion
	for _, v := range m.LatestVersions {
		if want[v.CurrentStage] {
			out = append(out, v)
		}
	}
	return out, nil
}
