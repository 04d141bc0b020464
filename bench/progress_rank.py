"""One rank of `go run ./bench progress`'s client part; prints one JSON line.

    python progress_rank.py MODE KIND STEPS STEP_S RANK START_AT

MODE is "off" (the loop alone) or "on" (Progress.step() after every step,
to the run in MLFLOW_RUN_ID on MLFLOW_TRACKING_URI); KIND is "sleep" (the
step sleeps STEP_S) or "busy" (it spins for STEP_S of its own CPU time).
The loop starts at the wall-clock time START_AT, so that the ranks of one
round run together. Standard library only (sextant.progress from
PYTHONPATH).
"""

import json
import sys
import threading
import time


def thread_cpu_s(t: threading.Thread) -> float:
    """CPU time (user + system) of another live thread of this process."""
    if t.ident is None or not t.is_alive():
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def main() -> None:
    mode, kind, steps, step_s, rank, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    p = None
    if mode == "on":
        from sextant.progress import Progress

        p = Progress(rank=rank, node="bench-node", gpu=rank)
    for _ in range(3):  # warm the loop's code paths before timing
        time.sleep(step_s)
    time.sleep(max(0.0, start_at - time.time()))
    if p is not None:
        p.reset()
        p.sent = 0
    sender0 = thread_cpu_s(p._thread) if p is not None and p._thread is not None else 0.0
    cpu0, tcpu0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(steps):
        if kind == "sleep":
            time.sleep(step_s)
        else:
            end = time.thread_time() + step_s
            while time.thread_time() < end:
                pass
        if p is not None:
            p.data_ready()
            p.step(samples=32)
    wall = time.perf_counter() - t0
    main_cpu = time.thread_time() - tcpu0
    sender_cpu = 0.0
    if p is not None:
        if p._thread is not None:
            sender_cpu = thread_cpu_s(p._thread) - sender0
        p.close(timeout=30)  # the last send: part of the cost
    out = {
        "wall_s": wall,
        # The process's CPU from the loop's start to the last report sent.
        "cpu_s": time.process_time() - cpu0,
        "main_thread_cpu_s": main_cpu,
        # The sender thread's CPU during the loop.
        "sender_thread_cpu_s": sender_cpu,
        "sent": p.sent if p is not None else 0,
        "dropped": p.dropped if p is not None else 0,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
