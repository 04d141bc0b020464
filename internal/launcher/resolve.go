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
// module (-m), or "" for -c and the REPL; tail is what follows it. Short
// options may be clustered, as Python takes them (-um pkg, -uc CODE,
// -Wignore).
func pythonTarget(args []string) (name string, module bool, tail []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--check-hash-based-pycs":
			i++ // takes a value
			continue
		case a == "-" || !strings.HasPrefix(a, "-"):
			return a, false, args[i+1:]
		case strings.HasPrefix(a, "--"):
			continue
		}
	flags:
		for j := 1; j < len(a); j++ {
			rest := a[j+1:]
			switch a[j] {
			case 'm':
				if rest != "" {
					return rest, true, args[i+1:]
				}
				if i+1 < len(args) {
					return args[i+1], true, args[i+2:]
				}
				return "", false, nil
			case 'c':
				return "", false, nil
			case 'W', 'X':
				if rest == "" {
					i++ // the value is the next argument
				}
				break flags
			}
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
			return pythonJob(args[i+1:])
		}
		return a, false
	}
	return "", false
}

// pythonJob finds what a Python interpreter in a launcher's arguments
// runs, looking through python -m torch.distributed.run; "python" when
// it runs no script or module.
func pythonJob(args []string) (name string, module bool) {
	name, mod, tail := pythonTarget(args)
	switch {
	case mod && isTorchrunModule(name):
		return launcherJob(tail)
	case name != "" && name != "-":
		return name, mod
	}
	return "python", false
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
	var key string
	switch {
	case isPython(prog):
		key = pythonKey(argv[1:])
	case isLauncher(prog):
		key = launchedKey(argv[1:])
	case isShell(prog):
		key = shellKey(argv[1:])
	}
	if key != "" {
		return key
	}
	return "command " + strings.Join(argv, " ")
}

// pythonKey is JobKey's key for a Python interpreter's arguments: the
// script or module, or, under python -m torch.distributed.run, what that
// runs; "" when there is none (python -c).
func pythonKey(args []string) string {
	name, module, tail := pythonTarget(args)
	switch {
	case module && isTorchrunModule(name):
		return launchedKey(tail)
	case module:
		return "module " + name
	case name != "" && name != "-":
		return scriptKey(name)
	}
	return ""
}

// launchedKey is JobKey's key for a distributed launcher's arguments:
// the script or module it runs; "" when there is none.
func launchedKey(args []string) string {
	n, mod := launcherJob(args)
	switch {
	case n == "" || n == "python":
		return ""
	case mod:
		return "module " + n
	}
	return scriptKey(n)
}

// shellKey is JobKey's key for a shell's arguments: the script it runs;
// "" for inline commands (sh -c), whose text is the job.
func shellKey(args []string) string {
	for _, a := range args {
		if a == "-c" || (strings.HasPrefix(a, "-") && strings.Contains(a, "c")) {
			return ""
		}
		if !strings.HasPrefix(a, "-") {
			return scriptKey(a)
		}
	}
	return ""
}

func scriptKey(name string) string { return "script " + path.Clean(name) }

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
	args, ok := torchrunArgs(argv)
	if !ok {
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
		t.set(strings.ReplaceAll(key, "_", "-"), val)
	}
	return t
}

// torchrunArgs returns torchrun's own arguments when argv runs torchrun,
// as a program or as python -m torch.distributed.run.
func torchrunArgs(argv []string) ([]string, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	args := argv[1:]
	switch prog := path.Base(argv[0]); {
	case prog == "torchrun":
		return args, true
	case isPython(prog):
		name, module, tail := pythonTarget(args)
		return tail, module && isTorchrunModule(name)
	}
	return nil, false
}

// set records one of torchrun's options (key spelled with dashes) that
// says something about the job; it ignores the others.
func (t *Torchrun) set(key, val string) {
	switch key {
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
	j := Job{
		NodeRank:  max(0, firstCount(-1, rankArg(in.NodeRankFlag), env("NODE_RANK"), env("GROUP_RANK"), rankArg(tr.NodeRank), env("SLURM_NODEID"))),
		LocalRank: localRank(in.LocalRankFlag, env),
		NNodes:    max(1, nodeCount(in.NNodesFlag, tr, env)),
	}
	world, _ := strconv.Atoi(env("WORLD_SIZE"))
	many := j.NNodes > 1 || j.NodeRank > 0 || j.LocalRank > 0 || (j.LocalRank >= 0 && world > 1)
	j.ID = in.JobIDFlag
	if j.ID == "" && many {
		j.ID = envJobID(tr, env)
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

// firstCount returns the first of vals that is a whole number, 0 or more,
// else def: the sources of a rank or count, in order of precedence.
func firstCount(def int, vals ...string) int {
	for _, v := range vals {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			return n
		}
	}
	return def
}

// rankArg is a rank flag's value for firstCount: "" when it is not set
// (negative).
func rankArg(n int) string {
	if n < 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// countArg is a count flag's value for firstCount: "" when it is not set
// (0 or negative).
func countArg(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// localRank is --local-rank, else LOCAL_RANK, else SLURM_LOCALID when
// SLURM runs one task per GPU (with one task per node, SLURM_LOCALID is
// always 0 and says nothing), else -1.
func localRank(flag int, env func(string) string) int {
	fromSlurm := ""
	if tasks := env("SLURM_NTASKS_PER_NODE"); tasks != "" && tasks != "1" {
		fromSlurm = env("SLURM_LOCALID")
	}
	return firstCount(-1, rankArg(flag), env("LOCAL_RANK"), fromSlurm)
}

// nodeCount is --nnodes, else torchrun's --nnodes, SLURM_NNODES,
// WORLD_SIZE/LOCAL_WORLD_SIZE, else -1. A flag's 0 means not set.
func nodeCount(flag int, tr Torchrun, env func(string) string) int {
	fromWorld := ""
	if w, err1 := strconv.Atoi(env("WORLD_SIZE")); err1 == nil {
		if lw, err2 := strconv.Atoi(env("LOCAL_WORLD_SIZE")); err2 == nil && lw > 0 {
			fromWorld = strconv.Itoa(w / lw)
		}
	}
	return firstCount(-1, countArg(flag), countArg(tr.NNodes), env("SLURM_NNODES"), fromWorld)
}

// envJobID is the job id the environment gives a launcher of a job on
// several launchers: TORCHELASTIC_RUN_ID, torchrun's --rdzv-id, else
// SLURM_JOB_ID (with SLURM_STEP_ID, so that the steps of one allocation
// are runs of their own); "" when none does.
func envJobID(tr Torchrun, env func(string) string) string {
	slurm := env("SLURM_JOB_ID")
	if slurm != "" && env("SLURM_STEP_ID") != "" {
		slurm += "." + env("SLURM_STEP_ID")
	}
	for _, v := range []string{env("TORCHELASTIC_RUN_ID"), tr.RdzvID, slurm} {
		if v != "" && v != "none" {
			return v
		}
	}
	return ""
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
