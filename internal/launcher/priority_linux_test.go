package launcher_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/launcher"
)

// TestLauncherYieldsCPUToJob runs the launcher in a child test process
// (it lowers the priority of its whole process) with Nice 3: the job keeps
// the priority the launcher started with, every thread of the launcher is
// 3 levels below while the job runs and runs Go code on at most 2 cores,
// leaving one to the job, and (as root) has its priority back after the
// run; with pipes the launcher does not yield.
func TestLauncherYieldsCPUToJob(t *testing.T) {
	if mode := os.Getenv("SEXTANT_TEST_YIELD"); mode != "" {
		f := newFakeServer()
		// The job prints its own nice, then its launcher's threads' (its
		// parent's) while it runs; after the run the launcher's threads
		// have their priority back.
		// The launcher lowers its threads just after starting the job: with
		// files, the job waits (up to 20 s) until none of them is at its own
		// nice any more before it looks, so a busy machine that runs the job
		// first does not fail the test; a launcher that never yields still
		// does, after the wait.
		job := `awk '{print $19}' /proc/self/stat; for s in /proc/$PPID/task/*/stat; do awk '{print "t", $19}' "$s"; done`
		if mode == "files" {
			job = `b=$(awk '{print $19}' /proc/self/stat); i=0; while [ $i -lt 400 ]; do ` +
				`n=$(cat /proc/$PPID/task/*/stat 2>/dev/null | awk -v b="$b" '$19 == b' | wc -l); ` +
				`[ "$n" -eq 0 ] && break; sleep 0.05; i=$((i+1)); done; ` + job
		}
		l := launch(t, f, []string{"sh", "-c", job}, func(o *launcher.Options) {
			o.Nice, o.PipeOutput = 3, mode == "pipes"
		})
		if l.err != nil {
			t.Fatal(l.err)
		}
		lines := strings.Split(strings.TrimSpace(l.stdout.String()), "\n")
		var during []string
		for _, ln := range lines[1:] {
			during = append(during, strings.TrimPrefix(ln, "t "))
		}
		fmt.Printf("job=%s launcher=%s after=%s procs=%d\n", lines[0], strings.Join(during, ","), strings.Join(threadNices(t), ","), runtime.GOMAXPROCS(0))
		return
	}
	base, procs := nice(t, "/proc/self/stat"), runtime.GOMAXPROCS(0)
	for _, mode := range []string{"files", "pipes"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLauncherYieldsCPUToJob$", "-test.v")
		cmd.Env = append(os.Environ(), "SEXTANT_TEST_YIELD="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		m := regexp.MustCompile(`job=(-?\d+) launcher=([-\d,]+) after=([-\d,]+) procs=(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no result in\n%s", mode, out)
		}
		want, wantProcs := min(base+3, 19), max(1, min(2, runtime.NumCPU()-1))
		if mode == "pipes" || os.Getenv("GOMAXPROCS") != "" {
			wantProcs = procs
		}
		if mode == "pipes" {
			want = base
		}
		if got, _ := strconv.Atoi(string(m[4])); got != wantProcs {
			t.Errorf("%s: the launcher ran Go code on %d cores, want %d", mode, got, wantProcs)
		}
		if job, _ := strconv.Atoi(string(m[1])); job != base {
			t.Errorf("%s: the job ran at nice %d, want the launcher's own %d", mode, job, base)
		}
		for n := range strings.SplitSeq(string(m[2]), ",") {
			if got, _ := strconv.Atoi(n); got != want {
				t.Errorf("%s: launcher threads at nice %s while the job ran, want all %d", mode, m[2], want)
				break
			}
		}
		// Root may raise a priority again: the launcher gives it back.
		if os.Geteuid() == 0 {
			for n := range strings.SplitSeq(string(m[3]), ",") {
				if got, _ := strconv.Atoi(n); got != base {
					t.Errorf("%s: launcher threads at nice %s after the run, want all %d back", mode, m[3], base)
					break
				}
			}
		}
	}
}

// nice reads the nice value from a /proc stat file (field 19; the command
// name in field 2 is in parentheses and may hold spaces).
func nice(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func threadNices(t *testing.T) []string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		out = append(out, strconv.Itoa(nice(t, "/proc/self/task/"+task.Name()+"/stat")))
	}
	return out
}
