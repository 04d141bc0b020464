package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpu/nvml"
	"github.com/sextant/sextant/internal/launcher"
)

// RunCommand is `sextant run`: it launches a training job in a run of the
// tracking server and keeps the job's output with the run.
type RunCommand struct {
	main *Main
}

// RunConfig is `sextant run`'s configuration: flags, then the variables
// the mlflow client, torchrun and SLURM set.
type RunConfig struct {
	TrackingURI    string
	Experiment     string
	RunName        string
	Resume         string
	RunID          string
	JobID          string
	NodeRank       int
	NNodes         int
	LocalRank      int
	Grace          time.Duration
	Drain          time.Duration
	Flush          time.Duration
	PartialAfter   time.Duration
	SpoolDir       string
	SpoolMaxBytes  int64
	MemoryMaxBytes int64
	Nice           int
	DeliverTimeout time.Duration
	JoinTimeout    time.Duration
	RankPrefix     string
	Quiet          bool
	OutputPipes    bool
	GPUSource      string
	GPUInterval    time.Duration
	GPUNode        string
	HangAfter      time.Duration
}

// Validate checks the configuration and names the bad field.
func (c *RunConfig) Validate() error {
	switch {
	case c.Grace <= 0:
		return &ConfigError{"grace", "must be positive"}
	case c.Drain <= 0:
		return &ConfigError{"drain", "must be positive"}
	case c.Flush < 10*time.Millisecond:
		return &ConfigError{"flush", "must be at least 10ms"}
	case c.RankPrefix != "auto" && c.RankPrefix != "on" && c.RankPrefix != "off":
		return &ConfigError{"rank-prefix", fmt.Sprintf("must be auto, on or off, got %q", c.RankPrefix)}
	case !gpu.ValidSourceSpec(c.GPUSource):
		return &ConfigError{"gpu-source", fmt.Sprintf("must be auto, nvml, nvidia-smi, sim:N (1 to 64) or none, got %q", c.GPUSource)}
	case c.GPUNode != "" && gpu.ValidateNode(c.GPUNode) != nil:
		return &ConfigError{"node", gpu.ValidateNode(c.GPUNode).Error()}
	case c.GPUInterval < 100*time.Millisecond:
		return &ConfigError{"gpu-interval", fmt.Sprintf("must be at least 100ms, got %s", c.GPUInterval)}
	case c.Nice < 0 || c.Nice > 19:
		return &ConfigError{"nice", fmt.Sprintf("must be 0 to 19, got %d", c.Nice)}
	case c.NodeRank < -1 || c.LocalRank < -1 || c.NNodes < 0:
		return &ConfigError{"node-rank", "ranks must be 0 or more and --nnodes 1 or more"}
	}
	return nil
}

// runAbout is the description in `sextant run -h`.
const runAbout = `Runs COMMAND in a run of the tracking server: the experiment is --experiment, else
$MLFLOW_EXPERIMENT_NAME, else /Users/<you>/<entry point>, where <you> is the user the server says
you are signed in as (in single-user mode $MLFLOW_TRACKING_USERNAME, else the operating system's
user). On a multi-user server experiment names are absolute workspace paths; in single-user mode any
name the mlflow client takes (my-exp) works too. The run is new (--run-name, else jobTaskRun-xxxxx)
or resumed (--run-id, $MLFLOW_RUN_ID). --resume latest continues that run (or the last run of the
same script or module in the experiment, whatever its arguments) from the newest complete checkpoint
its VolumeWriter recorded, handing the path to COMMAND in SEXTANT_RESUME_FROM (--resume
/Volumes/PATH: that checkpoint). COMMAND gets MLFLOW_TRACKING_URI, MLFLOW_RUN_ID and
MLFLOW_EXPERIMENT_NAME/_ID, so mlflow.start_run() logs to that run. Its output is shown here
unchanged and stored with the run (sextant logs --last). SIGINT and SIGTERM are passed to COMMAND
(Ctrl-C at a terminal reaches COMMAND directly); either way the run ends KILLED, and the exit code
is COMMAND's (128+N for signal N). A COMMAND that cannot start (not found, a missing Python script)
is refused before anything is created. On several nodes, run the same command on each with the same
--job-id (or under torchrun's rendezvous or SLURM): they share one run. See docs/run.md.`

