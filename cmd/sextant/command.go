package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// command is one entry of the command table (commands in main.go): a
// command, or a subcommand of a group such as "users add". The dispatcher
// finds commands in the table, and so does the test that runs -h on every
// one of them; help is printed from the entry, the same way for all.
type command struct {
	name    string
	summary string // one line, for the parent's list of commands
	// usage holds the synopsis lines, each starting with "sextant ".
	usage []string
	about string // what the command does, a paragraph or two
	// env names the environment variables the command reads.
	env []envVar
	// examples are command lines a user can copy, with a comment where
	// it helps.
	examples []string
	// subs are the subcommands of a group; a group has no run.
	subs []*command
	// run runs a leaf command with its flag set (named and with its
	// Usage set from this entry): it defines its flags on fs and parses
	// args with it. -h or --help makes fs.Parse return flag.ErrHelp after
	// printing the help, which exits 0.
	run func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error
}

// envVar is an environment variable a command reads.
type envVar struct{ name, what string }

// The variables of the client commands, which talk to a server the way the
// mlflow client does.
var (
	envServer = envVar{"MLFLOW_TRACKING_URI", "the server, as for the mlflow client (default " + defaultServer + "); --server wins over it"}
	envToken  = envVar{"MLFLOW_TRACKING_TOKEN", "a personal access token (sextant tokens create), sent as a bearer token"}
	envUser   = envVar{"MLFLOW_TRACKING_USERNAME", "with MLFLOW_TRACKING_PASSWORD: sign in with an email and password (HTTP Basic)"}
	envPass   = envVar{"MLFLOW_TRACKING_PASSWORD", "the password of MLFLOW_TRACKING_USERNAME"}
	envTLS    = envVar{"MLFLOW_TRACKING_INSECURE_TLS", "true: do not verify the server's TLS certificate"}
	clientEnv = []envVar{envServer, envToken, envUser, envPass, envTLS}
)

// defaultServer is the server the client commands use when neither
// --server nor MLFLOW_TRACKING_URI names one: `sextant server`'s default
// address.
const defaultServer = "http://127.0.0.1:5000"

// usageError is a command line that does not make sense: exit code 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// dispatch runs the command args name in the table cmds; path is the
// command line so far ("sextant", "sextant users").
func (m *Main) dispatch(ctx context.Context, path string, cmds []*command, args []string) error {
	what := strings.TrimPrefix(path+": ", "sextant: ")
	if len(args) == 0 {
		return usageError("%sgive a command (%s); '%s -h' shows them", what, commandNames(cmds), path)
	}
	name, rest := args[0], args[1:]
	c := findCommand(cmds, name)
	if c == nil {
		return usageError("%sunknown command %q (%s); '%s -h' shows them", what, name, commandNames(cmds), path)
	}
	full := path + " " + c.name
	short := strings.TrimPrefix(full, "sextant ") // errors are printed after "sextant: "
	if len(c.subs) > 0 {
		if len(rest) > 0 && isHelpArg(rest[0]) {
			printGroupHelp(m.Stdout, full, c)
			return nil
		}
		if len(rest) == 0 {
			printGroupHelp(m.Stderr, full, c)
		}
		return m.dispatch(ctx, full, c.subs, rest)
	}
	fs := flag.NewFlagSet(short, flag.ContinueOnError)
	// The flag package's own messages are dropped: help, when asked for,
	// goes to stdout, and a parse error is returned once, with a hint.
	fs.SetOutput(io.Discard)
	usageShown := false
	fs.Usage = func() {
		usageShown = true
		if wantsHelp(rest) {
			printHelp(m.Stdout, c, fs)
		}
	}
	err := c.run(ctx, m, fs, rest)
	var ee *exitError
	if err != nil && usageShown && !errors.Is(err, flag.ErrHelp) && !errors.As(err, &ee) {
		// fs.Parse failed: an unknown flag or a bad value.
		return usageError("%s: %v (see '%s -h')", short, err, full)
	}
	return err
}

func findCommand(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

func commandNames(cmds []*command) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func isHelpArg(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

// wantsHelp reports whether a command line asks for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// printHelp prints a leaf command's help: usage, description, flags,
// environment, examples.
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintln(w, "Usage:")
	for _, u := range c.usage {
		fmt.Fprintln(w, "  "+u)
	}
	if c.about != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.TrimSpace(c.about))
	}
	if fs != nil && hasFlags(fs) {
		fmt.Fprintln(w, "\nFlags:")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	printEnv(w, c.env)
	printExamples(w, c.examples)
}

// printGroupHelp prints a group's help: its subcommands and examples.
func printGroupHelp(w io.Writer, path string, c *command) {
	fmt.Fprintln(w, "Usage:")
	for _, u := range c.usage {
		fmt.Fprintln(w, "  "+u)
	}
	if c.about != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.TrimSpace(c.about))
	}
	fmt.Fprintln(w, "\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range c.subs {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun '%s <command> -h' for the flags of a command.\n", path)
	printEnv(w, c.env)
	printExamples(w, c.examples)
}

func printEnv(w io.Writer, env []envVar) {
	if len(env) == 0 {
		return
	}
	fmt.Fprintln(w, "\nEnvironment:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range env {
		fmt.Fprintf(tw, "  %s\t%s\n", e.name, e.what)
	}
	tw.Flush()
}

func printExamples(w io.Writer, examples []string) {
	if len(examples) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, e := range examples {
		fmt.Fprintln(w, "  "+e)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// serverFlag defines --server, the server of a client command: the flag,
// else MLFLOW_TRACKING_URI, else defaultServer. Every command that talks
// to a server takes it under this name.
func serverFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	def := getenv("MLFLOW_TRACKING_URI")
	if def == "" {
		def = defaultServer
	}
	return fs.String("server", def, "the server's URL (from $MLFLOW_TRACKING_URI when set)")
}
