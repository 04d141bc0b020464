"""Benchmark of dcp.async_save through VolumeWriter in both async modes;
prints one JSON object.

    PYTHONPATH=python python bench/async_ckpt_bench.py [--short] [--size-gib 1] [--ranks 1] [--bin sextant]

Run it with the ML environment (torch). It starts a `sextant server` and,
in --ranks ranks (torch.multiprocessing, gloo), a CPU training loop (a
small MLP on one thread per rank) that measures its own steps per second,
next to a state of --size-gib GiB (float32 tensors, split across the
ranks) that it checkpoints with dcp.async_save and VolumeWriter, in each of
the modes:

- thread/copy: AsyncCheckpointerType.THREAD, torch's staging copy (the
  default);
- thread/shared: THREAD, VolumeWriter(staging="shared");
- process/copy: AsyncCheckpointerType.PROCESS, the default staging;
- process/shared: PROCESS with staging="shared".

For each: the time training is blocked (async_save returning), the time
until the checkpoint has landed, and the training loop's steps per second
while the upload is in flight, against its steps per second without a
save (measured just before and just after, for as long: the mean). The staging copy it is compared
with is a plain clone of the state (fresh memory, as the copy staging
does) and a copy into existing tensors (as shared staging does from the
second save on). Each mode is measured --reps times (5) after a save that
is not measured (the process mode's first save starts its process), the
modes interleaved round by round; medians count, the slowest rank decides.
The run is recorded as a run of the server, so every save is also
reported as run events, as in a job.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
MODES = ("thread/copy", "thread/shared", "process/copy", "process/shared")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, a: argparse.Namespace, url: str, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch import nn
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

    from sextant.checkpoint import VolumeWriter
    from sextant.client import Client

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), MLFLOW_RUN_ID=a.run_id)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks, timeout=datetime.timedelta(minutes=30))
    ckpt_pg = dist.new_group(backend="gloo")
    per_rank = a.bytes // a.ranks
    g = torch.Generator().manual_seed(rank)
    state = {f"r{rank}.t{i}": torch.randn(per_rank // 4 // 8, generator=g) for i in range(8)}
    client = Client(url)
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 256)

    def step() -> None:
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()

    def steps_for(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while (el := time.perf_counter() - t0) < seconds:
            step()
            n += 1
        return n / el

    res: dict[str, list[float]] = {}

    def note(k: str, v: float) -> None:
        res.setdefault(k, []).append(v)

    for _ in range(20):
        step()
    save_no = [0]
    last_upload: dict[str, float] = {}

    def save(mode: str, measured: bool) -> None:
        kind, staging = mode.split("/")
        save_no[0] += 1
        # The same loop without a save, just before (for as long as the last
        # upload of this mode took) and again just after: the machine's load
        # moves, and the mean of the two is the fairest baseline.
        before = steps_for(last_upload.get(mode, 1.0)) if measured else 0.0
        w = VolumeWriter(f"{a.vol}/{kind}_{staging}/step_{save_no[0]}", client=client, staging=staging,
                         nice=a.thread_nice if kind == "thread" else a.process_nice)
        dist.barrier()
        t0 = time.perf_counter()
        fut = dcp.async_save(state, storage_writer=w, process_group=ckpt_pg,
                             async_checkpointer_type=AsyncCheckpointerType.PROCESS if kind == "process" else AsyncCheckpointerType.THREAD)
        t1 = time.perf_counter()
        n = 0
        while not fut.done():
            step()
            n += 1
        t2 = time.perf_counter()
        fut.result()
        during = n / (t2 - t1) if t2 > t1 else 0.0
        last_upload[mode] = max(t2 - t1, 0.5)
        if measured:
            note(f"{mode} blocked_s", t1 - t0)
            note(f"{mode} landed_s", t2 - t0)
            note(f"{mode} upload_s", t2 - t1)
            idle = (before + steps_for(last_upload[mode])) / 2
            note(f"{mode} steps_per_s_during_upload", during)
            note(f"{mode} steps_per_s_idle", idle)
            note(f"{mode} throughput_ratio", during / idle)

    for mode in MODES:
        save(mode, measured=False)
    for rep in range(a.reps):
        order = MODES if rep % 2 == 0 else MODES[::-1]
        for mode in order:
            save(mode, measured=True)
        t = time.perf_counter()
        clone = {k: v.clone() for k, v in state.items()}
        note("staging_clone_s", time.perf_counter() - t)
        t = time.perf_counter()
        for k, v in state.items():
            clone[k].copy_(v)
        note("staging_copy_into_s", time.perf_counter() - t)
        del clone
    names = sorted(res)
    # Medians per rank, then the slowest rank (the lowest ratios) decides.
    vals = [statistics.median(res[k]) for k in names]
    worst = [(-v if ("ratio" in k or "steps_per_s" in k) else v) for k, v in zip(names, vals)]
    t = torch.tensor(worst, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        merged = {k: (-v if ("ratio" in k or "steps_per_s" in k) else v) for k, v in zip(names, t.tolist())}
        Path(out).write_text(json.dumps({"medians": merged, "runs": {k: res[k] for k in names}}))
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--short", action="store_true", help="256 MiB instead of --size-gib")
    p.add_argument("--size-gib", type=float, default=1)
    p.add_argument("--ranks", type=int, default=1, help="training ranks (1 leaves a core of this 2-core machine to the upload and the server)")
    p.add_argument("--bin", default=os.environ.get("SEXTANT_BIN", ""))
    p.add_argument("--dir", default="")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--server-nice", type=int, default=19,
                   help="the server's nice level: 19 as if it ran on another machine (it does, beside a real training job)")
    p.add_argument("--thread-nice", type=int, default=0, help="VolumeWriter(nice=) in the thread modes")
    p.add_argument("--process-nice", type=int, default=None,
                   help="VolumeWriter(nice=) in the process modes (default: the writer's own, 10)")
    a = p.parse_args()
    a.bytes = int((0.25 if a.short else a.size_gib) * (1 << 30))
    tmp = tempfile.mkdtemp(prefix="sextant-abench-", dir=a.dir or None)
    os.environ["SEXTANT_STAGING_DIR"] = str(Path(tmp) / "staging")
    binary = a.bin
    if not binary:
        binary = str(Path(tmp) / "sextant")
        subprocess.run(["go", "build", "-o", binary, "./cmd/sextant"], cwd=ROOT, check=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(Path(tmp) / "server.log", "wb")
    srv = subprocess.Popen(["nice", "-n", str(a.server_nice), binary, "server", "--port", str(port), "--data-dir", str(Path(tmp) / "data")],
                           stdout=log, stderr=log)
    try:
        for _ in range(200):
            try:
                if requests.get(url + "/health", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        for target, body in (("/catalogs", {"name": "bench"}), ("/schemas", {"catalog_name": "bench", "name": "b"}),
                             ("/volumes", {"catalog_name": "bench", "schema_name": "b", "name": "v"})):
            requests.post(url + "/api/2.1/unity-catalog" + target, json=body, timeout=10).raise_for_status()
        a.vol = "/Volumes/bench/b/v"
        r = requests.post(url + "/api/2.0/mlflow/runs/create", json={"experiment_id": "0"}, timeout=10)
        r.raise_for_status()
        a.run_id = r.json()["run"]["info"]["run_id"]
        os.environ["MLFLOW_TRACKING_URI"] = url
        import torch.multiprocessing as mp

        out = str(Path(tmp) / "async.json")
        mp.start_processes(rank_main, args=(a, url, free_port(), out), nprocs=a.ranks, start_method="fork")
        got = json.loads(Path(out).read_text())
        med = got["medians"]
        modes = {}
        for mode in MODES:
            m = {k.split(" ", 1)[1]: round(v, 3) for k, v in med.items() if k.startswith(mode + " ")}
            m["blocked_vs_staging_clone"] = round(med[f"{mode} blocked_s"] / med["staging_clone_s"], 2)
            m["blocked_vs_staging_copy_into"] = round(med[f"{mode} blocked_s"] / med["staging_copy_into_s"], 2)
            modes[mode] = m
        evs = requests.get(url + "/api/2.0/sextant/events/list", params={"run_id": a.run_id, "kind": "checkpoint_save"}, timeout=30).json()["events"]
        recorded = {}
        for e in evs:
            c = e["checkpoint"]
            key = f"{c.get('mode')}/{c.get('staging')}"
            recorded.setdefault(key, {"saves": 0, "complete": 0})
            recorded[key]["saves"] += 1
            recorded[key]["complete"] += c.get("outcome") == "complete"
        result = {"benchmark": "async_checkpoint", "short": a.short, "cpus": os.cpu_count(), "ranks": a.ranks, "reps": a.reps,
                  "server_nice": a.server_nice, "thread_nice": a.thread_nice, "process_nice": a.process_nice, "load_average_at_start": os.getloadavg()[0],
                  "bytes": a.bytes, "staging_clone_s": round(med["staging_clone_s"], 3),
                  "staging_copy_into_s": round(med["staging_copy_into_s"], 3), "modes": modes,
                  "recorded_on_run": recorded,
                  "runs": {k: [round(x, 3) for x in v] for k, v in got["runs"].items()}}
        print(json.dumps(result, indent=2))
    finally:
        srv.terminate()
        srv.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
