"""A full disk under the data directory: the server keeps serving reads,
refuses writes with a clear 507, starts again after a kill -9 on the full
disk (read-only, saying so in its log and in /health), and writes again,
without a restart, once space is freed; every acknowledged point is there.

The data directory lives on a small tmpfs the test mounts, which needs
root (CI runs as root); elsewhere the test is skipped and says why, unless
SEXTANT_TEST_TMPFS=required (scripts/test.sh sets it as root), which fails
it instead."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException

from sextant_e2e import SextantServer

# The database lives on the tmpfs: not with the PostgreSQL session.
pytestmark = pytest.mark.disk

POINTS_PER_CALL = 1000


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        msg = f"cannot mount a tmpfs to fill (needs root; CI runs as root): {r.stderr.strip()}"
        if os.environ.get("SEXTANT_TEST_TMPFS") == "required":  # scripts/test.sh, as root
            pytest.fail(msg)
        pytest.skip(msg)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: Path) -> None:
    """Writes path until the file system has no space left."""
    block = b"\0" * (64 << 10)
    # Unbuffered: a buffered file keeps what a failing write did not get
    # onto the disk, and closing it tries again and raises ENOSPC from the
    # with statement (seen under load).
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def health(srv: SextantServer) -> dict:
    r = requests.get(srv.url + "/health", headers={"Accept": "application/json"}, timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def history_steps(client: MlflowClient, run_id: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, "loss"))


def concurrent_reads(srv: SextantServer, run_id: str, n: int = 64) -> list[int]:
    """n reads at once (run, history, search); their statuses."""
    urls = [srv.api("/mlflow/runs/get") + f"?run_id={run_id}",
            srv.api("/mlflow/metrics/get-history") + f"?run_id={run_id}&metric_key=loss&max_results=100",
            srv.api("/mlflow/experiments/search") + "?max_results=10"]
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda i: requests.get(urls[i % len(urls)], timeout=60).status_code, range(n)))


def assert_disk_full(r: requests.Response) -> None:
    """A JSON 507 RESOURCE_EXHAUSTED that says the disk is full and what to do."""
    assert r.status_code == 507 and r.headers["Content-Type"] == "application/json", (r.status_code, r.text)
    body = r.json()
    assert body["error_code"] == "RESOURCE_EXHAUSTED", body
    assert "disk is full" in body["message"] and "free disk space" in body["message"], body


def set_tag(srv: SextantServer, run_id: str, key: str) -> requests.Response:
    return requests.post(srv.api("/mlflow/runs/set-tag"), json={"run_id": run_id, "key": key, "value": "x" * 200}, timeout=60)


def test_full_disk_kill_and_restart(sextant_bin, tmpfs, tmp_path):
    srv = SextantServer(sextant_bin, tmpfs / "data", tmp_path / "server.log")
    srv.start()
    try:
        client = MlflowClient(srv.url)
        exp_id = client.create_experiment("/Shared/disk-full")
        run_id = client.create_run(exp_id).info.run_id
        client.log_param(run_id, "before", "yes")

        acked: list[int] = []  # steps of the batches that were acknowledged
        step = 0

        def log_one(c: MlflowClient) -> None:
            """Logs the next batch; a refused batch's steps are never reused."""
            nonlocal step
            first, step = step, step + POINTS_PER_CALL
            c.log_batch(run_id, metrics=[Metric("loss", float(s), 1_700_000_000_000 + s, s) for s in range(first, step)])
            acked.extend(range(first, step))

        for _ in range(3):
            log_one(client)
        # Kept back from the filling, freed before the restart (below).
        (tmpfs / "reserve").write_bytes(b"\0" * (256 << 10))
        fill(tmpfs / "filler")

        # Log until the disk refuses: a clear error at once (507 is not
        # retried), not minutes of retries.
        refusal = None
        for _ in range(2000):
            try:
                log_one(client)
            except MlflowException as e:
                refusal = e
                break
        assert refusal is not None, "the server never refused a write on a full disk"
        assert refusal.error_code == "RESOURCE_EXHAUSTED" and "disk is full" in str(refusal), str(refusal)
        # Read-only from that refusal on: small writes are refused too, even
        # where one might still fit into space the database's files hold.
        for i in range(3):
            assert_disk_full(set_tag(srv, run_id, f"t{i}"))

        # The running server: every concurrent read answers 200, /health
        # says read-only.
        assert concurrent_reads(srv, run_id) == [200] * 64
        h = health(srv)
        assert h["status"] == "READ_ONLY" and h["database"]["writable"] is False and "disk is full" in h["database"]["reason"], h
        assert history_steps(client, run_id) == acked

        # kill -9 on the full disk, then start again.
        srv.kill()
        # A little space back, as a crash can leave (a temporary file
        # removed): room for a small write, still a full disk (the server
        # waits for 1 MiB free). The server starts read-only all the same,
        # instead of calling itself writable until a write does not fit.
        os.remove(tmpfs / "reserve")
        srv.start(read_only=True)  # fails if the first /health answer is OK
        assert "the database cannot be written: serving reads only" in srv.log_since_start()
        client = MlflowClient(srv.url)
        assert history_steps(client, run_id) == acked
        run = client.get_run(run_id)
        assert run.data.params == {"before": "yes"}
        assert not [t for t in run.data.tags if t.startswith("t")], "a refused tag was stored"
        assert concurrent_reads(srv, run_id) == [200] * 64
        h = health(srv)
        assert h["status"] == "READ_ONLY" and "disk is full" in h["database"]["reason"], h
        assert_disk_full(set_tag(srv, run_id, "t-restarted"))
        with pytest.raises(MlflowException) as e:
            log_one(client)
        assert e.value.error_code == "RESOURCE_EXHAUSTED", str(e.value)

        # Space returns: the server writes again without a restart.
        os.remove(tmpfs / "filler")
        deadline = time.monotonic() + 60
        while health(srv)["status"] != "OK":
            assert time.monotonic() < deadline, f"still read-only a minute after space was freed: {health(srv)}"
            time.sleep(0.2)
        assert requests.get(srv.url + "/health", timeout=10).text == "OK"
        assert "the database is writable again" in srv.log_since_start()
        for _ in range(3):
            log_one(client)
        assert set_tag(srv, run_id, "t-after").status_code == 200
        assert history_steps(client, run_id) == acked
        after = client.get_run(run_id).data.tags
        assert after["t-after"] == "x" * 200 and "t-restarted" not in after, after
    finally:
        srv.stop_and_check()
