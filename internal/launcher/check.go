package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// CommandError is a command that cannot start, found before anything is
// created on the server. ExitCode is what `sextant run` exits with: 127 for
// a program that is not found, 126 for one that cannot be executed, 2 for a
// Python script that does not exist or a command that needs --experiment.
type CommandError struct {
	ExitCode int
	Msg      string
}

// Error implements error.
func (e *CommandError) Error() string { return e.Msg }

// CheckCommand checks, before any experiment or run is created, that argv
// can start, so that a typo leaves nothing behind on the server:
//
//   - the program is found (on $PATH for a bare name, else relative to dir,
//     "" meaning the working directory) and is an executable file;
//   - for a Python interpreter (python, python3.12, pypy3) running a script,
//     the script exists: Python would start, print "can't open file" and
//     exit 2, a FAILED run with nothing in it;
//   - a command without an entry point to name the experiment after
//     (`python -c CODE`, `python -`, a bare `python`) is given one:
//     experimentGiven says whether --experiment or MLFLOW_EXPERIMENT_NAME
//     (or a run to resume) decides the experiment.
//
// Programs run through a launcher (torchrun, accelerate) and shells are
// checked as programs only: their own arguments are theirs to judge.
func CheckCommand(argv []string, dir string, experimentGiven bool) error {
	if len(argv) == 0 {
		return &CommandError{ExitCode: 2, Msg: "no command to run: sextant run [flags] -- COMMAND [ARGS...]"}
	}
	prog := argv[0]
	if err := checkProgram(prog, dir); err != nil {
		return err
	}
	if !isPython(path.Base(prog)) {
		return nil
	}
	name, module, _ := pythonTarget(argv[1:])
	switch {
	case module:
		return nil
	case name == "" || name == "-":
		if experimentGiven {
			return nil
		}
		return &CommandError{ExitCode: 2, Msg: fmt.Sprintf(
			"%s: there is no script to name the experiment after (it would be /Users/<you>/python): "+
				"give --experiment NAME, or run a script (sextant run -- %s train.py)", strings.Join(argv, " "), prog)}
	}
	p := name
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	switch {
	case err == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(p, "__main__.py")); err == nil {
			return nil // python DIR runs DIR/__main__.py
		}
		return &CommandError{ExitCode: 2, Msg: fmt.Sprintf("cannot start %s %s: %s is a directory without __main__.py", prog, name, name)}
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &CommandError{ExitCode: 2, Msg: fmt.Sprintf("cannot start %s %s: there is no file %s (in %s)", prog, name, name, dirName(dir))}
	}
	return nil // unreadable: Python will say why
}

// checkProgram finds prog as the job's exec would.
func checkProgram(prog, dir string) error {
	if strings.ContainsRune(prog, '/') {
		p := prog
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &CommandError{ExitCode: 127, Msg: fmt.Sprintf("cannot start %s: there is no such file (in %s)", prog, dirName(dir))}
		case err != nil:
			return &CommandError{ExitCode: 126, Msg: fmt.Sprintf("cannot start %s: %v", prog, err)}
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return &CommandError{ExitCode: 126, Msg: fmt.Sprintf("cannot start %s: it is not an executable file (run it with its interpreter, e.g. sextant run -- python %s)", prog, prog)}
		}
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return &CommandError{ExitCode: 127, Msg: fmt.Sprintf("cannot start %s: no such program on $PATH", prog)}
		}
		return &CommandError{ExitCode: 126, Msg: fmt.Sprintf("cannot start %s: %v", prog, err)}
	}
	return nil
}

func dirName(dir string) string {
	if dir != "" {
		return dir
	}
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return "the working directory"
}
