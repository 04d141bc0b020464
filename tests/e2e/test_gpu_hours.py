"""GPU-hours and cost (docs/gpu.md), end to end: `sextant run` records each
attempt of a job on its run (a span from the job's start to its end, with
the number of distinct GPUs sampled), and the server sums them per run,
experiment and folder, priced by --gpu-hour-price. Jobs run on simulated
GPUs (--gpu-source sim:N); a job waits until the server has recorded its
GPUs before it ends, so nothing depends on the machine's speed, and the
expected totals are computed from the attempts the server reports."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
import requests

PRICE_H100 = 4.0
PRICE_OTHER = 1.0
SEXTANT_SERVER_FLAGS = {"gpu_hour_price": f"H100={PRICE_H100},*={PRICE_OTHER}"}

# The job waits until its own attempt (the open one) shows WANT GPUs, then
# ends as MODE says: exit 0, or killed by SIGKILL.
JOB = """
    import json, os, signal, sys, time, urllib.request
    run = os.environ["MLFLOW_RUN_ID"]
    url = os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/sextant/events/list?kind=attempt&run_id=" + run
    want = os.environ["WANT"]
    deadline = time.time() + 120
    while True:
        evs = json.load(urllib.request.urlopen(url, timeout=30))["events"]
        if any(e.get("open") and e.get("attrs", {}).get("gpus") == want for e in evs):
            break
        assert time.time() < deadline, evs
        time.sleep(0.05)
    print("GPUs recorded", flush=True)
    if os.environ["MODE"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
"""


def launcher_env(srv, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_TRACKING_USERNAME",
                        "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                        "NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES")}
    env["MLFLOW_TRACKING_URI"] = srv.url
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_id_of(stderr: bytes) -> str:
    m = re.search(rb"sextant: run ([0-9a-f]{32}) ", stderr)
    assert m, stderr.decode(errors="replace")
    return m.group(1).decode()


def attempts(server, run_id: str) -> list[dict]:
    r = requests.get(server.api("/sextant/events/list"), params={"run_id": run_id, "kind": "attempt"}, timeout=30)
    assert r.status_code == 200, r.text
    return sorted(r.json()["events"], key=lambda e: e["time_ms"])


def hours_of(evs: list[dict]) -> float:
    return sum(int(e["attrs"]["gpus"]) * (e["end_ms"] - e["time_ms"]) / 3_600_000 for e in evs)


def gpu_hours(server, **params) -> dict:
    r = requests.get(server.api("/sextant/gpu-hours"), params=params, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def launch(sextant_bin, server, script, experiment, gpus, want, mode, *flags, visible=None):
    env = {"WANT": want, "MODE": mode}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    argv = [sextant_bin, "run", "--experiment", experiment, "--gpu-source", f"sim:{gpus}", "--gpu-interval", "100ms",
            *flags, "--", sys.executable, str(script)]
    return subprocess.run(argv, env=launcher_env(server, **env), cwd=script.parent, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=180)


def test_folder_sums_runs_attempts_killed_and_resumed(sextant_bin, server, tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    # A run on 2 GPUs, finished in one attempt.
    p = launch(sextant_bin, server, script, "/Shared/gh/team/a", 2, "2", "exit")
    assert p.returncode == 0, p.stderr.decode()
    run_a = run_id_of(p.stderr)
    # A run on 1 of 4 GPUs, killed (SIGKILL), then resumed to the end.
    p = launch(sextant_bin, server, script, "/Shared/gh/team/b", 4, "1", "kill", visible="2")
    assert p.returncode == 128 + 9, p.stderr.decode()
    run_b = run_id_of(p.stderr)
    p = launch(sextant_bin, server, script, "/Shared/gh/team/b", 4, "1", "exit", "--resume", run_b, visible="2")
    assert p.returncode == 0, p.stderr.decode()
    assert run_id_of(p.stderr) == run_b
    # A run outside the folder.
    p = launch(sextant_bin, server, script, "/Shared/gh-other", 3, "3", "exit")
    assert p.returncode == 0, p.stderr.decode()
    run_c = run_id_of(p.stderr)

    ev_a, ev_b, ev_c = attempts(server, run_a), attempts(server, run_b), attempts(server, run_c)
    assert [e["attrs"]["status"] for e in ev_b] == ["KILLED", "FINISHED"], ev_b
    assert [e["attrs"]["gpus"] for e in ev_a + ev_b + ev_c] == ["2", "1", "1", "3"]
    assert all(not e.get("open") and e["end_ms"] >= e["time_ms"] for e in ev_a + ev_b + ev_c)
    assert ev_b[0]["end_ms"] <= ev_b[1]["time_ms"]  # the gap between the attempts is not counted
    assert all("H100" in e["attrs"]["gpu_model"] for e in ev_a + ev_b + ev_c)

    # Per run: the attempts, with their hours and cost.
    b = gpu_hours(server, run_id=run_b)
    (rb,) = b["runs"]
    assert [(x["start_ms"], x["end_ms"], x["gpus"], x["status"]) for x in rb["attempts"]] == [
        (e["time_ms"], e["end_ms"], 1, e["attrs"]["status"]) for e in ev_b]
    assert rb["gpu_hours"] == pytest.approx(hours_of(ev_b), rel=1e-9)
    assert rb["cost"] == pytest.approx(hours_of(ev_b) * PRICE_H100, rel=1e-9)
    assert all(x["price"] == PRICE_H100 for x in rb["attempts"])

    # Per experiment, and per folder: the sum of its runs' attempts.
    exp_b = rb["experiment_id"]
    assert gpu_hours(server, experiment_id=exp_b)["gpu_hours"] == pytest.approx(hours_of(ev_b), rel=1e-9)
    folder = gpu_hours(server, folder="/Shared/gh")
    want = hours_of(ev_a) + hours_of(ev_b)
    assert folder["gpu_hours"] == pytest.approx(want, rel=1e-9)
    assert folder["cost"] == pytest.approx(want * PRICE_H100, rel=1e-9)
    assert [x["name"] for x in folder["experiments"]] == ["/Shared/gh/team/a", "/Shared/gh/team/b"]
    assert gpu_hours(server, folder="/Shared")["gpu_hours"] == pytest.approx(want + hours_of(ev_c), rel=1e-9)

    # sextant runs ls: GPU-HOURS and, with a price, COST.
    ls = subprocess.run([sextant_bin, "runs", "ls", "--experiment", "/Shared/gh/team/b"], env=launcher_env(server),
                        capture_output=True, text=True, timeout=60)
    assert ls.returncode == 0, ls.stderr
    head, row = ls.stdout.splitlines()[:2]
    cols = re.split(r"\s{2,}", head.strip())
    assert cols[-2:] == ["GPU-HOURS", "COST"], head
    cells = re.split(r"\s{2,}", row.strip())
    assert float(cells[-2]) == pytest.approx(hours_of(ev_b), abs=0.00006), row
    assert float(cells[-1]) == pytest.approx(hours_of(ev_b) * PRICE_H100, abs=0.00006), row

    # Prometheus: totals by GPU model, no per-run labels.
    metrics = requests.get(server.url + "/metrics", timeout=30).text
    m = re.search(r'^sextant_gpu_held_seconds\{model="NVIDIA H100[^"]*"\} (\S+)$', metrics, re.M)
    assert m, metrics
    assert float(m.group(1)) == pytest.approx((want + hours_of(ev_c)) * 3600, rel=1e-9)
    assert "run_id" not in "".join(l for l in metrics.splitlines() if l.startswith("sextant_gpu_"))


def test_bad_requests(server):
    r = requests.get(server.api("/sextant/gpu-hours"), timeout=30)
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_PARAMETER_VALUE", r.text
    r = requests.get(server.api("/sextant/gpu-hours"), params={"folder": "Shared"}, timeout=30)
    assert r.status_code == 400, r.text
    r = requests.get(server.api("/sextant/gpu-hours"), params={"run_id": "0" * 32}, timeout=30)
    assert r.status_code == 404, r.text
