"""A hostile neighbour, a revoked user and an untrusted database against a
real server (issue 41, items 5, 6, 8, 9 and 11): file modes on disk, upload
tokens that outlive the user's rights, the webhook's log and text, the
headers of file downloads, secrets on the debug listener and in the log,
and `sextant import` reading only the artifact directories it is given."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from sextant_e2e import WebhookReceiver, admin_password, free_port, storage_flags

ADMIN = "admin@example.com"
ALICE = ("alice@example.com", "alice-password-1")
BOB = ("bob@example.com", "bob-password-1")
SX = "/api/2.0/sextant"
UC = "/api/2.1/unity-catalog"
FS = "/api/2.0/fs/files"


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def private_dir(p: Path) -> Path:
    """A data directory made as docs/deploy.md makes one: 0700."""
    p.mkdir(parents=True, mode=0o700)
    os.chmod(p, 0o700)  # whatever the umask
    return p


# ---------------------------------------------------------------- files on disk


def test_files_on_disk_are_private(start_server, use_server, tmp_path, s3_blob_store, postgres_db):
    """After a real mlflow client run, the database (SQLite) and every
    artifact file are 0600 and every directory the server made 0700."""
    import mlflow

    srv = start_server(data_dir=private_dir(tmp_path / "data"))
    use_server(srv)
    mlflow.set_experiment("/Shared/modes")
    with mlflow.start_run():
        mlflow.log_param("p", 1)
        mlflow.log_text("weights", "model/weights.txt")
    data = srv.data_dir
    assert mode(data) == 0o700
    if postgres_db is None:
        for name in ("sextant.db", "sextant.db-wal", "sextant.db-shm", "secret"):
            assert mode(data / name) == 0o600, (name, oct(mode(data / name)))
    if s3_blob_store is None:
        files = [p for p in (data / "artifacts").rglob("*") if p.is_file()]
        assert any(p.name == "weights.txt" for p in files), files
        for p in files:
            assert mode(p) == 0o600, (p, oct(mode(p)))
        for p in [data / "artifacts", *(p for p in (data / "artifacts").rglob("*") if p.is_dir())]:
            assert mode(p) == 0o700, (p, oct(mode(p)))
    assert "chmod" not in srv.stderr_tail(200)


def test_open_data_dir_gets_a_warning(start_server, tmp_path):
    """A data directory other accounts may read (as the old recipe of
    docs/deploy.md made it) is served, with a warning that gives the fix."""
    data = tmp_path / "open data"
    data.mkdir()
    os.chmod(data, 0o755)
    srv = start_server(data_dir=data)
    log = srv.stderr_tail(200)
    assert "0755" in log and f"chmod -R go-rwx '{data}'" in log, log


# ---------------------------------------------------------------- upload tokens


def auth_server(start_server):
    srv = start_server(auth="on", admin_email=ADMIN)
    admin = (ADMIN, admin_password(srv))
    for email, pw in (ALICE, BOB):
        r = requests.post(srv.url + SX + "/users", json={"email": email, "password": pw}, auth=admin, timeout=10)
        assert r.status_code == 200, r.text
    return srv, admin


def set_level(srv, admin, resource: str, who: str, level: str) -> None:
    r = requests.put(srv.url + SX + "/permissions", json={"resource": resource, "principal": who, "level": level}, auth=admin, timeout=10)
    assert r.status_code == 200, r.text


def set_disabled(srv, admin, email: str, disabled: bool) -> None:
    r = requests.patch(srv.url + SX + "/users", json={"email": email, "disabled": disabled}, auth=admin, timeout=10)
    assert r.status_code == 200, r.text


def test_artifact_part_tokens_follow_the_users_rights(start_server):
    """The part URLs of an artifact multipart upload carry a token: once an
    admin takes the experiment away from the user who started the upload,
    or disables them, the next part with the same token is refused."""
    srv, admin = auth_server(start_server)
    r = requests.post(srv.url + SX + "/workspace/mkdirs", json={"path": f"/Users/{ADMIN}/team"}, auth=admin, timeout=10)
    assert r.status_code == 200, r.text
    r = requests.post(srv.url + "/api/2.0/mlflow/experiments/create", json={"name": f"/Users/{ADMIN}/team/exp"}, auth=admin, timeout=10)
    exp = r.json()["experiment_id"]
    set_level(srv, admin, "experiment:" + exp, ALICE[0], "CAN_EDIT")
    run = requests.post(srv.url + "/api/2.0/mlflow/runs/create", json={"experiment_id": exp}, auth=ALICE, timeout=10).json()["run"]["info"]["run_id"]

    def start_upload():
        r = requests.post(f"{srv.url}/api/2.0/mlflow-artifacts/mpu/create/{exp}/{run}/artifacts",
                          json={"path": "big.bin", "num_parts": 3}, auth=ALICE, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["credentials"]

    def put(cred):  # as the mlflow client does: no credentials but the token
        return requests.put(cred["url"], data=b"x" * 1024, headers=cred["headers"], timeout=10)

    creds = start_upload()
    assert put(creds[0]).status_code == 200
    set_level(srv, admin, "experiment:" + exp, ALICE[0], "NO_PERMISSIONS")
    r = put(creds[1])
    assert r.status_code in (403, 404), (r.status_code, r.text)

    set_level(srv, admin, "experiment:" + exp, ALICE[0], "CAN_EDIT")
    creds = start_upload()
    assert put(creds[0]).status_code == 200
    set_disabled(srv, admin, ALICE[0], True)
    r = put(creds[1])
    assert r.status_code in (403, 404), (r.status_code, r.text)
    set_disabled(srv, admin, ALICE[0], False)
    assert put(creds[2]).status_code == 200


def test_volume_upload_sessions_follow_the_users_rights(start_server):
    """A volume's multipart session token is alice's: bob, who may write the
    volume too, cannot continue her upload with it; once an admin takes the
    volume away from her, or disables her, her next part is refused."""
    srv, admin = auth_server(start_server)
    for target, body in ((UC + "/catalogs", {"name": "main"}), (UC + "/schemas", {"catalog_name": "main", "name": "team"}),
                         (UC + "/volumes", {"catalog_name": "main", "schema_name": "team", "name": "ckpt"})):
        r = requests.post(srv.url + target, json=body, auth=admin, timeout=10)
        assert r.status_code == 200, r.text
    for who in (ALICE[0], BOB[0]):
        set_level(srv, admin, "volume:main.team.ckpt", who, "CAN_EDIT")
    url = srv.url + FS + "/Volumes/main/team/ckpt/big.bin"
    r = requests.post(url, params={"action": "initiate-upload"}, auth=ALICE, timeout=10)
    assert r.status_code == 200, r.text
    token = r.json()["multipart_upload"]["session_token"]

    def put(auth, n):
        return requests.put(url, params={"upload_type": "multipart", "session_token": token, "part_number": n}, data=b"x" * 1024, auth=auth, timeout=10)

    assert put(ALICE, 1).status_code == 200
    r = put(BOB, 2)
    assert r.status_code in (403, 404), (r.status_code, r.text)
    set_level(srv, admin, "volume:main.team.ckpt", ALICE[0], "NO_PERMISSIONS")
    r = put(ALICE, 2)
    assert r.status_code in (403, 404), (r.status_code, r.text)
    set_level(srv, admin, "volume:main.team.ckpt", ALICE[0], "CAN_EDIT")
    assert put(ALICE, 2).status_code == 200
    set_disabled(srv, admin, ALICE[0], True)
    r = put(ALICE, 3)
    assert r.status_code in (401, 403, 404), (r.status_code, r.text)


# ---------------------------------------------------------------- webhook



def test_webhook_logs_no_secret_and_escapes_the_text(start_server, use_server):
    """A stalled run named like a Slack broadcast: the text arrives with
    < > & escaped, and the failed delivery is logged with the receiver's
    host, never the path or query that are the webhook's secret."""
    rx = WebhookReceiver(500)
    try:
        hook = f"http://127.0.0.1:{rx.port}/services/T000/B000/XXsecretpathXX?token=hushhush"
        srv = start_server(alert_webhook=hook, stall_for="1s", idle_for="0", watch_every="200ms")
        c = use_server(srv)
        name = "<!channel> <http://x|y> & z"
        c.create_run(c.get_experiment_by_name("Default").experiment_id, run_name=name)
        deadline = time.monotonic() + 30
        while not rx.bodies and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rx.bodies, "no webhook arrived:\n" + srv.stderr_tail()
        text = rx.bodies[0]["text"]
        assert "&lt;!channel&gt; &lt;http://x|y&gt; &amp; z" in text, text
        assert "<" not in text and ">" not in text, text
        assert rx.bodies[0]["run"]["run_name"] == name
        # 5 attempts, 1 + 2 + 4 + 8 s apart, then the failure is logged.
        deadline = time.monotonic() + 40
        while "webhook failed" not in srv.stderr_tail(400) and time.monotonic() < deadline:
            time.sleep(0.2)
        # The server's own lines: the harness writes the command line too.
        log = "\n".join(line for line in srv.stderr_tail(400).splitlines() if not line.startswith("===== start "))
        assert "webhook failed" in log, log
        assert f"127.0.0.1:{rx.port}" in log, log
        for secret in ("XXsecretpathXX", "hushhush", "/services/"):
            assert secret not in log, f"the log shows {secret!r}:\n{log}"
    finally:
        rx.close()


