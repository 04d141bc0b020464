package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpOfEveryCommand runs -h and --help on every command and
// subcommand of the command table (the table the dispatcher uses, so a new
// command is tested without being listed here): each exits 0 and prints,
// on stdout, a usage line naming the command and at least one example,
// and its Environment section lists every variable of the command's
// entry and every variable the command read while it set up its flags
// (SEXTANT_* ones through a SEXTANT_<FLAG> line); a command with
// --server, which defaults to $MLFLOW_TRACKING_URI, lists that.
func TestHelpOfEveryCommand(t *testing.T) {
	var walk func(path []string, cmds []*command)
	n := 0
	walk = func(path []string, cmds []*command) {
		for _, c := range cmds {
			p := append(path[:len(path):len(path)], c.name)
			for _, flag := range []string{"-h", "--help"} {
				name := strings.Join(p, "_") + flag
				t.Run(name, func(t *testing.T) {
					var out, errb bytes.Buffer
					read := map[string]bool{}
					m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { read[k] = true; return "" }}
					err := m.Run(t.Context(), append(p[:len(p):len(p)], flag))
					if code := exitCode(err); err != nil && code != 0 {
						t.Fatalf("sextant %s %s: exit %d (%v)\nstderr: %s", strings.Join(p, " "), flag, code, err, errb.String())
					}
					help := out.String()
					if !strings.HasPrefix(help, "Usage:\n  sextant "+strings.Join(p, " ")) {
						t.Fatalf("no usage line for sextant %s:\n%s", strings.Join(p, " "), help)
					}
					_, examples, ok := strings.Cut(help, "\nExamples:\n")
					if !ok || !strings.Contains(examples, "sextant "+p[0]) {
						t.Fatalf("no example of sextant %s:\n%s", strings.Join(p, " "), help)
					}
					if len(c.env) > 0 && !strings.Contains(help, "\nEnvironment:\n  "+c.env[0].name) {
						t.Fatalf("the environment variables are not listed:\n%s", help)
					}
					listed := helpEnv(help)
					for _, e := range c.env {
						for _, name := range strings.Split(e.name, ", ") {
							if !listed[name] {
								t.Errorf("the help does not list %s, a variable of the command's entry:\n%s", name, help)
							}
						}
					}
					for name := range read {
						if !listed[name] && !(strings.HasPrefix(name, "SEXTANT_") && listed["SEXTANT_<FLAG>"]) {
							t.Errorf("sextant %s reads %s but its help does not list it:\n%s", strings.Join(p, " "), name, help)
						}
					}
					if (read["MLFLOW_TRACKING_URI"] || strings.Contains(help, "\n  -server ")) && !listed["MLFLOW_TRACKING_URI"] {
						t.Errorf("sextant %s takes its server from MLFLOW_TRACKING_URI but its help does not list it:\n%s", strings.Join(p, " "), help)
					}
				})
				n++
			}
			walk(p, c.subs)
		}
	}
	walk(nil, commands())
	if n < 2*30 {
		t.Fatalf("only %d help runs: is the command table complete?", n)
	}
	// The top level, and "help COMMAND".
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"help", "users", "add"}} {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		if err := m.Run(t.Context(), args); err != nil && exitCode(err) != 0 {
			t.Fatalf("sextant %v: %v", args, err)
		}
		if !strings.Contains(out.String(), "Usage:") || !strings.Contains(out.String(), "Examples:") {
			t.Fatalf("sextant %v:\n%s", args, out.String())
		}
	}
}

// helpEnv returns the variables a help's Environment section lists: the
// first column of each line, where one line may name several ("A, B").
func helpEnv(help string) map[string]bool {
	out := map[string]bool{}
	_, section, ok := strings.Cut(help, "\nEnvironment:\n")
	if !ok {
		return out
	}
	section, _, _ = strings.Cut(section, "\n\n")
	for _, line := range strings.Split(section, "\n") {
		names, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		for _, n := range strings.Split(names, ", ") {
			if n != "" {
				out[n] = true
			}
		}
	}
	return out
}

// TestUsageErrors: a command line that makes no sense exits 2 and says
// what is wrong once, with where to look.
func TestUsageErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"NoCommand":         {nil, "give a command"},
		"UnknownCommand":    {[]string{"frobnicate"}, `unknown command "frobnicate"`},
		"NoSubcommand":      {[]string{"users"}, "users: give a command (add, list"},
		"UnknownSubcommand": {[]string{"ckpt", "rm"}, `ckpt: unknown command "rm"`},
		"UnknownFlag":       {[]string{"users", "add", "--bogus", "a@b.c"}, "users add: flag provided but not defined: -bogus (see 'sextant users add -h')"},
		"MissingArgument":   {[]string{"perms", "set", "experiment:1"}, "perms set takes 3 argument(s), got 1"},
		"BadFlagValue":      {[]string{"runs", "ls", "--limit", "x"}, `invalid value "x" for flag -limit`},
		"ImportNeedsFrom":   {[]string{"import"}, "--from is required"},
		"NotAVolumePath":    {[]string{"ckpt", "ls", "/tmp/x"}, "takes one /Volumes path"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
			err := m.Run(t.Context(), tc.args)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got exit %d, %v; want exit 2 and %q", exitCode(err), err, tc.want)
			}
			if strings.Contains(errb.String(), tc.want) {
				t.Fatalf("the error is printed twice: once on stderr, once by main:\n%s", errb.String())
			}
		})
	}
}

// TestImportAndMigrateListOnlyTheirFlags: the storage commands take the
// server's storage flags, not its listening, authentication or limit ones.
func TestImportAndMigrateListOnlyTheirFlags(t *testing.T) {
	for cmd, tc := range map[string]struct{ want, not []string }{
		"import":  {want: []string{"-from", "-data-dir", "-db", "-blob-store", "-s3-bucket", "-log-level"}, not: []string{"-port", "-host", "-auth", "-max-params-per-run", "-gpu-retention", "-debug-addr"}},
		"migrate": {want: []string{"-data-dir", "-db", "-log-level"}, not: []string{"-port", "-auth", "-max-params-per-run", "-blob-store", "-s3-bucket"}},
		"server":  {want: []string{"-port", "-auth", "-max-params-per-run", "-data-dir", "-s3-bucket"}},
	} {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
		if err := m.Run(t.Context(), []string{cmd, "-h"}); err != nil && exitCode(err) != 0 {
			t.Fatal(err)
		}
		for _, f := range tc.want {
			if !strings.Contains(out.String(), "\n  "+f+" ") {
				t.Errorf("sextant %s -h does not list %s", cmd, f)
			}
		}
		for _, f := range tc.not {
			if strings.Contains(out.String(), "\n  "+f+" ") {
				t.Errorf("sextant %s -h lists %s, a flag of the server only", cmd, f)
			}
		}
	}
}
