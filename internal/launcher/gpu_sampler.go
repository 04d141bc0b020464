package launcher

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/gpu"
)

// GPUSampler samples the GPUs a job can see for its run while the job
// runs: a GPU agent inside the launcher, with the run's labels, so the
// samples show in the GPU pane under the run and become the run's MLflow
// system metrics (system/gpu_0_utilization_percentage, ...).
type GPUSampler struct {
	// Source is gpu.OpenSource's spec ("auto", "nvml", "nvidia-smi",
	// "sim:N", "none").
	Source string
	// NVML opens the NVML source (gpu.SourceOptions.NVML); nil means NVML
	// is not available.
	NVML func() (gpu.Source, error)
	// Node is the node's name; "" means the host name.
	Node string
	// Interval is the time between two samples.
	Interval time.Duration
	// Sink delivers the samples (internal/client's GPUSink).
	Sink gpu.Sink
	// SpoolDir holds, in a directory of its own, the samples that wait
	// while the server is unreachable; "" means the system's temporary
	// directory.
	SpoolDir string
	// NumNodes is the job's number of nodes.
	NumNodes int
	// Logger receives the agent's warnings; nil discards them.
	Logger *slog.Logger
}

var _ Sampler = (*GPUSampler)(nil)

// Start implements Sampler.
func (g *GPUSampler) Start(ctx context.Context, job SampledJob) (func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	if job.LocalRank > 0 {
		// With one launcher per rank, the one of local rank 0 samples
		// the node: the others would send the same samples again.
		return nop, nil
	}
	log := g.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	node, err := g.nodeName()
	if err != nil {
		return nil, err
	}
	seed := fnv.New64a()
	seed.Write([]byte(node))
	src, err := gpu.OpenSource(ctx, g.Source, gpu.SourceOptions{NVML: g.NVML, Seed: seed.Sum64(), Logger: log})
	if errors.Is(err, gpu.ErrNoSource) && g.Source != "nvml" && g.Source != "nvidia-smi" {
		// No GPU here (or --gpu-source none): nothing to sample.
		log.Debug("no GPU source; the run gets no GPU samples", "reason", err)
		return nop, nil
	}
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(g.SpoolDir, ".sextant-gpu-spool-")
	if err != nil {
		src.Close()
		return nil, err
	}
	spool, err := gpu.OpenSpool(dir, gpu.SpoolOptions{MaxBytes: 16 << 20, Logger: log})
	if err != nil {
		src.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	sel := gpu.Selector{}
	if job.VisibleDevices != "" {
		sel = gpu.ParseVisibleDevices(job.VisibleDevices)
	}
	var sink gpu.Sink = g.Sink
	if job.OnGPUs != nil {
		sink = &heldSink{Sink: g.Sink, node: node, on: job.OnGPUs, seen: map[string]bool{}}
	}
	agent, err := gpu.NewAgent(gpu.AgentOptions{
		Source: src, Sink: sink, Spool: spool, Selector: sel, Interval: g.Interval, Logger: log,
		Labels: gpu.Labels{Node: node, RunID: job.RunID, NodeRank: job.NodeRank, NumNodes: g.NumNodes},
	})
	if err != nil {
		spool.Close()
		src.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		agent.Run(actx) // at every multiple of the interval, from the first after now
	}()
	return func(sctx context.Context) error {
		// The agent makes a last attempt to deliver what it spooled.
		cancel()
		select {
		case <-done:
		case <-sctx.Done():
			return fmt.Errorf("the GPU agent did not stop: %w", sctx.Err())
		}
		return errors.Join(spool.Close(), src.Close(), os.RemoveAll(dir))
	}, nil
}

// nodeName is the node the samples are labelled with: Node, else the
// host name, which is what sextant agent names the node by default, so
// that the launcher's samples and the agent's land on the same node.
func (g *GPUSampler) nodeName() (string, error) {
	node := g.Node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("read the host name: %w", err)
		}
		node = h
	}
	if err := gpu.ValidateNode(node); err != nil {
		return "", err
	}
	return node, nil
}

// GPULogger is the GPU agent's logger inside the launcher: its warnings
// (the server unreachable, samples refused) among the launcher's messages
// on w; nil discards them.
func GPULogger(w io.Writer) *slog.Logger {
	if w == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "gpu")
}

// heldSink counts the distinct GPUs of the samples it passes on (by UUID,
// else index), and reports each growth to on.
type heldSink struct {
	gpu.Sink
	node  string
	on    func(node string, gpus int, model string)
	mu    sync.Mutex
	seen  map[string]bool
	model string
}

// Send implements gpu.Sink.
func (h *heldSink) Send(ctx context.Context, b *gpu.Batch) (*gpu.SendResult, error) {
	h.mu.Lock()
	n := len(h.seen)
	for _, s := range b.Samples {
		for _, g := range s.GPUs {
			id := g.UUID
			if id == "" {
				id = "#" + strconv.Itoa(g.Index)
			}
			h.seen[id] = true
			if h.model == "" {
				h.model = g.Name
			}
		}
	}
	grew, count, model := len(h.seen) > n, len(h.seen), h.model
	h.mu.Unlock()
	if grew {
		h.on(h.node, count, model)
	}
	return h.Sink.Send(ctx, b)
}
