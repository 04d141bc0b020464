package tracking

import (
	"context"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking/search"
)

// Store is what the tracking service needs from storage. Implementations
// live in adapter packages (internal/sqlstore) and are checked by one
// conformance suite (internal/tracking/trackingtest).
//
// Contract, for every method:
//   - ctx cancels the call; a cancelled call has no effect or its full effect.
//   - Missing experiments or runs give an errs.NotFound error whose message
//     names the id ("Run 'abc' not found").
//   - Each method is atomic: it happens completely or not at all.
//   - Methods are safe for concurrent use.
//   - Returned values are owned by the caller.
//
// The Store does no validation of input shapes (the Service does); it
// enforces what needs stored state: existence, lifecycle, uniqueness,
// immutability of params and the per-run limits given at construction.
type Store interface {
	ExperimentStore
	RunStore
	MetricReader
	LoggedModelStore
	RegistryStore
}

// ExperimentStore stores experiments and their tags.
type ExperimentStore interface {
	// EnsureDefaultExperiment creates e with id DefaultExperimentID unless
	// an experiment with that id exists.
	EnsureDefaultExperiment(ctx context.Context, e *Experiment) error
	// CreateExperiment stores e, assigning e.ID unless it is set (an
	// importer keeps the source's numeric ids; an id in use gives
	// errs.AlreadyExists, and later assigned ids follow the largest). When
	// e.ArtifactLocation is empty it is set to location(e.ID). A name held
	// by another experiment, active or deleted, gives errs.AlreadyExists.
	CreateExperiment(ctx context.Context, e *Experiment, location func(id string) string) error
	// GetExperiment returns the experiment with the id, deleted or not.
	GetExperiment(ctx context.Context, id string) (*Experiment, error)
	// GetExperimentByName returns the experiment with the exact name.
	GetExperimentByName(ctx context.Context, name string) (*Experiment, error)
	// SearchExperiments returns one page of experiments.
	SearchExperiments(ctx context.Context, q ExperimentQuery) (ExperimentPage, error)
	// RenameExperiment renames an active experiment; errs.Invalid when it is
	// deleted, errs.AlreadyExists when the name is taken.
	RenameExperiment(ctx context.Context, id, name string, nowMs int64) error
	// SetExperimentLifecycle deletes or restores an experiment together
	// with its runs.
	SetExperimentLifecycle(ctx context.Context, id string, stage LifecycleStage, nowMs int64) error
	// SetExperimentTag upserts a tag on an active experiment.
	SetExperimentTag(ctx context.Context, id string, tag Tag) error
	// DeleteExperimentTag removes a tag; errs.NotFound when it is missing.
	DeleteExperimentTag(ctx context.Context, id, key string) error
}

// RunStore stores runs and what is logged to them.
type RunStore interface {
	// CreateRun stores a new run in an active experiment (errs.Invalid
	// when the experiment is deleted). r.Info.RunID is set by the caller.
	CreateRun(ctx context.Context, r *Run) error
	// GetRun returns the run, deleted or not, with its latest metrics.
	GetRun(ctx context.Context, id string) (*Run, error)
	// UpdateRun changes the fields set in u on an active run and returns
	// the updated info. Setting the name also sets tag mlflow.runName.
	UpdateRun(ctx context.Context, id string, u RunUpdate) (*RunInfo, error)
	// SetRunLifecycle deletes or restores a run.
	SetRunLifecycle(ctx context.Context, id string, stage LifecycleStage, nowMs int64) error
	// LogBatch stores metrics, params and tags of an active run, all or
	// nothing. Exact duplicate metric points (same key, step, timestamp and
	// value) are stored once. A param logged again with the same value is a
	// no-op and with another value errs.Invalid. Tag mlflow.runName renames
	// the run. The per-run limits give errs.LimitExceeded.
	LogBatch(ctx context.Context, runID string, b Batch) error
	// DeleteTag removes a run tag; errs.NotFound when it is missing.
	DeleteTag(ctx context.Context, runID, key string) error
	// LogInputs records datasets and models used by an active run.
	LogInputs(ctx context.Context, runID string, datasets []DatasetInput, models []ModelInput) error
	// LogOutputs records models produced by an active run.
	LogOutputs(ctx context.Context, runID string, models []ModelOutput) error
	// SearchRuns returns one page of runs with their data. The runs may
	// be the store's own (SQLite's search index), shared with other
	// callers: read them, never change them; copy one (and drop its Memo)
	// to change it.
	SearchRuns(ctx context.Context, q RunQuery) (RunPage, error)
}

