package client

import (
	"bytes"
	"context"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/wire"
)

// GPU samples (POST /api/2.0/sextant/gpu/samples; docs/gpu.md).

// SendGPU sends one batch of samples, once: the agent spools what fails
// and sends it again later. Errors follow gpu.Sink's contract: the
// server's refusal of the batch is errs.Invalid or errs.LimitExceeded, an
// unreachable server errs.Unavailable, credentials refused
// errs.Unauthenticated or errs.PermissionDenied.
func (c *Client) SendGPU(ctx context.Context, b *gpu.Batch) (*gpu.SendResult, error) {
	body := wire.AppendGPUBatch(make([]byte, 0, 2048), b)
	r := &request{method: "POST", path: sxAPI + "/gpu/samples", body: bytes.NewReader(body), size: int64(len(body)), ctype: "application/json", noRetry: true}
	var out wire.GPUResult
	if err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Domain(), nil
}

// GPUSink returns c as a gpu.Sink.
func (c *Client) GPUSink() gpu.Sink { return gpuSink{c} }

type gpuSink struct{ c *Client }

func (s gpuSink) Send(ctx context.Context, b *gpu.Batch) (*gpu.SendResult, error) {
	return s.c.SendGPU(ctx, b)
}
