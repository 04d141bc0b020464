package tracking

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking/search"
)

// Options configure a Service.
type Options struct {
	// Limits are the enforced caps; zero fields take their defaults.
	Limits Limits
	// ArtifactRoot is the prefix of experiment artifact locations; an
	// experiment created without one gets ArtifactRoot + "/" + its id.
	// Empty means "mlflow-artifacts:", which makes the mlflow client go
	// through the server's artifact proxy.
	ArtifactRoot string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// ExactSampleLimit is the number of stored points in a
	// get-history-bulk-interval range up to which the sampling decodes
	// every point (exact MLflow sampling); above it, it works from the
	// store's overviews and the chunks' summaries and sketches. 0 means 64 Ki
	// points.
	ExactSampleLimit int
}

// Service applies the tracking rules on top of a Store. It is safe for
// concurrent use.
type Service struct {
	store  Store
	limits Limits
	root   string
	now    func() time.Time
	log    *slog.Logger
	exact  int
}

// NewService returns a Service over store.
func NewService(store Store, opts Options) *Service {
	s := &Service{
		store:  store,
		limits: opts.Limits.WithDefaults(),
		root:   strings.TrimRight(opts.ArtifactRoot, "/"),
		now:    opts.Now,
		log:    opts.Logger,
		exact:  opts.ExactSampleLimit,
	}
	if s.exact <= 0 {
		s.exact = exactSampleLimit
	}
	if s.root == "" {
		s.root = "mlflow-artifacts:"
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Init creates the Default experiment (id "0") on first start: clients
// send experiment id "0" without looking it up.
func (s *Service) Init(ctx context.Context) error {
	now := s.nowMs()
	return s.store.EnsureDefaultExperiment(ctx, &Experiment{
		ID:               DefaultExperimentID,
		Name:             DefaultExperimentName,
		ArtifactLocation: s.root + "/" + DefaultExperimentID,
		LifecycleStage:   Active,
		CreationTimeMs:   now,
		LastUpdateTimeMs: now,
	})
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }

func (s *Service) nowMs() int64 { return s.now().UnixMilli() }

// NewRunID returns a fresh run id: 32 lower-case hex characters, as MLflow.
func NewRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- experiments ----

// CreateExperiment creates an experiment and returns its id.
func (s *Service) CreateExperiment(ctx context.Context, name, artifactLocation string, tags []Tag) (string, error) {
	if err := s.validateExperimentName(name); err != nil {
		return "", err
	}
	if utf8.RuneCountInString(artifactLocation) > 2048 {
		return "", invalidf("artifact_location has length %d, which exceeds the limit of 2048", len(artifactLocation))
	}
	for _, t := range tags {
		if err := s.validateExperimentTag(t); err != nil {
			return "", err
		}
	}
	now := s.nowMs()
	e := &Experiment{
		Name:             name,
		ArtifactLocation: artifactLocation,
		LifecycleStage:   Active,
		CreationTimeMs:   now,
		LastUpdateTimeMs: now,
		Tags:             dedupTags(tags),
	}
	err := s.store.CreateExperiment(ctx, e, func(id string) string { return s.root + "/" + id })
	if err != nil {
		return "", err
	}
	return e.ID, nil
}

func (s *Service) validateExperimentName(name string) error {
	if name == "" {
		return invalidf("Missing value for required parameter 'name'. See the API docs for more information about request parameters.")
	}
	if !utf8.ValidString(name) {
		return invalidf("experiment name is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > s.limits.ExperimentNameLength {
		return invalidf("experiment name has length %d, which exceeds the limit of %d", n, s.limits.ExperimentNameLength)
	}
	return nil
}

func (s *Service) validateExperimentTag(t Tag) error {
	if err := ValidateKey("tag", t.Key, s.limits.KeyLength); err != nil {
		return err
	}
	return ValidateValueLength("experiment tag", t.Key, t.Value, s.limits.ExperimentTagValueLength)
}

// GetExperiment returns an experiment by id.
func (s *Service) GetExperiment(ctx context.Context, id string) (*Experiment, error) {
	if err := ValidateExperimentID(id); err != nil {
		return nil, err
	}
	return s.store.GetExperiment(ctx, id)
}

// GetExperimentByName returns an experiment by its exact name.
func (s *Service) GetExperimentByName(ctx context.Context, name string) (*Experiment, error) {
	if name == "" {
		return nil, invalidf("Missing value for required parameter 'experiment_name'. See the API docs for more information about request parameters.")
	}
	return s.store.GetExperimentByName(ctx, name)
}

// ExperimentSearch is a search request as the client sends it.
type ExperimentSearch struct {
	// OnlyIDs, when not nil, restricts the search to these experiments
	// (the ones the caller may read).
	OnlyIDs    []string
	Filter     string
	OrderBy    []string
	ViewType   ViewType
	MaxResults int
	PageToken  string
}

// SearchExperiments returns one page of experiments.
func (s *Service) SearchExperiments(ctx context.Context, q ExperimentSearch) (ExperimentPage, error) {
	f, err := search.ParseExperimentFilter(q.Filter)
	if err != nil {
		return ExperimentPage{}, err
	}
	order, err := search.ParseExperimentOrderBy(q.OrderBy)
	if err != nil {
		return ExperimentPage{}, err
	}
	max, err := s.maxResults(q.MaxResults, 1000)
	if err != nil {
		return ExperimentPage{}, err
	}
	vt, err := viewType(q.ViewType)
	if err != nil {
		return ExperimentPage{}, err
	}
	return s.store.SearchExperiments(ctx, ExperimentQuery{OnlyIDs: q.OnlyIDs, Filter: f, OrderBy: order, ViewType: vt, MaxResults: max, PageToken: q.PageToken})
}

func (s *Service) maxResults(n, def int) (int, error) {
	if n == 0 {
		return def, nil
	}
	if n < 0 || n > s.limits.SearchMaxResults {
		return 0, invalidf("max_results must be between 1 and %d, got %d", s.limits.SearchMaxResults, n)
	}
	return n, nil
}

func viewType(v ViewType) (ViewType, error) {
	switch v {
	case 0:
		return ActiveOnly, nil
	case ActiveOnly, DeletedOnly, AllViews:
		return v, nil
	}
	return 0, invalidf("invalid view type %d", v)
}

// RenameExperiment gives an active experiment a new name.
func (s *Service) RenameExperiment(ctx context.Context, id, newName string) error {
	if err := ValidateExperimentID(id); err != nil {
		return err
	}
	if newName == "" {
		return invalidf("Missing value for required parameter 'new_name'. See the API docs for more information about request parameters.")
	}
	if err := s.validateExperimentName(newName); err != nil {
		return err
	}
	return s.store.RenameExperiment(ctx, id, newName, s.nowMs())
}

// DeleteExperiment soft-deletes an experiment and its runs.
func (s *Service) DeleteExperiment(ctx context.Context, id string) error {
	if err := ValidateExperimentID(id); err != nil {
		return err
	}
	return s.store.SetExperimentLifecycle(ctx, id, Deleted, s.nowMs())
}

// RestoreExperiment restores a deleted experiment and its runs.
func (s *Service) RestoreExperiment(ctx context.Context, id string) error {
	if err := ValidateExperimentID(id); err != nil {
		return err
	}
	return s.store.SetExperimentLifecycle(ctx, id, Active, s.nowMs())
}

// SetExperimentTag upserts an experiment tag.
func (s *Service) SetExperimentTag(ctx context.Context, id string, t Tag) error {
	if err := ValidateExperimentID(id); err != nil {
		return err
	}
	if err := s.validateExperimentTag(t); err != nil {
		return err
	}
	return s.store.SetExperimentTag(ctx, id, t)
}

// DeleteExperimentTag removes an experiment tag.
func (s *Service) DeleteExperimentTag(ctx context.Context, id, key string) error {
	if err := ValidateExperimentID(id); err != nil {
		return err
	}
	if key == "" {
		return invalidf("Missing value for required parameter 'key'. See the API docs for more information about request parameters.")
	}
	return s.store.DeleteExperimentTag(ctx, id, key)
}

// ---- runs ----

// CreateRunRequest is what runs/create carries.
type CreateRunRequest struct {
	ExperimentID string
	UserID       string
	RunName      string
	StartTimeMs  int64
	Tags         []Tag
}

// CreateRun creates a run. Without a name (neither run_name nor tag
// mlflow.runName) the run gets a generated one.
func (s *Service) CreateRun(ctx context.Context, req CreateRunRequest) (*Run, error) {
	expID := req.ExperimentID
	if expID == "" {
		expID = DefaultExperimentID
	}
	if err := ValidateExperimentID(expID); err != nil {
		return nil, err
	}
	tags := dedupTags(req.Tags)
	if len(tags) > s.limits.TagsPerRun {
		return nil, LimitError("tags per run", 0, int64(len(tags)), int64(s.limits.TagsPerRun), "")
	}
	name := req.RunName
	for _, t := range tags {
		if err := s.validateTag(t); err != nil {
			return nil, err
		}
		if t.Key == TagRunName {
			if name != "" && name != t.Value {
				return nil, invalidf("Both 'run_name' argument and 'mlflow.runName' tag are specified, but with different values (run_name='%s', mlflow.runName='%s')", name, t.Value)
			}
			name = t.Value
		}
	}
	if name == "" {
		name = GenerateRunName()
	}
	if n := utf8.RuneCountInString(name); n > s.limits.RunNameLength {
		return nil, invalidf("run name has length %d, which exceeds the limit of %d", n, s.limits.RunNameLength)
	}
	tags = setTag(tags, Tag{Key: TagRunName, Value: name})
	start := req.StartTimeMs
	if start <= 0 {
		start = s.nowMs()
	}
	user := req.UserID
	if user == "" {
		user = tagValue(tags, TagUser)
	}
	if user == "" {
		user = "unknown"
	}
	exp, err := s.store.GetExperiment(ctx, expID)
	if err != nil {
		return nil, err
	}
	if exp.LifecycleStage != Active {
		return nil, invalidf("The experiment %s must be in the 'active' state. Current state is %s.", expID, exp.LifecycleStage)
	}
	id := NewRunID()
	r := &Run{
		Info: RunInfo{
			RunID:          id,
			RunName:        name,
			ExperimentID:   expID,
			UserID:         user,
			Status:         StatusRunning,
			StartTimeMs:    start,
			ArtifactURI:    strings.TrimRight(exp.ArtifactLocation, "/") + "/" + id + "/artifacts",
			LifecycleStage: Active,
		},
		Data: RunData{Tags: tags},
	}
	if err := s.store.CreateRun(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// GetRun returns a run with its latest metrics, params and tags.
func (s *Service) GetRun(ctx context.Context, id string) (*Run, error) {
	if err := ValidateRunID(id); err != nil {
		return nil, err
	}
	return s.store.GetRun(ctx, id)
}

// RunExperimentID returns the experiment a run belongs to.
func (s *Service) RunExperimentID(ctx context.Context, id string) (string, error) {
	r, err := s.GetRun(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Info.ExperimentID, nil
}

// UpdateRun changes a run's status, end time or name. Setting RUNNING on a
// finished run resumes it; its end time is kept unless one is given.
func (s *Service) UpdateRun(ctx context.Context, id string, u RunUpdate) (*RunInfo, error) {
	if err := ValidateRunID(id); err != nil {
		return nil, err
	}
	if u.Name != nil {
		if *u.Name == "" {
			u.Name = nil // MLflow treats an empty name as "not given".
		} else if n := utf8.RuneCountInString(*u.Name); n > s.limits.RunNameLength {
			return nil, invalidf("run name has length %d, which exceeds the limit of %d", n, s.limits.RunNameLength)
		}
	}
	if u.EndTimeMs != nil && *u.EndTimeMs < 0 {
		return nil, invalidf("end_time %d is negative", *u.EndTimeMs)
	}
	return s.store.UpdateRun(ctx, id, u)
}

// DeleteRun soft-deletes a run.
func (s *Service) DeleteRun(ctx context.Context, id string) error {
	if err := ValidateRunID(id); err != nil {
		return err
	}
	return s.store.SetRunLifecycle(ctx, id, Deleted, s.nowMs())
}

// RestoreRun restores a deleted run.
func (s *Service) RestoreRun(ctx context.Context, id string) error {
	if err := ValidateRunID(id); err != nil {
		return err
	}
	return s.store.SetRunLifecycle(ctx, id, Active, s.nowMs())
}

// LogBatch validates and stores a batch of metrics, params and tags, all or
// nothing.
func (s *Service) LogBatch(ctx context.Context, runID string, b Batch) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	l := s.limits
	switch {
	case len(b.Metrics) > l.BatchMetrics:
		return batchLimit(len(b.Metrics), l.BatchMetrics, "metrics")
	case len(b.Params) > l.BatchParams:
		return batchLimit(len(b.Params), l.BatchParams, "params")
	case len(b.Tags) > l.BatchTags:
		return batchLimit(len(b.Tags), l.BatchTags, "tags")
	case len(b.Metrics)+len(b.Params)+len(b.Tags) > l.BatchTotal:
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: A batch logging request can contain at most %d metrics, params and tags in total. Got %d", l.BatchTotal, len(b.Metrics)+len(b.Params)+len(b.Tags))
	}
	checkedKey := ""
	for i := range b.Metrics {
		m := &b.Metrics[i]
		if err := l.validateMetric(m, i, m.Key != "" && m.Key == checkedKey); err != nil {
			return err
		}
		checkedKey = m.Key
	}
	seen := make(map[string]string, len(b.Params))
	for _, p := range b.Params {
		if err := ValidateKey("param", p.Key, l.KeyLength); err != nil {
			return err
		}
		if err := ValidateValueLength("param", p.Key, p.Value, l.ParamValueLength); err != nil {
			return err
		}
		if v, dup := seen[p.Key]; dup && v != p.Value {
			return invalidf("Duplicate parameter keys have been submitted: '%s' with values '%s' and '%s'", p.Key, errs.Truncate(v, 80), errs.Truncate(p.Value, 80))
		}
		seen[p.Key] = p.Value
	}
	for _, t := range b.Tags {
		if err := s.validateTag(t); err != nil {
			return err
		}
	}
	if len(b.Metrics)+len(b.Params)+len(b.Tags) == 0 {
		// Still refuse writes to missing or deleted runs, as MLflow does.
		r, err := s.store.GetRun(ctx, runID)
		if err != nil {
			return err
		}
		if r.Info.LifecycleStage != Active {
			return invalidf("The run %s must be in the 'active' state. Current state is %s.", runID, r.Info.LifecycleStage)
		}
		return nil
	}
	b.Params = dedupParams(b.Params)
	b.Tags = dedupTags(b.Tags)
	return s.store.LogBatch(ctx, runID, b)
}

func batchLimit(got, max int, what string) error {
	return errs.Errorf(errs.LimitExceeded, "limit exceeded: A batch logging request can contain at most %d %s. Got %d %s", max, what, got, what)
}

func (s *Service) validateTag(t Tag) error {
	if err := ValidateKey("tag", t.Key, s.limits.KeyLength); err != nil {
		return err
	}
	return ValidateValueLength("tag", t.Key, t.Value, s.limits.TagValueLength)
}

// LogMetric logs one metric point.
func (s *Service) LogMetric(ctx context.Context, runID string, m Metric) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if err := s.limits.validateMetric(&m, -1, false); err != nil {
		return err
	}
	return s.store.LogBatch(ctx, runID, Batch{Metrics: []Metric{m}})
}

// LogParam logs one param.
func (s *Service) LogParam(ctx context.Context, runID string, p Param) error {
	return s.LogBatch(ctx, runID, Batch{Params: []Param{p}})
}

// SetTag upserts one run tag.
func (s *Service) SetTag(ctx context.Context, runID string, t Tag) error {
	return s.LogBatch(ctx, runID, Batch{Tags: []Tag{t}})
}

// DeleteTag removes a run tag.
func (s *Service) DeleteTag(ctx context.Context, runID, key string) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if key == "" {
		return invalidf("Missing value for required parameter 'key'. See the API docs for more information about request parameters.")
	}
	return s.store.DeleteTag(ctx, runID, key)
}

// LogInputs records datasets and models used by a run.
func (s *Service) LogInputs(ctx context.Context, runID string, datasets []DatasetInput, models []ModelInput) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	if len(datasets) > 1000 {
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: a log-inputs request can contain at most 1000 datasets, got %d", len(datasets))
	}
	for i, d := range datasets {
		ds := d.Dataset
		switch {
		case ds.Name == "":
			return invalidf("Missing value for required parameter 'datasets[%d].dataset.name'. See the API docs for more information about request parameters.", i)
		case ds.Digest == "":
			return invalidf("Missing value for required parameter 'datasets[%d].dataset.digest'. See the API docs for more information about request parameters.", i)
		case ds.SourceType == "":
			return invalidf("Missing value for required parameter 'datasets[%d].dataset.source_type'. See the API docs for more information about request parameters.", i)
		case ds.Source == "":
			return invalidf("Missing value for required parameter 'datasets[%d].dataset.source'. See the API docs for more information about request parameters.", i)
		case len(ds.Name) > 500:
			return invalidf("datasets[%d].dataset.name exceeds 500 characters", i)
		case len(ds.Digest) > 36:
			return invalidf("datasets[%d].dataset.digest exceeds 36 characters", i)
		case len(ds.Source) > 65535:
			return invalidf("datasets[%d].dataset.source exceeds 65535 characters", i)
		case len(ds.Schema) > 1048575:
			return invalidf("datasets[%d].dataset.schema exceeds 1048575 characters", i)
		case len(ds.Profile) > 16777215:
			return invalidf("datasets[%d].dataset.profile exceeds 16777215 characters", i)
		}
		for _, t := range d.Tags {
			if t.Key == "" || len(t.Key) > 255 || len(t.Value) > 500 {
				return invalidf("datasets[%d]: input tag keys must be 1 to 255 characters and values at most 500", i)
			}
		}
	}
	for i, m := range models {
		if m.ModelID == "" {
			return invalidf("Missing value for required parameter 'models[%d].model_id'. See the API docs for more information about request parameters.", i)
		}
	}
	return s.store.LogInputs(ctx, runID, datasets, models)
}

// LogOutputs records models produced by a run.
func (s *Service) LogOutputs(ctx context.Context, runID string, models []ModelOutput) error {
	if err := ValidateRunID(runID); err != nil {
		return err
	}
	for i, m := range models {
		if m.ModelID == "" {
			return invalidf("Missing value for required parameter 'models[%d].model_id'. See the API docs for more information about request parameters.", i)
		}
	}
	return s.store.LogOutputs(ctx, runID, models)
}

// RunSearch is a search request as the client sends it.
type RunSearch struct {
	ExperimentIDs []string
	Filter        string
	OrderBy       []string
	ViewType      ViewType
	MaxResults    int
	PageToken     string
}

// SearchRuns returns one page of runs.
func (s *Service) SearchRuns(ctx context.Context, q RunSearch) (RunPage, error) {
	for _, id := range q.ExperimentIDs {
		if err := ValidateExperimentID(id); err != nil {
			return RunPage{}, err
		}
	}
	f, err := search.ParseRunFilter(q.Filter)
	if err != nil {
		return RunPage{}, err
	}
	order, err := search.ParseRunOrderBy(q.OrderBy)
	if err != nil {
		return RunPage{}, err
	}
	max, err := s.maxResults(q.MaxResults, 1000)
	if err != nil {
		return RunPage{}, err
	}
	vt, err := viewType(q.ViewType)
	if err != nil {
		return RunPage{}, err
	}
	if len(q.ExperimentIDs) == 0 {
		return RunPage{}, nil
	}
	return s.store.SearchRuns(ctx, RunQuery{
		ExperimentIDs: q.ExperimentIDs, Filter: f, OrderBy: order,
		ViewType: vt, MaxResults: max, PageToken: q.PageToken,
	})
}

// ---- helpers ----

func tagValue(tags []Tag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}

func setTag(tags []Tag, t Tag) []Tag {
	for i := range tags {
		if tags[i].Key == t.Key {
			tags[i].Value = t.Value
			return tags
		}
	}
	return append(tags, t)
}

// dedupTags keeps the last value of each key, in first-seen order.
func dedupTags(tags []Tag) []Tag {
	if len(tags) < 2 {
		return tags
	}
	idx := make(map[string]int, len(tags))
	out := make([]Tag, 0, len(tags))
	for _, t := range tags {
		if i, ok := idx[t.Key]; ok {
			out[i].Value = t.Value
			continue
		}
		idx[t.Key] = len(out)
		out = append(out, t)
	}
	return out
}

func dedupParams(ps []Param) []Param {
	if len(ps) < 2 {
		return ps
	}
	seen := make(map[string]bool, len(ps))
	out := ps[:0:0]
	for _, p := range ps {
		if !seen[p.Key] {
			seen[p.Key] = true
			out = append(out, p)
		}
	}
	return out
}
