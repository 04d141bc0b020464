#!/usr/bin/env bash
# Checks GPU monitoring against nvidia-smi on a machine with an NVIDIA GPU.
#
#   ./scripts/gpu-check.sh            30 s of sampling (SEXTANT_GPU_CHECK_SECONDS)
#
# It builds sextant, starts a small CUDA load on GPU 0 (a matrix-multiply
# loop from PyTorch, when PyTorch with CUDA is importable), starts a server
# and an agent using NVML, and for the duration takes, every 2 s, one
# sample through `sextant agent --once --gpu-source nvml` and one from
# `nvidia-smi --query-gpu`. It then checks:
#   - the agent sees the same GPUs (UUIDs) as nvidia-smi;
#   - memory total matches exactly; memory used, temperature, power and the
#     SM clock agree within tolerances (the two reads are not simultaneous);
#   - under the load, GPU 0's utilisation is high in both, on average;
#   - the server received the agent's samples: the latest sample is fresh
#     and the history has one point per 2 s interval;
#   - a CUDA job under `sextant run` with CUDA_VISIBLE_DEVICES=0 gets GPU 0
#     (only) sampled for its run, as the run's MLflow system metrics too;
#   - the GPU health readings (issue 18): memory clock and maximum SM clock,
#     default power limit, throttle reasons and ECC counts agree with
#     nvidia-smi where the driver reports them;
#   - health events: an agent linked to a run gets no Xid or lost-GPU event
#     on these healthy GPUs, and a simulated GPU on the same node, fed Xid
#     79, a thermal slowdown and a fall off the bus (--sim-events), gets the
#     run the matching gpu_xid, gpu_throttle and gpu_lost events;
#   - checkpoints from the GPU (scripts/gpu-check-ckpt.py, when PyTorch with
#     CUDA is importable): a model on GPU 0 saved to a volume with
#     dcp.async_save through VolumeWriter under `sextant run`, thread and
#     process checkpointers, copy and pinned staging, while it trains; each
#     save loads back bit for bit and is listed by `sextant ckpt ls --run`;
#   - MFU (issue 45, when PyTorch with CUDA is importable): a bf16 matmul
#     job under `sextant run` reporting Progress(flops_per_sample=) gets,
#     from GET goodput, the GPU model NVML names, the peak table's bf16
#     figure for it, and an MFU equal to its own FLOPs/s over that peak
#     (within 10%, in (0.05, 1]); a model not in the table fails, named.
# It exits 0 when all checks pass, 1 when one fails, and 2 (with a message)
# when there is no NVIDIA GPU or driver here. SEXTANT_BIN names a sextant
# binary to use instead of building one (a GPU machine without Go);
# SEXTANT_GPU_CHECK_OUT a directory that keeps the check's files (the
# checkpoint JSON, `ckpt ls --run`, logs).
#
#   ./scripts/gpu-check.sh --record DIR
#                                     also writes what this machine's
#                                     nvidia-smi answers the nvidia-smi source
#                                     (under load), as a recording for the fake
#                                     nvidia-smi (internal/gpu/testdata/smi/).
#
#   ./scripts/gpu-check.sh --fake     the same checks without a GPU, against
#                                     the fake nvidia-smi replaying a recording
#                                     (internal/gpu/testdata/smi/535-h100-health;
#                                     SEXTANT_GPU_CHECK_RECORDING), through the
#                                     nvidia-smi source: it checks this script
#                                     and the parsing, not a driver.
set -uo pipefail

cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${SEXTANT_GPU_CHECK_SECONDS:-30}
# The agent's source; only a test of this script itself sets another.
SOURCE=${SEXTANT_GPU_CHECK_SOURCE:-nvml}
PYTHON=${PYTHON:-python3}
FAKE=0
RECORD=
if [ "${1:-}" = "--record" ]; then
	RECORD=${2:?--record needs a directory}
	shift 2
fi
if [ "${1:-}" = "--fake" ]; then
	FAKE=1
	SOURCE=nvidia-smi
	fakebin=$(mktemp -d)
	cp internal/gpu/testdata/fake-nvidia-smi/nvidia-smi "$fakebin/" && chmod +x "$fakebin/nvidia-smi"
	export PATH="$fakebin:$PATH"
	export FAKE_SMI_DIR=${SEXTANT_GPU_CHECK_RECORDING:-$PWD/internal/gpu/testdata/smi/535-h100-health}
	SECONDS_TO_RUN=${SEXTANT_GPU_CHECK_SECONDS:-8}
