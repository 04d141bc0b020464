"""Multi-user permissions that hold when users move, rename and reference
things (docs/auth.md, "Moves, the Default experiment and references"),
through the real mlflow client: moving an experiment needs CAN_MANAGE on it,
the Default experiment is the administrators', a reference to another
user's run or logged model needs a grant on it, a model version's source
must be readable, and searches over unreadable experiments are empty."""

from __future__ import annotations

import pytest
import requests

from sextant_e2e import admin_password

ADMIN = "admin@example.com"
ALICE = "alice@example.com"
BOB = "bob@example.com"
SEXTANT_SERVER_FLAGS = {"auth": "on", "admin_email": ADMIN}


@pytest.fixture(scope="module")
def creds(server):
    """Creates alice and bob; returns {email: password}, admin included."""
    out = {ADMIN: admin_password(server), ALICE: "alice-password-1", BOB: "bob-password-1"}
    for email in (ALICE, BOB):
        r = requests.post(server.url + "/api/2.0/sextant/users", json={"email": email, "password": out[email]},
                          auth=(ADMIN, out[ADMIN]), timeout=10)
        assert r.status_code == 200, r.text
    return out


def as_user(monkeypatch, creds, email):
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", email)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", creds[email])


def api(server, creds, email, method, path, body=None):
    return requests.request(method, server.url + path, json=body, auth=(email, creds[email]), timeout=10)


def denied(fn, *args, **kwargs):
    """Calls fn, which must fail with PERMISSION_DENIED; returns the message."""
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException) as e:
        fn(*args, **kwargs)
    assert e.value.error_code == "PERMISSION_DENIED", str(e.value)
    return str(e.value)


@pytest.fixture
def alices(server, creds, client, monkeypatch):
    """Alice's private experiment (in a fresh folder), with a run and a
    logged model of that run; bob's own experiment and run."""
    import uuid

    n = uuid.uuid4().hex[:8]
    as_user(monkeypatch, creds, ALICE)
    r = api(server, creds, ALICE, "POST", "/api/2.0/sextant/workspace/mkdirs", {"path": f"/Users/{ALICE}/p{n}"})
    assert r.status_code == 200, r.text
    exp = client.create_experiment(f"/Users/{ALICE}/p{n}/private")
    run = client.create_run(exp).info.run_id
    model = client.create_logged_model(exp, name="alices", source_run_id=run).model_id
    as_user(monkeypatch, creds, BOB)
    bob_exp = client.create_experiment(f"/Users/{BOB}/mine-{n}")
    bob_run = client.create_run(bob_exp).info.run_id
    bob_model = client.create_logged_model(bob_exp, name="bobs").model_id
    return dict(n=n, exp=exp, run=run, model=model, folder=f"/Users/{ALICE}/p{n}",
                bob_exp=bob_exp, bob_run=bob_run, bob_model=bob_model)


def grant(server, creds, resource, who, level):
    r = api(server, creds, ALICE, "PUT", "/api/2.0/sextant/permissions", {"resource": resource, "principal": who, "level": level})
    assert r.status_code == 200, r.text


def test_moving_an_experiment_needs_manage(server, creds, client, monkeypatch, alices):
    grant(server, creds, "experiment:" + alices["exp"], BOB, "CAN_EDIT")
    as_user(monkeypatch, creds, BOB)
    # An editor cannot move it into his own home (where he would manage
    # it) or into /Shared (where everyone would).
    msg = denied(client.rename_experiment, alices["exp"], f"/Users/{BOB}/stolen-{alices['n']}")
    assert "CAN_MANAGE" in msg
    denied(client.rename_experiment, alices["exp"], f"/Shared/stolen-{alices['n']}")
    r = api(server, creds, BOB, "PUT", "/api/2.0/sextant/permissions",
            {"resource": "experiment:" + alices["exp"], "principal": BOB, "level": "CAN_MANAGE"})
    assert r.status_code == 403, r.text
    # Renaming within the folder is editing.
    client.rename_experiment(alices["exp"], alices["folder"] + "/renamed")
    assert client.get_experiment(alices["exp"]).name == alices["folder"] + "/renamed"
    # Its manager may move it into a folder she can edit, and the move is audited.
    as_user(monkeypatch, creds, ALICE)
    r = api(server, creds, ALICE, "POST", "/api/2.0/sextant/workspace/mkdirs", {"path": f"/Users/{ALICE}/moved-{alices['n']}"})
    assert r.status_code == 200, r.text
    client.rename_experiment(alices["exp"], f"/Users/{ALICE}/moved-{alices['n']}/exp")
    events = api(server, creds, ADMIN, "GET", "/api/2.0/sextant/audit").json()["events"]
    moves = [e for e in events if e["action"] == "experiment.move" and e["target"] == "experiment:" + alices["exp"]]
    assert len(moves) == 1 and moves[0]["actor"] == ALICE, events[-5:]
    assert moves[0]["detail"] == f"{alices['folder']}/renamed -> /Users/{ALICE}/moved-{alices['n']}/exp"


