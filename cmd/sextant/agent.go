package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpu/nvml"
	"github.com/sextant/sextant/internal/wire"
)

// AgentConfig is the GPU agent's configuration. Sources, lowest
// precedence first: DefaultAgentConfig, the environment (SEXTANT_<FLAG>,
// then the variables the mlflow client, torchrun and Slurm set), flags.
type AgentConfig struct {
	Server        string
	Node          string
	RunID         string
	NodeRank      int
	NumNodes      int
	Interval      time.Duration
	Source        string
	GPUs          string
	SMIPath       string
	SimEvents     string
	SpoolDir      string
	SpoolMaxBytes int64
	BatchSamples  int
	MetricsAddr   string
	LogLevel      string
	LogFormat     string
	Once          bool
	// Credentials come from the environment only, never from flags, so
	// that they do not show in process listings.
	Token, Username, Password string
}

// DefaultAgentConfig returns the agent's defaults.
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{
		Server:        defaultServer,
		NodeRank:      -1,
		Interval:      10 * time.Second,
		Source:        "auto",
		GPUs:          "all",
		SpoolMaxBytes: 64 << 20,
		BatchSamples:  20,
		LogLevel:      "info",
		LogFormat:     "text",
	}
}

// Validate checks the configuration and names the bad field.
func (c *AgentConfig) Validate() error {
	switch {
	case c.Node == "":
		return &ConfigError{"node", "must not be empty (the host name could not be read)"}
	case gpu.ValidateNode(c.Node) != nil:
		return &ConfigError{"node", gpu.ValidateNode(c.Node).Error()}
	case c.Interval < 100*time.Millisecond:
		return &ConfigError{"interval", fmt.Sprintf("must be at least 100ms, got %s", c.Interval)}
	case !gpu.ValidSourceSpec(c.Source):
		return &ConfigError{"gpu-source", fmt.Sprintf("must be auto, nvml, nvidia-smi, sim:N (1 to 64) or none, got %q", c.Source)}
	case c.NodeRank < -1:
		return &ConfigError{"node-rank", fmt.Sprintf("must be 0 or more (or -1 for unknown), got %d", c.NodeRank)}
	case c.NumNodes < 0:
		return &ConfigError{"num-nodes", fmt.Sprintf("must be 0 (unknown) or more, got %d", c.NumNodes)}
	case c.SpoolMaxBytes < 64<<10:
		return &ConfigError{"spool-max-bytes", "must be at least 65536"}
	case c.BatchSamples < 1 || c.BatchSamples > 1000:
		return &ConfigError{"batch-samples", fmt.Sprintf("must be between 1 and 1000, got %d", c.BatchSamples)}
	case c.LogFormat != "text" && c.LogFormat != "json":
		return &ConfigError{"log-format", fmt.Sprintf("must be text or json, got %q", c.LogFormat)}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return &ConfigError{"log-level", err.Error()}
	}
	if !c.Once {
		if _, err := client.New(c.Server, client.Options{}); err != nil {
			return &ConfigError{"server", errs.MessageOf(err)}
		}
	}
	return nil
}

// AgentCommand runs the GPU monitoring agent.
type AgentCommand struct {
	main *Main
	// clock replaces the real clock in tests.
	clock gpu.Clock
}

