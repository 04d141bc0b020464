package wire

import (
	"slices"

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
	// vals holds what the reports' pointers point to when DecodeProgress's
	// fast path filled them; kept with the request so that a request
	// decoded again reuses it (see DecodeProgress).
	vals []progressValues
}

// Domain returns the request as a progress.Batch, its reports appended to
// dst[:0] (a caller decoding many requests passes the last one's, so as
// not to allocate them each time; nil is a new array). A missing required
// field or a negative optional one is an error naming the report.
func (q *ProgressRequest) Domain(dst []progress.Report) (progress.Batch, error) {
	b := progress.Batch{RunID: q.RunID, Node: q.Node, Reports: slices.Grow(dst[:0], len(q.Reports))}
	for i := range q.Reports {
		r := &q.Reports[i]
		switch {
		case r.Rank == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'rank'", i)
		case r.Step == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'step'", i)
		case r.StepTimeS == nil:
			return b, invalid("reports[%d]: Missing value for required parameter 'step_time_s'", i)
		}
		d := progress.Report{Rank: *r.Rank, GPU: -1, Step: *r.Step, TimeMs: r.TimeMs, StepTimeS: *r.StepTimeS}
		if r.GPU != nil {
			d.GPU = *r.GPU
		}
		var err error
		if d.DataWaitS, err = optional(i, "data_wait_s", r.DataWaitS); err != nil {
			return b, err
		}
		if d.Samples, err = optional(i, "samples", r.Samples); err != nil {
			return b, err
		}
		if d.Tokens, err = optional(i, "tokens", r.Tokens); err != nil {
			return b, err
		}
		b.Reports = append(b.Reports, d)
	}
	return b, nil
}

// optional returns report i's optional value v, -1 when it is left out.
// (A function, not a loop over pointers to the report's fields: those
// moved every report to the heap.)
func optional(i int, name string, v *float64) (float64, error) {
	switch {
	case v == nil:
		return -1, nil
	case *v < 0:
		return 0, invalid("reports[%d]: %s %v must be 0 or more (leave it out when unknown)", i, name, *v)
	}
	return *v, nil
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
