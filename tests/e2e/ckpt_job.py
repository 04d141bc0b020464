"""A distributed training job for test_checkpoint.py: N ranks forked with
torch.multiprocessing (gloo on CPU), an FSDP2-sharded model and AdamW, and
PyTorch Distributed Checkpoints saved to and loaded from a Sextant volume
with sextant.checkpoint. Modes:

  save   train, dcp.save step_1, train, dcp.async_save step_2 while training
         continues (a separate gloo group for the checkpoint's collectives);
         rank 0 writes the full expected state of each checkpoint to --out
  load   a fresh model loads --ckpt and compares every tensor with --expect
  crash  save step_1, write step1.done, wait for the file go, save step_2
         (--async-save: with dcp.async_save) while the test breaks something;
         each rank writes its outcome (and when the save ended), rank 0 the
         expected state of both checkpoints
  train  train on a VolumeDataset with checkpoints every --every steps,
         recording the samples and RNG draws of each step; --kill-at exits
         abruptly after that step; --resume starts from the latest checkpoint

Each rank writes rank<r>.pid in --out; results are JSON files there.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
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
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from sextant.checkpoint import VolumeReader, VolumeWriter, latest_checkpoint
from sextant.data import PipelineState, VolumeDataLoader, VolumeDataset


class AppState(Stateful):
    """The model and optimizer, as DCP wants them (sharded state dicts)."""

    def __init__(self, model: nn.Module, optim: torch.optim.Optimizer) -> None:
        self.model, self.optim = model, optim

    def state_dict(self):
        msd, osd = get_state_dict(self.model, self.optim)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, sd) -> None:
        set_state_dict(self.model, self.optim, model_state_dict=sd["model"], optim_state_dict=sd["optim"])


def build(world: int, width: int, seed: int):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))
    fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, optim, x: torch.Tensor) -> None:
    loss = model(x).pow(2).mean()
    loss.backward()
    optim.step()
    optim.zero_grad()


def batch_for(rank: int, step: int, width: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, width, generator=g)


def full(obj):
    """obj with every DTensor replaced by its full tensor (a collective: all
    ranks call it in the same order)."""
    if isinstance(obj, DTensor):
        return obj.full_tensor().clone()
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        return {k: full(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(full(v) for v in obj)
    return obj


def digest(obj) -> str:
    h = hashlib.sha256()

    def walk(o) -> None:
        if isinstance(o, torch.Tensor):
            h.update(o.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
        elif isinstance(o, dict):
            for k in sorted(o, key=str):
                h.update(str(k).encode())
                walk(o[k])
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        else:
            h.update(repr(o).encode())

    walk(obj)
    return h.hexdigest()


def mismatches(got, want, path: str = "") -> list[str]:
    if isinstance(want, torch.Tensor):
        ok = isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
        return [] if ok else [path]
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return [path + " (keys)"]
        return [m for k in want for m in mismatches(got[k], want[k], f"{path}.{k}")]
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return [path + " (length)"]
        return [m for i, (g, w) in enumerate(zip(got, want)) for m in mismatches(g, w, f"{path}[{i}]")]
    return [] if got == want else [f"{path} ({got!r} != {want!r})"]


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


# ---------------------------------------------------------------- modes


def mode_save(a, rank: int, world: int, out: Path) -> None:
    model, optim = build(world, a.width, seed=0)
    app = AppState(model, optim)
    state = {"app": app, "pos": PipelineState(extra={"note": "saved"})}
    run_id = None
    if a.mlflow and rank == 0:
        import mlflow

        run_id = mlflow.start_run(run_name="dcp").info.run_id
    for step in range(3):
        train_step(model, optim, batch_for(rank, step, a.width))
    expect1 = full(app.state_dict())
    dcp.save(state, storage_writer=VolumeWriter(a.ckpt + "/step_1"))
    train_step(model, optim, batch_for(rank, 3, a.width))
    expect2 = full(app.state_dict())
    ckpt_group = dist.new_group(backend="gloo")
    t = time.perf_counter()
    fut = dcp.async_save(state, storage_writer=VolumeWriter(a.ckpt + "/step_2", lease_seconds=a.lease),
                         process_group=ckpt_group)
    blocked = time.perf_counter() - t
    steps_during = 0
    # Training steps are collective (FSDP all-gathers): every rank must take
    # the same number, so they go on while any rank's save is in flight.
    while steps_during < 50:
        busy = torch.tensor([0 if fut.done() else 1])
        dist.all_reduce(busy, op=dist.ReduceOp.MAX)
        if not busy.item():
            break
        train_step(model, optim, batch_for(rank, 100 + steps_during, a.width))
        steps_during += 1
    fut.result()
    landed = time.perf_counter() - t
    if rank == 0:
        torch.save(expect1, out / "expected_step_1.pt")
        torch.save(expect2, out / "expected_step_2.pt")
        if run_id:
            import mlflow

            mlflow.end_run()
    write_json(out / f"result{rank}.json", {"blocked_s": blocked, "landed_s": landed, "steps_during_async": steps_during,
                                           "run_id": run_id})


def mode_load(a, rank: int, world: int, out: Path) -> None:
    model, optim = build(world, a.width, seed=123)  # different weights: the load must replace them
    train_step(model, optim, batch_for(rank, 0, a.width))  # optimizer state to load into
    app = AppState(model, optim)
    dcp.load({"app": app}, storage_reader=VolumeReader(a.ckpt))
    got = full(app.state_dict())
    want = torch.load(a.expect, weights_only=False)
    write_json(out / f"result{rank}.json", {"mismatches": mismatches(got, want)[:20], "tensors": len(str(want))})


def mode_crash(a, rank: int, world: int, out: Path) -> None:
    model, optim = build(world, a.width, seed=0)
    app = AppState(model, optim)
    for step in range(2):
        train_step(model, optim, batch_for(rank, step, a.width))
    expect = full(app.state_dict())
    opts = {"lease_seconds": a.lease, "retry_seconds": a.retry_seconds, "publish_timeout": a.publish_timeout}
    dcp.save({"app": app}, storage_writer=VolumeWriter(a.ckpt + "/step_1", **opts))
    ckpt_group = dist.new_group(backend="gloo") if a.async_save else None
    if rank == 0:
        torch.save(expect, out / "expected_step_1.pt")
        (out / "step1.done").write_text("ok")
    while not (out / "go").exists():
        time.sleep(0.05)
    train_step(model, optim, batch_for(rank, 2, a.width))
    expect2 = full(app.state_dict())
    if rank == 0:
        torch.save(expect2, out / "expected_step_2.pt")
    try:
        w = VolumeWriter(a.ckpt + "/step_2", **opts)
        if a.async_save:
            dcp.async_save({"app": app}, storage_writer=w, process_group=ckpt_group).result()
        else:
            dcp.save({"app": app}, storage_writer=w)
        write_json(out / f"result{rank}.json", {"ok": True, "ended": time.time()})
    except BaseException as e:  # noqa: BLE001 - the test reads what happened
        causes = []
        for r, (exc, _) in sorted(getattr(e, "failures", {}).items()):
            causes.append({"rank": r, "type": type(exc).__name__, "message": str(exc)[:4000],
                           "missing": getattr(exc, "missing", None), "replaced": getattr(exc, "replaced", None)})
        write_json(out / f"result{rank}.json", {"ok": False, "error": f"{type(e).__name__}: {e}"[:8000],
                                               "causes": causes, "ended": time.time()})
        raise


def mode_train(a, rank: int, world: int, out: Path) -> None:
    model, optim = build(world, a.width, seed=0)
    ds = VolumeDataset(a.data, shuffle=True, seed=7)
    loader = VolumeDataLoader(ds, batch_size=4, num_workers=2)
    pipe = PipelineState()
    state = {"app": AppState(model, optim), "data": ds, "pipe": pipe}
    torch.manual_seed(1000 + rank)  # the draws PipelineState must restore
    step = 0
    if a.resume:
        last = latest_checkpoint(a.ckpt)
        assert last, f"nothing to resume under {a.ckpt}"
        dcp.load(state, storage_reader=VolumeReader(last))
        step = int(pipe.extra["step"])
    seen = open(out / f"seen{rank}.jsonl", "a")
    while step < a.steps:
        ds.set_epoch(ds.epoch)
        for batch in loader:
            step += 1
            x = torch.stack([torch.tensor(v, dtype=torch.float32) for v in batch["x"]], dim=1)
            x = torch.nn.functional.pad(x, (0, a.width - x.shape[1]))
            noise = torch.rand(1).item()
            seen.write(json.dumps({"step": step, "epoch": ds.epoch, "ids": batch["id"].tolist(), "noise": noise}) + "\n")
            seen.flush()
            train_step(model, optim, x * noise)
            if step % a.every == 0:
                pipe.extra["step"] = step
                dcp.save(state, storage_writer=VolumeWriter(f"{a.ckpt}/step_{step}"))
            if step == a.kill_at:
                os._exit(3)  # killed: no cleanup, no goodbye
            if step == a.steps:
                break
        else:
            ds.set_epoch(ds.epoch + 1)
    final = digest(full(state["app"].state_dict()))
    write_json(out / f"result{rank}.json", {"final": final, "epoch": ds.epoch})


MODES = {"save": mode_save, "load": mode_load, "crash": mode_crash, "train": mode_train}


def rank_main(rank: int, a) -> None:
    out = Path(a.out)
    (out / f"rank{rank}.pid").write_text(str(os.getpid()))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(a.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=a.world, timeout=datetime.timedelta(seconds=a.pg_timeout))
    try:
        MODES[a.mode](a, rank, a.world, out)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--expect")
    p.add_argument("--data")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--lease", type=float, default=60.0)
    p.add_argument("--retry-seconds", type=float, default=30.0)
    p.add_argument("--publish-timeout", type=float, default=30.0)
    p.add_argument("--async-save", action="store_true")
    p.add_argument("--mlflow", action="store_true")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=3)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--pg-timeout", type=float, default=60)
    a = p.parse_args()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    if a.mlflow:
        import mlflow  # noqa: F401 - imported once, before the fork
    mp.start_processes(rank_main, args=(a,), nprocs=a.world, start_method="fork")


if __name__ == "__main__":
    main()
