"""Crash durability: SIGKILL the server while clients log; after a restart on
the same data directory every acknowledged point is there, exactly once."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric

N_THREADS = 4
POINTS_PER_CALL = 100
LOG_FOR_S = 3.0


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_acknowledged_points_survive_sigkill(start_server, synchronous, monkeypatch):
    srv = start_server(sqlite_synchronous=synchronous)
    data_dir = srv.data_dir
    # A call in flight when the server dies must fail, not retry for minutes.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    client = MlflowClient(srv.url)
    exp_id = client.create_experiment(f"/Shared/durability/{synchronous}")
    run_id = client.create_run(exp_id).info.run_id
    client.log_param(run_id, "before_crash", "yes")

    acked: list[list[tuple]] = [[] for _ in range(N_THREADS)]   # batches that returned OK
    failed: list[list[tuple]] = [[] for _ in range(N_THREADS)]  # batches whose call raised
    stop = threading.Event()

    def worker(t: int):
        c = MlflowClient(srv.url)
        call = 0
        while not stop.is_set():
            base = t * 10_000_000 + call * POINTS_PER_CALL  # distinct steps per thread
            batch = [(base + j, 1_700_000_000_000 + base + j, float(t) + j / 1000.0) for j in range(POINTS_PER_CALL)]
            try:
                c.log_batch(run_id, metrics=[Metric("m", v, ts, s) for (s, ts, v) in batch])
            except Exception:
                failed[t].append(batch)
                return  # the server is gone
            acked[t].append(batch)
            call += 1

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    time.sleep(LOG_FOR_S)
    alive_before_kill = sum(th.is_alive() for th in threads)
    srv.kill()
    stop.set()
    for th in threads:
        th.join(timeout=30)
    assert not any(th.is_alive() for th in threads), "a client thread hung after the server died"
    assert alive_before_kill == N_THREADS, "a client thread stopped logging before the kill"
    n_acked = sum(len(a) for a in acked)
    assert n_acked >= N_THREADS, f"only {n_acked} calls succeeded in {LOG_FOR_S}s; the test proves little"
    print(f"[{synchronous}] {n_acked} acknowledged calls, {sum(map(len, failed))} failed at the kill")

    # Restart on the same data directory.
    srv2 = start_server(data_dir=data_dir, sqlite_synchronous=synchronous)
    c2 = MlflowClient(srv2.url)
    run = c2.get_run(run_id)
    assert run.data.params == {"before_crash": "yes"}
    hist = c2.get_metric_history(run_id, "m")
    got = [(m.step, m.timestamp, m.value) for m in hist]
    got_set = set(got)
    assert len(got) == len(got_set), f"{len(got) - len(got_set)} duplicate points after recovery"

    acked_points = {p for per in acked for b in per for p in b}
    missing = acked_points - got_set
    assert not missing, (f"[{synchronous}] {len(missing)} acknowledged points lost in the crash, "
                         f"e.g. {sorted(missing)[:3]}")
    failed_points = {p for per in failed for b in per for p in b}
    phantom = got_set - acked_points - failed_points
    assert not phantom, f"{len(phantom)} points present that no call sent, e.g. {sorted(phantom)[:3]}"
    # A failed call's batch is atomic: all of it or none of it.
    for per in failed:
        for b in per:
            present = sum(p in got_set for p in b)
            assert present in (0, len(b)), f"a batch interrupted by the crash is half stored ({present}/{len(b)})"

    # The latest value reflects the highest step stored.
    top = max(got, key=lambda p: (p[0], p[1], p[2]))
    assert math.isclose(run.data.metrics["m"], top[2])

    # The recovered server keeps working, and writes survive a clean restart too.
    c2.log_metric(run_id, "after", 1.0, step=1)
    srv2.stop_and_check()
    srv3 = start_server(data_dir=data_dir, sqlite_synchronous=synchronous)
    c3 = MlflowClient(srv3.url)
    assert len(c3.get_metric_history(run_id, "m")) == len(got)
    assert [(m.step, m.value) for m in c3.get_metric_history(run_id, "after")] == [(1, 1.0)]
    assert os.path.isdir(data_dir)