# ---------------------------------------------------------------- downloads


def test_file_downloads_are_attachments(start_server):
    """Workspace and volume files download as artifacts do: never sniffed,
    never rendered in the server's origin."""
    srv = start_server()
    ws = srv.url + FS + "/Workspace/Shared/page.html"
    assert requests.put(ws, data=b"<script>alert(document.cookie)</script>", timeout=10).status_code in (200, 204)
    for target, body in ((UC + "/catalogs", {"name": "main"}), (UC + "/schemas", {"catalog_name": "main", "name": "team"}),
                         (UC + "/volumes", {"catalog_name": "main", "schema_name": "team", "name": "files"})):
        assert requests.post(srv.url + target, json=body, timeout=10).status_code == 200
    vol = srv.url + FS + "/Volumes/main/team/files/page.html"
    assert requests.put(vol, data=b"<script>alert(document.cookie)</script>", timeout=10).status_code == 204
    for url in (ws, vol):
        for method in ("GET", "HEAD"):
            r = requests.request(method, url, timeout=10)
            assert r.status_code == 200, (method, url, r.status_code, r.text)
            assert r.headers.get("X-Content-Type-Options") == "nosniff", (method, url, r.headers)
            assert r.headers.get("Content-Disposition") == "attachment; filename=page.html", (method, url, r.headers)
            assert "html" not in r.headers.get("Content-Type", ""), (method, url, r.headers)


