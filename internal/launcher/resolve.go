package launcher

import (
	"crypto/rand"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/workspace"
)

// EntryPoint names a job's entry point the way the managed runtime does:
// the script's base name without its extension. For `python train.py`
// and `torchrun --nproc-per-node 8 train.py` it is "train"; for
// `python -m pkg.mod` it is "mod"; for `bash run.sh` it is "run"; for any
// other program, the program's name.
func EntryPoint(argv []string) string {
	if len(argv) == 0 {
		return "job"
	}
	prog := path.Base(argv[0])
	rest := argv[1:]
	switch {
	case isPython(prog):
		name, module, tail := pythonTarget(rest)
		if module && isTorchrunModule(name) {
			return launcherTarget(tail)
		}
		if module {
			return lastDotted(name)
		}
		if name != "" {
			return stem(name)
		}
		return "python"
	case isLauncher(prog):
		return launcherTarget(rest)
	case isShell(prog):
		for _, a := range rest {
			if !strings.HasPrefix(a, "-") {
				return stem(a)
			}
		}
	}
	return stem(prog)
}

func isPython(prog string) bool {
	return prog == "python" || prog == "pythonw" || prog == "pypy3" ||
		strings.HasPrefix(prog, "python") && strings.Trim(prog[len("python"):], "0123456789.") == ""
}

func isLauncher(prog string) bool {
	switch prog {
	case "torchrun", "accelerate", "deepspeed", "lightning", "composer", "mpirun", "srun":
		return true
	}
	return false
}

func isShell(prog string) bool {
	switch prog {
	case "sh", "bash", "zsh", "dash":
		return true
	}
	return false
}

func isTorchrunModule(m string) bool {
	return m == "torch.distributed.run" || m == "torch.distributed.launch"
}

// pythonTarget finds what `python ARGS` runs: a script (module false), a
// module (-m), or "" for -c and the REPL; tail is what follows it.
func pythonTarget(args []string) (name string, module bool, tail []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args):
			return args[i+1], true, args[i+2:]
		case strings.HasPrefix(a, "-m") && len(a) > 2:
			return a[2:], true, args[i+1:]
		case a == "-c" || strings.HasPrefix(a, "-c"):
			return "", false, nil
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++ // takes a value
		case a == "-" || !strings.HasPrefix(a, "-"):
			return a, false, args[i+1:]
		}
	}
	return "", false, nil
}

// torchrun's options that take no value; every other --option does,
// unless written --option=value.
var torchrunFlags = map[string]bool{
	"--standalone": true, "--no-python": true, "--no_python": true, "--run-path": true, "--run_path": true,
	"-m": true, "--module": true, "--use-env": true, "--use_env": true,
	"--multi_gpu": true, "--multi-gpu": true, "--cpu": true, "--fp16": true, "--debug": true, "--quiet": true, "-q": true,
}

// launcherTarget finds the training script in a distributed launcher's
// arguments (torchrun, accelerate launch, deepspeed, ...), as an entry
// point name.
func launcherTarget(args []string) string {
	name, module := launcherJob(args)
	switch {
	case name == "":
		return "job"
	case module:
		return lastDotted(name)
	}
	return stem(name)
}

// launcherJob finds what a distributed launcher runs: a script (module
// false) or a module, as given; "" when there is none.
func launcherJob(args []string) (name string, module bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if i == 0 && (a == "launch" || a == "run") {
			continue // accelerate launch, lightning run
		}
		if strings.HasPrefix(a, "-") {
			if a == "-m" || a == "--module" {
				module = true
				continue
			}
			if strings.Contains(a, "=") || torchrunFlags[a] {
				continue
			}
			i++ // its value
			continue
		}
		if module {
			return a, true
		}
		if isPython(path.Base(a)) {
			name, mod, tail := pythonTarget(args[i+1:])
			switch {
			case mod && isTorchrunModule(name):
				return launcherJob(tail)
			case name != "" && name != "-":
				return name, mod
			}
			return "python", false
		}
		return a, false
	}
	return "", false
}

// JobKey is what identifies a job across its launches, for --resume
// latest: the script or module the command runs, not its arguments, so
// that `python train.py --epochs 20` resumes the run of `python -u
// train.py --epochs 10 --master-port 29511`. The interpreter or launcher
// does not count either (`torchrun --nproc-per-node 8 train.py` resumes
// `python train.py`). A command with no script or module (`python -c`,
// `sh -c`, a plain program) is identified by its whole text.
func JobKey(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	prog := path.Base(argv[0])
	script := func(name string) string { return "script " + path.Clean(name) }
	switch {
	case isPython(prog):
		name, module, tail := pythonTarget(argv[1:])
		switch {
		case module && isTorchrunModule(name):
			if n, mod := launcherJob(tail); n != "" && n != "python" {
				if mod {
					return "module " + n
				}
				return script(n)
			}
		case module:
			return "module " + name
		case name != "" && name != "-":
			return script(name)
		}
	case isLauncher(prog):
		if n, mod := launcherJob(argv[1:]); n != "" && n != "python" {
			if mod {
				return "module " + n
			}
			return script(n)
		}
	case isShell(prog):
		for _, a := range argv[1:] {
			if a == "-c" || (strings.HasPrefix(a, "-") && strings.Contains(a, "c")) {
				break // inline commands: the text is the job
			}
			if !strings.HasPrefix(a, "-") {
				return script(a)
			}
		}
	}
	return "command " + strings.Join(argv, " ")
}

