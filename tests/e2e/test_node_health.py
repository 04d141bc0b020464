"""Node health history (docs/gpu.md, "Node health"), end to end: two real
`sextant agent` processes sample simulated GPUs (--gpu-source sim:4), one
node-wide (no run) and one for a run created with the mlflow client; faults
are injected through --sim-events as a test or demo would. The server keeps
every fault per node with the run that held the GPU, once each whatever the
agents resend, and flags the nodes with repeated faults. Every wait is for
a condition the server reports, never for a time."""
from __future__ import annotations

import os
import subprocess
import time

import requests


def nodes(server) -> dict:
    r = requests.get(server.api("/sextant/nodes"), timeout=30)
    assert r.status_code == 200, r.text
    return {n["node"]: n for n in r.json()["nodes"]}


def faults(server, node: str) -> list[dict]:
    r = requests.get(server.api("/sextant/nodes/health"), params={"node": node}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["events"]


def latest_ts(server, node: str) -> int:
    r = requests.get(server.api("/sextant/gpu/latest"), params={"node": node}, timeout=30)
    assert r.status_code == 200, r.text
    ns = r.json().get("nodes") or []
    return ns[0]["ts_ms"] if ns else 0


def wait_for(what: str, cond, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_agent(sextant_bin, server, tmp_path, node: str, *extra: str):
    events = tmp_path / f"{node}.events"
    events.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_") and k != "CUDA_VISIBLE_DEVICES"}
    env["MLFLOW_TRACKING_URI"] = server.url
    proc = subprocess.Popen([sextant_bin, "agent", "--node", node, "--gpu-source", "sim:4", "--sim-events", str(events),
                             "--interval", "200ms", "--spool-dir", str(tmp_path / f"spool-{node}"), *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, events


def stop(proc) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def inject(events, line: str) -> None:
    with open(events, "a") as f:
        f.write(line + "\n")


def test_faults_are_kept_per_node_across_runs_and_flag_the_node(server, client, sextant_bin, tmp_path):
    exp = client.create_experiment("node-health")
    run = client.create_run(exp).info.run_id
    a, a_events = start_agent(sextant_bin, server, tmp_path, "sim-a")
    b, b_events = start_agent(sextant_bin, server, tmp_path, "sim-b", "--run-id", run)
    try:
        for node in ("sim-a", "sim-b"):
            wait_for(f"{node}'s samples", lambda: latest_ts(server, node) > 0)
        assert not nodes(server)["sim-a"]["flagged"]

        # One Xid on the node-wide agent's node: shown, not yet flagged.
        inject(a_events, "xid 1 79")
        xid = wait_for("the Xid in sim-a's history", lambda: [e for e in faults(server, "sim-a") if e["kind"] == "xid"])
        assert xid[0]["gpu"] == 1 and xid[0]["xid"] == 79 and xid[0]["xid_meaning"] == "the GPU has fallen off the bus"
        assert xid[0]["run_ids"] == [], "no run held sim-a's GPUs"
        assert not nodes(server)["sim-a"]["flagged"], "one fault does not flag a node"

        # A second fault in 7 days flags it.
        inject(a_events, "ecc 0 3 1")
        wait_for("sim-a flagged", lambda: nodes(server)["sim-a"]["flagged"])
        n = nodes(server)["sim-a"]
        assert n["reason"] == "2 faults in 7 days (1 Xid, 1 ECC)", n
        assert n["counts_24h"] == {"xid": 1, "ecc": 1, "throttle": 0, "lost": 0}, n

        # The run's node: a throttle span that ends, then a lost GPU, both with the run.
        inject(b_events, "throttle 2 0x40")
        wait_for("sim-b's throttle span", lambda: [e for e in faults(server, "sim-b") if e["kind"] == "throttle"])
        inject(b_events, "throttle 2 0")
        wait_for("the span's end", lambda: [e for e in faults(server, "sim-b") if e["kind"] == "throttle" and not e.get("open") and e.get("end_ms")])
        assert not nodes(server)["sim-b"]["flagged"], "throttling alone never flags a node"
        inject(b_events, "lost 3 GPU has fallen off the bus")
        wait_for("sim-b flagged", lambda: nodes(server)["sim-b"]["flagged"])
        assert nodes(server)["sim-b"]["reason"] == "lost a GPU in the last 24 hours"
        evs = faults(server, "sim-b")
        assert [e["kind"] for e in evs] == ["lost", "throttle"], evs
        assert all(e["run_ids"] == [run] for e in evs), evs
        assert evs[0]["gpu"] == 3 and "fallen off the bus" in evs[0]["message"]
        assert evs[1]["end_ms"] > evs[1]["time_ms"]

        # More samples (the lost GPU stays lost in each): nothing is recorded twice.
        seen = latest_ts(server, "sim-b")
        wait_for("three more samples of sim-b", lambda: latest_ts(server, "sim-b") >= seen + 600)
        assert [e["kind"] for e in faults(server, "sim-b")] == ["lost", "throttle"]
        assert [e["kind"] for e in faults(server, "sim-a")] == ["ecc", "xid"]
    finally:
        logs = stop(a) + stop(b)
    assert "Traceback" not in logs