// MetricReader reads stored metric series. The service builds history
// pages and downsampled views from these primitives.
type MetricReader interface {
	// SeriesChunks returns the chunks of the series (runID, key) that may
	// hold steps in [fromStep, toStep], ordered by (MinStep, MaxStep, ID).
	// An unknown run gives errs.NotFound; an unknown key gives an empty
	// slice.
	SeriesChunks(ctx context.Context, runID, key string, fromStep, toStep int64) ([]ChunkInfo, error)
	// ReadSeries reads the series (runID, key) from one consistent
	// snapshot: it lists the chunks as SeriesChunks does and calls fn with
	// the listing and functions that read the chunks' encodings and
	// sketches, valid until fn returns. It returns fn's error. Errors are
	// as for SeriesChunks.
	ReadSeries(ctx context.Context, runID, key string, fromStep, toStep int64, fn func(SeriesSnapshot) error) error
	// ReadSeriesCoarse is ReadSeries for downsampling: runs of chunks of
	// which the store keeps an overview, lying wholly inside [fromStep,
	// toStep], come as that overview, in step order, and the snapshot
	// lists the other chunks of the range, none of which overlaps an
	// overview's steps. A store without overviews lists every chunk.
	ReadSeriesCoarse(ctx context.Context, runID, key string, fromStep, toStep int64, fn func([]Overview, SeriesSnapshot) error) error
	// ReadRecent reads the newest points of several series of one run from
	// one snapshot, in one pass, for checks that look at many series at
	// once (the straggler check reads every rank's step times: a read per
	// series cost a thousand transactions a look). For each series
	// (runID, key) with key in keys it calls fn with every chunk that may
	// hold a point at one of the series' newest lastSteps steps (a step
	// above its largest minus lastSteps) with a timestamp at sinceMs or
	// later; such a chunk may hold other points too, which the caller
	// drops. A series' chunks come one after the other, in step order; the
	// series come in any order. keys must not repeat; keys the run does
	// not have are skipped; an unknown run gives errs.NotFound. It returns
	// fn's error.
	ReadRecent(ctx context.Context, runID string, keys []string, lastSteps, sinceMs int64, fn func(RecentChunk) error) error
}

// RecentChunk is a chunk ReadRecent found.
type RecentChunk struct {
	// Key is the series' key and MaxStep the largest step it holds.
	Key     string
	MaxStep int64
	// Data is the chunk's encoding (docs/format/chunk.md), only valid
	// until fn returns.
	Data []byte
}

// Overview summarises a run of consecutive chunks of one context that no
// other chunk overlaps: a stored coarse level of a series, so that
// downsampling a long series reads one row for each run of chunks instead
// of one for each chunk.
type Overview struct {
	// Summary covers the points of the chunks; Count is their number.
	metrics.Summary
	Context MetricContext
	// Chunks is the number of chunks.
	Chunks int
	// Data is the encoding (docs/format/chunk.md) of the first, lowest,
	// highest and last point of each of the chunks, sorted and unique.
	Data []byte
}

// SeriesSnapshot is a listing of a series' chunks and the means to read
// them, all from one snapshot of the store.
type SeriesSnapshot struct {
	// Chunks are ordered by (MinStep, MaxStep, ID).
	Chunks []ChunkInfo
	// Read calls fn with the encoding (docs/format/chunk.md) of Chunks[i],
	// for i = first, first+1, ..., in order, until fn returns false or an
	// error (which Read returns) or the chunks run out. data is only valid
	// until fn returns; fn must not keep it.
	Read func(first int, fn func(i int, data []byte) (more bool, err error)) error
	// Sketches calls fn, in order, with the sketch of each chunk that has
	// one (ChunkInfo.HasSketch): the encoding of a chunk of metrics.Sketch
	// of its points. sketch is only valid until fn returns.
	Sketches func(fn func(i int, sketch []byte) error) error
}

// ChunkInfo describes one stored chunk of a metric series.
type ChunkInfo struct {
	ID int64
	metrics.Summary
	Context MetricContext
	// HasSketch says the chunk stores a sketch of its points.
	HasSketch bool
}

// HistoryPoint is a point of a metric series with its context.
type HistoryPoint struct {
	metrics.Point
	// Context is shared by the points of a chunk; nil when empty.
	Context *MetricContext
}

// Batch is what one log-batch request writes.
type Batch struct {
	Metrics []Metric
	Params  []Param
	Tags    []Tag
}

// RunUpdate lists the run fields to change; nil fields are left alone.
type RunUpdate struct {
	Status    *RunStatus
	EndTimeMs *int64
	Name      *string
}

// ExperimentQuery selects experiments.
type ExperimentQuery struct {
	// OnlyIDs, when not nil, restricts the results to these ids.
	OnlyIDs    []string
	Filter     search.Filter
	OrderBy    []search.OrderKey
	ViewType   ViewType
	MaxResults int
	// PageToken is opaque and store-defined; "" is the first page.
	PageToken string
}

// ExperimentPage is one page of experiments.
type ExperimentPage struct {
	Experiments   []*Experiment
	NextPageToken string
}

// RunQuery selects runs.
type RunQuery struct {
	ExperimentIDs []string
	Filter        search.Filter
	OrderBy       []search.OrderKey
	ViewType      ViewType
	MaxResults    int
	// PageToken is opaque and store-defined; "" is the first page. Tokens
	// stay correct while runs are added: a page never repeats or skips a
	// run that existed when the first page was read.
	PageToken string
}

// RunPage is one page of runs.
type RunPage struct {
	Runs          []*Run
	NextPageToken string
}
