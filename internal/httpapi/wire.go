package httpapi

import (
	"math"
	"strconv"

	"github.com/sextant/sextant/internal/tracking"
)

// The MLflow JSON shapes. Field names are the proto names; int64 fields go
// out as JSON numbers, enums as names, and NaN and infinities as the
// strings "NaN", "Infinity" and "-Infinity".

type wireKV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// wireFloat is a float64 that encodes NaN and infinities as MLflow does.
type wireFloat float64

// MarshalJSON implements json.Marshaler.
func (f wireFloat) MarshalJSON() ([]byte, error) {
	return appendFloat(nil, float64(f)), nil
}

// appendFloat appends v as MLflow JSON.
func appendFloat(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Infinity"`...)
	}
	// Like encoding/json: shortest representation, exponent only for very
	// large or small magnitudes.
	abs := math.Abs(v)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	return strconv.AppendFloat(dst, v, fmtc, -1, 64)
}

type wireExperiment struct {
	ExperimentID     string   `json:"experiment_id"`
	Name             string   `json:"name"`
	ArtifactLocation string   `json:"artifact_location"`
	LifecycleStage   string   `json:"lifecycle_stage"`
	LastUpdateTime   int64    `json:"last_update_time"`
	CreationTime     int64    `json:"creation_time"`
	Tags             []wireKV `json:"tags,omitempty"`
}

func toWireExperiment(e *tracking.Experiment) wireExperiment {
	w := wireExperiment{
		ExperimentID:     e.ID,
		Name:             e.Name,
		ArtifactLocation: e.ArtifactLocation,
		LifecycleStage:   string(e.LifecycleStage),
		LastUpdateTime:   e.LastUpdateTimeMs,
		CreationTime:     e.CreationTimeMs,
	}
	for _, t := range e.Tags {
		w.Tags = append(w.Tags, wireKV(t))
	}
	return w
}

type wireRunInfo struct {
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

func toWireRunInfo(i *tracking.RunInfo) wireRunInfo {
	w := wireRunInfo{
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

type wireMetric struct {
	Key           string    `json:"key"`
	Value         wireFloat `json:"value"`
	Timestamp     int64     `json:"timestamp"`
	Step          int64     `json:"step"`
	DatasetName   string    `json:"dataset_name,omitempty"`
	DatasetDigest string    `json:"dataset_digest,omitempty"`
	ModelID       string    `json:"model_id,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
}

type wireDataset struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	SourceType string `json:"source_type"`
	Source     string `json:"source"`
	Schema     string `json:"schema,omitempty"`
	Profile    string `json:"profile,omitempty"`
}

type wireDatasetInput struct {
	Tags    []wireKV    `json:"tags,omitempty"`
	Dataset wireDataset `json:"dataset"`
}

type wireModelInput struct {
	ModelID string `json:"model_id"`
}

type wireModelOutput struct {
	ModelID string `json:"model_id"`
	Step    int64  `json:"step"`
}

type wireRun struct {
	Info wireRunInfo `json:"info"`
	Data struct {
		Metrics []wireMetric `json:"metrics,omitempty"`
		Params  []wireKV     `json:"params,omitempty"`
		Tags    []wireKV     `json:"tags,omitempty"`
	} `json:"data"`
	Inputs struct {
		DatasetInputs []wireDatasetInput `json:"dataset_inputs,omitempty"`
		ModelInputs   []wireModelInput   `json:"model_inputs,omitempty"`
	} `json:"inputs"`
	Outputs struct {
		ModelOutputs []wireModelOutput `json:"model_outputs,omitempty"`
	} `json:"outputs"`
}

func toWireRun(r *tracking.Run) *wireRun {
	w := &wireRun{Info: toWireRunInfo(&r.Info)}
	for _, m := range r.Data.Metrics {
		w.Data.Metrics = append(w.Data.Metrics, wireMetric{
			Key: m.Key, Value: wireFloat(m.Value), Timestamp: m.TimestampMs, Step: m.Step,
			DatasetName: m.DatasetName, DatasetDigest: m.DatasetDigest, ModelID: m.ModelID,
		})
	}
	for _, p := range r.Data.Params {
		w.Data.Params = append(w.Data.Params, wireKV(p))
	}
	for _, t := range r.Data.Tags {
		w.Data.Tags = append(w.Data.Tags, wireKV(t))
	}
	for _, d := range r.Inputs.Datasets {
		wd := wireDatasetInput{Dataset: wireDataset(d.Dataset)}
		for _, t := range d.Tags {
			wd.Tags = append(wd.Tags, wireKV(t))
		}
		w.Inputs.DatasetInputs = append(w.Inputs.DatasetInputs, wd)
	}
	for _, m := range r.Inputs.Models {
		w.Inputs.ModelInputs = append(w.Inputs.ModelInputs, wireModelInput(m))
	}
	for _, m := range r.Outputs.Models {
		w.Outputs.ModelOutputs = append(w.Outputs.ModelOutputs, wireModelOutput(m))
	}
	return w
}

// appendHistoryPoint appends one metric of a history response. History
// responses are the largest the server writes (a 200,000-point history is
// about 15 MB), so they are built by hand into one buffer.
func appendHistoryPoint(dst []byte, key string, p *tracking.HistoryPoint, runID string) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendString(dst, key)
	dst = append(dst, `,"value":`...)
	dst = appendFloat(dst, p.Value)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, p.TimestampMs, 10)
	dst = append(dst, `,"step":`...)
	dst = strconv.AppendInt(dst, p.Step, 10)
	if c := p.Context; c != nil {
		dst = appendContext(dst, c)
	}
	if runID != "" {
		dst = append(dst, `,"run_id":`...)
		dst = appendString(dst, runID)
	}
	return append(dst, '}')
}

// appendContext appends a point's context fields, each after a comma.
func appendContext(dst []byte, c *tracking.MetricContext) []byte {
	if c.DatasetName != "" {
		dst = append(dst, `,"dataset_name":`...)
		dst = appendString(dst, c.DatasetName)
	}
	if c.DatasetDigest != "" {
		dst = append(dst, `,"dataset_digest":`...)
		dst = appendString(dst, c.DatasetDigest)
	}
	if c.ModelID != "" {
		dst = append(dst, `,"model_id":`...)
		dst = appendString(dst, c.ModelID)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Keys are validated to a safe
// alphabet, but contexts are free text, so escape properly.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
