package httpapi

import (
	"strconv"

	"github.com/sextant/sextant/internal/tracking"
)

// appendRuns appends the runs/search response for page. A page of 1,000
// runs is about a megabyte of JSON; encoding/json spent more time on it,
// reflecting over wireRun, than the search that found the runs. The shape
// is wireRun's, field for field.
func appendRuns(dst []byte, page tracking.RunPage) []byte {
	dst = append(dst, '{')
	if len(page.Runs) > 0 {
		dst = append(dst, `"runs":[`...)
		for i, r := range page.Runs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendRun(dst, r)
		}
		dst = append(dst, ']')
	}
	if page.NextPageToken != "" {
		if len(page.Runs) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"next_page_token":`...)
		dst = appendString(dst, page.NextPageToken)
	}
	return append(dst, '}')
}

// appendRun appends one run as wireRun encodes it.
func appendRun(dst []byte, r *tracking.Run) []byte {
	i := &r.Info
	dst = append(dst, `{"info":{"run_id":`...)
	dst = appendString(dst, i.RunID)
	dst = append(dst, `,"run_uuid":`...)
	dst = appendString(dst, i.RunID)
	dst = append(dst, `,"run_name":`...)
	dst = appendString(dst, i.RunName)
	dst = append(dst, `,"experiment_id":`...)
	dst = appendString(dst, i.ExperimentID)
	dst = append(dst, `,"user_id":`...)
	dst = appendString(dst, i.UserID)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, i.Status.String())
	dst = append(dst, `,"start_time":`...)
	dst = strconv.AppendInt(dst, i.StartTimeMs, 10)
	if i.EndTimeMs != 0 {
		dst = append(dst, `,"end_time":`...)
		dst = strconv.AppendInt(dst, i.EndTimeMs, 10)
	}
	dst = append(dst, `,"artifact_uri":`...)
	dst = appendString(dst, i.ArtifactURI)
	dst = append(dst, `,"lifecycle_stage":`...)
	dst = appendString(dst, string(i.LifecycleStage))
	dst = append(dst, `},"data":{`...)
	comma := false
	sep := func() {
		if comma {
			dst = append(dst, ',')
		}
		comma = true
	}
	if ms := r.Data.Metrics; len(ms) > 0 {
		sep()
		dst = append(dst, `"metrics":[`...)
		for k := range ms {
			m := &ms[k]
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = appendString(dst, m.Key)
			dst = append(dst, `,"value":`...)
			dst = appendFloat(dst, m.Value)
			dst = append(dst, `,"timestamp":`...)
			dst = strconv.AppendInt(dst, m.TimestampMs, 10)
			dst = append(dst, `,"step":`...)
			dst = strconv.AppendInt(dst, m.Step, 10)
			dst = appendContext(dst, &m.MetricContext)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(r.Data.Params) > 0 {
		sep()
		dst = appendParams(append(dst, `"params":`...), r.Data.Params)
	}
	if len(r.Data.Tags) > 0 {
		sep()
		dst = appendTags(append(dst, `"tags":`...), r.Data.Tags)
	}
	dst = append(dst, `},"inputs":{`...)
	comma = false
	if ds := r.Inputs.Datasets; len(ds) > 0 {
		sep()
		dst = append(dst, `"dataset_inputs":[`...)
		for k := range ds {
			d := &ds[k]
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			if len(d.Tags) > 0 {
				dst = appendTags(append(dst, `"tags":`...), d.Tags)
				dst = append(dst, ',')
			}
			dst = append(dst, `"dataset":{"name":`...)
			dst = appendString(dst, d.Dataset.Name)
			dst = append(dst, `,"digest":`...)
			dst = appendString(dst, d.Dataset.Digest)
			dst = append(dst, `,"source_type":`...)
			dst = appendString(dst, d.Dataset.SourceType)
			dst = append(dst, `,"source":`...)
			dst = appendString(dst, d.Dataset.Source)
			if d.Dataset.Schema != "" {
				dst = append(dst, `,"schema":`...)
				dst = appendString(dst, d.Dataset.Schema)
			}
			if d.Dataset.Profile != "" {
				dst = append(dst, `,"profile":`...)
				dst = appendString(dst, d.Dataset.Profile)
			}
			dst = append(dst, "}}"...)
		}
		dst = append(dst, ']')
	}
	if ms := r.Inputs.Models; len(ms) > 0 {
		sep()
		dst = append(dst, `"model_inputs":[`...)
		for k, m := range ms {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(append(dst, `{"model_id":`...), m.ModelID)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"outputs":{`...)
	if ms := r.Outputs.Models; len(ms) > 0 {
		dst = append(dst, `"model_outputs":[`...)
		for k, m := range ms {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(append(dst, `{"model_id":`...), m.ModelID)
			dst = strconv.AppendInt(append(dst, `,"step":`...), m.Step, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, "}}"...)
}

// appendTags appends tags (or params) as a JSON list of {"key","value"}.
func appendTags(dst []byte, kvs []tracking.Tag) []byte {
	dst = append(dst, '[')
	for k := range kvs {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(append(dst, `{"key":`...), kvs[k].Key)
		dst = appendString(append(dst, `,"value":`...), kvs[k].Value)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendParams(dst []byte, kvs []tracking.Param) []byte {
	dst = append(dst, '[')
	for k := range kvs {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(append(dst, `{"key":`...), kvs[k].Key)
		dst = appendString(append(dst, `,"value":`...), kvs[k].Value)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}
