// Command sextant is the Sextant binary: the tracking server and the
// client commands, one subcommand each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// mlflowAPIVersion is the MLflow version whose REST API the server speaks;
// /version reports it because mlflow clients compare it with their own.
const mlflowAPIVersion = "3.7.0"

func main() {
	// The first signal cancels ctx and starts a graceful shutdown; a second
	// one kills the process (the default behaviour once stop is called).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sextant:", err)
		}
		os.Exit(exitCode(err))
	}
}

// Main is the program, separated from process globals so that tests can
// run it in-process.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment; tests replace it.
	Getenv func(string) string
	// Ready, when set, receives the server's address once it listens.
	Ready func(addr string)
}

// Run dispatches to a command of the table.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.usage(m.Stderr)
		return usageError("give a command; 'sextant -h' lists them")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			// sextant help users add == sextant users add -h
			return m.Run(ctx, append(args[1:len(args):len(args)], "-h"))
		}
		m.usage(m.Stdout)
		return nil
	case "--version", "-version":
		args = []string{"version"}
	}
	return m.dispatch(ctx, "sextant", commands(), args)
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprint(w, `Sextant: self-hosted experiment tracking and GPU-training observability.

Usage:
  sextant <command> [flags]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Run 'sextant <command> -h' for a command's flags, environment and examples.

Examples:
  sextant server                               # the server on http://127.0.0.1:5000, data in ./sextant-data
  sextant run -- python train.py               # a training job in a run, its output kept with the run
  sextant runs ls                              # the newest runs
  sextant logs --last -f                       # follow the output of your newest run
`)
}

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h or --help: the help was asked for and printed
	}
	return 1
}