// Run parses flags and runs the job. Everything that can be refused (a
// bad flag, a command that cannot start, an unknown job layout, a server
// that refuses the credentials) is refused before the launcher creates
// anything on the server.
func (c *RunCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg, command, err := parseRunConfig(fs, args, m.Getenv)
	if err != nil {
		return err
	}
	resumeFrom := cfg.splitResume()
	if err := checkRunCommand(command, &cfg, m.Getenv); err != nil {
		return err
	}
	job, err := cfg.resolveJob(command, m.Getenv)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	conn, err := m.connectRun(&cfg)
	if err != nil {
		return err
	}
	// Who the server says we are decides the default experiment and the
	// naming rule, so that the launcher and the server agree.
	userName, multiUser, err := whoIsLoggedIn(ctx, conn.tracker, m.Getenv)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	expName, err := launcher.ExperimentName(cfg.Experiment, m.Getenv("MLFLOW_EXPERIMENT_NAME"), userName, multiUser, command)
	if err != nil && cfg.Resume == "" {
		return &exitError{code: 2, err: err}
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	res, err := launcher.Run(ctx, m.launchOptions(&cfg, runLaunch{
		command: command, resumeFrom: resumeFrom, job: job, conn: conn, user: userName, experiment: expName, signals: sigs,
	}))
	return m.reportRun(&cfg, command[0], res, err)
}

// parseRunConfig reads `sextant run`'s flags over their defaults and the
// environment, and returns the configuration, validated, and the command
// to run.
func parseRunConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (RunConfig, []string, error) {
	cfg := RunConfig{
		RunID:    getenv("MLFLOW_RUN_ID"),
		NodeRank: -1, LocalRank: -1, Grace: 30 * time.Second, Drain: 2 * time.Second, Flush: 200 * time.Millisecond,
		PartialAfter: 2 * time.Second, SpoolMaxBytes: 1 << 30, MemoryMaxBytes: 256 << 20, Nice: 10,
		DeliverTimeout: 10 * time.Minute, JoinTimeout: 10 * time.Minute, RankPrefix: "auto",
		GPUSource: "auto", GPUInterval: 10 * time.Second, GPUNode: getenv("SEXTANT_NODE"),
		HangAfter: 10 * time.Minute,
	}
	server := serverFlag(fs, getenv)
	fs.StringVar(&cfg.Experiment, "experiment", "", "experiment name (default $MLFLOW_EXPERIMENT_NAME, else /Users/<you>/<entry point>); an absolute workspace path on a multi-user server")
	fs.StringVar(&cfg.RunName, "run-name", "", "name of the new run (default jobTaskRun-xxxxx); renames a resumed run")
	fs.StringVar(&cfg.RunID, "run-id", cfg.RunID, "continue this run instead of creating one (default $MLFLOW_RUN_ID)")
	fs.StringVar(&cfg.Resume, "resume", "", "latest: resume the run (--run-id, else the last run of the same script or module in the experiment) from its newest complete checkpoint; /Volumes/PATH: from that checkpoint; a run id: as --run-id")
	fs.StringVar(&cfg.JobID, "job-id", "", "key shared by the launchers of one multi-node job (default $TORCHELASTIC_RUN_ID, torchrun's --rdzv-id, $SLURM_JOB_ID)")
	fs.IntVar(&cfg.NodeRank, "node-rank", -1, "this node's rank (default $NODE_RANK, $GROUP_RANK, torchrun's --node-rank, $SLURM_NODEID, else 0)")
	fs.IntVar(&cfg.NNodes, "nnodes", 0, "number of nodes of the job (default torchrun's --nnodes, $SLURM_NNODES, else 1)")
	fs.IntVar(&cfg.LocalRank, "local-rank", -1, "this launcher's local rank when there is one launcher per process (default $LOCAL_RANK)")
	fs.DurationVar(&cfg.Grace, "grace", cfg.Grace, "time COMMAND has to exit after a forwarded SIGINT/SIGTERM before SIGKILL")
	fs.DurationVar(&cfg.HangAfter, "hang-after", cfg.HangAfter, "a rank with no progress (or a job with no output and no new metric) for this long is hung: its Python stacks go to the run's log and a hung span opens (0: off)")
	fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, "time output is still read after COMMAND exits (from processes it left behind), before they are stopped")
	fs.DurationVar(&cfg.Flush, "flush", cfg.Flush, "longest a line waits before it is sent to the server")
	fs.DurationVar(&cfg.PartialAfter, "partial-after", cfg.PartialAfter, "an unfinished line (no newline yet) is sent as a partial record after this")
	fs.StringVar(&cfg.SpoolDir, "spool-dir", "", "where COMMAND's output files are, and where output waits on disk while the server is unreachable (default the temporary directory)")
	fs.BoolVar(&cfg.OutputPipes, "output-pipes", false, "give COMMAND pipes for its output instead of files the launcher follows (through pipes COMMAND waits whenever the launcher falls behind)")
	fs.Int64Var(&cfg.SpoolMaxBytes, "spool-max-bytes", cfg.SpoolMaxBytes, "largest spool on disk; output beyond it is dropped, and counted (negative: no spool)")
	fs.Int64Var(&cfg.MemoryMaxBytes, "memory-max-bytes", cfg.MemoryMaxBytes, "output kept in memory while the server is behind, before it goes to the spool")
	fs.IntVar(&cfg.Nice, "nice", cfg.Nice, "nice levels the launcher lowers its own CPU priority by once COMMAND runs, so that COMMAND goes first on busy cores (0: same priority; not with --output-pipes)")
	fs.DurationVar(&cfg.DeliverTimeout, "deliver-timeout", cfg.DeliverTimeout, "after COMMAND exits, how long to keep trying to reach an unreachable server")
	fs.DurationVar(&cfg.JoinTimeout, "join-timeout", cfg.JoinTimeout, "how long a node other than 0 waits for node 0's run")
	fs.StringVar(&cfg.RankPrefix, "rank-prefix", cfg.RankPrefix, "read local ranks from torchrun's \"[rank3]:\" line prefixes: auto (when COMMAND is torchrun), on or off")
	fs.StringVar(&cfg.GPUSource, "gpu-source", cfg.GPUSource, "where the job's GPUs are sampled from for the run: auto (NVML, else nvidia-smi, else none), nvml, nvidia-smi, sim:N (N simulated GPUs) or none")
	fs.DurationVar(&cfg.GPUInterval, "gpu-interval", cfg.GPUInterval, "time between two GPU samples")
	fs.StringVar(&cfg.GPUNode, "node", cfg.GPUNode, "this node's name in the GPU pane, as sextant agent names it (default $SEXTANT_NODE, else the host name)")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the job's output, not the launcher's messages")
	if err := fs.Parse(args); err != nil {
		return cfg, nil, err
	}
	cfg.TrackingURI = *server
	command := fs.Args()
	if len(command) == 0 {
		return cfg, nil, usageError("run: no command given: sextant run [flags] -- COMMAND [ARGS...] (see 'sextant run -h')")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, &exitError{code: 2, err: err}
	}
	return cfg, command, nil
}

