package tracking

import (
	"github.com/sextant/sextant/internal/errs"
)

// Limits are the hard caps the tracking service enforces. Every field is
// documented for users in docs/limits.md; keep the two in step. A value of 0
// or less means "use the default", never "unlimited".
type Limits struct {
	// MetricStepsPerRun caps the number of stored metric points of a run,
	// every point of every key counted (MLflow's "10 million metric steps").
	MetricStepsPerRun int64
	// MetricKeysPerRun caps the number of distinct metric keys of a run.
	MetricKeysPerRun int
	// ParamsPerRun and TagsPerRun cap the number of params and tags of a run.
	ParamsPerRun int
	TagsPerRun   int
	// BatchMetrics, BatchParams, BatchTags and BatchTotal cap one log-batch
	// request (MLflow: 1000, 100, 100 and 1000).
	BatchMetrics int
	BatchParams  int
	BatchTags    int
	BatchTotal   int
	// KeyLength caps metric, param and tag keys, in characters.
	KeyLength int
	// ParamValueLength and TagValueLength cap values, in characters.
	ParamValueLength int
	TagValueLength   int
	// ExperimentNameLength and ExperimentTagValueLength cap experiments.
	ExperimentNameLength     int
	ExperimentTagValueLength int
	// RunNameLength caps run names, in characters.
	RunNameLength int
	// MaxStep is the largest accepted metric step; -MaxStep is the smallest.
	// The default, 2^53-1, is the largest integer a browser represents exactly.
	MaxStep int64
	// SearchMaxResults caps max_results of runs/search and experiments/search.
	SearchMaxResults int
	// HistoryMaxResults caps one page of get-history.
	HistoryMaxResults int
	// BulkIntervalMaxRuns and BulkIntervalMaxResults cap
	// get-history-bulk-interval.
	BulkIntervalMaxRuns    int
	BulkIntervalMaxResults int
}

// DefaultLimits returns the limits Sextant ships with.
func DefaultLimits() Limits {
	return Limits{
		MetricStepsPerRun:        10_000_000,
		MetricKeysPerRun:         10_000,
		ParamsPerRun:             10_000,
		TagsPerRun:               10_000,
		BatchMetrics:             1000,
		BatchParams:              100,
		BatchTags:                100,
		BatchTotal:               1000,
		KeyLength:                250,
		ParamValueLength:         6000,
		TagValueLength:           8000,
		ExperimentNameLength:     500,
		ExperimentTagValueLength: 5000,
		RunNameLength:            250,
		MaxStep:                  1<<53 - 1,
		SearchMaxResults:         50_000,
		HistoryMaxResults:        250_000,
		BulkIntervalMaxRuns:      100,
		BulkIntervalMaxResults:   2500,
	}
}

// WithDefaults returns l with every unset (zero or negative) field taken
// from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set64 := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	set64(&l.MetricStepsPerRun, d.MetricStepsPerRun)
	set(&l.MetricKeysPerRun, d.MetricKeysPerRun)
	set(&l.ParamsPerRun, d.ParamsPerRun)
	set(&l.TagsPerRun, d.TagsPerRun)
	set(&l.BatchMetrics, d.BatchMetrics)
	set(&l.BatchParams, d.BatchParams)
	set(&l.BatchTags, d.BatchTags)
	set(&l.BatchTotal, d.BatchTotal)
	set(&l.KeyLength, d.KeyLength)
	set(&l.ParamValueLength, d.ParamValueLength)
	set(&l.TagValueLength, d.TagValueLength)
	set(&l.ExperimentNameLength, d.ExperimentNameLength)
	set(&l.ExperimentTagValueLength, d.ExperimentTagValueLength)
	set(&l.RunNameLength, d.RunNameLength)
	set64(&l.MaxStep, d.MaxStep)
	set(&l.SearchMaxResults, d.SearchMaxResults)
	set(&l.HistoryMaxResults, d.HistoryMaxResults)
	set(&l.BulkIntervalMaxRuns, d.BulkIntervalMaxRuns)
	set(&l.BulkIntervalMaxResults, d.BulkIntervalMaxResults)
	return l
}

// LimitError returns the error for a breached limit. The message names the
// limit, the current count and the maximum, so that a user reading the
// client's exception knows what to change.
func LimitError(limit string, current, adding, max int64, hint string) error {
	e := errs.RunLimit(limit, current, adding, max, "")
	if hint != "" {
		// In the message: the mlflow client shows the message only.
		e.Msg += ". " + hint
	}
	return e
}

// StepsHint is the advice attached to a breach of MetricStepsPerRun.
const StepsHint = "Log metrics less often (for Lightning's MLFlowLogger, a larger log_every_n_steps; for Transformers, a larger logging_steps), or raise the server's --max-metric-steps-per-run"
