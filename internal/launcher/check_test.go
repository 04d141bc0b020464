package launcher_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sextant/sextant/internal/launcher"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		argv     []string
		given    bool
		wantCode int // 0: accepted
	}{
		"OK":                     {argv: []string{"sh", "-c", "exit 0"}},
		"OKScript":               {argv: []string{"python3", "-u", "train.py", "--epochs", "3"}},
		"OKModule":               {argv: []string{"python3", "-m", "pkg.train"}},
		"OKInlineWithExperiment": {argv: []string{"python3", "-c", "print(1)"}, given: true},
		"OKClusteredModule":      {argv: []string{"python3", "-um", "pkg.train"}},
		"OKClusteredModuleGlued": {argv: []string{"python3", "-Bmpkg.train"}},
		"OKClusteredInline":      {argv: []string{"python3", "-uc", "print(1)"}, given: true},
		"OKWarningGlued":         {argv: []string{"python3", "-Wignore", "train.py"}},
		"ErrClusteredScript":     {argv: []string{"python3", "-uB", "nope.py"}, wantCode: 2},
		"ErrProgramNotFound":     {argv: []string{"pythn", "train.py"}, wantCode: 127},
		"ErrPathNotFound":        {argv: []string{"./nope.sh"}, wantCode: 127},
		"ErrNotExecutable":       {argv: []string{"./run.sh"}, wantCode: 126},
		"ErrScriptNotFound":      {argv: []string{"python3", "nope.py"}, wantCode: 2},
		"ErrScriptAfterOptions":  {argv: []string{"python3", "-W", "ignore", "-u", "nope.py"}, wantCode: 2},
		"ErrDirWithoutMain":      {argv: []string{"python3", "pkg"}, wantCode: 2},
		"ErrInlineNoExperiment":  {argv: []string{"python3", "-c", "print(1)"}, wantCode: 2},
		"ErrBarePython":          {argv: []string{"python3"}, wantCode: 2},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.argv[0] == "python3" {
				if _, err := os.Stat("/usr/bin/python3"); err != nil {
					tc.argv[0] = "sh" // the checks of Python's arguments need no Python, but the lookup does
					if tc.wantCode == 0 || tc.wantCode == 2 {
						t.Skip("no python3 on this machine")
					}
				}
			}
			err := launcher.CheckCommand(tc.argv, dir, tc.given)
			var ce *launcher.CommandError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantCode != 0 && (!errors.As(err, &ce) || ce.ExitCode != tc.wantCode):
				t.Fatalf("got %v, want a CommandError with exit code %d", err, tc.wantCode)
			}
		})
	}
}
