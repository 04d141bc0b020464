package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpu/nvml"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/launcher"
)

// gpuSampler samples the GPUs a job can see for its run while the job
// runs: a GPU agent inside the launcher, with the run's labels, so the
// samples show in the GPU pane under the run and become the run's MLflow
// system metrics (system/gpu_0_utilization_percentage, ...).
type gpuSampler struct {
	source   string // gpu.OpenSource's spec
	node     string // the node's name; "" means the host name
	interval time.Duration
	server   string
	client   httpapi.GPUClientOptions
	spoolDir string // where the samples wait while the server is unreachable
	numNodes int
	log      *slog.Logger
}

// Start implements launcher.Sampler.
func (g *gpuSampler) Start(ctx context.Context, job launcher.SampledJob) (func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	if job.LocalRank > 0 {
		// With one launcher per rank, the one of local rank 0 samples
		// the node: the others would send the same samples again.
		return nop, nil
	}
	node := g.node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("read the host name: %w", err)
		}
		node = h
	}
	if err := gpu.ValidateNode(node); err != nil {
		return nil, err
	}
	seed := fnv.New64a()
	seed.Write([]byte(node))
	src, err := gpu.OpenSource(ctx, g.source, gpu.SourceOptions{NVML: nvml.Open, Seed: seed.Sum64(), Logger: g.log})
	if errors.Is(err, gpu.ErrNoSource) && g.source != "nvml" && g.source != "nvidia-smi" {
		// No GPU here (or --gpu-source none): nothing to sample.
		g.log.Debug("no GPU source; the run gets no GPU samples", "reason", err)
		return nop, nil
	}
	if err != nil {
		return nil, err
	}
	sink, err := httpapi.NewGPUClient(g.server, g.client)
	if err != nil {
		src.Close()
		return nil, err
	}
	dir, err := os.MkdirTemp(g.spoolDir, ".sextant-gpu-spool-")
	if err != nil {
		src.Close()
		return nil, err
	}
	spool, err := gpu.OpenSpool(dir, gpu.SpoolOptions{MaxBytes: 16 << 20, Logger: g.log})
	if err != nil {
		src.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	sel := gpu.Selector{}
	if job.VisibleDevices != "" {
		sel = gpu.ParseVisibleDevices(job.VisibleDevices)
	}
	agent, err := gpu.NewAgent(gpu.AgentOptions{
		Source: src, Sink: sink, Spool: spool, Selector: sel, Interval: g.interval, Logger: g.log,
		Labels: gpu.Labels{Node: node, RunID: job.RunID, NodeRank: job.NodeRank, NumNodes: g.numNodes},
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

// gpuHTTPClient is the GPU client's HTTP client: the default one, or one
// that skips the verification of the server's certificate, as the mlflow
// client does with MLFLOW_TRACKING_INSECURE_TLS.
func gpuHTTPClient(insecure bool) *http.Client {
	if !insecure {
		return nil
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: 2 * time.Minute,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
}

// launcherLog is the GPU agent's logger inside the launcher: its warnings
// (the server unreachable, samples refused) among the launcher's messages.
func launcherLog(w io.Writer) *slog.Logger {
	if w == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "gpu")
}