def test_the_default_experiment_is_the_administrators(server, creds, client, monkeypatch):
    import mlflow

    as_user(monkeypatch, creds, BOB)
    r = api(server, creds, BOB, "POST", "/api/2.0/sextant/workspace/mkdirs", {"path": f"/Users/{BOB}/grab"})
    assert r.status_code == 200, r.text
    denied(client.rename_experiment, "0", f"/Users/{BOB}/grab/default")
    denied(client.delete_experiment, "0")
    r = api(server, creds, BOB, "PUT", "/api/2.0/sextant/permissions", {"resource": "experiment:0", "principal": "group:users", "level": "NO_PERMISSIONS"})
    assert r.status_code == 403 and r.json()["error_code"] == "PERMISSION_DENIED", r.text
    assert client.get_experiment("0").name == "Default"
    # Everyone still logs there.
    for who in (BOB, ALICE):
        as_user(monkeypatch, creds, who)
        with mlflow.start_run() as run:
            mlflow.log_metric("m", 1.0)
        assert run.info.experiment_id == "0"


def test_an_admins_change_to_default_survives_a_restart(start_server, use_server, monkeypatch):
    """Every user may log into Default on a new server; an administrator who
    narrows that keeps it narrowed after the server restarts (each start
    sets up the workspace again, and must not grant it back)."""
    import mlflow

    srv = start_server(auth="on", admin_email=ADMIN)
    creds = {ADMIN: admin_password(srv), BOB: "bob-password-1"}
    r = requests.post(srv.url + "/api/2.0/sextant/users", json={"email": BOB, "password": creds[BOB]},
                      auth=(ADMIN, creds[ADMIN]), timeout=10)
    assert r.status_code == 200, r.text
    use_server(srv)
    as_user(monkeypatch, creds, BOB)
    with mlflow.start_run() as run:
        mlflow.log_metric("m", 1.0)
    assert run.info.experiment_id == "0"
    r = api(srv, creds, ADMIN, "PUT", "/api/2.0/sextant/permissions",
            {"resource": "experiment:0", "principal": "group:users", "level": "CAN_READ"})
    assert r.status_code == 200, r.text
    srv.stop()
    srv.start()
    client = use_server(srv)
    as_user(monkeypatch, creds, BOB)
    denied(client.create_run, "0")
    r = api(srv, creds, ADMIN, "GET", "/api/2.0/sextant/permissions?resource=experiment:0")
    assert r.status_code == 200, r.text
    assert [g["level"] for g in r.json()["grants"] if g["principal"] == "group:users"] == ["CAN_READ"], r.text


