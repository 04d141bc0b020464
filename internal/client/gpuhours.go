package client

import (
	"context"
	"net/url"

	"github.com/sextant/sextant/internal/wire"
)

// GPUHours returns the GPU-hours (and cost, when the server has prices)
// of the runs runIDs names, with their attempts (docs/gpu.md).
func (c *Client) GPUHours(ctx context.Context, runIDs []string) (*wire.GPUHoursResponse, error) {
	var out wire.GPUHoursResponse
	if err := c.call(ctx, &request{method: "GET", path: "/api/2.0/sextant/gpu-hours", query: url.Values{"run_id": runIDs}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
