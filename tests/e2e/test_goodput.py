"""Throughput, MFU and goodput (issue 45 item 4, docs/run.md "Throughput,
MFU and goodput"), with real torch (CPU, gloo, torchrun, 2 ranks) under
`sextant run` and a real server: GET /api/2.0/sextant/goodput agrees with
a hand computation from the job's own record of its steps
(goodput_job.py) and the attempt bounds the server reports; after kill -9
and `sextant run --resume latest`, the steps after the last checkpoint of
the killed attempt count as lost.

Tolerances: the job's step times and data waits reach the server as the
very floats it recorded, so throughput and MFU match to 1e-9 (relative).
A step's end is stored in whole milliseconds (the metric's timestamp), so
each step may shift by up to 1 ms against its neighbours and the attempt's
bounds: the times in seconds (productive, lost) match to 2 ms per step.

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

JOB = str(Path(__file__).with_name("goodput_job.py"))
UC = "/api/2.1/unity-catalog"
FLOPS = 1e9  # per sample
PEAK = 0.1  # TFLOPS per device, as the run param sextant.peak_tflops
CATEGORIES = ("productive_s", "data_wait_s", "checkpoint_s", "lost_s", "hung_s", "idle_s", "startup_s", "other_s")


def tail(p: Path, n: int = 80) -> str:
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def launch(sextant_bin, server, out: Path, *flags: str, job: list[str]) -> subprocess.Popen:
    env = dict(os.environ, MLFLOW_TRACKING_URI=server.url, PYTHONPATH=str(REPO_ROOT / "python"), PYTHONUNBUFFERED="1",
               SEXTANT_HTTP_TIMEOUT="15", OMP_NUM_THREADS="1", SEXTANT_STAGING_DIR=str(out / "staging"))
    for k in ("MLFLOW_RUN_ID", "RANK", "SEXTANT_NODE"):
        env.pop(k, None)
    cmd = [sextant_bin, "run", "--gpu-source", "none", *flags,
           "--", sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), JOB, "--out", str(out),
           "--flops", str(FLOPS), "--peak", str(PEAK), *job]
    log = open(out / "launcher.log", "ab")
    return subprocess.Popen(cmd, env=env, cwd=str(out), stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def run_id_of(out: Path) -> str:
    m = re.search(r"sextant: run ([0-9a-f]{32}) ", (out / "launcher.log").read_text())
    assert m, tail(out / "launcher.log")
    return m.group(1)


def records(out: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (out / f"steps{rank}.jsonl").read_text().splitlines() if line.strip()]


def goodput(server, run_id: str) -> dict:
    r = requests.get(server.api("/sextant/goodput"), params={"run_id": run_id}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def events(server, run_id: str, kind: str) -> list[dict]:
    r = requests.get(server.api("/sextant/events/list"), params={"run_id": run_id, "kind": kind}, timeout=30)
    assert r.status_code == 200, r.text
    return sorted(r.json().get("events", []), key=lambda e: e["time_ms"])


def close(got: float, want: float, tol: float, what: str) -> None:
    assert abs(got - want) <= tol, f"{what}: got {got}, want {want} (± {tol})"


def check_throughput_and_mfu(g: dict, recs: list[list[dict]]) -> float:
    # Per rank Σsamples / Σstep time, summed over the ranks; MFU over 2 devices of PEAK TFLOPS.
    want = sum(sum(s["samples"] for s in r) / sum(s["step_time_s"] for s in r) for r in recs)
    close(g["throughput"]["samples_per_s"], want, 1e-9 * want, "samples/s")
    assert g["throughput"]["tokens_per_s"] is None
    m = g["mfu"]
    assert m["mfu"] is not None, m
    close(m["mfu"], want * FLOPS / (2 * PEAK * 1e12), 1e-9, "MFU")
    assert (m["devices"], m["per"], m["flops_per"], m["peak_tflops"], m["peak_source"], m["dtype"]) == \
        (2, "sample", FLOPS, PEAK, "param sextant.peak_tflops", "bf16"), m
    return want


def check_sums(g: dict) -> None:
    b = g["breakdown"]
    close(sum(b[c] for c in CATEGORIES), b["wall_s"], 1e-6, "sum of the categories")
    assert all(b[c] >= 0 for c in CATEGORIES), b
    close(g["goodput"], b["productive_s"] / b["wall_s"], 1e-12, "goodput")
    assert b["hung_s"] == 0 and b["idle_s"] == 0, b  # the test's premise: no stall, no idle GPU


def test_goodput_matches_a_hand_computation(sextant_bin, server, tmp_path):
    out = tmp_path
    steps = 12
    p = launch(sextant_bin, server, out, "--experiment", "/Shared/goodput", job=["--steps", str(steps)])
    assert p.wait(timeout=300) == 0, tail(out / "launcher.log")
    run_id = run_id_of(out)
    recs = [records(out, r) for r in (0, 1)]
    assert [len(r) for r in recs] == [steps, steps]
    g = goodput(server, run_id)
    check_throughput_and_mfu(g, recs)
    check_sums(g)
    assert g["reference_rank"] == 0

    # Wall: the attempt as the server recorded it; productive: rank 0's step times less their data waits.
    (att,) = events(server, run_id, "attempt")
    wall = (att["end_ms"] - att["time_ms"]) / 1000
    b = g["breakdown"]
    close(b["wall_s"], wall, 1e-6, "wall")
    tol = 0.002 * steps
    productive = sum(s["step_time_s"] - s["data_wait_s"] for s in recs[0])
    close(b["productive_s"], productive, tol, "productive")
    close(b["data_wait_s"], sum(s["data_wait_s"] for s in recs[0]), tol, "data wait")
    close(g["goodput"], productive / wall, tol / wall, "goodput")
    # Start-up: from the attempt's start to the start of rank 0's first step (Python, torch, the rendezvous).
    close(b["startup_s"], recs[0][0]["start"] - att["time_ms"] / 1000, 0.002, "startup")
    assert b["lost_s"] == 0 and b["checkpoint_s"] == 0, b
    # The series: cumulative goodput at each of rank 0's step ends, the last one no more than the run's.
    assert [pt["step"] for pt in g["series"]] == list(range(1, steps + 1))
    assert g["series"][-1]["goodput"] >= g["goodput"]


def make_volume(server) -> None:
    for target, body in ((UC + "/catalogs", {"name": "main"}), (UC + "/schemas", {"catalog_name": "main", "name": "ml"}),
                         (UC + "/volumes", {"catalog_name": "main", "schema_name": "ml", "name": "goodput"})):
        r = requests.post(server.url + target, json=body, timeout=10)
        assert r.status_code in (200, 409), r.text


def test_goodput_counts_work_lost_to_kill_and_resume(sextant_bin, server, tmp_path):
    make_volume(server)
    out = tmp_path
    steps, ckpt_at, hold_after = 12, 4, 8
    job = ["--steps", str(steps), "--ckpt", "/Volumes/main/ml/goodput/ckpt", "--ckpt-at", str(ckpt_at),
           "--hold-after", str(hold_after)]
    exp = "/Shared/goodput-resume"

    # Attempt 1: a checkpoint after step 4, 4 more steps, then kill -9 of every rank.
    p1 = launch(sextant_bin, server, out, "--experiment", exp, job=job)
    deadline = time.monotonic() + 240
    while not all((out / f"hold{r}").exists() for r in (0, 1)):
        assert p1.poll() is None, tail(out / "launcher.log")
        assert time.monotonic() < deadline, "the job never reached step 8:\n" + tail(out / "launcher.log")
        time.sleep(0.05)
    for r in (0, 1):
        pid = int((out / f"hold{r}").read_text())
        pgid = os.getpgid(pid)
        if pgid != os.getpgid(0):
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    assert p1.wait(timeout=120) != 0, tail(out / "launcher.log")
    run_id = run_id_of(out)

    # Attempt 2: the same command, from the checkpoint of step 4, to the end.
    p2 = launch(sextant_bin, server, out, "--experiment", exp, "--resume", "latest", job=job)
    assert p2.wait(timeout=300) == 0, tail(out / "launcher.log")
    assert f"(step {ckpt_at})" in (out / "launcher.log").read_text(), tail(out / "launcher.log")
    assert run_id_of(out) == run_id  # the first "sextant: run" line: the same run either way

    recs = [records(out, r) for r in (0, 1)]
    fresh = [s for s in recs[0] if s["attempt"] == "fresh"]
    resumed = [s for s in recs[0] if s["attempt"] == "resumed"]
    assert [s["step"] for s in fresh] == list(range(1, hold_after + 1))
    assert [s["step"] for s in resumed] == list(range(ckpt_at + 1, steps + 1))

    g = goodput(server, run_id)
    check_throughput_and_mfu(g, recs)
    check_sums(g)
    atts = events(server, run_id, "attempt")
    assert len(atts) == 2 and atts[0]["attrs"].get("status") in ("FAILED", "KILLED"), atts
    b = g["breakdown"]
    close(b["wall_s"], sum(a["end_ms"] - a["time_ms"] for a in atts) / 1000, 1e-6, "wall")
    # Lost: the killed attempt's steps after its checkpoint (5..8), the work the resume redid.
    tol = 0.002 * len(recs[0])
    lost = sum(s["step_time_s"] for s in fresh if s["step"] > ckpt_at)
    close(b["lost_s"], lost, tol, "lost")
    kept = [s for s in fresh if s["step"] <= ckpt_at] + resumed
    productive = sum(s["step_time_s"] - s["data_wait_s"] for s in kept)
    close(b["productive_s"], productive, tol, "productive")
    close(g["goodput"], productive / b["wall_s"], tol / b["wall_s"], "goodput")
    # The save after step 4 blocked training: counted as checkpoint, between steps 4 and 5.
    saves = [e for e in events(server, run_id, "checkpoint_save") if e.get("checkpoint", {}).get("outcome") == "complete"]
    assert saves, events(server, run_id, "checkpoint_save")
    assert b["checkpoint_s"] > 0, b