# ---------------------------------------------------------------- secrets


def test_debug_listener_and_log_show_no_secret(start_server):
    # Mixed-case letters only: a window of it cannot turn up in a log by
    # chance, as digits do in ports, pids and times.
    secret = "QxZvSeCrEtWkJmYb"
    dbg = f"127.0.0.1:{free_port()}"
    srv = start_server(debug_addr=dbg, s3_secret_key=secret)
    r = requests.get(f"http://{dbg}/debug/pprof/cmdline", timeout=10)
    assert r.status_code == 404 and secret not in r.text and "s3-secret-key" not in r.text, (r.status_code, r.text)
    assert requests.get(f"http://{dbg}/debug/pprof/", timeout=10).status_code == 200
    log = "\n".join(line for line in srv.stderr_tail(400).splitlines() if not line.startswith("===== start "))
    assert "starting sextant" in log, log
    for i in range(len(secret) - 3):
        assert secret[i:i + 4] not in log, f"the log shows {secret[i:i + 4]!r} of the secret:\n{log}"


@pytest.mark.mlflow_sql
def test_import_reads_only_the_named_artifact_directories(sextant_bin, tmp_path):
    """An MLflow database names each run's artifact location; one that
    points outside the directories the operator named (here at a private
    key) is not read, and the report says which flag would allow it."""
    import mlflow

    root = tmp_path / "mlflow"
    mlruns = root / "mlruns"
    mlruns.mkdir(parents=True)
    c = mlflow.MlflowClient(f"sqlite:///{root}/mlflow.db")
    exp = c.create_experiment("hostile", artifact_location=mlruns.as_uri() + "/1")
    good, bad = c.create_run(exp, run_name="good"), c.create_run(exp, run_name="bad")
    for run in (good, bad):
        c.log_text(run.info.run_id, "weights", "model.txt")
        c.set_terminated(run.info.run_id)
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE KEY")
    import sqlite3

    con = sqlite3.connect(root / "mlflow.db")
    con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (secret.as_uri(), bad.info.run_id))
    con.commit()
    con.close()

    data = tmp_path / "sextant"
    r = subprocess.run([sextant_bin, "import", "--from", f"sqlite:///{root}/mlflow.db", "--artifacts-root", str(mlruns),
                        "--data-dir", str(data), *storage_flags(data)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 artifact files" in r.stdout and "--artifacts-root" in r.stdout, r.stdout
    assert secret.as_uri() in r.stderr, r.stderr
    data2 = tmp_path / "sextant2"
    r = subprocess.run([sextant_bin, "import", "--from", f"sqlite:///{root}/mlflow.db", "--artifacts-root", str(mlruns),
                        "--data-dir", str(data2), *storage_flags(data2), "--json"], capture_output=True, text=True, timeout=300)
    rep = json.loads(r.stdout)
    assert rep["artifact_files"] == 1 and rep["refused_artifacts"] == [bad.info.run_id], rep
    if not storage_flags(data2):
        copied = [p for p in (data2 / "artifacts").rglob("*") if p.is_file()]
        assert all(b"PRIVATE KEY" not in p.read_bytes() for p in copied), copied
