"""Multi-user mode with the real mlflow client: Basic and Bearer credentials,
personal folders and /Shared, refusals in someone else's home folder,
token revocation, and workspace-path rules."""

from __future__ import annotations

import time

import pytest
import requests

from sextant_e2e import admin_password

ADMIN = "admin@example.com"
SEXTANT_SERVER_FLAGS = {"auth": "on", "admin_email": ADMIN}


@pytest.fixture(scope="module")
def people(server):
    """Creates alice and bob; returns {email: password}, admin included."""
    admin = (ADMIN, admin_password(server))
    creds = {ADMIN: admin[1], "alice@example.com": "alice-password-1", "bob@example.com": "bob-password-1"}
    for email in ("alice@example.com", "bob@example.com"):
        r = requests.post(server.url + "/api/2.0/sextant/users", json={"email": email, "password": creds[email]}, auth=admin, timeout=10)
        assert r.status_code == 200, r.text
    r = requests.post(server.url + "/api/2.0/sextant/workspace/mkdirs", json={"path": "/Shared/team"}, auth=("alice@example.com", creds["alice@example.com"]), timeout=10)
    assert r.status_code == 200, r.text
    return creds


def as_user(monkeypatch, email=None, password=None, token=None):
    for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    if email:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", email)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    if token:
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)


def test_anonymous_requests_are_refused(server, people, client):
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException) as e:
        client.search_experiments()
    assert "UNAUTHENTICATED" in str(e.value) or "401" in str(e.value)
    r = requests.get(server.url + "/health", timeout=5)
    assert r.status_code == 200  # probes stay open


def test_basic_auth_into_home_and_shared(server, people, client, monkeypatch):
    import mlflow

    as_user(monkeypatch, "alice@example.com", people["alice@example.com"])
    mlflow.set_experiment("/Users/alice@example.com/mnist")
    with mlflow.start_run(run_name="basic") as run:
        mlflow.log_param("lr", 0.1)
        mlflow.log_metrics({"loss": 0.5}, step=1)
    got = client.get_run(run.info.run_id)
    assert got.data.metrics["loss"] == 0.5
    assert got.info.user_id == "alice@example.com"  # who signed in, whatever the client claims
    mlflow.set_experiment("/Workspace/Shared/team/baseline")  # the /Workspace prefix names the same node
    with mlflow.start_run() as run:
        mlflow.log_metric("acc", 0.9)
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "/Shared/team/baseline"


def test_bearer_token_and_revocation(server, people, client, monkeypatch):
    import mlflow
    from mlflow.exceptions import MlflowException

    alice = ("alice@example.com", people["alice@example.com"])
    r = requests.post(server.url + "/api/2.0/sextant/tokens", json={"name": "ci"}, auth=alice, timeout=10)
    assert r.status_code == 200, r.text
    tok = r.json()["token"]
    as_user(monkeypatch, token=tok["token"])
    mlflow.set_experiment("/Shared/team/bearer")
    with mlflow.start_run() as run:
        mlflow.log_metric("m", 1.0, step=0)
    assert client.get_run(run.info.run_id).info.user_id == "alice@example.com"
    r = requests.delete(server.url + "/api/2.0/sextant/tokens", json={"id": tok["id"]}, auth=alice, timeout=10)
    assert r.status_code == 200, r.text
    start = time.monotonic()
    with pytest.raises(MlflowException) as e:
        client.log_metric(run.info.run_id, "m", 2.0, step=1)
    assert time.monotonic() - start < 10  # a 401 is not retried
    assert "UNAUTHENTICATED" in str(e.value) or "401" in str(e.value)


def test_refused_in_someone_elses_home(server, people, client, monkeypatch):
    import mlflow
    from mlflow.exceptions import MlflowException

    as_user(monkeypatch, "alice@example.com", people["alice@example.com"])
    mlflow.set_experiment("/Users/alice@example.com/private")
    with mlflow.start_run() as run:
        mlflow.log_metric("secret", 42.0)
    as_user(monkeypatch, "bob@example.com", people["bob@example.com"])
    # What bob may not read answers as missing (docs/auth.md, Enumeration).
    with pytest.raises(MlflowException) as e:
        mlflow.set_experiment("/Users/alice@example.com/bobs-attempt")
    assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(MlflowException) as e:
        client.get_run(run.info.run_id)
    assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(MlflowException):
        client.log_metric(run.info.run_id, "secret", 0.0)
    names = [x.name for x in client.search_experiments()]
    assert "/Users/alice@example.com/private" not in names
    runs = client.search_runs([run.info.experiment_id])
    assert len(runs) == 0
    # Once alice grants bob read access, he can read but still not write.
    r = requests.put(server.url + "/api/2.0/sextant/permissions",
                     json={"resource": "experiment:" + run.info.experiment_id, "principal": "bob@example.com", "level": "CAN_READ"},
                     auth=("alice@example.com", people["alice@example.com"]), timeout=10)
    assert r.status_code == 200, r.text
    assert client.get_run(run.info.run_id).data.metrics["secret"] == 42.0
    with pytest.raises(MlflowException) as e:
        client.log_metric(run.info.run_id, "secret", 0.0)
    assert e.value.error_code == "PERMISSION_DENIED"


def test_workspace_path_rules(server, people, client, monkeypatch):
    import mlflow
    from mlflow.exceptions import MlflowException

    as_user(monkeypatch, "alice@example.com", people["alice@example.com"])
    with pytest.raises(MlflowException) as e:
        mlflow.set_experiment("relative-name")
    assert e.value.error_code == "INVALID_PARAMETER_VALUE"
    with pytest.raises(MlflowException) as e:
        mlflow.set_experiment("/Users/alice@example.com/no-such-folder/exp")
    assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    assert "/Users/alice@example.com/no-such-folder" in str(e.value)
    with pytest.raises(MlflowException) as e:
        mlflow.set_experiment("/Users/alice@example.com/../bob@example.com/x")
    assert e.value.error_code == "INVALID_PARAMETER_VALUE"
