"""Training-aware runs end to end, with real torch (CPU, gloo, 2 ranks), a
real server and the real mlflow client: a job under `sextant run` saves
through VolumeWriter with dcp.async_save in both async modes (thread and
process), the run records every save (step, path, bytes, ranks, time
blocked, time landed, outcome; `sextant ckpt ls --run`), the job is killed
with SIGKILL in the middle of a save, and `sextant run --resume latest`
continues the same run from the last complete checkpoint at the exact next
sample, its metric series at the next step with nothing logged twice.

Needs the ML environment (requirements-ml.txt) and PYTHONPATH=python."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from sextant_e2e import REPO_ROOT, free_port

pytestmark = pytest.mark.ml

JOB = str(Path(__file__).with_name("resume_job.py"))
UC = "/api/2.1/unity-catalog"


def make_volume(srv) -> None:
    for target, body in ((UC + "/catalogs", {"name": "main"}), (UC + "/schemas", {"catalog_name": "main", "name": "ml"}),
                         (UC + "/volumes", {"catalog_name": "main", "schema_name": "ml", "name": "resume"})):
        r = requests.post(srv.url + target, json=body, timeout=10)
        assert r.status_code in (200, 409), r.text


def launch(sextant_bin: str, srv, out: Path, argv: list[str], *flags: str, **env: str) -> subprocess.Popen:
    e = dict(os.environ, MLFLOW_TRACKING_URI=srv.url, PYTHONPATH=str(REPO_ROOT / "python"), SEXTANT_HTTP_TIMEOUT="15",
             SEXTANT_STAGING_DIR=str(out / "staging"), PYTHONUNBUFFERED="1")
    e.pop("MLFLOW_RUN_ID", None)
    e.update(env)
    log = open(out / "launcher.log", "ab")
    return subprocess.Popen([sextant_bin, "run", "--gpu-source", "none", *flags, "--", sys.executable, *argv],
                            env=e, cwd=str(out), stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def tail(p: Path, n: int = 80) -> str:
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def wait_for(cond, what: str, out: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n{tail(out / 'launcher.log')}")
        time.sleep(0.05)


def seen(out: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (out / f"seen{rank}.jsonl").read_text().splitlines() if line.strip()]


def cli(sextant_bin: str, srv, *args: str) -> str:
    r = subprocess.run([sextant_bin, *args], env=dict(os.environ, MLFLOW_TRACKING_URI=srv.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, f"sextant {' '.join(args)}: {r.stderr}"
    return r.stdout


@pytest.mark.parametrize("first,second", [("thread", "process"), ("process", "thread")])
def test_kill_during_save_then_resume_latest(sextant_bin, server, tmp_path, first, second):
    """Attempt 1 (async mode `first`) saves steps 3 and 6 while training; the
    save of step 6 stops before its .metadata (every shard landed) and the
    job is killed with SIGKILL. Attempt 2, `sextant run --resume latest`
    with the same command (async mode `second`), continues the same run
    from step 3: every rank sees at steps 4, 5, ... the samples and draws
    attempt 1 saw, the loss series holds steps 1 to 12 once each, and the
    run lists its checkpoints with steps, modes and timings."""
    import mlflow
    from sextant.client import Client
    from sextant.data import write_shards

    make_volume(server)
    tag = f"{first}-{second}"
    vol = f"/Volumes/main/ml/resume/{tag}"
    data = vol + "/data"
    import random

    rng = random.Random(5)
    assert write_shards(data, ({"id": i, "x": [rng.random() for _ in range(8)]} for i in range(60)),
                        samples_per_shard=10, client=Client(server.url)) == 6
    out = tmp_path / "out"
    out.mkdir()
    argv = [JOB, "--port", str(free_port()), "--out", str(out), "--ckpt", vol + "/ckpt", "--data", data,
            "--steps", "12", "--every", "3", "--hold-at", "6"]
    exp = f"/Shared/e2e/resume-{tag}"
    staging = {"thread": "copy", "process": "shared"}

    # Attempt 1: killed while saving step 6.
    p1 = launch(sextant_bin, server, out, argv, "--experiment", exp, JOB_MODE=first, JOB_STAGING=staging[first])
    wait_for(lambda: (out / "holding_6").exists() or p1.poll() is not None, "the save of step 6 to hold", out)
    assert p1.poll() is None, f"the job ended before the save of step 6:\n{tail(out / 'launcher.log')}"
    pgid = os.getpgid(int((out / "rank0.pid").read_text()))
    assert pgid != os.getpgid(0)
    os.killpg(pgid, signal.SIGKILL)
    assert p1.wait(timeout=120) == 128 + signal.SIGKILL, tail(out / "launcher.log")
    m = re.search(r"sextant: run ([0-9a-f]{32}) ", (out / "launcher.log").read_text())
    assert m, tail(out / "launcher.log")
    run_id = m.group(1)
    client = mlflow.tracking.MlflowClient(server.url)
    assert client.get_run(run_id).info.status == "KILLED"
    # Between saves the ranks do not wait for each other, so each may have
    # gone a step further than the other when the kill came.
    killed_at = [max(e["step"] for e in seen(out, r)) for r in range(2)]
    assert min(killed_at) >= 6, killed_at
    listing = cli(sextant_bin, server, "ckpt", "ls", "--run", run_id)
    rows = [line.split() for line in listing.splitlines()[1:]]
    assert [(r[0], r[2]) for r in rows] == [("3", "complete"), ("6", "incomplete")], listing

    # Attempt 2: the same command, resumed from the latest complete checkpoint.
    (out / "launcher.log").write_text("")
    p2 = launch(sextant_bin, server, out, argv, "--experiment", exp, "--resume", "latest", JOB_MODE=second,
                JOB_STAGING=staging[second])
    assert p2.wait(timeout=300) == 0, tail(out / "launcher.log")
    log2 = (out / "launcher.log").read_text()
    assert f"sextant: run {run_id} " in log2, log2  # the same run
    assert f"resumed from {vol}/ckpt/step_3 (step 3)" in log2, log2
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"

    for r in range(2):
        got = seen(out, r)
        a1 = [e for e in got if e["attempt"] == "fresh"]
        a2 = [e for e in got if e["attempt"] != "fresh"]
        assert [e["step"] for e in a1] == list(range(1, killed_at[r] + 1))
        assert [e["step"] for e in a2] == list(range(4, 13)), "attempt 2 did not continue at the step after its checkpoint"
        assert {e["attempt"] for e in a2} == {f"{vol}/ckpt/step_3"}
        assert {e["mode"] for e in a2} == {second}
        for e1, e2 in zip(a1[3:], a2):  # the steps both attempts ran: the same samples, draws and loss
            assert (e1["step"], e1["ids"], e1["epoch"]) == (e2["step"], e2["ids"], e2["epoch"]), f"rank {r}: step {e1['step']}"
            assert e1["loss"] == pytest.approx(e2["loss"], rel=1e-6, abs=1e-9)
        one_epoch = [i for e in a1[:3] + a2 if e["epoch"] == 0 for i in e["ids"]]
        assert len(one_epoch) == len(set(one_epoch)), f"rank {r}: a sample seen twice in one epoch"

    history = client.get_metric_history(run_id, "loss")
    steps = sorted(m.step for m in history)
    assert steps == list(range(1, 13)), f"loss steps {steps}: duplicated or skipped"
    by_step = {e["step"]: e["loss"] for e in seen(out, 0) if e["attempt"] != "fresh"}
    for m in history:
        if m.step in by_step:
            assert m.value == pytest.approx(by_step[m.step], rel=1e-6, abs=1e-9)

    listing = cli(sextant_bin, server, "ckpt", "ls", "--run", run_id)
    rows = [line.split() for line in listing.splitlines()[1:]]
    assert [(r[0], r[2]) for r in rows] == [("3", "complete"), ("6", "incomplete"), ("6", "complete"),
                                            ("9", "complete"), ("12", "complete")], listing
    for r in rows:
        if r[2] != "complete":
            continue
        step, path, status, size, unit, ranks, mode, blocked, upload, landed = r
        assert path == f"{vol}/ckpt/step_{step}"
        assert ranks == "2" and float(size) > 0 and unit.endswith("B"), listing
        assert "-" not in (blocked, upload, landed), f"no timings: {listing}"
    assert rows[0][6] == f"{first}/{staging[first]}" and rows[4][6] == f"{second}/{staging[second]}", listing
    assert cli(sextant_bin, server, "ckpt", "latest", "--run", run_id).strip() == f"{vol}/ckpt/step_12"
    evs = requests.get(server.api("/sextant/events/list"), params={"run_id": run_id, "kind": "resume"}, timeout=10).json()["events"]
    assert [(e["step"], e["attrs"]["path"]) for e in evs] == [(3, f"{vol}/ckpt/step_3")]
    loads = requests.get(server.api("/sextant/events/list"), params={"run_id": run_id, "kind": "checkpoint_load"},
                         timeout=10).json()["events"]
    assert [(e["checkpoint"]["path"], e["checkpoint"]["outcome"], e["checkpoint"]["ranks"]) for e in loads] == \
        [(f"{vol}/ckpt/step_3", "complete", 2)]
