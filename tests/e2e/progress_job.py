"""A 2-rank job for test_progress.py, run by torchrun under `sextant run`:
each rank steps for about the same wall time, rank --slow-rank sleeping
--slow-factor times longer per step, and reports every step with
sextant.progress; each rank writes how long its progress calls took and
its measured step times to --out/cost<rank>.json."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

from sextant.progress import Progress


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--step", type=float, default=0.04)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--slow-factor", type=float, default=5.0)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    sleep = a.step * (a.slow_factor if rank == a.slow_rank else 1.0)
    steps = int(a.seconds / sleep)
    x = torch.randn(64, 64)
    p = Progress()
    assert p.enabled and p.rank == rank, (p.run_id, p.rank, rank)
    dist.barrier()
    p.reset()
    calls, step_times = [], []
    last = time.perf_counter()
    for step in range(steps):
        p.data_ready()
        x = torch.tanh(x @ x.T / 64)  # a little work
        time.sleep(sleep)
        t0 = time.perf_counter()
        p.step(step, samples=8, tokens=8 * 128)
        t1 = time.perf_counter()
        calls.append(t1 - t0)
        step_times.append(t0 - last)
        last = t1
    p.flush()
    with open(os.path.join(a.out, f"cost{rank}.json"), "w") as f:
        json.dump({"calls": len(calls), "mean_call_s": statistics.fmean(calls), "median_call_s": statistics.median(calls),
                   "max_call_s": max(calls),
                   "median_step_s": statistics.median(step_times), "dropped": p.dropped, "sent": p.sent}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
