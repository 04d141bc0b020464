package wire

import "github.com/sextant/sextant/internal/goodput"

// The wire shape of GET /api/2.0/sextant/goodput (docs/api.md, docs/run.md):
// a run's throughput, MFU and goodput breakdown (internal/goodput).

// GoodputBreakdownJSON is the wall time by category, in seconds.
type GoodputBreakdownJSON struct {
	Wall       float64 `json:"wall_s"`
	Productive float64 `json:"productive_s"`
	DataWait   float64 `json:"data_wait_s"`
	Checkpoint float64 `json:"checkpoint_s"`
	Lost       float64 `json:"lost_s"`
	Hung       float64 `json:"hung_s"`
	Idle       float64 `json:"idle_s"`
	Startup    float64 `json:"startup_s"`
	Other      float64 `json:"other_s"`
}

// ThroughputJSON is samples and tokens per second; null where not reported.
type ThroughputJSON struct {
	Rank        *int     `json:"rank,omitempty"`
	Steps       int      `json:"steps,omitempty"`
	SamplesPerS *float64 `json:"samples_per_s"`
	TokensPerS  *float64 `json:"tokens_per_s"`
}

// MFUJSON is the MFU (null with a reason when unknown) and its inputs.
type MFUJSON struct {
	MFU           *float64 `json:"mfu"`
	Reason        string   `json:"reason,omitempty"`
	FLOPsPer      float64  `json:"flops_per,omitempty"`
	Per           string   `json:"per,omitempty"`
	AchievedFLOPS float64  `json:"achieved_flops_per_s"`
	Devices       int      `json:"devices"`
	PeakTFLOPS    float64  `json:"peak_tflops,omitempty"`
	PeakSource    string   `json:"peak_source,omitempty"`
	GPUModel      string   `json:"gpu_model,omitempty"`
	DType         string   `json:"dtype"`
}

// GoodputPointJSON is the cumulative goodput at a reference step's end.
type GoodputPointJSON struct {
	TimeMs  int64   `json:"time_ms"`
	Step    int64   `json:"step"`
	Goodput float64 `json:"goodput"`
}

// GoodputResponse is the body of GET goodput.
type GoodputResponse struct {
	RunID         string               `json:"run_id"`
	Goodput       *float64             `json:"goodput"`
	Breakdown     GoodputBreakdownJSON `json:"breakdown"`
	ReferenceRank int                  `json:"reference_rank"`
	Throughput    ThroughputJSON       `json:"throughput"`
	Recent        ThroughputJSON       `json:"recent_throughput"`
	Ranks         []ThroughputJSON     `json:"ranks"`
	MFU           MFUJSON              `json:"mfu"`
	Series        []GoodputPointJSON   `json:"series"`
}

func optRate(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return &v
}

// GoodputToJSON returns the wire shape of a report.
func GoodputToJSON(runID string, r goodput.Report) GoodputResponse {
	b := r.Breakdown
	out := GoodputResponse{RunID: runID, ReferenceRank: r.ReferenceRank,
		Breakdown:  GoodputBreakdownJSON{b.Wall, b.Productive, b.DataWait, b.Checkpoint, b.Lost, b.Hung, b.Idle, b.Startup, b.Other},
		Throughput: ThroughputJSON{SamplesPerS: optRate(r.Throughput.SamplesPerS), TokensPerS: optRate(r.Throughput.TokensPerS)},
		Recent:     ThroughputJSON{SamplesPerS: optRate(r.Recent.SamplesPerS), TokensPerS: optRate(r.Recent.TokensPerS)},
		Ranks:      []ThroughputJSON{}, Series: []GoodputPointJSON{},
	}
	if r.Known {
		g := r.Goodput
		out.Goodput = &g
	}
	for _, rt := range r.Ranks {
		rk := rt.Rank
		out.Ranks = append(out.Ranks, ThroughputJSON{Rank: &rk, Steps: rt.Steps, SamplesPerS: optRate(rt.SamplesPerS), TokensPerS: optRate(rt.TokensPerS)})
	}
	m := r.MFU
	out.MFU = MFUJSON{Reason: m.Reason, FLOPsPer: m.FLOPsPer, Per: m.Per, AchievedFLOPS: m.AchievedFLOPS, Devices: m.Devices,
		PeakTFLOPS: m.PeakTFLOPS, PeakSource: m.PeakSource, GPUModel: m.Model, DType: m.DType}
	if m.Known {
		v := m.Value
		out.MFU.MFU = &v
	}
	for _, p := range r.Series {
		out.Series = append(out.Series, GoodputPointJSON{p.TimeMs, p.Step, p.Goodput})
	}
	return out
}
