"""The first hour of a new user, end to end with the real mlflow client and
the real binary: the first administrator on a new machine, `sextant run`
on a multi-user server (a token, a user name and password), the
experiment-naming rule in single-user and multi-user mode through both the
client and the launcher, and finding runs from the terminal (`runs ls`,
`logs --last`, `logs RUN_NAME`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests
from mlflow import MlflowClient

from sextant_e2e import admin_password

TIMEOUT_S = 120
ALICE = ("alice@example.com", "alice-password-1")

CREDENTIAL_VARS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
                   "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID")


def env_for(srv, **extra) -> dict:
    """The environment of a client command for the server srv (or URL)."""
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARS}
    env["MLFLOW_TRACKING_URI"] = srv if isinstance(srv, str) else srv.url
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def sextant(bin_path, *args, env, stdin: str | None = None, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([bin_path, *args], env=env, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S,
                       stdin=None if stdin is not None else subprocess.DEVNULL)
    if check:
        assert r.returncode == 0, f"sextant {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def launched_experiment(stderr: str) -> str:
    m = re.search(r"^sextant: run [0-9a-f]{32} \(\S+\) in experiment (.+)$", stderr, re.M)
    assert m, f"the launcher did not announce its run:\n{stderr}"
    return m.group(1)


TRAIN = """
    import mlflow
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 0.25, step=1)
        print("trained", run.info.run_id, flush=True)
