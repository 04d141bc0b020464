package launcher_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/launcher"
)

func TestEntryPoint(t *testing.T) {
	f := func(cmd, want string) {
		t.Helper()
		if got := launcher.EntryPoint(strings.Fields(cmd)); got != want {
			t.Errorf("EntryPoint(%q) = %q, want %q", cmd, got, want)
		}
	}
	f("python train.py", "train")
	f("python3.11 -u scripts/train.py --lr 3e-4", "train")
	f("/usr/bin/python3 -W ignore -X dev train.py", "train")
	f("python -m pkg.mod --epochs 3", "mod")
	f("python -mpkg.sub.main", "main")
	f("python -c print(1)", "python")
	f("torchrun --nproc-per-node 8 train.py --lr 1", "train")
	f("torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend c10d --rdzv-endpoint h:29500 --standalone finetune.py", "finetune")
	f("torchrun --nproc-per-node 2 -m pkg.trainer", "trainer")
	f("torchrun --no-python --nproc-per-node 2 ./bin/train.sh", "train")
	f("python -m torch.distributed.run --nproc-per-node 4 pretrain.py", "pretrain")
	f("accelerate launch --num_processes 2 --multi_gpu sft.py", "sft")
	f("deepspeed --num_gpus 8 ds_train.py --deepspeed cfg.json", "ds_train")
	f("bash run.sh", "run")
	f("sh -x ./jobs/nightly.sh", "nightly")
	f("./train", "train")
	f("/opt/bin/my-trainer --config a.yaml", "my-trainer")
	f("", "job")
}

// TestJobKey: what --resume latest matches runs by: the script or module,
// not the arguments, the interpreter or the launcher.
func TestJobKey(t *testing.T) {
	same := func(a, b string) {
		t.Helper()
		if ka, kb := launcher.JobKey(strings.Fields(a)), launcher.JobKey(strings.Fields(b)); ka != kb {
			t.Errorf("JobKey(%q) = %q, JobKey(%q) = %q, want the same", a, ka, b, kb)
		}
	}
	differ := func(a, b string) {
		t.Helper()
		if ka, kb := launcher.JobKey(strings.Fields(a)), launcher.JobKey(strings.Fields(b)); ka == kb {
			t.Errorf("JobKey(%q) = JobKey(%q) = %q, want them to differ", a, b, ka)
		}
	}
	same("python train.py --epochs 10", "python train.py --epochs 20")
	same("python -u ./train.py --master-port 29511", "python3.11 train.py --master-port 31234")
	same("torchrun --nproc-per-node 8 train.py --lr 1", "python train.py")
	same("python -m torch.distributed.run --nproc-per-node 4 pkg/pretrain.py", "torchrun pkg/pretrain.py --resume")
	same("python -m pkg.train --a 1", "torchrun --nproc-per-node 2 -m pkg.train --a 2")
	same("bash run.sh 1", "bash run.sh 2")
	differ("python train.py", "python eval.py")
	differ("python a/train.py", "python b/train.py")
	differ("python -m pkg.train", "python -m pkg.eval")
	differ("python -c print(1)", "python -c print(2)")
	differ("sh -c a", "sh -c b")
	same("./trainer --x 1", "./trainer --x 1")
	differ("./trainer --x 1", "./trainer --x 2")
}

func TestExperimentName(t *testing.T) {
	for name, tc := range map[string]struct {
		flag, env, user, cmd string
		multiUser            bool
		want                 string
		code                 errs.Code
	}{
		"Default":            {"", "", "alice@example.com", "python train.py", true, "/Users/alice@example.com/train", ""},
		"DefaultTorchrun":    {"", "", "bob", "torchrun --nproc-per-node 8 train.py", true, "/Users/bob/train", ""},
		"FromEnv":            {"", "/Shared/exp", "bob", "python train.py", true, "/Shared/exp", ""},
		"FlagWins":           {"/Users/bob/x", "/Shared/exp", "bob", "python train.py", true, "/Users/bob/x", ""},
		"Normalised":         {"/Workspace/Shared//exp/", "", "bob", "python train.py", true, "/Shared/exp", ""},
		"ErrRelativeEnv":     {"", "exp", "bob", "python train.py", true, "", errs.Invalid},
		"ErrRelativeFlag":    {"my-exp", "", "bob", "python train.py", true, "", errs.Invalid},
		"ErrDotDot":          {"/Shared/../x", "", "bob", "python train.py", true, "", errs.Invalid},
		"UnknownUser":        {"", "", "", "python -m a.b", true, "/Users/unknown/b", ""},
		"SingleUserRelative": {"my-exp", "", "bob", "python train.py", false, "my-exp", ""},
		"SingleUserEnv":      {"", "my exp", "bob", "python train.py", false, "my exp", ""},
		"SingleUserAbsolute": {"/Workspace/Shared//exp/", "", "bob", "python train.py", false, "/Shared/exp", ""},
		"SingleUserDefault":  {"", "", "bob", "python train.py", false, "/Users/bob/train", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := launcher.ExperimentName(tc.flag, tc.env, tc.user, tc.multiUser, strings.Fields(tc.cmd))
			if got != tc.want || errs.CodeOf(err) != tc.code {
				t.Fatalf("got %q, %v; want %q, code %q", got, err, tc.want, tc.code)
			}
			if err != nil && !strings.Contains(err.Error(), "absolute") && !strings.Contains(err.Error(), "segment") {
				t.Fatalf("message does not say what is wrong: %v", err)
			}
		})
	}
}