// splitResume separates --resume's two meanings: a checkpoint to start
// from (latest, or a /Volumes path), which it returns, and a run id,
// which it treats as --run-id. Resume is then the run to continue.
func (c *RunConfig) splitResume() (resumeFrom string) {
	switch r := c.Resume; {
	case r == "":
	case r == launcher.ResumeLatest || strings.HasPrefix(r, "/Volumes/"):
		resumeFrom = r
	default:
		// A run id: the run to continue, as --run-id.
		c.RunID = r
	}
	c.Resume = c.RunID
	return resumeFrom
}

// checkRunCommand refuses a command that cannot start before anything is
// created on the server: a typo must not leave a FAILED run behind.
func checkRunCommand(command []string, cfg *RunConfig, getenv func(string) string) error {
	experimentGiven := cfg.Experiment != "" || getenv("MLFLOW_EXPERIMENT_NAME") != "" || cfg.Resume != ""
	err := launcher.CheckCommand(command, "", experimentGiven)
	if err == nil {
		return nil
	}
	var ce *launcher.CommandError
	if errors.As(err, &ce) {
		return &exitError{code: ce.ExitCode, err: fmt.Errorf("%w; nothing was created on the server", err)}
	}
	return &exitError{code: 2, err: err}
}

// resolveJob places this launcher in its job (see launcher.ResolveJob).
// A resume needs no job id, so there a layout that cannot be resolved
// is taken from the rank flags alone.
func (c *RunConfig) resolveJob(command []string, getenv func(string) string) (launcher.Job, error) {
	job, err := launcher.ResolveJob(launcher.JobInputs{
		JobIDFlag: c.JobID, NodeRankFlag: c.NodeRank, NNodesFlag: c.NNodes, LocalRankFlag: c.LocalRank,
		Getenv: getenv, Command: command,
	})
	if err == nil {
		return job, nil
	}
	if c.Resume == "" {
		return launcher.Job{}, err
	}
	// Every node resumes the run given: no job id is needed to find it.
	return launcher.Job{NodeRank: max(c.NodeRank, 0), LocalRank: c.LocalRank, NNodes: max(c.NNodes, 1)}, nil
}

