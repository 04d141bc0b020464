package wire

import (
	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// The MLflow JSON shapes. Field names are the proto names; int64 fields go
// out as JSON numbers, enums as names, and NaN and infinities as the
// strings "NaN", "Infinity" and "-Infinity".

// KV is a param or tag: {"key": ..., "value": ...}.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Double is a float64 that encodes NaN and infinities as MLflow does.
type Double float64

// MarshalJSON implements json.Marshaler.
func (f Double) MarshalJSON() ([]byte, error) {
	return AppendFloat(nil, float64(f)), nil
}

// UnmarshalJSON implements json.Unmarshaler: a number, or one of the
// strings Float accepts. null leaves f as it is.
func (f *Double) UnmarshalJSON(b []byte) error {
	var v Float
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	if v.Set {
		*f = Double(v.V)
	}
	return nil
}

// Experiment is an experiment in answers.
type Experiment struct {
	ExperimentID     string `json:"experiment_id"`
	Name             string `json:"name"`
	ArtifactLocation string `json:"artifact_location"`
	LifecycleStage   string `json:"lifecycle_stage"`
	LastUpdateTime   int64  `json:"last_update_time"`
	CreationTime     int64  `json:"creation_time"`
	Tags             []KV   `json:"tags,omitempty"`
}

// ToExperiment returns e's wire shape.
func ToExperiment(e *tracking.Experiment) Experiment {
	w := Experiment{
		ExperimentID:     e.ID,
		Name:             e.Name,
		ArtifactLocation: e.ArtifactLocation,
		LifecycleStage:   string(e.LifecycleStage),
		LastUpdateTime:   e.LastUpdateTimeMs,
		CreationTime:     e.CreationTimeMs,
	}
	for _, t := range e.Tags {
		w.Tags = append(w.Tags, KV(t))
	}
	return w
}

// RunInfo is a run's info in answers.
type RunInfo struct {
	RunID          string `json:"run_id"`
	RunUUID        string `json:"run_uuid"`
	RunName        string `json:"run_name"`
	ExperimentID   string `json:"experiment_id"`
	UserID         string `json:"user_id"`
	Status         string `json:"status"`
	StartTime      int64  `json:"start_time"`
	EndTime        *int64 `json:"end_time,omitempty"`
	ArtifactURI    string `json:"artifact_uri"`
	LifecycleStage string `json:"lifecycle_stage"`
}

// ToRunInfo returns i's wire shape.
func ToRunInfo(i *tracking.RunInfo) RunInfo {
	w := RunInfo{
		RunID:          i.RunID,
		RunUUID:        i.RunID,
		RunName:        i.RunName,
		ExperimentID:   i.ExperimentID,
		UserID:         i.UserID,
		Status:         i.Status.String(),
		StartTime:      i.StartTimeMs,
		ArtifactURI:    i.ArtifactURI,
		LifecycleStage: string(i.LifecycleStage),
	}
	if i.EndTimeMs != 0 {
		end := i.EndTimeMs
		w.EndTime = &end
	}
	return w
}

// Metric is a metric's point in answers (a run's latest values).
type Metric struct {
	Key           string `json:"key"`
	Value         Double `json:"value"`
	Timestamp     int64  `json:"timestamp"`
	Step          int64  `json:"step"`
	DatasetName   string `json:"dataset_name,omitempty"`
	DatasetDigest string `json:"dataset_digest,omitempty"`
	ModelID       string `json:"model_id,omitempty"`
	RunID         string `json:"run_id,omitempty"`
}

// Dataset is a dataset of a run's inputs.
type Dataset struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	SourceType string `json:"source_type"`
	Source     string `json:"source"`
	Schema     string `json:"schema,omitempty"`
	Profile    string `json:"profile,omitempty"`
}

// DatasetInput is a dataset input of a run, with its tags.
type DatasetInput struct {
	Tags    []KV    `json:"tags,omitempty"`
	Dataset Dataset `json:"dataset"`
}

// ModelInput is a logged model a run used.
type ModelInput struct {
	ModelID string `json:"model_id"`
}

