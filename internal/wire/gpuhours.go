package wire

// GPUHoursAttempt is one attempt of a run in a GPUHoursResponse.
type GPUHoursAttempt struct {
	Node     string   `json:"node"`
	StartMs  int64    `json:"start_ms"`
	EndMs    int64    `json:"end_ms"`
	Open     bool     `json:"open"`
	GPUs     int      `json:"gpus"`
	Model    string   `json:"gpu_model,omitempty"`
	Status   string   `json:"status,omitempty"`
	GPUHours float64  `json:"gpu_hours"`
	Price    *float64 `json:"price,omitempty"`
	Cost     *float64 `json:"cost,omitempty"`
}

// GPUHoursRun is a run's GPU-hours, with its attempts.
type GPUHoursRun struct {
	RunID        string            `json:"run_id"`
	ExperimentID string            `json:"experiment_id"`
	GPUHours     float64           `json:"gpu_hours"`
	Cost         *float64          `json:"cost,omitempty"`
	Attempts     []GPUHoursAttempt `json:"attempts"`
}

// GPUHoursExperiment is an experiment's GPU-hours, in a folder's answer.
type GPUHoursExperiment struct {
	ExperimentID string   `json:"experiment_id"`
	Name         string   `json:"name"`
	GPUHours     float64  `json:"gpu_hours"`
	Cost         *float64 `json:"cost,omitempty"`
	Runs         int      `json:"runs"`
}

// GPUHoursResponse is the answer of GET /api/2.0/sextant/gpu-hours
// (docs/gpu.md). Costs are present only when the server has prices.
type GPUHoursResponse struct {
	GPUHours    float64              `json:"gpu_hours"`
	Cost        *float64             `json:"cost,omitempty"`
	Prices      string               `json:"prices,omitempty"`
	Runs        []GPUHoursRun        `json:"runs,omitempty"`
	Experiments []GPUHoursExperiment `json:"experiments,omitempty"`
}