// rankPrefix says whether to read local ranks from torchrun's line
// prefixes: on request, or by default when one launcher captures all the
// ranks of a torchrun.
func (c *RunConfig) rankPrefix(command []string, job launcher.Job) bool {
	if c.RankPrefix != "auto" {
		return c.RankPrefix == "on"
	}
	return launcher.ParseTorchrun(command).Found && job.LocalRank < 0
}

// The launcher finds these optional calls on its Tracker by assertion: a
// client without them would silently lose the alert tag's clearing and the
// Flight Recorder dumps, so their absence is a build error here.
var (
	_ launcher.TagDeleter     = (*client.Client)(nil)
	_ launcher.ArtifactPutter = (*client.Client)(nil)
)

// runClients are the launcher's two clients of the tracking server, with
// different retry rules, and the credentials they share.
type runClients struct {
	tracker *client.Client // runs, experiments, events, checkpoints
	logs    *client.Client // output and GPU samples
	opts    client.Options
}

// connectRun makes the launcher's clients. The tracker keeps the client's
// long retries (a job is not given up for a server restarting), but says
// at once that it is retrying; the shipper and the GPU sampler's agent
// retry on their own, with their own messages.
func (m *Main) connectRun(cfg *RunConfig) (runClients, error) {
	getenv := m.Getenv
	copts := client.Options{
		Token: getenv("MLFLOW_TRACKING_TOKEN"), Username: getenv("MLFLOW_TRACKING_USERNAME"), Password: getenv("MLFLOW_TRACKING_PASSWORD"),
		InsecureTLS: strings.EqualFold(getenv("MLFLOW_TRACKING_INSECURE_TLS"), "true"), UserAgent: "sextant-run/" + version,
	}
	topts := copts
	if !cfg.Quiet {
		topts.Unreachable = m.sayUnreachable(cfg.TrackingURI)
	}
	tracker, err := client.New(cfg.TrackingURI, topts)
	if err != nil {
		return runClients{}, &exitError{code: 2, err: &ConfigError{"server", errs.MessageOf(err)}}
	}
	lopts := copts
	lopts.RetryFor = -1
	logs, err := client.New(cfg.TrackingURI, lopts)
	if err != nil {
		return runClients{}, &exitError{code: 2, err: err}
	}
	return runClients{tracker: tracker, logs: logs, opts: copts}, nil
}

// runLaunch is what `sextant run` worked out before launching.
type runLaunch struct {
	command    []string
	resumeFrom string
	job        launcher.Job
	conn       runClients
	user       string
	experiment string
	signals    <-chan os.Signal
}

