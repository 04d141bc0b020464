// Package tracking holds the experiment-tracking domain: experiments, runs,
// their params, tags, metrics, inputs and outputs, the rules MLflow clients
// rely on, and the limits Sextant enforces. It knows nothing of HTTP or SQL:
// the Store interface says what it needs from storage, and Service applies
// the rules on top of it.
package tracking

import "github.com/sextant/sextant/internal/metrics"

// LifecycleStage says whether an experiment or run is active or soft-deleted.
type LifecycleStage string

// The lifecycle stages, spelled as MLflow spells them on the wire.
const (
	Active  LifecycleStage = "active"
	Deleted LifecycleStage = "deleted"
)

// RunStatus is the status of a run. The numbers are MLflow's enum values and
// are persisted.
type RunStatus int32

// The run statuses.
const (
	StatusRunning   RunStatus = 1
	StatusScheduled RunStatus = 2
	StatusFinished  RunStatus = 3
	StatusFailed    RunStatus = 4
	StatusKilled    RunStatus = 5
)

var statusNames = map[RunStatus]string{
	StatusRunning:   "RUNNING",
	StatusScheduled: "SCHEDULED",
	StatusFinished:  "FINISHED",
	StatusFailed:    "FAILED",
	StatusKilled:    "KILLED",
}

// String returns the MLflow name of the status.
func (s RunStatus) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "UNKNOWN"
}

// ParseRunStatus parses an MLflow status name.
func ParseRunStatus(name string) (RunStatus, bool) {
	for s, n := range statusNames {
		if n == name {
			return s, true
		}
	}
	return 0, false
}

// Terminal reports whether the status ends a run.
func (s RunStatus) Terminal() bool {
	return s == StatusFinished || s == StatusFailed || s == StatusKilled
}

// ViewType selects active, deleted or all entities in searches.
type ViewType int

// The view types, with MLflow's enum numbers.
const (
	ActiveOnly  ViewType = 1
	DeletedOnly ViewType = 2
	AllViews    ViewType = 3
)

// Tag is a key/value pair on an experiment, run or input.
type Tag struct {
	Key   string
	Value string
}

// Param is a run parameter. Params are immutable once logged.
type Param struct {
	Key   string
	Value string
}

// MetricContext is what MLflow 3 attaches to a metric point beyond its
// value: the logged model and the evaluation dataset it belongs to. Most
// points have none.
type MetricContext struct {
	ModelID       string
	DatasetName   string
	DatasetDigest string
}

// IsZero reports whether the context is empty.
func (c MetricContext) IsZero() bool { return c == MetricContext{} }

// Metric is one logged metric point with its key and context.
type Metric struct {
	Key string
	metrics.Point
	MetricContext
}

// Experiment is a named group of runs.
type Experiment struct {
	ID               string
	Name             string
	ArtifactLocation string
	LifecycleStage   LifecycleStage
	CreationTimeMs   int64
	LastUpdateTimeMs int64
	Tags             []Tag
}

// RunInfo is a run's metadata.
type RunInfo struct {
	RunID        string
	RunName      string
	ExperimentID string
	UserID       string
	Status       RunStatus
	StartTimeMs  int64
	// EndTimeMs is 0 while the run has not ended.
	EndTimeMs      int64
	ArtifactURI    string
	LifecycleStage LifecycleStage
}

// RunData is a run's latest metric values, params and tags.
type RunData struct {
	// Metrics holds the latest point of each key: the one with the highest
	// step, then timestamp, then value.
	Metrics []Metric
	Params  []Param
	Tags    []Tag
}

// Dataset describes an input dataset as MLflow records it.
type Dataset struct {
	Name       string
	Digest     string
	SourceType string
	Source     string
	Schema     string
	Profile    string
}

// DatasetInput is a dataset used by a run, with tags such as
// mlflow.data.context.
type DatasetInput struct {
	Tags    []Tag
	Dataset Dataset
}

// ModelInput names a logged model a run used.
type ModelInput struct {
	ModelID string
}

// ModelOutput names a logged model a run produced, at a step.
type ModelOutput struct {
	ModelID string
	Step    int64
}

// Run is a run with everything MLflow returns for it.
type Run struct {
	Info    RunInfo
	Data    RunData
	Inputs  RunInputs
	Outputs RunOutputs
	// Memo, when set, keeps this run's JSON once encoded (see Memo); the
	// run must then not be changed.
	Memo *Memo
}

// RunInputs are the datasets and models a run used.
type RunInputs struct {
	Datasets []DatasetInput
	Models   []ModelInput
}

// RunOutputs are the models a run produced.
type RunOutputs struct {
	Models []ModelOutput
}

// Well-known tag keys.
const (
	TagRunName     = "mlflow.runName"
	TagUser        = "mlflow.user"
	TagParentRunID = "mlflow.parentRunId"
	TagNote        = "mlflow.note.content"
	TagDataContext = "mlflow.data.context"
)

// DefaultExperimentID is the id of the experiment that exists from the first
// start, named DefaultExperimentName. Clients send it without looking it up.
const (
	DefaultExperimentID   = "0"
	DefaultExperimentName = "Default"
)
