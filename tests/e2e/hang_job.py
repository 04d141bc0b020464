"""Jobs for test_hang.py.

--mode collective: a 2-rank torchrun job (CPU, gloo) whose ranks report a
few steps with sextant.progress, then hang: rank 0 in dist.all_reduce
(blocked_collective), which rank 1 never joins because it sleeps
(rank1_sleeps). --mode silent: one process that never calls the progress
API, prints nothing and logs no metric (silent_wait)."""

from __future__ import annotations

import argparse
import time


def blocked_collective(dist, t) -> None:
    dist.all_reduce(t)


def rank1_sleeps() -> None:
    time.sleep(3600)


def silent_wait() -> None:
    time.sleep(3600)


def collective() -> None:
    import torch
    import torch.distributed as dist

    from sextant.progress import Progress

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    p = Progress()
    assert p.enabled and p.rank == rank, (p.run_id, p.rank, rank)
    for step in range(5):
        time.sleep(0.05)
        p.step(step, samples=1)
    p.flush()
    dist.barrier()
    if rank == 0:
        blocked_collective(dist, torch.ones(4))
    else:
        rank1_sleeps()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["collective", "silent"], required=True)
    a = ap.parse_args()
    if a.mode == "collective":
        collective()
    else:
        silent_wait()


if __name__ == "__main__":
    main()