// launchOptions copies the configuration and what was worked out from it
// into the launcher's Options; the launcher never sees RunConfig.
func (m *Main) launchOptions(cfg *RunConfig, r runLaunch) launcher.Options {
	messages := m.Stderr
	if cfg.Quiet {
		messages = nil
	}
	return launcher.Options{
		Command: r.command, Env: os.Environ(), Stdin: os.Stdin, Stdout: m.Stdout, Stderr: m.Stderr, Messages: messages,
		Tracker: r.conn.tracker, Logs: r.conn.logs, TrackingURI: r.conn.tracker.URL(),
		Token: r.conn.opts.Token, Username: r.conn.opts.Username, Password: r.conn.opts.Password,
		Experiment: r.experiment, ExperimentExplicit: cfg.Experiment != "" || m.Getenv("MLFLOW_EXPERIMENT_NAME") != "",
		RunName: cfg.RunName, User: r.user, Resume: cfg.Resume, Job: r.job,
		ResumeFrom: r.resumeFrom, Events: r.conn.tracker, Checkpoints: r.conn.tracker,
		Grace: cfg.Grace, Drain: cfg.Drain, FlushInterval: cfg.Flush, PartialAfter: cfg.PartialAfter,
		MemoryBytes: cfg.MemoryMaxBytes, SpoolBytes: cfg.SpoolMaxBytes, SpoolDir: cfg.SpoolDir, PipeOutput: cfg.OutputPipes, Nice: cfg.Nice,
		DeliverTimeout: cfg.DeliverTimeout, JoinTimeout: cfg.JoinTimeout, RankPrefix: cfg.rankPrefix(r.command, r.job),
		Signals: r.signals, HangAfter: cfg.HangAfter,
		Sampler: &launcher.GPUSampler{
			Source: cfg.GPUSource, NVML: nvml.Open, Interval: cfg.GPUInterval, Node: cfg.GPUNode, Sink: r.conn.logs.GPUSink(),
			SpoolDir: cfg.SpoolDir, NumNodes: r.job.NNodes, Logger: launcher.GPULogger(messages),
		},
	}
}

// reportRun turns the launch's result into the command's: the job's exit
// code, and one line saying how the job ended and what the run became
// (main prints it for a non-zero exit; here it is printed unless quiet).
func (m *Main) reportRun(cfg *RunConfig, prog string, res launcher.Result, err error) error {
	if err != nil {
		return &exitError{code: max(res.ExitCode, 1), err: err}
	}
	line := closingLine(prog, res)
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode, err: errors.New(line)}
	}
	if !cfg.Quiet {
		fmt.Fprintln(m.Stderr, "sextant: "+line)
	}
	return nil
}

// closingLine says how the job ended and the run's status.
func closingLine(prog string, res launcher.Result) string {
	what := fmt.Sprintf("exited with code %d", res.ExitCode)
	if res.Signal != "" {
		what = fmt.Sprintf("ended by %s (exit code %d)", res.Signal, res.ExitCode)
	}
	return fmt.Sprintf("%s %s; run %s is %s", path.Base(prog), what, res.RunID, res.Status)
}

// whoIsLoggedIn asks the server who the credentials belong to and whether
// it is multi-user. In single-user mode, and against a server without the
// route (MLflow's), the user is MLFLOW_TRACKING_USERNAME, else the
// operating system's user.
func whoIsLoggedIn(ctx context.Context, cl *client.Client, getenv func(string) string) (user string, multiUser bool, err error) {
	id, err := cl.WhoAmI(ctx)
	switch {
	case err == nil && id.MultiUser:
		return id.Email, true, nil
	case err == nil, errs.CodeOf(err) == errs.NotFound:
	case errs.CodeOf(err) == errs.Unauthenticated:
		return "", false, fmt.Errorf("the server at %s refused the credentials: %s", cl.URL(), errs.MessageOf(err))
	default:
		return "", false, fmt.Errorf("ask the server who is signed in: %w", err)
	}
	if u := getenv("MLFLOW_TRACKING_USERNAME"); u != "" {
		return u, false, nil
	}
	return osUser(getenv), false, nil
}

// osUser names the user running the launcher.
func osUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return "unknown"
}