// bindAgentFlags binds the config to flags and the environment.
func bindAgentFlags(fs *flag.FlagSet, c *AgentConfig, getenv func(string) string) (envErr error) {
	env := func(names ...string) (string, string, bool) {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v, n, true
			}
		}
		return "", "", false
	}
	own := func(flagName string) string {
		return "SEXTANT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	}
	str := func(p *string, name, usage string, also ...string) {
		if v, _, ok := env(append([]string{own(name)}, also...)...); ok {
			*p = v
		}
		fs.StringVar(p, name, *p, usage)
	}
	integer := func(p *int, name, usage string, also ...string) {
		if v, from, ok := env(append([]string{own(name)}, also...)...); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("%s must be an integer, got %q", from, v)}
			}
			*p = n
		}
		fs.IntVar(p, name, *p, usage)
	}
	// The server is named as for every client command: --server, else
	// MLFLOW_TRACKING_URI (not SEXTANT_SERVER).
	if v := getenv("MLFLOW_TRACKING_URI"); v != "" {
		c.Server = v
	}
	fs.StringVar(&c.Server, "server", c.Server, "the server's URL (from $MLFLOW_TRACKING_URI when set)")
	str(&c.Node, "node", "name of this node in the GPU pane (default: the host name)")
	str(&c.RunID, "run-id", "MLflow run the samples belong to; they are also logged to it as system metrics (also from $MLFLOW_RUN_ID)", "MLFLOW_RUN_ID")
	integer(&c.NodeRank, "node-rank", "rank of this node in a multi-node job; -1 for unknown (also from $NODE_RANK, $GROUP_RANK, $SLURM_NODEID)", "NODE_RANK", "GROUP_RANK", "SLURM_NODEID")
	integer(&c.NumNodes, "num-nodes", "number of nodes of the job; 0 for unknown (also from $SLURM_JOB_NUM_NODES, $SLURM_NNODES)", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
	if v, from, ok := env(own("interval")); ok {
		d, err := time.ParseDuration(v)
		if err != nil && envErr == nil {
			envErr = &ConfigError{"interval", fmt.Sprintf("%s must be a duration such as 10s, got %q", from, v)}
		}
		c.Interval = d
	}
	fs.DurationVar(&c.Interval, "interval", c.Interval, "time between samples")
	str(&c.Source, "gpu-source", "where readings come from: auto (NVML, else nvidia-smi), nvml, nvidia-smi, sim:N (N simulated GPUs) or none")
	str(&c.GPUs, "gpus", "GPUs to report, as CUDA_VISIBLE_DEVICES lists them (indexes or UUIDs), or all (also from $CUDA_VISIBLE_DEVICES)", "CUDA_VISIBLE_DEVICES")
	str(&c.SMIPath, "nvidia-smi", "path of nvidia-smi (default: looked up on PATH)")
	str(&c.SimEvents, "sim-events", "with --gpu-source sim:N, a file of health events to inject, appended while the agent runs (docs/gpu.md)")
	str(&c.SpoolDir, "spool-dir", "directory that keeps samples while the server is unreachable (default: a per-node directory under $XDG_STATE_HOME or ~/.local/state)")
	if v, from, ok := env(own("spool-max-bytes")); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && envErr == nil {
			envErr = &ConfigError{"spool-max-bytes", fmt.Sprintf("%s must be an integer, got %q", from, v)}
		}
		c.SpoolMaxBytes = n
	}
	fs.Int64Var(&c.SpoolMaxBytes, "spool-max-bytes", c.SpoolMaxBytes, "largest size of the spool, in bytes; the oldest samples are dropped beyond it")
	integer(&c.BatchSamples, "batch-samples", "most samples in one request to the server")
	str(&c.MetricsAddr, "metrics-addr", "serve Prometheus /metrics (dcgm-exporter names) on this address, e.g. :9400; off when empty")
	str(&c.LogLevel, "log-level", "debug, info, warn or error")
	str(&c.LogFormat, "log-format", "text or json")
	fs.BoolVar(&c.Once, "once", false, "take one sample, print it as JSON and exit (no server needed)")
	c.Token = getenv("MLFLOW_TRACKING_TOKEN")
	c.Username, c.Password = getenv("MLFLOW_TRACKING_USERNAME"), getenv("MLFLOW_TRACKING_PASSWORD")
	return envErr
}

// defaultSpoolDir returns a per-node spool directory.
func defaultSpoolDir(getenv func(string) string, node string) string {
	base := getenv("XDG_STATE_HOME")
	if base == "" {
		if home := getenv("HOME"); home != "" {
			base = filepath.Join(home, ".local", "state")
		} else {
			base = os.TempDir()
		}
	}
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 {
			return '_'
		}
		return r
	}, node)
	return filepath.Join(base, "sextant", "agent-spool", safe)
}

