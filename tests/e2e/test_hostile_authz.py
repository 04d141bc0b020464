"""A hostile user against a multi-user server (issue 41, items 7 and 10;
docs/auth.md, Threat model): what they may not read answers exactly as
what does not exist (experiments by id and by name, runs, folders and
homes, volumes and their files); the groups list shows them only their
own groups; and they cannot speak for a GPU node, which reports through
a node token an administrator created for it."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest
import requests

from sextant_e2e import admin_password

ADMIN = "admin@example.com"
ALICE = "alice@example.com"
BOB = "bob@example.com"
SEXTANT_SERVER_FLAGS = {"auth": "on", "admin_email": ADMIN}
UC = "/api/2.1/unity-catalog"
ML = "/api/2.0/mlflow"
SX = "/api/2.0/sextant"


@pytest.fixture(scope="module")
def creds(server):
    pw = {ADMIN: admin_password(server), ALICE: "alice-password-1", BOB: "bob-password-1"}
    for email in (ALICE, BOB):
        r = requests.post(server.url + SX + "/users", json={"email": email, "password": pw[email]}, auth=(ADMIN, pw[ADMIN]), timeout=10)
        assert r.status_code == 200, r.text
    return pw


def call(server, creds, who, method, path, body=None, **kw):
    return requests.request(method, server.url + path, json=body, auth=(who, creds[who]), timeout=10, **kw)


@pytest.fixture(scope="module")
def alices(server, creds):
    """Alice's private world: a folder, an experiment with a run, and a
    volume with a file (in a catalog an administrator lets her use)."""
    n = uuid.uuid4().hex[:8]
    folder = f"/Users/{ALICE}/secret-{n}"
    assert call(server, creds, ALICE, "POST", SX + "/workspace/mkdirs", {"path": folder}).status_code == 200
    r = call(server, creds, ALICE, "POST", ML + "/experiments/create", {"name": folder + "/exp"})
    assert r.status_code == 200, r.text
    exp = r.json()["experiment_id"]
    r = call(server, creds, ALICE, "POST", ML + "/runs/create", {"experiment_id": exp})
    run = r.json()["run"]["info"]["run_id"]
    cat = f"cat{n}"
    assert call(server, creds, ADMIN, "POST", UC + "/catalogs", {"name": cat}).status_code == 200
    assert call(server, creds, ADMIN, "PUT", SX + "/permissions", {"resource": "catalog:" + cat, "principal": ALICE, "level": "CAN_EDIT"}).status_code == 200
    assert call(server, creds, ALICE, "POST", UC + "/schemas", {"catalog_name": cat, "name": "team"}).status_code == 200
    r = call(server, creds, ALICE, "POST", UC + "/volumes", {"catalog_name": cat, "schema_name": "team", "name": "ckpt", "volume_type": "MANAGED"})
    assert r.status_code == 200, r.text
    r = requests.put(server.url + f"/api/2.0/fs/files/Volumes/{cat}/team/ckpt/a.bin", data=b"secret", auth=(ALICE, creds[ALICE]), timeout=10)
    assert r.status_code == 204, r.text
    return dict(n=n, folder=folder, name=folder + "/exp", exp=exp, run=run, cat=cat, volume=f"{cat}.team.ckpt")


def same_as_missing(hidden: requests.Response, missing: requests.Response, hidden_name: str, missing_name: str):
    """The answer for an unreadable object is the answer for a missing one:
    the same 404, error_code and message (with the name swapped)."""
    assert hidden.status_code == 404, hidden.text
    assert missing.status_code == 404, missing.text
    h, m = hidden.json(), missing.json()
    assert h["error_code"] == m["error_code"], (h, m)
    assert h["message"].replace(hidden_name, "NAME") == m["message"].replace(missing_name, "NAME"), (h, m)


def test_unreadable_answers_as_missing(server, creds, alices):
    bob = lambda method, path, body=None: call(server, creds, BOB, method, path, body)  # noqa: E731
    # Experiments, by id and by name.
    same_as_missing(bob("GET", ML + "/experiments/get?experiment_id=" + alices["exp"]),
                    bob("GET", ML + "/experiments/get?experiment_id=987654"), alices["exp"], "987654")
    nope = alices["folder"] + "/nope"
    by_name = lambda name: requests.get(server.url + ML + "/experiments/get-by-name", params={"experiment_name": name},  # noqa: E731
                                        auth=(BOB, creds[BOB]), timeout=10)
    same_as_missing(by_name(alices["name"]), by_name(nope), alices["name"], nope)
    # Runs, and what is reached through them.
    missing_run = uuid.uuid4().hex
    same_as_missing(bob("GET", ML + "/runs/get?run_id=" + alices["run"]), bob("GET", ML + "/runs/get?run_id=" + missing_run), alices["run"], missing_run)
    same_as_missing(bob("POST", ML + "/runs/log-batch", {"run_id": alices["run"], "params": [{"key": "a", "value": "b"}]}),
                    bob("POST", ML + "/runs/log-batch", {"run_id": missing_run, "params": [{"key": "a", "value": "b"}]}), alices["run"], missing_run)
    # Folders, and whether an email has an account.
    same_as_missing(bob("GET", SX + "/workspace/list?path=" + alices["folder"]), bob("GET", SX + "/workspace/list?path=" + nope), alices["folder"], nope)
    same_as_missing(bob("GET", SX + f"/workspace/list?path=/Users/{ALICE}"), bob("GET", SX + "/workspace/list?path=/Users/nobody@example.com"), ALICE, "nobody@example.com")
    same_as_missing(bob("POST", ML + "/experiments/create", {"name": f"/Users/{ALICE}/mine"}),
                    bob("POST", ML + "/experiments/create", {"name": "/Users/nobody@example.com/mine"}), ALICE, "nobody@example.com")
    # Volumes and their files.
    missing_vol = alices["cat"] + ".team.nope"
    same_as_missing(bob("GET", UC + "/volumes/" + alices["volume"]), bob("GET", UC + "/volumes/" + missing_vol), alices["volume"], missing_vol)
    same_as_missing(bob("GET", UC + "/catalogs/" + alices["cat"]), bob("GET", UC + "/catalogs/nocat" + alices["n"]), alices["cat"], "nocat" + alices["n"])
    same_as_missing(bob("GET", f"/api/2.0/fs/files/Volumes/{alices['cat']}/team/ckpt/a.bin"),
                    bob("GET", f"/api/2.0/fs/files/Volumes/{alices['cat']}/team/nope/a.bin"), alices["volume"], missing_vol)


def test_mlflow_client_sees_nothing(server, creds, alices, client, monkeypatch):
    from mlflow.exceptions import MlflowException

    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", BOB)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", creds[BOB])
    # mlflow answers None for a name that does not exist: so for alice's.
    assert client.get_experiment_by_name(alices["name"]) is None
    assert client.get_experiment_by_name(alices["folder"] + "/nope") is None
    with pytest.raises(MlflowException) as e:
        client.get_run(alices["run"])
    assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    # Readable but not writable is a refusal, not a secret.
    r = call(server, creds, ALICE, "PUT", SX + "/permissions", {"resource": "experiment:" + alices["exp"], "principal": BOB, "level": "CAN_READ"})
    assert r.status_code == 200, r.text
    try:
        assert client.get_experiment_by_name(alices["name"]).experiment_id == alices["exp"]
        with pytest.raises(MlflowException) as e:
            client.log_metric(alices["run"], "m", 1.0)
        assert e.value.error_code == "PERMISSION_DENIED"
    finally:
        call(server, creds, ALICE, "PUT", SX + "/permissions", {"resource": "experiment:" + alices["exp"], "principal": BOB, "level": "NO_PERMISSIONS"})


def test_groups_list_shows_own_groups(server, creds):
    n = uuid.uuid4().hex[:6]
    for g, member in ((f"vision{n}", ALICE), (f"board{n}", ADMIN)):
        assert call(server, creds, ADMIN, "POST", SX + "/groups", {"name": g}).status_code == 200
        assert call(server, creds, ADMIN, "POST", SX + "/groups/members", {"group": g, "email": member}).status_code == 200

    def names(who):
        r = call(server, creds, who, "GET", SX + "/groups")
        assert r.status_code == 200, r.text
        return {g["name"] for g in r.json()["groups"]}

    assert f"vision{n}" not in names(BOB) and f"board{n}" not in names(BOB)
    assert f"vision{n}" in names(ALICE) and f"board{n}" not in names(ALICE)
    assert {f"vision{n}", f"board{n}"} <= names(ADMIN)
    assert ADMIN not in str(call(server, creds, BOB, "GET", SX + "/groups").json())


def samples(node, util, run_id=None, ahead_s=0.0):
    body = {"node": node, "samples": [{"ts_ms": int((time.time() + ahead_s) * 1000),
                                       "gpus": [{"index": 0, "uuid": "GPU-0", "util": util}],
                                       "processes": [{"gpu": 0, "pid": 4242, "name": "miner", "mem_used": 1}]}]}
    if run_id:
        body["run_id"] = run_id
    return body


def node_util(server, creds, node):
    r = call(server, creds, ADMIN, "GET", SX + "/gpu/latest?node=" + node)
    assert r.status_code == 200, r.text
    nodes = [n for n in r.json()["nodes"] if n["node"] == node]
    return nodes[0]["gpus"][0].get("util") if nodes else None


def test_gpu_nodes_report_through_node_tokens(server, creds, sextant_bin):
    gpu = SX + "/gpu/samples"
    bob_tok = call(server, creds, BOB, "POST", SX + "/tokens", {"name": "laptop"}).json()["token"]["token"]
    as_bob = {"Authorization": "Bearer " + bob_tok}
    # A user cannot post node samples, for any node: a node token must.
    r = requests.post(server.url + gpu, json=samples("gpu-01", 99), headers=as_bob, timeout=10)
    assert r.status_code == 403 and r.json()["error_code"] == "PERMISSION_DENIED" and "node token" in r.json()["message"], r.text
    # Only an administrator creates a node token (the CLI, as docs/gpu.md shows).
    env = dict(os.environ, MLFLOW_TRACKING_URI=server.url, MLFLOW_TRACKING_USERNAME=BOB, MLFLOW_TRACKING_PASSWORD=creds[BOB])
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    out = subprocess.run([sextant_bin, "tokens", "create", "mine", "--nodes", "gpu-01"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "administrators" in out.stderr, (out.returncode, out.stderr)
    env.update(MLFLOW_TRACKING_USERNAME=ADMIN, MLFLOW_TRACKING_PASSWORD=creds[ADMIN])
    out = subprocess.run([sextant_bin, "tokens", "create", "agents", "--nodes", "gpu-01"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    node_tok = out.stdout.strip()
    as_node = {"Authorization": "Bearer " + node_tok}
    r = requests.post(server.url + gpu, json=samples("gpu-01", 11), headers=as_node, timeout=10)
    assert r.status_code == 200, r.text
    # For its own node only, and nothing else.
    r = requests.post(server.url + gpu, json=samples("gpu-02", 12), headers=as_node, timeout=10)
    assert r.status_code == 403 and "gpu-01" in r.json()["message"], r.text
    r = requests.post(server.url + ML + "/experiments/search", json={}, headers=as_node, timeout=10)
    assert r.status_code == 403, r.text
    # Still no user speaks for gpu-01; a user's own run on it keeps its
    # system metrics, but the node's samples stay the node token's.
    r = requests.post(server.url + gpu, json=samples("gpu-01", 99), headers=as_bob, timeout=10)
    assert r.status_code == 403, r.text
    r = call(server, creds, BOB, "POST", ML + "/experiments/create", {"name": f"/Users/{BOB}/gpu-{uuid.uuid4().hex[:6]}"})
    assert r.status_code == 200, r.text
    run = call(server, creds, BOB, "POST", ML + "/runs/create", {"experiment_id": r.json()["experiment_id"]}).json()["run"]["info"]["run_id"]
    r = requests.post(server.url + gpu, json=samples("gpu-01", 77, run_id=run, ahead_s=1), headers=as_bob, timeout=10)
    assert r.status_code == 200, r.text
    assert node_util(server, creds, "gpu-01") == 11
    hist = call(server, creds, BOB, "GET", ML + "/metrics/get-history?run_id=" + run + "&metric_key=system/gpu_0_utilization_percentage")
    assert hist.status_code == 200 and [m["value"] for m in hist.json()["metrics"]] == [77], hist.text
    # Samples dated in the future are not the node's latest.
    r = requests.post(server.url + gpu, json=samples("gpu-01", 13, ahead_s=300), headers=as_node, timeout=10)
    assert r.status_code == 400 and "ahead of the server's clock" in r.text, r.text


def test_agent_reports_with_a_node_token(server, creds, sextant_bin, tmp_path):
    env = dict(os.environ, MLFLOW_TRACKING_URI=server.url, MLFLOW_TRACKING_USERNAME=ADMIN, MLFLOW_TRACKING_PASSWORD=creds[ADMIN])
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    node = f"gpu-{uuid.uuid4().hex[:6]}"
    out = subprocess.run([sextant_bin, "tokens", "create", "agent-" + node, "--nodes", node], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    env = dict(os.environ, MLFLOW_TRACKING_URI=server.url, MLFLOW_TRACKING_TOKEN=out.stdout.strip())
    env.pop("MLFLOW_TRACKING_USERNAME", None)
    env.pop("MLFLOW_TRACKING_PASSWORD", None)
    agent = subprocess.Popen([sextant_bin, "agent", "--node", node, "--gpu-source", "sim:2", "--interval", "1s", "--spool-dir", str(tmp_path / "spool")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and node_util(server, creds, node) is None:
            time.sleep(0.2)
        assert node_util(server, creds, node) is not None, "the agent's samples did not arrive"
    finally:
        agent.terminate()
        try:
            log, _ = agent.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            log, _ = agent.communicate()
    assert "403" not in log and "PERMISSION_DENIED" not in log, log
