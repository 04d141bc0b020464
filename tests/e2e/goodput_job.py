"""A 2-rank job for test_goodput.py, run by torchrun under `sextant run`:
each rank does --steps steps (numbered from 1) of a known simulated data
wait and compute sleep, and reports each with sextant.progress, giving its
own measured step time and data wait, the samples, and the MFU params
(Progress(flops_per_sample=, peak_tflops=, dtype=)). Each rank appends its
record of every step (step, start time, step time, data wait, samples,
which attempt) to --out/steps<rank>.jsonl, for the test's hand computation.

With --ckpt, a synchronous dcp.save through VolumeWriter after step
--ckpt-at, and resume through sextant.resume (SEXTANT_RESUME_FROM, set by
`sextant run --resume latest`). With --hold-after, the fresh attempt stops
after that step, its reports flushed, writes its pid to --out/hold<rank>
and waits there for the test's kill -9.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

from sextant.checkpoint import VolumeWriter
from sextant.progress import Progress
from sextant.resume import TrainState, resume


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--sleep", type=float, default=0.12)
    ap.add_argument("--wait", type=float, default=0.03)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--flops", type=float, required=True)
    ap.add_argument("--peak", type=float, required=True)
    ap.add_argument("--ckpt", default="")
    ap.add_argument("--ckpt-at", type=int, default=-1)
    ap.add_argument("--hold-after", type=int, default=-1)
    a = ap.parse_args()
    out = Path(a.out)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Linear(16, 16)
    ts = TrainState(model)
    state = {"train": ts}
    attempt = "fresh"
    if a.ckpt:
        res = resume(state)
        attempt = "fresh" if res is None else "resumed"
    p = Progress(flops_per_sample=a.flops, peak_tflops=a.peak, dtype="bf16")
    assert p.enabled and p.rank == rank
    rec = open(out / f"steps{rank}.jsonl", "a")
    compute = a.sleep * (1 + 0.5 * rank)  # ranks differ: the run's throughput is a sum of two rates
    while ts.step < a.steps:
        ts.step += 1
        start = time.time()
        t0 = time.perf_counter()
        time.sleep(a.wait)  # "waiting for the batch"
        waited = time.perf_counter() - t0
        time.sleep(compute)
        with torch.no_grad():
            model.weight.mul_(0.999)
        st = time.perf_counter() - t0
        p.step(ts.step, step_time_s=st, data_wait_s=waited, samples=a.samples)
        rec.write(json.dumps({"step": ts.step, "start": start, "step_time_s": st, "data_wait_s": waited,
                              "samples": a.samples, "attempt": attempt}) + "\n")
        rec.flush()
        if a.ckpt and ts.step == a.ckpt_at and attempt == "fresh":
            dcp.save(state, storage_writer=VolumeWriter(f"{a.ckpt}/step_{ts.step}", step=ts.step))
            p.reset()
        if ts.step == a.hold_after and attempt == "fresh":
            p.flush()
            (out / f"hold{rank}").write_text(str(os.getpid()))
            while True:
                time.sleep(1)
    p.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
