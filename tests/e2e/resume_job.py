"""A training job for test_resume.py, run under `sextant run`: 2 ranks
forked with torch.multiprocessing (gloo on CPU), an FSDP2-sharded model and
AdamW trained on a VolumeDataset, a checkpoint every --every steps with
dcp.async_save through VolumeWriter (JOB_MODE=thread or process:
AsyncCheckpointerType; JOB_STAGING: VolumeWriter's staging), rank 0
logging the loss to the launcher's run with mlflow, and resume through
sextant.resume (SEXTANT_RESUME_FROM, set by `sextant run --resume latest`).

The save of step --hold-at stops just before its .metadata (every shard
landed) and writes holding_<step> in --out: the test kills the job there.
Each rank appends what every step saw (sample ids, loss, which attempt) to
seen<rank>.jsonl in --out. The mode and staging come from the environment
so that both attempts run the same command line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from sextant.checkpoint import VolumeWriter
from sextant.data import PipelineState, VolumeDataLoader, VolumeDataset
from sextant.resume import TrainState, resume


class HoldingWriter(VolumeWriter):
    """A VolumeWriter whose coordinator stops before publishing .metadata:
    the save is in flight, every shard on the volume, when the test kills
    the job."""

    def __init__(self, *args, marker: str = "", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.marker = marker

    def _publish(self, local: Path) -> None:
        Path(self.marker).write_text(str(os.getpid()))
        while True:
            time.sleep(1)


def rank_main(rank: int, a) -> None:
    out = Path(a.out)
    (out / f"rank{rank}.pid").write_text(str(os.getpid()))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(a.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=a.world, timeout=datetime.timedelta(seconds=120))
    try:
        train(rank, a, out)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    dist.destroy_process_group()


def train(rank: int, a, out: Path) -> None:
    mode = os.environ.get("JOB_MODE", "thread")
    staging = os.environ.get("JOB_STAGING", "copy")
    kind = AsyncCheckpointerType.PROCESS if mode == "process" else AsyncCheckpointerType.THREAD
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(a.width, 2 * a.width), nn.ReLU(), nn.Linear(2 * a.width, a.width))
    fully_shard(model, mesh=init_device_mesh("cpu", (a.world,)))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ds = VolumeDataset(a.data, shuffle=True, seed=7)
    loader = VolumeDataLoader(ds, batch_size=4, num_workers=1)
    ts = TrainState(model, optim)
    state = {"train": ts, "data": ds, "rng": PipelineState()}
    torch.manual_seed(1000 + rank)  # the draws PipelineState must restore
    res = resume(state)
    attempt = os.environ.get("SEXTANT_RESUME_FROM", "fresh")
    mlflow = None
    if rank == 0:
        import mlflow

        mlflow.start_run()  # the launcher's run (MLFLOW_RUN_ID)
    ckpt_group = dist.new_group(backend="gloo")
    seen = open(out / f"seen{rank}.jsonl", "a")
    fut = None
    while ts.step < a.steps:
        ds.set_epoch(ds.epoch)
        for batch in loader:
            ts.step += 1
            step = ts.step
            x = torch.stack([torch.tensor(v, dtype=torch.float32) for v in batch["x"]], dim=1)
            x = torch.nn.functional.pad(x, (0, a.width - x.shape[1])) * torch.rand(1).item()
            loss = model(x).pow(2).mean()
            loss.backward()
            optim.step()
            optim.zero_grad()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            value = mean.item() / a.world
            seen.write(json.dumps({"step": step, "attempt": attempt, "epoch": ds.epoch, "ids": batch["id"].tolist(),
                                   "loss": value, "mode": mode}) + "\n")
            seen.flush()
            if mlflow is not None and (res is None or res.should_log(step)):
                mlflow.log_metric("loss", value, step=step)
            if step % a.every == 0:
                if fut is not None:
                    fut.result()
                path = f"{a.ckpt}/step_{step}"
                if step == a.hold_at and attempt == "fresh":
                    w: VolumeWriter = HoldingWriter(path, step=step, staging=staging, marker=str(out / f"holding_{step}"))
                else:
                    w = VolumeWriter(path, step=step, staging=staging)
                fut = dcp.async_save(state, storage_writer=w, process_group=ckpt_group, async_checkpointer_type=kind)
            if step == a.steps:
                break
        else:
            ds.set_epoch(ds.epoch + 1)
    if fut is not None:
        fut.result()
    (out / f"done{rank}").write_text(attempt)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=3)
    p.add_argument("--hold-at", type=int, default=-1)
    a = p.parse_args()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    import mlflow  # noqa: F401 - imported once, before the fork

    mp.start_processes(rank_main, args=(a,), nprocs=a.world, start_method="fork")


if __name__ == "__main__":
    main()