func TestRunName(t *testing.T) {
	re := regexp.MustCompile(`^jobTaskRun-[a-z0-9]{5}$`)
	seen := map[string]bool{}
	for range 50 {
		n := launcher.RunName()
		if !re.MatchString(n) {
			t.Fatalf("run name %q", n)
		}
		seen[n] = true
	}
	if len(seen) < 45 {
		t.Fatalf("only %d distinct names in 50", len(seen))
	}
}

func TestParseTorchrun(t *testing.T) {
	f := func(cmd string, want launcher.Torchrun) {
		t.Helper()
		if got := launcher.ParseTorchrun(strings.Fields(cmd)); got != want {
			t.Errorf("ParseTorchrun(%q) = %+v, want %+v", cmd, got, want)
		}
	}
	f("python train.py", launcher.Torchrun{NodeRank: -1})
	f("torchrun --nproc-per-node 8 train.py --node-rank 5", launcher.Torchrun{Found: true, NodeRank: -1})
	f("torchrun --nnodes=2 --node_rank=1 --rdzv_id=abc train.py", launcher.Torchrun{Found: true, NNodes: 2, NodeRank: 1, RdzvID: "abc"})
	f("torchrun --nnodes 1:4 --rdzv-id none --standalone train.py", launcher.Torchrun{Found: true, NNodes: 4, NodeRank: -1})
	f("python -m torch.distributed.run --nnodes 3 --node-rank 2 t.py", launcher.Torchrun{Found: true, NNodes: 3, NodeRank: 2})
}

func TestResolveJob(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	none := launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1}
	for name, tc := range map[string]struct {
		in   launcher.JobInputs
		want launcher.Job
		code errs.Code
	}{
		"SingleNode": {none, launcher.Job{NodeRank: 0, LocalRank: -1, NNodes: 1}, ""},
		"Flags": {launcher.JobInputs{JobIDFlag: "j1", NodeRankFlag: 1, NNodesFlag: 2, LocalRankFlag: -1},
			launcher.Job{ID: "j1", NodeRank: 1, LocalRank: -1, NNodes: 2}, ""},
		"Torchrun": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, Command: strings.Fields("torchrun --nnodes 2 --node-rank 1 --rdzv-id r9 t.py")},
			launcher.Job{ID: "r9", NodeRank: 1, LocalRank: -1, NNodes: 2}, ""},
		"TorchrunNode0": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, Command: strings.Fields("torchrun --nnodes 2 --node-rank 0 --rdzv-id r9 t.py")},
			launcher.Job{ID: "r9", NodeRank: 0, LocalRank: -1, NNodes: 2}, ""},
		"Slurm": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, Getenv: env("SLURM_JOB_ID", "77", "SLURM_NNODES", "4", "SLURM_NODEID", "3")},
			launcher.Job{ID: "77", NodeRank: 3, LocalRank: -1, NNodes: 4}, ""},
		"SlurmOneNode": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, Getenv: env("SLURM_JOB_ID", "77", "SLURM_NNODES", "1")},
			launcher.Job{NodeRank: 0, LocalRank: -1, NNodes: 1}, ""},
		"PerRankUnderTorchrun": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, Getenv: env("TORCHELASTIC_RUN_ID", "te", "GROUP_RANK", "1", "LOCAL_RANK", "0", "WORLD_SIZE", "16", "LOCAL_WORLD_SIZE", "8")},
			launcher.Job{ID: "te", NodeRank: 1, LocalRank: 0, NNodes: 2}, ""},
		"EnvNodeRank": {launcher.JobInputs{NodeRankFlag: -1, LocalRankFlag: -1, JobIDFlag: "x", Getenv: env("NODE_RANK", "2")},
			launcher.Job{ID: "x", NodeRank: 2, LocalRank: -1, NNodes: 1}, ""},
		"ErrNoJobID":  {launcher.JobInputs{NodeRankFlag: 1, NNodesFlag: 2, LocalRankFlag: -1}, launcher.Job{}, errs.Invalid},
		"ErrBadJobID": {launcher.JobInputs{JobIDFlag: "a'b", NodeRankFlag: -1, LocalRankFlag: -1}, launcher.Job{}, errs.Invalid},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := launcher.ResolveJob(tc.in)
			if got != tc.want || errs.CodeOf(err) != tc.code {
				t.Fatalf("got %+v, %v; want %+v, code %q", got, err, tc.want, tc.code)
			}
		})
	}
	if !(launcher.Job{NodeRank: 0, LocalRank: -1}).Creator() || (launcher.Job{NodeRank: 1, LocalRank: -1}).Creator() || (launcher.Job{NodeRank: 0, LocalRank: 2}).Creator() {
		t.Fatal("Creator")
	}
}