// ModelOutput is a logged model a run produced, at a step.
type ModelOutput struct {
	ModelID string `json:"model_id"`
	Step    int64  `json:"step"`
}

// Run is a run in answers: info, data, inputs and outputs.
type Run struct {
	Info RunInfo `json:"info"`
	Data struct {
		Metrics []Metric `json:"metrics,omitempty"`
		Params  []KV     `json:"params,omitempty"`
		Tags    []KV     `json:"tags,omitempty"`
	} `json:"data"`
	Inputs struct {
		DatasetInputs []DatasetInput `json:"dataset_inputs,omitempty"`
		ModelInputs   []ModelInput   `json:"model_inputs,omitempty"`
	} `json:"inputs"`
	Outputs struct {
		ModelOutputs []ModelOutput `json:"model_outputs,omitempty"`
	} `json:"outputs"`
}

// ToRun returns r's wire shape.
func ToRun(r *tracking.Run) *Run {
	w := &Run{Info: ToRunInfo(&r.Info)}
	for _, m := range r.Data.Metrics {
		w.Data.Metrics = append(w.Data.Metrics, Metric{
			Key: m.Key, Value: Double(m.Value), Timestamp: m.TimestampMs, Step: m.Step,
			DatasetName: m.DatasetName, DatasetDigest: m.DatasetDigest, ModelID: m.ModelID,
		})
	}
	for _, p := range r.Data.Params {
		w.Data.Params = append(w.Data.Params, KV(p))
	}
	for _, t := range r.Data.Tags {
		w.Data.Tags = append(w.Data.Tags, KV(t))
	}
	for _, d := range r.Inputs.Datasets {
		wd := DatasetInput{Dataset: Dataset(d.Dataset)}
		for _, t := range d.Tags {
			wd.Tags = append(wd.Tags, KV(t))
		}
		w.Inputs.DatasetInputs = append(w.Inputs.DatasetInputs, wd)
	}
	for _, m := range r.Inputs.Models {
		w.Inputs.ModelInputs = append(w.Inputs.ModelInputs, ModelInput(m))
	}
	for _, m := range r.Outputs.Models {
		w.Outputs.ModelOutputs = append(w.Outputs.ModelOutputs, ModelOutput(m))
	}
	return w
}

// Domain returns the experiment as tracking has it (tags included).
func (w *Experiment) Domain() *tracking.Experiment {
	e := &tracking.Experiment{ID: w.ExperimentID, Name: w.Name, ArtifactLocation: w.ArtifactLocation,
		LifecycleStage: tracking.LifecycleStage(w.LifecycleStage), LastUpdateTimeMs: w.LastUpdateTime, CreationTimeMs: w.CreationTime}
	for _, t := range w.Tags {
		e.Tags = append(e.Tags, tracking.Tag(t))
	}
	return e
}

// Domain returns the run's info and data as tracking has them; an unknown
// status reads as the zero value.
func (w *Run) Domain() *tracking.Run {
	i := w.Info
	st, _ := tracking.ParseRunStatus(i.Status)
	r := &tracking.Run{Info: tracking.RunInfo{
		RunID: i.RunID, RunName: i.RunName, ExperimentID: i.ExperimentID, UserID: i.UserID, Status: st,
		StartTimeMs: i.StartTime, ArtifactURI: i.ArtifactURI, LifecycleStage: tracking.LifecycleStage(i.LifecycleStage),
	}}
	if i.EndTime != nil {
		r.Info.EndTimeMs = *i.EndTime
	}
	for _, m := range w.Data.Metrics {
		r.Data.Metrics = append(r.Data.Metrics, tracking.Metric{Key: m.Key, Point: metrics.Point{Step: m.Step, TimestampMs: m.Timestamp, Value: float64(m.Value)},
			MetricContext: tracking.MetricContext{DatasetName: m.DatasetName, DatasetDigest: m.DatasetDigest, ModelID: m.ModelID}})
	}
	for _, p := range w.Data.Params {
		r.Data.Params = append(r.Data.Params, tracking.Param(p))
	}
	for _, t := range w.Data.Tags {
		r.Data.Tags = append(r.Data.Tags, tracking.Tag(t))
	}
	return r
}