func lastDotted(m string) string {
	if i := strings.LastIndexByte(m, '.'); i >= 0 {
		return m[i+1:]
	}
	return m
}

func stem(p string) string {
	b := path.Base(p)
	if i := strings.LastIndexByte(b, '.'); i > 0 {
		b = b[:i]
	}
	if b == "" || b == "." || b == "/" {
		return "job"
	}
	return b
}

// ExperimentName returns the experiment a job runs in: flag (--experiment)
// if set, else env (MLFLOW_EXPERIMENT_NAME) if set, else
// /Users/{user}/{entry point}. It follows the server's naming rule, so that
// the launcher accepts exactly the names the mlflow client can use: on a
// multi-user server a name is an absolute workspace path (normalised as
// the server does; a relative one is refused), in single-user mode any
// name is kept as given, an absolute one normalised.
func ExperimentName(flag, env, user string, multiUser bool, argv []string) (string, error) {
	for _, c := range []struct{ v, from string }{{flag, "--experiment"}, {env, "MLFLOW_EXPERIMENT_NAME"}} {
		if c.v == "" {
			continue
		}
		if !multiUser {
			return workspace.CanonicalName(c.v), nil
		}
		p, err := workspace.NormalizePath(c.v)
		if err != nil {
			msg := strings.ReplaceAll(errs.MessageOf(err), "<you>", userOr(user))
			return "", errs.Errorf(errs.Invalid, "%s: %s (the server is multi-user: experiment names are workspace paths)", c.from, msg)
		}
		return p, nil
	}
	return "/Users/" + userOr(user) + "/" + EntryPoint(argv), nil
}

func userOr(u string) string {
	if u == "" {
		return "unknown"
	}
	return u
}

// RunName returns a generated run name: "jobTaskRun-" and five random
// lower-case letters and digits.
func RunName() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "jobTaskRun-" + string(b[:])
}

// Torchrun is what a torchrun command line says about the job.
type Torchrun struct {
	// Found reports whether the command is torchrun (or python -m
	// torch.distributed.run).
	Found bool
	// NNodes is the number of nodes (the maximum of a min:max range); 0
	// when not given.
	NNodes int
	// NodeRank is --node-rank; -1 when not given.
	NodeRank int
	// RdzvID is --rdzv-id, "" when not given or "none".
	RdzvID string
}

// ParseTorchrun reads the job options of a torchrun command line.
func ParseTorchrun(argv []string) Torchrun {
	t := Torchrun{NodeRank: -1}
	if len(argv) == 0 {
		return t
	}
	args := argv[1:]
	switch prog := path.Base(argv[0]); {
	case prog == "torchrun":
	case isPython(prog):
		name, module, tail := pythonTarget(args)
		if !module || !isTorchrunModule(name) {
			return t
		}
		args = tail
	default:
		return t
	}
	t.Found = true
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break // the script: the rest is its own
		}
		key, val, hasVal := strings.Cut(a, "=")
		if !hasVal && !torchrunFlags[key] && i+1 < len(args) {
			val = args[i+1]
			i++
		}
		switch strings.ReplaceAll(key, "_", "-") {
		case "--nnodes":
			hi := val
			if _, after, ok := strings.Cut(val, ":"); ok {
				hi = after
			}
			t.NNodes, _ = strconv.Atoi(hi)
		case "--node-rank":
			if n, err := strconv.Atoi(val); err == nil {
				t.NodeRank = n
			}
		case "--rdzv-id":
			if val != "none" {
				t.RdzvID = val
			}
		}
	}
	return t
}

// Job says where this launcher stands in a job that may span nodes.
type Job struct {
	// ID is the key the launchers of one job share; "" for a job on one
	// launcher.
	ID string
	// NodeRank and LocalRank label this launcher's lines; LocalRank is -1
	// when one launcher captures all the ranks of its node.
	NodeRank  int
	LocalRank int
	// NNodes is the number of nodes, 1 when unknown.
	NNodes int
}

// Creator reports whether this launcher creates the job's run: the one on
// node 0 (and local rank 0, when there is one launcher per rank).
func (j Job) Creator() bool { return j.NodeRank == 0 && j.LocalRank <= 0 }

