package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/sextant/sextant/internal/wire"
)

// Nodes returns every node's health summary (docs/gpu.md, "Node health").
func (c *Client) Nodes(ctx context.Context) (*wire.NodesResponse, error) {
	var out wire.NodesResponse
	if err := c.call(ctx, &request{method: "GET", path: "/api/2.0/sextant/nodes"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NodeHealth returns a page of a node's GPU faults, newest first;
// pageToken continues from the previous page's NextPageToken.
func (c *Client) NodeHealth(ctx context.Context, node string, maxResults int, pageToken string) (*wire.NodeHealthResponse, error) {
	q := url.Values{"node": {node}}
	if maxResults > 0 {
		q.Set("max_results", strconv.Itoa(maxResults))
	}
	if pageToken != "" {
		q.Set("page_token", pageToken)
	}
	var out wire.NodeHealthResponse
	if err := c.call(ctx, &request{method: "GET", path: "/api/2.0/sextant/nodes/health", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
