"""Hangs (issue 45 item 2, docs/run.md "Hangs"), with real torch (CPU,
gloo), torchrun and a real server: `sextant run --hang-after 5s` on a
2-rank job whose rank 0 is blocked in dist.all_reduce that rank 1 never
joins opens a hung span naming the ranks, the node and the blocked
frames; the run's log holds both ranks' stacks; each rank's Flight Recorder
dump is kept as a run artifact (rank 0's names the blocked all_reduce) and
the log says where; `sextant runs ls` shows the alert; the webhook is told;
stopping the job closes the span. A job that
never calls the progress API, prints nothing and logs no metric is found
hung too.

Needs the ML environment (requirements-ml.txt) and PYTHONPATH=python."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import requests

from sextant_e2e import REPO_ROOT, WebhookReceiver, free_port

pytestmark = pytest.mark.ml

JOB = str(Path(__file__).with_name("hang_job.py"))



def tail(p: Path, n: int = 80) -> str:
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def wait_for(what: str, cond, limit: float = 120.0, log: Path | None = None):
    """Polls cond until it returns something true; the limit only ends a broken test."""
    deadline = time.monotonic() + limit
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}\n" + (tail(log) if log else ""))
        time.sleep(0.2)


def hung_events(srv, run_id: str) -> list[dict]:
    r = requests.get(srv.url + "/api/2.0/sextant/events/list", params={"run_id": run_id, "kind": "hung"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json().get("events", [])


def run_id_from(log: Path) -> str | None:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("sextant: run "):
            return line.split()[2]
    return None


def start_job(srv, sextant_bin: str, out: Path, argv: list[str]) -> subprocess.Popen:
    env = dict(os.environ, MLFLOW_TRACKING_URI=srv.url, PYTHONPATH=str(REPO_ROOT / "python"), PYTHONUNBUFFERED="1",
               SEXTANT_HTTP_TIMEOUT="15", OMP_NUM_THREADS="1")
    for k in ("MLFLOW_RUN_ID", "RANK", "SEXTANT_NODE"):
        env.pop(k, None)
    cmd = [sextant_bin, "run", "--gpu-source", "none", "--hang-after", "5s", "--grace", "5s",
           "--experiment", "/Shared/hang", "--"] + argv
    log = open(out / "launcher.log", "wb")
    return subprocess.Popen(cmd, env=env, cwd=str(out), stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def sextant_cli(sextant_bin: str, srv, *args: str) -> str:
    env = dict(os.environ, MLFLOW_TRACKING_URI=srv.url)
    return subprocess.run([sextant_bin, *args], env=env, capture_output=True, text=True, timeout=60, check=True).stdout


def test_rank_blocked_in_collective_is_hung(start_server, sextant_bin, tmp_path):
    rx = WebhookReceiver()
    try:
        srv = start_server(alert_webhook=f"http://127.0.0.1:{rx.port}/hook", idle_for="0", watch_every="300ms")
        log = tmp_path / "launcher.log"
        p = start_job(srv, sextant_bin, tmp_path, [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                                                   "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                                                   "--master-port", str(free_port()), JOB, "--mode", "collective"])
        try:
            run_id = wait_for("the run", lambda: run_id_from(log), log=log)
            # While torch imports, the job is silent and has no heartbeat yet: on a loaded machine that
            # alone can last the 5 s and open a span judged on silence, which the ranks' first heartbeats
            # close; the span of the hang itself is the one judged on the ranks' progress.
            ev = wait_for("an open hung span", lambda: next((e for e in hung_events(srv, run_id)
                                                             if e.get("open") and "no progress for" in e["message"]), None),
                          log=log)
            host = socket.gethostname()
            msg = ev["message"]
            assert f"rank 0, 1 on node {host}: no progress for" in msg, msg
            assert "rank 0: blocked in all_reduce" in msg and "rank 1: blocked in rank1_sleeps (hang_job.py:" in msg, msg
            assert ev["node"] == host and ev["attrs"]["ranks"] == "0,1", ev

            # Both ranks' stacks are in the run's log, each line saying whose it is.
            def stacks():
                logs = sextant_cli(sextant_bin, srv, "logs", run_id)
                r0 = [l for l in logs.splitlines() if "[sextant hang] rank 0 pid " in l]
                r1 = [l for l in logs.splitlines() if "[sextant hang] rank 1 pid " in l]
                return (logs, r0, r1) if any("in rank1_sleeps" in l for l in r1) and any("in all_reduce" in l for l in r0) else None

            logs, r0, r1 = wait_for("both ranks' stacks in the log", stacks, log=log)
            assert any("in all_reduce" in l for l in r0) and any("in blocked_collective" in l for l in r0), logs
            assert any("in rank1_sleeps" in l for l in r1), logs
            assert all(f"node {host}:" in l for l in r0 + r1)

            # Each rank's Flight Recorder dump is an artifact in the folder the span names, and the
            # log says so per rank. gloo records into torch's generic Flight Recorder: rank 0's dump
            # has the all_reduce it is blocked in, not retired (gloo leaves "state" at "scheduled";
            # "retired" says the work finished); rank 1 never joined it.
            fr_dir = ev["attrs"].get("fr_dir", "")
            assert fr_dir.startswith("sextant/hang/") and f"Flight Recorder dumps in artifacts {fr_dir}/" in msg, ev
            assert ev["attrs"]["fr_dumps"] == "2", ev
            client = mlflow.MlflowClient(tracking_uri=srv.url)
            names = sorted(f.path for f in client.list_artifacts(run_id, fr_dir))
            assert names == [f"{fr_dir}/flight_recorder_rank0.json", f"{fr_dir}/flight_recorder_rank1.json"], names
            dumps = {}
            for r in (0, 1):
                got = client.download_artifacts(run_id, f"{fr_dir}/flight_recorder_rank{r}.json", str(tmp_path / "fr"))
                dumps[r] = json.loads(Path(got).read_text())
            ops = {r: [(e["profiling_name"], e["retired"]) for e in d["entries"]] for r, d in dumps.items()}
            assert ops[0][-1] == ("gloo:all_reduce", False), ops
            assert ops[1] and not any("all_reduce" in n for n, _ in ops[1]), ops  # the barrier before the hang

            def fr_lines():
                logs = sextant_cli(sextant_bin, srv, "logs", run_id)
                got = [l for l in logs.splitlines() if "Flight Recorder dump saved as artifact " + fr_dir in l]
                return got if len(got) == 2 else None

            lines = wait_for("the Flight Recorder lines in the log", fr_lines, log=log)
            assert any("[sextant hang] rank 0 pid " in l and "flight_recorder_rank0.json (2 entries)" in l
                       for l in lines), lines
            assert any("[sextant hang] rank 1 pid " in l and "flight_recorder_rank1.json (" in l for l in lines), lines
            # The launcher sets only the buffer-size variable this torch reads, so torch does not
            # warn in the job's output about the deprecated one.
            assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in log.read_text(errors="replace"), tail(log)

            # runs ls shows the alert while the run is running and the span open.
            ls = sextant_cli(sextant_bin, srv, "runs", "ls", "--experiment", "/Shared/hang")
            assert "ALERT" in ls and "no progress for" in ls, ls

            # The webhook was told of the hang.
            opened = wait_for("the webhook's notification",
                              lambda: [b for b in rx.bodies if "no progress for" in json.dumps(b)], log=log)
            assert run_id in json.dumps(opened[0]), opened
        finally:
            stop(p)
        # The job was stopped: the span closed, the alert is gone, the webhook told again.
        evs = wait_for("the hung span closed", lambda: (lambda e: e if e and not any(x.get("open") for x in e) else None)(
            hung_events(srv, run_id)), log=log)
        # (Its message says "until the job ended", or "it moved again" when the ranks were gone
        # before the launcher's last look: a known wart, see docs/run.md.)
        assert any(e["key"] == ev["key"] and not e.get("open") for e in evs), evs
        tags = requests.get(srv.url + "/api/2.0/mlflow/runs/get", params={"run_id": run_id}, timeout=10).json()["run"]["data"]
        assert not any(t["key"] == "sextant.alert" for t in tags.get("tags", [])), tags
        wait_for("the webhook's closing notification",
                 lambda: len([b for b in rx.bodies if run_id in json.dumps(b) and "no progress for" in json.dumps(b)]) >= 2,
                 log=log)
    finally:
        rx.close()


def test_silent_job_without_progress_is_hung(server, sextant_bin, tmp_path):
    log = tmp_path / "launcher.log"
    p = start_job(server, sextant_bin, tmp_path, [sys.executable, JOB, "--mode", "silent"])
    try:
        run_id = wait_for("the run", lambda: run_id_from(log), log=log)
        ev = wait_for("an open hung span", lambda: next((e for e in hung_events(server, run_id) if e.get("open")), None),
                      log=log)
        assert "no output and no metrics for" in ev["message"], ev
        assert "blocked in silent_wait (hang_job.py:" in ev["message"], ev
        wait_for("the stacks in the log", lambda: "in silent_wait" in sextant_cli(sextant_bin, server, "logs", run_id), log=log)
    finally:
        stop(p)
    wait_for("the hung span closed", lambda: hung_events(server, run_id) and not any(
        e.get("open") for e in hung_events(server, run_id)), log=log)