fi

die() { echo "gpu-check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi is not on PATH: this machine has no NVIDIA GPU or driver, so there is nothing to check"
if [ "$FAKE" = 0 ] && { ! out=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$out"; }; then
	die "nvidia-smi finds no GPU: $(head -1 <<<"$out")"
fi
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON is needed to compare the readings"
[ -n "${SEXTANT_BIN:-}" ] || command -v go >/dev/null 2>&1 || die "go is needed to build sextant (or set SEXTANT_BIN)"

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ -n "${SEXTANT_GPU_CHECK_OUT:-}" ]; then
		mkdir -p "$SEXTANT_GPU_CHECK_OUT" && cp "$work"/*.log "$work"/*.json "$work"/*.txt "$SEXTANT_GPU_CHECK_OUT"/ 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${SEXTANT_BIN:-}" ]; then
	echo "== sextant: $SEXTANT_BIN"
	cp "$SEXTANT_BIN" "$work/sextant" || exit 1
else
	echo "== building sextant"
	go build -o "$work/sextant" ./cmd/sextant || { echo "gpu-check: build failed" >&2; exit 1; }
fi

echo "== CUDA load on GPU 0"
load=none
if [ "$FAKE" = 0 ] && "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	"$PYTHON" - "$((SECONDS_TO_RUN + 20))" >"$work/load.log" 2>&1 <<'EOF' &
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda:0")
b = torch.randn(8192, 8192, device="cuda:0")
print("load running", flush=True)
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
EOF
	pids+=($!)
	load=torch
	for _ in $(seq 1 60); do grep -q "load running" "$work/load.log" && break; sleep 0.5; done
	grep -q "load running" "$work/load.log" || { echo "gpu-check: the PyTorch load did not start:"; cat "$work/load.log"; exit 1; }
	sleep 3 # let utilisation settle
else
	echo "PyTorch with CUDA is not importable: checking without a load (utilisation is not checked)"
fi

echo "== server and agent"
port=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/sextant" server --port "$port" --data-dir "$work/data" --log-level warn >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "gpu-check: the server did not start:"; cat "$work/server.log"; exit 1; }
"$work/sextant" agent --server "http://127.0.0.1:$port" --gpu-source "$SOURCE" --interval 2s --node gpu-check \
	--spool-dir "$work/spool" >"$work/agent.log" 2>&1 &
pids+=($!)
start_ms=$("$PYTHON" -c 'import time; print(int(time.time()*1000))')

if [ -n "$RECORD" ]; then
	# The fields the driver knows, one query each (it refuses a whole query
	# over one field it does not know), then the source's own two queries.
	echo "== recording nvidia-smi into $RECORD"
	mkdir -p "$RECORD"
	: >"$RECORD/fields"
	gpu_fields=$(sed -n '/^var smiQueryFields = /,/^}/p' internal/gpu/smi.go | grep -o '"[a-z_.]*"' | tr -d '"')
	app_fields=$(sed -n 's/^var smiAppFields = \[\]string{\(.*\)}/\1/p' internal/gpu/smi.go | grep -o '"[a-z_.]*"' | tr -d '"')
	known=()
	for f in $gpu_fields; do
		nvidia-smi --query-gpu="$f" --format=csv,nounits >/dev/null 2>&1 && { echo "$f" >>"$RECORD/fields"; known+=("$f"); }
	done
	for f in $app_fields; do
		nvidia-smi --query-compute-apps="$f" --format=csv,nounits >/dev/null 2>&1 && echo "$f" >>"$RECORD/fields"
	done
	nvidia-smi --query-gpu="$(IFS=,; echo "${known[*]}")" --format=csv,nounits >"$RECORD/query-gpu.csv"
	nvidia-smi --query-compute-apps="$(echo $app_fields | tr ' ' ',')" --format=csv,nounits >"$RECORD/compute-apps.csv"
	nvidia-smi --version >"$RECORD/version.txt" 2>&1
fi

echo "== sampling for ${SECONDS_TO_RUN}s (agent --once and nvidia-smi, every 2 s)"
# Read with the header, by column name: the health fields are asked for
# separately, and a driver that does not know one refuses only that query.
fields=uuid,index,memory.used,memory.total,temperature.gpu,power.draw,clocks.sm,utilization.gpu
health_fields=uuid,clocks.mem,clocks.max.sm,power.default_limit,clocks_throttle_reasons.active,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total
: >"$work/pairs.jsonl"
n=$((SECONDS_TO_RUN / 2))
for i in $(seq 1 "$n"); do
	agent=$("$work/sextant" agent --once --node gpu-check --gpu-source "$SOURCE" 2>"$work/once.err") || { echo "gpu-check: sextant agent --once failed:"; cat "$work/once.err"; exit 1; }
	smi=$(nvidia-smi --query-gpu=$fields --format=csv,nounits) || { echo "gpu-check: nvidia-smi failed"; exit 1; }
	smih=$(nvidia-smi --query-gpu=$health_fields --format=csv,nounits 2>/dev/null) || smih=""
	"$PYTHON" -c 'import json,sys; print(json.dumps({"agent": json.loads(sys.argv[1]), "smi": sys.argv[2], "smi_health": sys.argv[3]}))' "$agent" "$smi" "$smih" >>"$work/pairs.jsonl"
	sleep 2
done
sleep 3 # the agent's last send

echo "== a CUDA job under sextant run (GPU 0 only, sampled every 2 s)"
cat >"$work/job.py" <<'EOF'
import sys, time
end = time.time() + 14
try:
    import torch
    cuda = torch.cuda.is_available()
except ImportError:
    cuda = False
if cuda:
    a = torch.randn(8192, 8192, device="cuda:0")
    b = torch.randn(8192, 8192, device="cuda:0")
    while time.time() < end:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
    print("job done on", torch.cuda.get_device_name(0))
else:
    time.sleep(14)
    print("job done without CUDA")
EOF
CUDA_VISIBLE_DEVICES=0 MLFLOW_TRACKING_URI="http://127.0.0.1:$port" "$work/sextant" run --experiment /Shared/gpu-check \
	--gpu-source "$SOURCE" --gpu-interval 2s -- "$PYTHON" "$work/job.py" >"$work/job.out" 2>"$work/job.err" \
	|| { echo "gpu-check: sextant run failed:"; cat "$work/job.out" "$work/job.err"; exit 1; }
run_id=$(sed -n 's/^sextant: run \([0-9a-f]\{32\}\) .*/\1/p' "$work/job.err" | head -1)
[ -n "$run_id" ] || { echo "gpu-check: no run id from sextant run:"; cat "$work/job.err"; exit 1; }
curl -sf "http://127.0.0.1:$port/api/2.0/sextant/gpu/series?run_id=$run_id&points=0&fields=util" >"$work/run-series.json" || { echo "gpu-check: the run's /gpu/series failed"; exit 1; }
curl -sf "http://127.0.0.1:$port/api/2.0/mlflow/metrics/get-history?run_id=$run_id&metric_key=system/gpu_0_utilization_percentage" >"$work/run-util.json" || { echo "gpu-check: the run's system metric failed"; exit 1; }

echo "== MFU: a bf16 matmul job under sextant run reporting progress (GPU model from NVML, peak from the table)"
mfu=skipped
if [ "$load" = torch ]; then
	mfu=failed
	cat >"$work/mfu-job.py" <<'EOF'
import json, sys, time
import torch
from sextant.progress import Progress
n, k, steps = 8192, 50, 20  # about 0.1 s a step on an H100
a = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda:0", dtype=torch.bfloat16)
for _ in range(3):  # warm-up outside the reported steps
    a @ b
torch.cuda.synchronize()
p = Progress(flops_per_token=None, flops_per_sample=2 * n**3 * k, dtype="bf16")
total = 0.0
for step in range(steps):
    t0 = time.perf_counter()
    for _ in range(k):
        c = a @ b
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    total += dt
    p.step(step, step_time_s=dt, samples=1)
p.close()
# The run's GPU model comes from the launcher's sampler (every 2 s) seeing
# this process on GPU 0: stay on it (memory held) past a few samples.
time.sleep(6)
out = {"gpu": torch.cuda.get_device_name(0), "flops": 2 * n**3 * k * steps, "seconds": total,
       "flops_per_s": 2 * n**3 * k * steps / total, "dropped": p.dropped, "sent": p.sent}
json.dump(out, open(sys.argv[1], "w"))
print("mfu job:", json.dumps(out))
EOF
	if CUDA_VISIBLE_DEVICES=0 MLFLOW_TRACKING_URI="http://127.0.0.1:$port" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
		"$work/sextant" run --experiment /Shared/gpu-check-mfu --gpu-source "$SOURCE" --gpu-interval 2s -- \
		"$PYTHON" "$work/mfu-job.py" "$work/mfu-job.json" >"$work/mfu-job.log" 2>&1; then
		mfu_run=$(sed -n 's/^sextant: run \([0-9a-f]\{32\}\) .*/\1/p' "$work/mfu-job.log" | head -1)
		curl -sf "http://127.0.0.1:$port/api/2.0/sextant/goodput?run_id=$mfu_run" >"$work/goodput-mfu.json" &&
			nvidia-smi --query-gpu=name --format=csv,noheader -i 0 >"$work/mfu-smi-name.txt" && mfu=ran
	fi
	[ "$mfu" = ran ] || { echo "gpu-check: the MFU job failed:"; tail -n 40 "$work/mfu-job.log"; }
else
	echo "PyTorch with CUDA is not importable: the MFU check is skipped"
fi

echo "== health events: this node's GPUs, and a simulated GPU fed Xid 79, a slowdown and a fall off the bus"
mkrun() {
	curl -sf -X POST "http://127.0.0.1:$port/api/2.0/mlflow/runs/create" -H 'Content-Type: application/json' -d '{"experiment_id": "0"}' |
		"$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["run"]["info"]["run_id"])'
}
real_run=$(mkrun) && sim_run=$(mkrun) || { echo "gpu-check: could not create the runs for the health checks"; exit 1; }
"$work/sextant" agent --server "http://127.0.0.1:$port" --gpu-source "$SOURCE" --interval 1s --node gpu-check-health \
	--run-id "$real_run" --spool-dir "$work/spool-health" >"$work/agent-health.log" 2>&1 &
pids+=($!)
: >"$work/sim-events"
"$work/sextant" agent --server "http://127.0.0.1:$port" --gpu-source sim:2 --sim-events "$work/sim-events" --interval 1s \
	--node gpu-check-sim --run-id "$sim_run" --spool-dir "$work/spool-sim" >"$work/agent-sim.log" 2>&1 &
pids+=($!)
sleep 3
printf 'xid 0 79\nthrottle 1 0x40\n' >>"$work/sim-events"
sleep 3
printf 'throttle 1 0\nlost 1 GPU has fallen off the bus\n' >>"$work/sim-events"
sleep 4
for r in real sim; do
	id=real_run; [ $r = sim ] && id=sim_run
	curl -sf "http://127.0.0.1:$port/api/2.0/sextant/events/list?run_id=${!id}" >"$work/events-$r.json" || { echo "gpu-check: the $r run's events failed"; exit 1; }
done

ckpt=skipped
if [ "$load" = torch ]; then
	echo "== checkpoints from the GPU: dcp.async_save through VolumeWriter under sextant run"
	ckpt=failed
	if MLFLOW_TRACKING_URI="http://127.0.0.1:$port" "$work/sextant" volumes create main.gpucheck.ckpt -p >"$work/ckpt-volume.txt" 2>&1 &&
		CUDA_VISIBLE_DEVICES=0 MLFLOW_TRACKING_URI="http://127.0.0.1:$port" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
			"$work/sextant" run --experiment /Shared/gpu-check-ckpt --gpu-source "$SOURCE" --gpu-interval 2s -- \
			"$PYTHON" scripts/gpu-check-ckpt.py /Volumes/main/gpucheck/ckpt/run1 "$work/ckpt.json" >"$work/ckpt-job.log" 2>&1; then
		ckpt_run=$(sed -n 's/^sextant: run \([0-9a-f]\{32\}\) .*/\1/p' "$work/ckpt-job.log" | head -1)
		MLFLOW_TRACKING_URI="http://127.0.0.1:$port" "$work/sextant" ckpt ls --run "$ckpt_run" >"$work/ckpt-ls.txt" 2>&1 &&
			curl -sf "http://127.0.0.1:$port/api/2.0/sextant/events/list?run_id=$ckpt_run" >"$work/events-ckpt.json" && ckpt=ran
	fi
	[ "$ckpt" = ran ] || { echo "gpu-check: the checkpoint job failed:"; tail -n 40 "$work/ckpt-volume.txt" "$work/ckpt-job.log"; }
	cat "$work/ckpt-ls.txt" 2>/dev/null
fi

curl -sf "http://127.0.0.1:$port/api/2.0/sextant/gpu/latest?node=gpu-check" >"$work/latest.json" || { echo "gpu-check: /gpu/latest failed"; cat "$work/agent.log"; exit 1; }
curl -sf "http://127.0.0.1:$port/api/2.0/sextant/gpu/series?node=gpu-check&points=0&fields=util,mem_used&from_ms=$start_ms" >"$work/series.json" || { echo "gpu-check: /gpu/series failed"; exit 1; }

echo "== comparing"
"$PYTHON" - "$work" "$load" "$SECONDS_TO_RUN" "$ckpt" "$mfu" <<'EOF'
import json, sys, time

work, load, seconds, ckpt, mfu = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
failures = []

def check(ok, msg):
    print(("ok    " if ok else "FAIL  ") + msg)
    if not ok:
        failures.append(msg)

def num(s):
    s = s.strip()
    try:
        return float(s)
    except ValueError:
        return None  # [N/A], [Not Supported]

def table(text, want):
    """nvidia-smi CSV with its header, as {uuid: [cells in the order of want]}
    (None for a column it lacks): column names without their units."""
    lines = [l for l in text.strip().splitlines() if "," in l]
    if not lines:
        return {}
    head = [c.split("[")[0].strip() for c in lines[0].split(",")]
    out = {}
    for l in lines[1:]:
        cells = [c.strip() for c in l.split(",")]
        if len(cells) != len(head):
            continue
        row = dict(zip(head, cells))
        out[row.get("uuid", "")] = [row.get(w) for w in want]
    return out

pairs = [json.loads(l) for l in open(f"{work}/pairs.jsonl")]
check(len(pairs) >= max(3, seconds // 2 - 1), f"{len(pairs)} paired samples taken")
MiB = 1 << 20
util0 = {"agent": [], "smi": []}
FIELDS = ["uuid", "index", "memory.used", "memory.total", "temperature.gpu", "power.draw", "clocks.sm", "utilization.gpu"]
HEALTH = ["clocks.mem", "clocks.max.sm", "power.default_limit", "clocks_throttle_reasons.active",
          "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total"]
same_mask = {}
for k, p in enumerate(pairs):
    smi = {u: [c or "" for c in r] for u, r in table(p["smi"], FIELDS).items()}
    health = table(p.get("smi_health", ""), HEALTH)
    agent = {g["uuid"]: g for g in p["agent"]["gpus"]}
    if k == 0:
        check(set(smi) == set(agent), f"same GPUs: nvidia-smi {sorted(smi)} agent {sorted(agent)}")
    for uuid, r in smi.items():
        g = agent.get(uuid)
        if g is None:
            continue
        idx = int(r[1])
        if k == 0:
            check(g["index"] == idx, f"GPU {uuid}: index {g['index']} == {idx}")
            check(g.get("error") in (None, ""), f"GPU {idx}: no error ({g.get('error')})")
            if g["mem_total"] is not None and num(r[3]) is not None:
                check(round(g["mem_total"] / MiB) == num(r[3]), f"GPU {idx}: memory total {g['mem_total'] / MiB:.0f} MiB == {num(r[3]):.0f} MiB")
        def close(name, a, b, rel, absolute):
            if a is None or b is None:
                return
            ok = abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))
            if not ok or k == 0:
                check(ok, f"GPU {idx} sample {k}: {name} agent {a:.1f} vs nvidia-smi {b:.1f}")
        mu = g["mem_used"] / MiB if g["mem_used"] is not None else None
        close("memory used MiB", mu, num(r[2]), 0.05, 512)
        close("temperature C", g["temp"], num(r[4]), 0, 5)
        close("power W", g["power"], num(r[5]), 0.25, 40)
        close("SM clock MHz", g["sm_clock"], num(r[6]), 0.2, 150)
        if idx == 0:
            if g["util"] is not None:
                util0["agent"].append(g["util"])
            if num(r[7]) is not None:
                util0["smi"].append(num(r[7]))
        h = health.get(uuid)
        if h:
            mem_clock, max_sm, pdef, mask, ecc_c, ecc_u = (x if x is None else x.strip() for x in h)
            close("memory clock MHz", g.get("mem_clock"), num(mem_clock or ""), 0.1, 100)
            if k == 0:
                for name, a, b in (("max SM clock MHz", g.get("sm_clock_max"), num(max_sm or "")),
                                   ("default power limit W", g.get("power_limit_default"), num(pdef or "")),
                                   ("corrected ECC errors", g.get("ecc_corrected"), num(ecc_c or "")),
                                   ("uncorrected ECC errors", g.get("ecc_uncorrected"), num(ecc_u or ""))):
                    if b is not None:
                        check(a is not None and abs(a - b) <= 1, f"GPU {idx}: {name} agent {a} == nvidia-smi {b}")
            try:
                m = int(mask, 0)
            except (TypeError, ValueError):
                m = None
            if m is not None:
                # Reasons move from one read to the next; most reads agree.
                same_mask.setdefault(idx, []).append(g.get("throttle_reasons") == m)

if load == "torch" and util0["agent"] and util0["smi"]:
    a = sum(util0["agent"]) / len(util0["agent"])
    s = sum(util0["smi"]) / len(util0["smi"])
    check(a >= 50 and s >= 50, f"GPU 0 under load: mean utilisation agent {a:.0f}%, nvidia-smi {s:.0f}% (both >= 50%)")
    check(abs(a - s) <= 25, f"GPU 0 mean utilisation agrees within 25 points ({a:.0f} vs {s:.0f})")

for idx, same in sorted(same_mask.items()):
    check(sum(same) * 2 >= len(same), f"GPU {idx}: throttle reasons agree with nvidia-smi in {sum(same)} of {len(same)} reads")

def events(name):
    return json.load(open(f"{work}/events-{name}.json")).get("events", [])

real = events("real")
bad = [e for e in real if e["kind"] in ("gpu_xid", "gpu_lost")]
check(not bad, f"no Xid or lost-GPU event on this node's GPUs ({len(real)} health event(s): {sorted({e['kind'] for e in real})})")
sim = events("sim")
kinds = {(e["kind"], e.get("gpu")) for e in sim}
for want in (("gpu_xid", 0), ("gpu_throttle", 1), ("gpu_lost", 1)):
    check(want in kinds, f"the simulated GPU's run has {want[0]} on GPU {want[1]} ({sorted(kinds)})")
xids = [e for e in sim if e["kind"] == "gpu_xid"]
check(bool(xids) and xids[0].get("attrs", {}).get("xid") == "79" and "fallen off the bus" in xids[0].get("message", ""),
      f"the Xid event names 79 and what it means: {xids[:1]}")
thr = [e for e in sim if e["kind"] == "gpu_throttle"]
check(bool(thr) and not thr[0].get("open") and thr[0].get("end_ms", 0) > thr[0]["time_ms"], f"the slowdown is a closed span: {thr[:1]}")

latest = json.load(open(f"{work}/latest.json"))["nodes"]
check(len(latest) == 1, "the server has the agent's node")
if latest:
    age = time.time() * 1000 - latest[0]["ts_ms"]
    check(age < 10_000, f"the latest sample is {age / 1000:.1f}s old")
series = json.load(open(f"{work}/series.json"))["gpus"]
check(len(series) == len(pairs[0]["agent"]["gpus"]), f"history for {len(series)} GPUs")
for g in series:
    n = len(g["series"]["mem_used"])
    check(n >= seconds // 2 - 2, f"GPU {g['index']}: {n} samples in {seconds}s at 2 s")

# The job under sextant run: GPU 0 only (CUDA_VISIBLE_DEVICES=0), about 7
# samples in 14 s, logged to the run as MLflow system metrics.
run_gpus = json.load(open(f"{work}/run-series.json"))["gpus"]
check([g["index"] for g in run_gpus] == [0], f"the run's GPUs: {[g['index'] for g in run_gpus]} (want [0])")
if run_gpus:
    n = len(run_gpus[0]["series"]["util"])
    check(n >= 5, f"the run has {n} samples of GPU 0 in 14 s at 2 s")
hist = json.load(open(f"{work}/run-util.json")).get("metrics", [])
check(len(hist) >= 5, f"the run's system/gpu_0_utilization_percentage has {len(hist)} points")
if load == "torch" and hist:
    mean = sum(m["value"] for m in hist) / len(hist)
    check(mean >= 50, f"GPU 0 under the job: mean utilisation {mean:.0f}% in the run's system metrics (>= 50%)")

# MFU (issue 45): the server took the GPU model from NVML (the run's GPU
# samples), matched it in the peak table (internal/goodput/peaks.go, read
# here from the source: the longest part of the name on word boundaries)
# and computed MFU as the job's own FLOPs/s over that bf16 peak.
if mfu != "skipped":
    check(mfu == "ran", "the MFU job under sextant run finished")
if mfu == "ran":
    import re
    job = json.load(open(f"{work}/mfu-job.json"))
    gp = json.load(open(f"{work}/goodput-mfu.json"))["mfu"]
    smi_name = open(f"{work}/mfu-smi-name.txt").read().strip()
    src = open("internal/goodput/peaks.go").read()
    table = {m: dict((d, float(v)) for d, v in re.findall(r'"(\w+)":\s*([0-9.]+)', body))
             for m, body in re.findall(r'^\t"([^"]+)":\s*\{([^}]*)\}', src, re.M)}
    def contains(name, part):  # as containsWord in peaks.go: on word boundaries, any case
        return re.search(r"(?<![a-z0-9])" + re.escape(part) + r"(?![a-z0-9])", name.lower()) is not None
    parts = sorted((m for m in table if contains(smi_name, m)), key=len, reverse=True)
    print(f"      nvidia-smi: {smi_name!r}; server: model {gp.get('gpu_model')!r}, peak {gp.get('peak_tflops')} TFLOPS "
          f"({gp.get('peak_source')}), mfu {gp.get('mfu')}; job: {job['flops_per_s'] / 1e12:.1f} TFLOPS over {job['seconds']:.2f} s")
    check(job["sent"] == 20 and job["dropped"] == 0, f"the server took the job's 20 progress reports: {job['sent']} sent, {job['dropped']} dropped")
    check(bool(parts) and "bf16" in table[parts[0]],
          f"GPU model {smi_name!r} has a bf16 peak in internal/goodput/peaks.go (add it if not)")
    check((gp.get("gpu_model") or "").strip().lower() == smi_name.lower(),
          f"the server's GPU model (from NVML) {gp.get('gpu_model')!r} is the one nvidia-smi names, {smi_name!r}")
    if parts and "bf16" in table[parts[0]]:
        want = table[parts[0]]["bf16"]
        check(gp.get("peak_tflops") == want and gp.get("peak_source") == "table: " + parts[0],
              f"the peak used, {gp.get('peak_tflops')} TFLOPS ({gp.get('peak_source')}), is the table's bf16 figure for {parts[0]!r}: {want}")
        v = gp.get("mfu")
        if v is None:
            check(False, f"MFU is present (reason: {gp.get('reason')})")
        else:
            expect = job["flops_per_s"] / (want * 1e12)
            check(abs(v - expect) <= 0.10 * expect, f"MFU {v:.3f} is the job's own {expect:.3f} (FLOPs/s over the peak) within 10%")
            check(0.05 < v <= 1.0, f"MFU {v:.3f} lies in (0.05, 1.0]")

# Checkpoints from the GPU: every save loaded back bit for bit, and the run
# lists them as complete saves with the staging and the time it blocked.
if ckpt != "skipped":
    check(ckpt == "ran", "the checkpoint job under sextant run finished")
    if ckpt == "ran":
        res = json.load(open(f"{work}/ckpt.json"))
        print("      " + json.dumps(res))
        for s in res["saves"]:
            check(s["loaded_bit_for_bit"], f"{s['mode']}/{s['staging']} save loads back bit for bit "
                  f"(blocked {s['blocked_s']} s, landed {s['landed_s']} s, {s['steps_during_upload']} steps during the upload)")
        check(res["latest_complete"].endswith("/step_3"), f"latest_complete finds the last save: {res['latest_complete']}")
        saves = [e for e in json.load(open(f"{work}/events-ckpt.json")).get("events", []) if e["kind"] == "checkpoint_save"]
        done = sorted(e.get("step") for e in saves if e["checkpoint"].get("outcome", "complete") == "complete")
        check(done == [1, 2, 3], f"the run records three complete saves: steps {done}")
        staging = [(e["checkpoint"].get("mode"), e["checkpoint"].get("staging"), e["checkpoint"].get("blocked_ms")) for e in saves]
        check(sum(1 for m, st, b in staging if st == "pinned" and b is not None) == 2,
              f"two saves report pinned staging and the time they blocked: {staging}")

print()
if failures:
    print(f"gpu-check: {len(failures)} check(s) failed")
    sys.exit(1)
print("gpu-check: all checks passed")
EOF
