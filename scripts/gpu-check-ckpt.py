"""The checkpoint part of scripts/gpu-check.sh: a model on the GPU saved to a
volume with dcp.async_save through VolumeWriter, in the thread-based and the
process-based checkpointer, with copy and pinned-memory staging, while it
keeps training; each save loaded back and compared bit for bit with the
state it was taken from. Run it under `sextant run`, so every save is
reported to the run (checked afterwards with `sextant ckpt ls --run`).

    python scripts/gpu-check-ckpt.py /Volumes/<catalog>/<schema>/<volume>/<dir> OUT.json

Without CUDA it runs on the CPU with a small model (to check this script
where there is no GPU); pinned staging then falls back to shared memory,
as docs/volumes.md says. Prints one JSON line and writes it to OUT.json;
exits 1 when a save does not load back bit for bit.
"""

from __future__ import annotations

import json
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

from sextant.checkpoint import VolumeReader, VolumeWriter, latest_complete

MODES = [("thread", "copy"), ("thread", "pinned"), ("process", "pinned")]


def main() -> int:
    root, out_path = sys.argv[1], sys.argv[2]
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda:0" if cuda else "cpu")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # async_save runs its collectives on a CPU backend: gloo beside NCCL, as
    # docs/volumes.md shows for GPUs.
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    if cuda:
        torch.cuda.set_device(0)
    torch.manual_seed(0)
    width, layers = (4096, 16) if cuda else (256, 4)  # 1.07 GB of float32 on the GPU
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(1024, width, device=dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()

    def rate(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step()
            n += 1
        return n / (time.perf_counter() - t0)

    step()
    result: dict = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
                    "state_bytes": sum(p.numel() * p.element_size() for p in model.state_dict().values()),
                    "steps_per_s_alone": round(rate(2.0), 2), "saves": []}
    ok = True
    for i, (mode, staging) in enumerate(MODES, start=1):
        path = f"{root}/step_{i}"
        expect = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        kind = AsyncCheckpointerType.PROCESS if mode == "process" else AsyncCheckpointerType.THREAD
        t0 = time.perf_counter()
        fut = dcp.async_save({"model": model.state_dict()}, storage_writer=VolumeWriter(path, step=i, staging=staging),
                             async_checkpointer_type=kind)
        blocked = time.perf_counter() - t0
        n, t1 = 0, time.perf_counter()
        while not fut.done():  # training goes on while the save uploads
            step()
            n += 1
        during = time.perf_counter() - t1
        fut.result()
        landed = time.perf_counter() - t0
        fresh = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(dev)
        sd = {"model": fresh.state_dict()}
        dcp.load(sd, storage_reader=VolumeReader(path))
        same = all(torch.equal(sd["model"][k].cpu(), v) for k, v in expect.items())
        ok = ok and same
        result["saves"].append({"mode": mode, "staging": staging, "blocked_s": round(blocked, 3),
                                "landed_s": round(landed, 3), "steps_during_upload": n,
                                "steps_per_s_during_upload": round(n / during, 2) if n and during > 0 else None,
                                "loaded_bit_for_bit": same})
    result["latest_complete"] = latest_complete(root)
    ok = ok and result["latest_complete"].endswith(f"/step_{len(MODES)}")
    result["ok"] = ok
    line = json.dumps(result)
    print(line, flush=True)
    with open(out_path, "w") as f:
        f.write(line + "\n")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
