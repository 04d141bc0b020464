package wire

import (
	"github.com/sextant/sextant/internal/progress"
)

// The wire shapes of the progress routes (/api/2.0/sextant/progress,
// docs/api.md and docs/run.md): per-rank step reports in, per-rank step
// time series out.

// ProgressReportJSON is one step of one rank. data_wait_s, samples and
// tokens may be left out; gpu defaults to unknown and time_ms to the
// server's time.
type ProgressReportJSON struct {
	Rank      *int     `json:"rank"`
	GPU       *int     `json:"gpu,omitempty"`
	Step      *int64   `json:"step"`
	TimeMs    int64    `json:"time_ms,omitempty"`
	StepTimeS *float64 `json:"step_time_s"`
	DataWaitS *float64 `json:"data_wait_s,omitempty"`
	Samples   *float64 `json:"samples,omitempty"`
	Tokens    *float64 `json:"tokens,omitempty"`
}

// ProgressRequest is the body of POST progress.
type ProgressRequest struct {
	RunID   string               `json:"run_id"`
	Node    string               `json:"node,omitempty"`
	Reports []ProgressReportJSON `json:"reports"`
}

// Domain returns the request as a progress.Batch; a missing required
// field or a negative optional one is an error naming the report.
func (q *ProgressRequest) Domain() (progress.Batch, error) {
	b := progress.Batch{RunID: q.RunID, Node: q.Node, Reports: make([]progress.Report, len(q.Reports))}
	for i, r := range q.Reports {
		switch {
		case r.Rank == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'rank'", i)
		case r.Step == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'step'", i)
		case r.StepTimeS == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'step_time_s'", i)
		}
		d := progress.Report{Rank: *r.Rank, GPU: -1, Step: *r.Step, TimeMs: r.TimeMs, StepTimeS: *r.StepTimeS, DataWaitS: -1, Samples: -1, Tokens: -1}
		if r.GPU != nil {
			d.GPU = *r.GPU
		}
		for _, o := range []struct {
			name string
			v    *float64
			dst  *float64
		}{{"data_wait_s", r.DataWaitS, &d.DataWaitS}, {"samples", r.Samples, &d.Samples}, {"tokens", r.Tokens, &d.Tokens}} {
			if o.v == nil {
				continue
			}
			if *o.v < 0 {
				return b, invalid("reports[%d]: %s %v must be 0 or more (leave it out when unknown)", i, o.name, *o.v)
			}
			*o.dst = *o.v
		}
		b.Reports[i] = d
	}
	return b, nil
}

// ProgressPointJSON is one point of a rank's series: [step, time_ms,
// seconds].
type ProgressPointJSON [3]float64

// ProgressRankJSON is one rank's series in GET progress.
type ProgressRankJSON struct {
	Rank      int                 `json:"rank"`
	Node      string              `json:"node,omitempty"`
	GPU       *int                `json:"gpu,omitempty"`
	StepTimes []ProgressPointJSON `json:"step_time_s"`
	DataWaits []ProgressPointJSON `json:"data_wait_s,omitempty"`
}

// ProgressResponse answers GET progress.
type ProgressResponse struct {
	Ranks []ProgressRankJSON `json:"ranks"`
}

// ProgressToJSON returns the ranks as GET progress answers them.
func ProgressToJSON(ranks []progress.Rank) ProgressResponse {
	out := ProgressResponse{Ranks: make([]ProgressRankJSON, len(ranks))}
	for i, r := range ranks {
		j := ProgressRankJSON{Rank: r.Rank, Node: r.Node, StepTimes: make([]ProgressPointJSON, len(r.StepTimes))}
		if r.GPU >= 0 {
			g := r.GPU
			j.GPU = &g
		}
		for k, p := range r.StepTimes {
			j.StepTimes[k] = ProgressPointJSON{float64(p.Step), float64(p.TimestampMs), p.Value}
		}
		if len(r.DataWaits) > 0 {
			j.DataWaits = make([]ProgressPointJSON, len(r.DataWaits))
			for k, p := range r.DataWaits {
				j.DataWaits[k] = ProgressPointJSON{float64(p.Step), float64(p.TimestampMs), p.Value}
			}
		}
		out.Ranks[i] = j
	}
	return out
}
