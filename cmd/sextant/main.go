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

// Run dispatches to a subcommand.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.usage()
		return flag.ErrHelp
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "server":
		return (&ServerCommand{main: m}).Run(ctx, rest)
	case "agent":
		return (&AgentCommand{main: m}).Run(ctx, rest)
	case "run":
		return (&RunCommand{main: m}).Run(ctx, rest)
	case "logs":
		return (&LogsCommand{main: m}).Run(ctx, rest)
	case "users":
		return (&UsersCommand{main: m}).Run(ctx, rest)
	case "tokens":
		return (&TokensCommand{main: m}).Run(ctx, rest)
	case "groups":
		return (&GroupsCommand{main: m}).Run(ctx, rest)
	case "perms":
		return (&PermsCommand{main: m}).Run(ctx, rest)
	case "mkdirs":
		return (&MkdirsCommand{main: m}).Run(ctx, rest)
	case "volumes":
		return (&VolumesCommand{main: m}).Run(ctx, rest)
	case "ckpt":
		return (&CkptCommand{main: m}).Run(ctx, rest)
	case "import":
		return (&ImportCommand{main: m}).Run(ctx, rest)
	case "migrate":
		return (&MigrateCommand{main: m}).Run(ctx, rest)
	case "version", "--version", "-version":
		fmt.Fprintf(m.Stdout, "sextant %s (MLflow REST API %s)\n", version, mlflowAPIVersion)
		return nil
	case "help", "-h", "--help":
		m.usage()
		return nil
	}
	m.usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func (m *Main) usage() {
	fmt.Fprint(m.Stderr, `Sextant: self-hosted experiment tracking and GPU-training observability.

Usage:
  sextant <command> [flags]

Commands:
  server    run the tracking server (MLflow-compatible REST API)
  agent     sample this node's GPUs and send them to the server
  run       run a training job in a run, keeping its output with the run
  logs      print, follow, search or save a run's output
  users     add, list, disable or enable users; change passwords
  tokens    create, list or revoke personal access tokens
  groups    create groups and manage their members
  perms     show, grant or revoke permissions on experiments and folders
  mkdirs    create a workspace folder
  volumes   create, list and delete catalogs, schemas and volumes; copy files to and from them
  ckpt      list, find the latest of, and clean up checkpoints in a volume
  import    copy an MLflow tracking database and its artifacts into Sextant
  migrate   apply pending schema migrations to the database and exit
  version   print the version

Run 'sextant <command> -h' for the flags of a command.
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
		return 2
	}
	return 1
}