// JobInputs are what identifies a job, from flags and the environment.
type JobInputs struct {
	// From flags; empty or -1 when not given.
	JobIDFlag     string
	NodeRankFlag  int
	NNodesFlag    int
	LocalRankFlag int
	// Getenv reads the environment.
	Getenv func(string) string
	// Command is the job's command line (torchrun options are read).
	Command []string
}

var jobIDShape = regexp.MustCompile(`^[A-Za-z0-9_.:@+/-]{1,200}$`)

// ResolveJob works out the job's identity. Node rank: --node-rank, else
// NODE_RANK, GROUP_RANK, torchrun's --node-rank, SLURM_NODEID; local rank:
// --local-rank, else LOCAL_RANK, SLURM_LOCALID when SLURM runs one task
// per GPU; node count: --nnodes, else torchrun's --nnodes, SLURM_NNODES,
// WORLD_SIZE/LOCAL_WORLD_SIZE. The job id (what makes the launchers of
// one job share a run): --job-id, else, for a job on more than one
// launcher, TORCHELASTIC_RUN_ID, torchrun's --rdzv-id, SLURM_JOB_ID (with
// SLURM_STEP_ID). A job on several launchers without any of them is an
// error: the launchers could not find each other's run.
func ResolveJob(in JobInputs) (Job, error) {
	env := in.Getenv
	if env == nil {
		env = func(string) string { return "" }
	}
	tr := ParseTorchrun(in.Command)
	j := Job{NodeRank: -1, LocalRank: -1}
	pickInt := func(dst *int, vals ...string) {
		for _, v := range vals {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
				*dst = n
				return
			}
		}
	}
	itoa := func(n int) string {
		if n < 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	slurmTasks := env("SLURM_NTASKS_PER_NODE") != "" && env("SLURM_NTASKS_PER_NODE") != "1"
	pickInt(&j.NodeRank, itoa(in.NodeRankFlag), env("NODE_RANK"), env("GROUP_RANK"), itoa(tr.NodeRank), env("SLURM_NODEID"))
	if j.NodeRank < 0 {
		j.NodeRank = 0
	}
	localFromSlurm := ""
	if slurmTasks {
		localFromSlurm = env("SLURM_LOCALID")
	}
	pickInt(&j.LocalRank, itoa(in.LocalRankFlag), env("LOCAL_RANK"), localFromSlurm)
	j.NNodes = -1
	nnodesFromWorld := ""
	if w, err1 := strconv.Atoi(env("WORLD_SIZE")); err1 == nil {
		if lw, err2 := strconv.Atoi(env("LOCAL_WORLD_SIZE")); err2 == nil && lw > 0 {
			nnodesFromWorld = strconv.Itoa(w / lw)
		}
	}
	nnodesFlag := ""
	if in.NNodesFlag > 0 {
		nnodesFlag = strconv.Itoa(in.NNodesFlag)
	}
	trNodes := ""
	if tr.NNodes > 0 {
		trNodes = strconv.Itoa(tr.NNodes)
	}
	pickInt(&j.NNodes, nnodesFlag, trNodes, env("SLURM_NNODES"), nnodesFromWorld)
	if j.NNodes < 1 {
		j.NNodes = 1
	}
	world, _ := strconv.Atoi(env("WORLD_SIZE"))
	many := j.NNodes > 1 || j.NodeRank > 0 || j.LocalRank > 0 || (j.LocalRank >= 0 && world > 1)
	j.ID = in.JobIDFlag
	if j.ID == "" && many {
		slurm := env("SLURM_JOB_ID")
		if slurm != "" && env("SLURM_STEP_ID") != "" {
			slurm += "." + env("SLURM_STEP_ID")
		}
		for _, v := range []string{env("TORCHELASTIC_RUN_ID"), tr.RdzvID, slurm} {
			if v != "" && v != "none" {
				j.ID = v
				break
			}
		}
	}
	if j.ID != "" && !jobIDShape.MatchString(j.ID) {
		return Job{}, errs.Errorf(errs.Invalid, "job id %q must be 1 to 200 letters, digits and _ . : @ + / -", j.ID)
	}
	if j.ID == "" && many {
		return Job{}, errs.Errorf(errs.Invalid,
			"this launcher is node %d of %d (local rank %d) but no job id says which run to join: give the same --job-id to every node (or run with torchrun --rdzv-id, or under SLURM), or --resume RUN_ID",
			j.NodeRank, j.NNodes, j.LocalRank)
	}
	return j, nil
}

// rankPrefix matches torchrun's default log line prefix ("[default3]:"
// with --tee, "[rank3]:" in newer versions) and captures the rank.
var rankPrefix = regexp.MustCompile(`^\[[A-Za-z_-]*?(\d{1,5})\]:`)

// prefixRank returns the local rank a torchrun line prefix names, or -1.
func prefixRank(text []byte) int32 {
	if len(text) < 4 || text[0] != '[' {
		return -1
	}
	m := rankPrefix.FindSubmatch(text)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		return -1
	}
	return int32(n)
}