def test_references_to_someone_elses_run_or_model(server, creds, client, monkeypatch, alices):
    import mlflow
    from mlflow.entities import LoggedModelInput, LoggedModelOutput, Metric, RunTag

    as_user(monkeypatch, creds, BOB)
    model, run = alices["model"], alices["run"]
    # A metric logged to alice's model would be recorded on it.
    mlflow.set_experiment(experiment_id=alices["bob_exp"])
    with mlflow.start_run():
        msg = denied(mlflow.log_metric, "acc", 0.9, model_id=model)
        assert "model_id" in msg
    denied(client.log_batch, alices["bob_run"], metrics=[Metric("acc", 0.9, 1, 0, model_id=model)])
    denied(client.log_inputs, alices["bob_run"], models=[LoggedModelInput(model)])
    denied(client.log_outputs, alices["bob_run"], [LoggedModelOutput(model, 0)])
    # A parent run and a logged model's source run.
    denied(client.create_run, alices["bob_exp"], tags={"mlflow.parentRunId": run})
    denied(client.set_tag, alices["bob_run"], "mlflow.parentRunId", run)
    denied(client.log_batch, alices["bob_run"], tags=[RunTag("mlflow.parentRunId", run)])
    denied(client.create_logged_model, alices["bob_exp"], name="x", source_run_id=run)
    # Nothing was written.
    as_user(monkeypatch, creds, ALICE)
    assert client.get_logged_model(model).metrics in (None, [])
    # With CAN_READ, bob may point at them, but not write metrics into the model.
    grant(server, creds, "experiment:" + alices["exp"], BOB, "CAN_READ")
    as_user(monkeypatch, creds, BOB)
    child = client.create_run(alices["bob_exp"], tags={"mlflow.parentRunId": run})
    assert child.data.tags["mlflow.parentRunId"] == run
    client.log_inputs(alices["bob_run"], models=[LoggedModelInput(model)])
    denied(client.log_batch, alices["bob_run"], metrics=[Metric("acc", 0.9, 1, 0, model_id=model)])
    # His own model takes metrics.
    client.log_batch(alices["bob_run"], metrics=[Metric("acc", 0.8, 2, 1, model_id=alices["bob_model"])])
    assert [m.value for m in client.get_logged_model(alices["bob_model"]).metrics] == [0.8]


def test_registering_what_you_cannot_read(server, creds, client, monkeypatch, alices):
    import mlflow

    as_user(monkeypatch, creds, BOB)
    name = "bobs-" + alices["n"]
    client.create_registered_model(name)
    denied(client.create_model_version, name, f"runs:/{alices['run']}/model", run_id=alices["run"])
    denied(client.create_model_version, name, f"models:/{alices['model']}")
    denied(client.create_model_version, name, "s3://bucket/model", run_id=alices["run"])
    # mlflow.register_model may read the run first (newer clients do): a
    # run bob may not read answers as a missing one (docs/auth.md,
    # Enumeration); the reference itself is refused with 403.
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException) as e:
        mlflow.register_model(f"runs:/{alices['run']}/model", name)
    assert e.value.error_code in ("PERMISSION_DENIED", "RESOURCE_DOES_NOT_EXIST"), str(e.value)
    assert client.search_model_versions(f"name = '{name}'") == []
    # Alice registers her private model in the shared registry: bob sees
    # the version but cannot learn where its files are.
    as_user(monkeypatch, creds, ALICE)
    theirs = "alices-" + alices["n"]
    client.create_registered_model(theirs)
    v = client.create_model_version(theirs, f"models:/{alices['model']}", model_id=alices["model"])
    uri = client.get_model_version_download_uri(theirs, v.version)
    assert uri.startswith(f"mlflow-artifacts:/{alices['exp']}/")
    as_user(monkeypatch, creds, BOB)
    msg = denied(client.get_model_version_download_uri, theirs, v.version)
    assert alices["run"] not in msg and alices["model"] not in msg and "mlflow-artifacts" not in msg
    # His own source registers.
    v = client.create_model_version(name, f"runs:/{alices['bob_run']}/model", run_id=alices["bob_run"])
    assert client.get_model_version_download_uri(name, v.version).startswith(f"mlflow-artifacts:/{alices['bob_exp']}/")


def test_searches_over_unreadable_experiments_are_empty(server, creds, client, monkeypatch, alices):
    as_user(monkeypatch, creds, BOB)
    assert client.search_logged_models(experiment_ids=[alices["exp"]]) == []
    assert client.search_runs([alices["exp"]]) == []
    mine = client.search_logged_models(experiment_ids=[alices["exp"], alices["bob_exp"]])
    assert [m.model_id for m in mine] == [alices["bob_model"]]