// commands is the command table: the dispatcher finds commands in it, the
// help is printed from it, and TestHelpOfEveryCommand runs -h on every
// entry.
func commands() []*command {
	storageEnv := []envVar{
		{"SEXTANT_<FLAG>", "every flag, upper case with _ for -, e.g. SEXTANT_DATA_DIR, SEXTANT_DB; a flag wins"},
		{"AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY", "S3 credentials when --s3-access-key and --s3-secret-key are not given"},
	}
	return []*command{
		{
			name: "server", summary: "run the tracking server (MLflow-compatible REST API, web UI)",
			usage: []string{"sextant server [flags]"},
			about: "Runs the tracking server: the MLflow REST API, Sextant's own API and the web UI. It prints its\nconfiguration and the data directory or database it uses at start, and stops cleanly on SIGINT or\nSIGTERM. See README.md (Configuration) and docs/deploy.md.",
			env:   storageEnv,
			examples: []string{
				"sextant server                                   # http://127.0.0.1:5000, data in ./sextant-data",
				"sextant server --host 0.0.0.0 --data-dir /srv/sextant   # authentication on (not loopback)",
				"SEXTANT_DB=postgres://sextant:pw@db:5432/sextant sextant server",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&ServerCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "agent", summary: "sample this node's GPUs and send them to the server",
			usage: []string{"sextant agent [flags]"},
			about: "Samples this node's GPUs every --interval and sends the samples to the server, which keeps\ntwo hours of history for the GPU pane and, with --run-id, logs them to the run as MLflow system\nmetrics. While the server is unreachable the samples wait in --spool-dir and are sent in order\nlater. Every flag but --server can also be set as SEXTANT_<FLAG>. See docs/gpu.md.",
			env: append([]envVar{
				{"SEXTANT_<FLAG>", "every flag but --server, e.g. SEXTANT_NODE, SEXTANT_INTERVAL; a flag wins"},
				{"MLFLOW_RUN_ID", "the run of --run-id"},
				{"NODE_RANK, GROUP_RANK, SLURM_NODEID", "the node's rank (--node-rank)"},
				{"SLURM_JOB_NUM_NODES, SLURM_NNODES", "the number of nodes (--num-nodes)"},
				{"CUDA_VISIBLE_DEVICES", "the GPUs to report (--gpus)"},
			}, clientEnv[:4]...),
			examples: []string{
				"sextant agent --server http://head:5000         # samples every 10 s",
				"sextant agent --once --gpu-source sim:2          # one sample as JSON, no server needed",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&AgentCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "run", summary: "run a training job in a run, keeping its output with the run",
			usage: []string{"sextant run [flags] -- COMMAND [ARGS...]"},
			about: runAbout,
			env: append(clientEnv[:len(clientEnv):len(clientEnv)],
				envVar{"MLFLOW_EXPERIMENT_NAME", "the experiment (--experiment wins)"},
				envVar{"MLFLOW_RUN_ID", "resume this run (--resume wins)"},
				envVar{"SEXTANT_NODE", "this node's name in the GPU pane (--node)"},
				envVar{"NODE_RANK, GROUP_RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE", "the job's layout, as torchrun sets them"},
				envVar{"TORCHELASTIC_RUN_ID, SLURM_JOB_ID, SLURM_STEP_ID, SLURM_NODEID, SLURM_NNODES", "the job id and layout under torchrun or SLURM"},
				envVar{"CUDA_VISIBLE_DEVICES", "the GPUs the job can see, which are sampled"},
			),
			examples: []string{
				"sextant run -- python train.py --lr 3e-4      # experiment /Users/<you>/train",
				"sextant run --experiment /Shared/llm --run-name sft-1 -- torchrun --nproc-per-node 8 sft.py",
				"sextant run --resume 3f9a...c2 -- python train.py",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&RunCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "logs", summary: "print, follow, search or save a run's output",
			usage: []string{"sextant logs [flags] RUN_ID | RUN_NAME", "sextant logs [flags] --last"},
			about: "Prints the output `sextant run` captured for a run, as the job printed it. The run is given by\nits id or its name (the newest run of that name, with --experiment: in that experiment), or --last:\nyour newest run (on a multi-user server the newest you started; in single-user mode the newest of\nall). With -f it keeps printing new lines until the run ends. --save-artifact stores the log as the\nrun's artifact logs/<name>.txt instead of printing it. See docs/run.md.",
			env:   clientEnv,
			examples: []string{
				"sextant logs --last -f                          # follow your newest run",
				"sextant logs jobTaskRun-x7k2p --grep 'NaN|Traceback'",
				"sextant logs 3f9a...c2 --node 1 --since 10m",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&LogsCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "runs", summary: "list runs; end one left running",
			usage: []string{"sextant runs <command> [flags]"},
			env:   clientEnv,
			examples: []string{
				"sextant runs ls --status RUNNING",
				"sextant runs end 3f9a...c2",
			},
			subs: []*command{
				{
					name: "ls", summary: "list the newest runs: name, id, status, start, duration, metrics",
					usage: []string{"sextant runs ls [--experiment PATH] [--status STATUS] [--limit N]"},
					about: "Lists runs, newest first: their name, id, status, start time, duration and their first\nmetrics' latest values. Without --experiment, the runs of every experiment you can read.",
					env:   clientEnv,
					examples: []string{
						"sextant runs ls",
						"sextant runs ls --experiment /Users/alice@example.com/train --status FAILED --limit 5",
					},
					run: runsLs,
				},
				{
					name: "end", summary: "end a run left RUNNING by a job that died without ending it",
					usage: []string{"sextant runs end RUN [--status KILLED|FAILED|FINISHED] [--experiment PATH]"},
					about: "Ends a RUNNING run (its id, or its name: the newest run of that name) with a status (KILLED\nunless --status says otherwise) and the end time now, as the job would have had it ended the run\nitself. A run that has ended already is left as it is.",
					env:   clientEnv,
					examples: []string{
						"sextant runs ls --status RUNNING",
						"sextant runs end 3f9a...c2",
						"sextant runs end sft-1 --experiment /Shared/llm --status FAILED",
					},
					run: runsEnd,
				},
			},
		},
		nodesCommand(),
		{
			name: "users", summary: "add, list, disable or enable users; change passwords",
			usage: []string{"sextant users <command> [flags]"},
			about: "Manages the users of a multi-user server (see docs/auth.md). `users add --data-dir DIR` creates\na user directly in a data directory, the first administrator before the server runs.",
			env:   clientEnv,
			examples: []string{
				"echo 'a long password' | sextant users add admin@example.com --admin --data-dir sextant-data",
				"sextant users list",
			},
			subs: usersCommands(),
		},
		{
			name: "tokens", summary: "create, list or revoke personal access tokens",
			usage: []string{"sextant tokens <command> [flags]"},
			about: "Manages your personal access tokens: the client sends one as MLFLOW_TRACKING_TOKEN.",
			env:   clientEnv,
			examples: []string{
				"sextant tokens create laptop --lifetime 2160h",
				"sextant tokens list",
			},
			subs: tokensCommands(),
		},
		{
			name: "groups", summary: "create groups and manage their members",
			usage: []string{"sextant groups <command> [flags]"},
			env:   clientEnv,
			examples: []string{
				"sextant groups create vision && sextant groups add vision bob@example.com",
			},
			subs: groupsCommands(),
		},
		{
			name: "perms", summary: "show, grant or revoke permissions on experiments, folders and volumes",
			usage: []string{"sextant perms <command> [flags]"},
			about: permsAbout,
			env:   clientEnv,
			examples: []string{
				"sextant perms set folder:/Shared/vision group:vision CAN_EDIT",
				"sextant perms get experiment:12",
			},
			subs: permsCommands(),
		},
		{
			name: "mkdirs", summary: "create a workspace folder and its missing parents",
			usage: []string{"sextant mkdirs PATH"},
			about: "Creates a workspace folder and its missing parents, like mkdir -p, and says whether it was created.",
			env:   clientEnv,
			examples: []string{
				"sextant mkdirs /Users/alice@example.com/mnist",
				"sextant mkdirs /Shared/vision",
			},
			run: mkdirs,
		},
		{
			name: "volumes", summary: "create, list and delete catalogs, schemas and volumes; copy files to and from them",
			usage: []string{"sextant volumes <command> [flags]"},
			about: "Catalogs, schemas and volumes (CATALOG.SCHEMA.VOLUME), and the files in volumes\n(/Volumes/CATALOG/SCHEMA/VOLUME/...). See docs/volumes.md.",
			env:   clientEnv,
			examples: []string{
				"sextant volumes create main.vision.ckpt -p",
				"sextant volumes cp -r ./data /Volumes/main/vision/ckpt/data",
			},
			subs: volumesCommands(),
		},
		{
			name: "ckpt", summary: "list, find the latest of, and clean up checkpoints in a volume",
			usage: []string{"sextant ckpt <command> [flags]"},
			about: "Inspects and cleans up the PyTorch Distributed Checkpoints in a volume directory: one\nsubdirectory per checkpoint, complete when its .metadata exists (the writer uploads it last).\nCheckpoints are ordered by the number ending their names (step_100) when every one has one,\nelse by time.",
			env:   clientEnv,
			examples: []string{
				"sextant ckpt ls /Volumes/main/vision/ckpt",
				"sextant ckpt gc /Volumes/main/vision/ckpt --keep-last 3 --dry-run",
			},
			subs: ckptCommands(),
		},
		{
			name: "import", summary: "copy an MLflow tracking database and its artifacts into Sextant",
			usage: []string{"sextant import --from DATABASE_URL [--artifacts DIR] [--data-dir DIR | --db URL] [flags]"},
			about: importAbout,
			env:   storageEnv,
			examples: []string{
				"sextant import --from sqlite:///mlflow.db --artifacts ./mlartifacts --data-dir sextant-data",
				"sextant import --from postgresql://mlflow:pw@db/mlflow --db postgres://sextant:pw@db/sextant --skip-existing",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&ImportCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "migrate", summary: "apply pending schema migrations to the database and exit",
			usage: []string{"sextant migrate [--data-dir DIR | --db URL]"},
			about: "Applies pending schema migrations to the database the server would use, prints which one\nand its schema versions, and exits. Run it before rolling a new version out to several replicas\n(each server also migrates on start, one at a time).",
			env:   storageEnv[:1],
			examples: []string{
				"sextant migrate --data-dir sextant-data",
				"SEXTANT_DB=postgres://sextant:pw@db:5432/sextant sextant migrate",
			},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				return (&MigrateCommand{main: m}).Run(ctx, fs, args)
			},
		},
		{
			name: "version", summary: "print the version",
			usage:    []string{"sextant version"},
			examples: []string{"sextant version"},
			run: func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
				if err := fs.Parse(args); err != nil {
					return err
				}
				if fs.NArg() > 0 {
					return usageError("version takes no arguments")
				}
				fmt.Fprintf(m.Stdout, "sextant %s (MLflow REST API %s)\n", version, mlflowAPIVersion)
				return nil
			},
		},
	}
}
