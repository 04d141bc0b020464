package wire

// NodeHealthCounts counts a node's health findings by kind.
type NodeHealthCounts struct {
	Xid      int `json:"xid"`
	ECC      int `json:"ecc"`
	Throttle int `json:"throttle"`
	Lost     int `json:"lost"`
}

// NodeGPU is a GPU of a node.
type NodeGPU struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	Model string `json:"model,omitempty"`
}

// NodeHealth is a node's health summary (GET /api/2.0/sextant/nodes).
type NodeHealth struct {
	Node        string           `json:"node"`
	GPUs        []NodeGPU        `json:"gpus"`
	LastSeenMs  int64            `json:"last_seen_ms,omitempty"`
	LastFaultMs int64            `json:"last_fault_ms,omitempty"`
	Counts24h   NodeHealthCounts `json:"counts_24h"`
	Counts7d    NodeHealthCounts `json:"counts_7d"`
	Flagged     bool             `json:"flagged"`
	Reason      string           `json:"reason,omitempty"`
}

// NodesResponse answers GET /api/2.0/sextant/nodes.
type NodesResponse struct {
	Nodes []NodeHealth `json:"nodes"`
	// Rule describes the flag rule in words.
	Rule string `json:"rule"`
}

// NodeHealthEvent is one finding of a node's health history.
type NodeHealthEvent struct {
	TimeMs     int64    `json:"time_ms"`
	EndMs      int64    `json:"end_ms,omitempty"`
	Open       bool     `json:"open,omitempty"`
	Kind       string   `json:"kind"`
	GPU        int      `json:"gpu"`
	UUID       string   `json:"uuid,omitempty"`
	Model      string   `json:"model,omitempty"`
	Xid        int      `json:"xid,omitempty"`
	XidMeaning string   `json:"xid_meaning,omitempty"`
	Message    string   `json:"message"`
	RunIDs     []string `json:"run_ids"`
}

// NodeHealthResponse answers GET /api/2.0/sextant/nodes/health.
type NodeHealthResponse struct {
	Node          string            `json:"node"`
	Events        []NodeHealthEvent `json:"events"`
	NextPageToken string            `json:"next_page_token,omitempty"`
}
