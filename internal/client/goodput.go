package client

import (
	"context"
	"net/url"

	"github.com/sextant/sextant/internal/wire"
)

// Goodput returns the throughput, MFU and goodput of run runID
// (docs/run.md).
func (c *Client) Goodput(ctx context.Context, runID string) (*wire.GoodputResponse, error) {
	var out wire.GoodputResponse
	if err := c.call(ctx, &request{method: "GET", path: "/api/2.0/sextant/goodput", query: url.Values{"run_id": {runID}}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
