package wire

// The request bodies of the MLflow tracking routes that both the server
// (internal/httpapi) and the Go client (internal/client) use: one type a
// body, so that a field changed on one side is changed on the other.
// Optional fields are left out when not set, as the mlflow client leaves
// them out.

// CreateExperimentRequest is the body of experiments/create.
type CreateExperimentRequest struct {
	Name             string `json:"name"`
	ArtifactLocation string `json:"artifact_location,omitempty"`
	Tags             []KV   `json:"tags,omitempty"`
}

// CreateRunRequest is the body of runs/create.
type CreateRunRequest struct {
	ExperimentID string `json:"experiment_id,omitempty"`
	UserID       string `json:"user_id,omitempty"`
	RunName      string `json:"run_name,omitempty"`
	StartTime    Int    `json:"start_time,omitzero"`
	Tags         []KV   `json:"tags,omitempty"`
}

// UpdateRunRequest is the body of runs/update; RunUUID is the older name
// of RunID, which clients still send. A nil RunName leaves the name.
type UpdateRunRequest struct {
	RunID   string  `json:"run_id,omitempty"`
	RunUUID string  `json:"run_uuid,omitempty"`
	Status  Enum    `json:"status,omitzero"`
	EndTime Int     `json:"end_time,omitzero"`
	RunName *string `json:"run_name,omitempty"`
}

// SearchExperimentsRequest is the body of experiments/search (and its
// query parameters, for GET).
type SearchExperimentsRequest struct {
	MaxResults Int      `json:"max_results,omitzero"`
	PageToken  string   `json:"page_token,omitempty"`
	Filter     string   `json:"filter,omitempty"`
	OrderBy    []string `json:"order_by,omitempty"`
	ViewType   Enum     `json:"view_type,omitzero"`
}

// SearchRunsRequest is the body of runs/search.
type SearchRunsRequest struct {
	ExperimentIDs []string `json:"experiment_ids"`
	Filter        string   `json:"filter,omitempty"`
	RunViewType   Enum     `json:"run_view_type,omitzero"`
	MaxResults    Int      `json:"max_results,omitzero"`
	OrderBy       []string `json:"order_by,omitempty"`
	PageToken     string   `json:"page_token,omitempty"`
}