// Run parses flags and samples until ctx is cancelled.
func (c *AgentCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg := DefaultAgentConfig()
	if h, err := os.Hostname(); err == nil {
		cfg.Node = h
	}
	envErr := bindAgentFlags(fs, &cfg, m.Getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if fs.NArg() > 0 {
		return usageError("agent: unexpected arguments: %v", fs.Args())
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = defaultSpoolDir(m.Getenv, cfg.Node)
	}
	log := slog.New(logHandler(m.Stderr, cfg.LogLevel, cfg.LogFormat)).With("component", "gpu-agent")
	clock := c.clock
	if clock == nil {
		clock = gpu.SystemClock()
	}
	seed := fnv.New64a()
	seed.Write([]byte(cfg.Node))
	src, err := gpu.OpenSource(ctx, cfg.Source, gpu.SourceOptions{
		NVML: nvml.Open, SMIPath: cfg.SMIPath, Seed: seed.Sum64(), Now: clock.Now, Logger: log, SimEvents: cfg.SimEvents,
	})
	if errors.Is(err, gpu.ErrNoSource) && cfg.Source != "nvml" && cfg.Source != "nvidia-smi" {
		// A CPU-only node is not an error for a wrapper that starts the
		// agent everywhere: say so and leave.
		log.Warn("no GPU found on this node; nothing to monitor", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer src.Close()
	sel := gpu.Selector{}
	if g := strings.TrimSpace(cfg.GPUs); g != "" && g != "all" {
		sel = gpu.ParseVisibleDevices(g)
	}
	if cfg.Once {
		a, err := gpu.NewAgent(gpu.AgentOptions{Source: src, Labels: gpu.Labels{Node: cfg.Node, NodeRank: -1}, Selector: sel, Clock: clock})
		if err != nil {
			return err
		}
		smp, err := a.Take(ctx, clock.Now())
		if err != nil {
			return err
		}
		_, err = m.Stdout.Write(append(wire.AppendGPUSampleJSON(nil, smp), '\n'))
		return err
	}
	return c.serve(ctx, cfg, src, sel, clock, log)
}

func (c *AgentCommand) serve(ctx context.Context, cfg AgentConfig, src gpu.Source, sel gpu.Selector, clock gpu.Clock, log *slog.Logger) error {
	auth := "none"
	switch {
	case cfg.Token != "":
		auth = "bearer token (MLFLOW_TRACKING_TOKEN)"
	case cfg.Username != "":
		auth = "basic (" + cfg.Username + ", password " + mask(cfg.Password) + ")"
	}
	cl, err := client.New(cfg.Server, client.Options{
		Token: cfg.Token, Username: cfg.Username, Password: cfg.Password, UserAgent: "sextant-agent/" + version,
	})
	if err != nil {
		return err
	}
	sink := cl.GPUSink()
	spool, err := gpu.OpenSpool(cfg.SpoolDir, gpu.SpoolOptions{MaxBytes: cfg.SpoolMaxBytes, Logger: log})
	if err != nil {
		return err
	}
	defer spool.Close()
	labels := gpu.Labels{Node: cfg.Node, RunID: cfg.RunID, NodeRank: cfg.NodeRank, NumNodes: cfg.NumNodes}
	agent, err := gpu.NewAgent(gpu.AgentOptions{
		Source: src, Sink: sink, Spool: spool, Labels: labels, Selector: sel,
		Interval: cfg.Interval, MaxBatchSamples: cfg.BatchSamples, Clock: clock, Logger: log,
	})
	if err != nil {
		return err
	}
	log.Info("starting sextant agent", "version", version, "server", cfg.Server, "auth", auth, "source", src.Name(),
		"node", cfg.Node, "run_id", cfg.RunID, "node_rank", cfg.NodeRank, "num_nodes", cfg.NumNodes, "gpus", sel.String(),
		"interval", cfg.Interval, "spool_dir", cfg.SpoolDir, "spool_max_bytes", cfg.SpoolMaxBytes, "metrics_addr", cfg.MetricsAddr)
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			if err := agent.WriteMetrics(w); err != nil {
				log.Debug("write /metrics", "err", err)
			}
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		log.Info("serving Prometheus metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
		if c.main.Ready != nil {
			c.main.Ready(ln.Addr().String())
		}
	}
	err = agent.Run(ctx)
	st := agent.Stats()
	log.Info("sextant agent stopped", "samples", st.Samples, "sent", st.Sent, "spooled", st.Spooled, "dropped", st.Dropped)
	return err
}