"""


@pytest.mark.disk  # the administrator goes into the data directory's SQLite database
def test_first_admin_on_a_new_directory(sextant_bin, start_server, tmp_path, monkeypatch):
    data_dir = tmp_path / "new" / "sextant-data"
    assert not data_dir.exists()
    r = sextant(sextant_bin, "users", "add", "root@example.com", "--admin", "--data-dir", str(data_dir),
                env=env_for("http://127.0.0.1:1"), stdin="a long password\n")
    # It says which directory and database it used.
    assert f"created the data directory {data_dir}" in r.stderr, r.stderr
    assert f"in the database {data_dir / 'sextant.db'}" in r.stdout, r.stdout
    srv = start_server(data_dir=data_dir)
    # A user in the database: the server requires authentication.
    assert requests.get(srv.api("/mlflow/experiments/search?max_results=5"), timeout=10).status_code == 401
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "root@example.com")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a long password")
    client = MlflowClient(srv.url)
    assert [e.name for e in client.search_experiments()] == ["Default"]
    exp = client.create_experiment("/Users/root@example.com/first")
    assert client.get_experiment(exp).name == "/Users/root@example.com/first"


@pytest.fixture
def multi_user(start_server, sextant_bin):
    """A multi-user server with alice; returns (server, admin env, alice env, alice token env)."""
    srv = start_server(auth="on", admin_email="admin@example.com")
    admin = env_for(srv, MLFLOW_TRACKING_USERNAME="admin@example.com", MLFLOW_TRACKING_PASSWORD=admin_password(srv))
    sextant(sextant_bin, "users", "add", ALICE[0], env=admin, stdin=ALICE[1] + "\n")
    alice = env_for(srv, MLFLOW_TRACKING_USERNAME=ALICE[0], MLFLOW_TRACKING_PASSWORD=ALICE[1])
    token = sextant(sextant_bin, "tokens", "create", "laptop", env=alice).stdout.strip()
    assert token.startswith("sxt_"), token
    return srv, admin, alice, env_for(srv, MLFLOW_TRACKING_TOKEN=token)


@pytest.mark.parametrize("creds", ["token", "basic"])
def test_sextant_run_on_a_multi_user_server(sextant_bin, multi_user, tmp_path, creds, monkeypatch):
    srv, _, alice, token = multi_user
    env = token if creds == "token" else alice
    train = script(tmp_path, f"train_{creds}.py", TRAIN)
    p = subprocess.run([sextant_bin, "run", "--", sys.executable, str(train)], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # Who the server says is signed in, not the operating system's user.
    want = f"/Users/{ALICE[0]}/train_{creds}"
    assert launched_experiment(p.stderr) == want
    run_id = re.search(r"trained ([0-9a-f]{32})", p.stdout).group(1)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ALICE[0])
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ALICE[1])
    client = MlflowClient(srv.url)
    run = client.get_run(run_id)
    assert client.get_experiment(run.info.experiment_id).name == want
    assert run.data.metrics["loss"] == 0.25 and run.info.user_id == ALICE[0]
    assert run.data.tags["mlflow.user"] == ALICE[0]
    # The banner links the run's page.
    assert f"sextant: view it at {srv.url}/runs/{run_id}\n" in p.stderr
    # logs --last: the newest run this user started.
    last = sextant(sextant_bin, "logs", "--last", env=env)
    assert f"trained {run_id}\n" in last.stdout and run_id in last.stderr, last.stdout + last.stderr


def test_naming_rule_on_a_multi_user_server(sextant_bin, multi_user, tmp_path, monkeypatch):
    """Experiment names are absolute workspace paths: the client and the
    launcher both refuse a relative one, and take the same absolute one."""
    import mlflow
    from mlflow.exceptions import MlflowException

    srv, _, alice, token = multi_user
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token["MLFLOW_TRACKING_TOKEN"])
    mlflow.set_tracking_uri(srv.url)
    with pytest.raises(MlflowException) as e:
        mlflow.set_experiment("my-exp")
    assert "INVALID_PARAMETER_VALUE" in str(e.value) and "absolute" in str(e.value)
    train = script(tmp_path, "train.py", TRAIN)
    p = subprocess.run([sextant_bin, "run", "--experiment", "my-exp", "--", sys.executable, str(train)], env=token,
                       capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == ""
    assert '"my-exp" is not an absolute workspace path' in p.stderr and f"/Users/{ALICE[0]}/my-exp" in p.stderr, p.stderr
    assert p.stderr.count("my-exp\" is not") == 1, "the error is printed more than once:\n" + p.stderr
    # The absolute name: the launcher's run and the client's experiment agree.
    name = f"/Workspace/Users/{ALICE[0]}/named"
    p = subprocess.run([sextant_bin, "run", "--experiment", name, "--", sys.executable, str(train)], env=token,
                       capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert launched_experiment(p.stderr) == f"/Users/{ALICE[0]}/named"
    assert mlflow.set_experiment(name).name == f"/Users/{ALICE[0]}/named"


def test_naming_rule_in_single_user_mode(sextant_bin, server, tmp_path):
    """Any name the client takes: mlflow.set_experiment("my-exp") works
    unchanged, and `sextant run --experiment my-exp` (or
    MLFLOW_EXPERIMENT_NAME=my-exp) runs in that same experiment, as does
    a job that calls set_experiment("my-exp") itself."""
    import mlflow

    mlflow.set_tracking_uri(server.url)
    exp = mlflow.set_experiment("my-exp")
    assert exp.name == "my-exp"
    client = MlflowClient(server.url)
    own = script(tmp_path, "own.py", """
        import mlflow
        mlflow.set_experiment("my-exp")
        with mlflow.start_run() as run:
            mlflow.log_metric("loss", 1.0)
            print("trained", run.info.run_id, flush=True)
    """)
    train = script(tmp_path, "train.py", TRAIN)
    env = env_for(server)
    for argv, extra in (
        (["--experiment", "my-exp", "--", sys.executable, str(train)], {}),
        (["--", sys.executable, str(train)], {"MLFLOW_EXPERIMENT_NAME": "my-exp"}),
        (["--experiment", "my-exp", "--", sys.executable, str(own)], {}),
    ):
        p = subprocess.run([sextant_bin, "run", *argv], env={**env, **extra}, capture_output=True, text=True,
                           timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr
        assert launched_experiment(p.stderr) == "my-exp"
        run_id = re.search(r"trained ([0-9a-f]{32})", p.stdout).group(1)
        assert client.get_run(run_id).info.experiment_id == exp.experiment_id
    assert len(client.search_runs([exp.experiment_id])) == 3


def test_find_runs_from_the_terminal(sextant_bin, start_server, tmp_path):
    srv = start_server()
    env = env_for(srv)
    job = script(tmp_path, "job.py", """
        import sys
        import mlflow
        with mlflow.start_run():
            mlflow.log_metrics({"loss": float(sys.argv[2]), "acc": 0.5}, step=3)
        print("output of", sys.argv[1], flush=True)
        sys.exit(int(sys.argv[3]))
    """)
    for name, loss, code, exp in (("baseline", "0.5", "0", "/Shared/a"), ("sweep-1", "0.25", "4", "/Shared/b")):
        p = subprocess.run([sextant_bin, "run", "--experiment", exp, "--run-name", name, "--", sys.executable, str(job), name, loss, code],
                           env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert p.returncode == int(code), p.stderr

    out = sextant(sextant_bin, "runs", "ls", env=env).stdout.splitlines()
    assert re.match(r"NAME\s+RUN ID\s+STATUS\s+STARTED\s+DURATION\s+METRICS\s+EXPERIMENT(\s+GPU-HOURS)?$", out[0]), out
    assert re.match(r"sweep-1\s+[0-9a-f]{32}\s+FAILED\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\S+\s+acc=0\.5 loss=0\.25\s+/Shared/b(\s+([0-9.]+|-))?$", out[1]), out
    assert re.match(r"baseline\s+[0-9a-f]{32}\s+FINISHED\s+.*acc=0\.5 loss=0\.5\s+/Shared/a(\s+([0-9.]+|-))?$", out[2]), out
    assert len(out) == 3
    only = sextant(sextant_bin, "runs", "ls", "--experiment", "/Shared/a", "--status", "FINISHED", "--limit", "5", env=env).stdout
    assert "baseline" in only and "sweep-1" not in only
    bad = sextant(sextant_bin, "runs", "ls", "--status", "DONE", env=env, check=False)
    assert bad.returncode == 2 and "--status must be one of" in bad.stderr

    # The job's whole output: the client's own "View run" lines, then the job's.
    last = sextant(sextant_bin, "logs", "--last", env=env)
    assert "View run sweep-1 at" in last.stdout and last.stdout.endswith("\noutput of sweep-1\n"), last.stdout
    assert "(sweep-1), FAILED" in last.stderr
    named = sextant(sextant_bin, "logs", "baseline", env=env)
    assert "View run baseline at" in named.stdout and named.stdout.endswith("\noutput of baseline\n"), named.stdout
    missing = sextant(sextant_bin, "logs", "no-such-run", env=env, check=False)
    assert missing.returncode == 1 and 'no run has the id or name "no-such-run"' in missing.stderr
