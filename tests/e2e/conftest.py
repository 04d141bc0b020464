"""End-to-end harness: a real `sextant server` driven by the official mlflow client.

Run with a Python that has mlflow, pytest and requests installed:

    SEXTANT_BIN=/path/to/sextant python -m pytest tests/e2e -q

Without SEXTANT_BIN the binary is built once per session with
`go build -o <tmp>/sextant ./cmd/sextant` from the repository root.

Fixtures only; the process handling is in sextant_e2e.py. Every server is
started on a free loopback port with a fresh data directory,
waited on through GET /health, and stopped with SIGTERM at teardown; the
teardown asserts exit code 0. A server's stderr goes to a file in its tmp dir,
and its tail is shown whenever a server dies, fails to start, or exits badly.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

# The client must never try to reach the internet (telemetry). Set these
# before any test module imports mlflow.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"
# Nor may the machine-learning tests (marker `ml`) reach the Hugging Face hub:
# their models are built from configs in code. These are read when
# huggingface_hub/transformers are imported, so they are set here.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

from sextant_e2e import (  # noqa: E402
    MLFLOW_STATE_ENV,
    FAST_FAIL_ENV,
    MEASUREMENTS,
    REPO_ROOT,
    MinioServer,
    PostgresServer,
    SextantServer,
    tail_file,
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "ml: trains tiny models with torch/lightning/transformers; needs the ML environment "
        "(requirements-ml.txt). Run `-m ml` there and `-m \"not ml\"` elsewhere: these tests "
        "import torch inside the test, so an environment without it fails them, never skips.")
    config.addinivalue_line(
        "markers", "slow: moves gigabytes (1 GiB artifact round trips); about a minute each")
    config.addinivalue_line(
        "markers",
        "mlflow_sql: writes an MLflow database with MLflow's own SQL store (the source of "
        "`sextant import`); run with the newest mlflow: 3.7.0's store does not load next to "
        "SQLAlchemy 2.1, which its requirements let pip choose")
    config.addinivalue_line(
        "markers",
        "replicas: two servers sharing one PostgreSQL database and one bucket; run them in the "
        "SEXTANT_E2E_DB=postgres SEXTANT_E2E_BLOB_STORE=s3 session and deselect them elsewhere")
    config.addinivalue_line(
        "markers",
        "disk: looks at the files the local-directory blob store keeps under the data directory; "
        "deselect with -m \"not disk\" when SEXTANT_E2E_BLOB_STORE=s3 (the S3 store's own "
        "guarantees are checked by the Go conformance suite against MinIO)")


def pytest_terminal_summary(terminalreporter):
    """Shows what tests measured (report_measurement), even under -q."""
    if not MEASUREMENTS:
        return
    import json

    terminalreporter.write_sep("-", "sextant e2e measurements")
    for name, data in MEASUREMENTS:
        terminalreporter.write_line(f"{name}: {json.dumps(data, sort_keys=True)}")

# ---------------------------------------------------------------- binary


@pytest.fixture(scope="session")
def sextant_bin(tmp_path_factory) -> str:
    env_bin = os.environ.get("SEXTANT_BIN")
    if env_bin:
        p = Path(env_bin)
        assert p.is_file() and os.access(p, os.X_OK), f"SEXTANT_BIN={env_bin} is not an executable file"
        return str(p.resolve())
    out = tmp_path_factory.mktemp("bin") / "sextant"
    env = dict(os.environ, CGO_ENABLED="1")
    r = subprocess.run(["go", "build", "-o", str(out), "./cmd/sextant"], cwd=REPO_ROOT,
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        pytest.fail(f"go build failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    return str(out)


# ---------------------------------------------------------------- S3


@pytest.fixture(scope="session", autouse=True)
def s3_blob_store(tmp_path_factory):
    """With SEXTANT_E2E_BLOB_STORE=s3 every server of the session keeps its
    artifacts in a real MinIO server started here (binary from
    scripts/minio.sh, built once and cached); otherwise in its data directory."""
    mode = os.environ.get("SEXTANT_E2E_BLOB_STORE", "dir")
    if mode == "dir":
        yield None
        return
    if mode != "s3":
        pytest.fail(f"SEXTANT_E2E_BLOB_STORE={mode!r}: want dir or s3")
    import sextant_e2e

    r = subprocess.run([str(REPO_ROOT / "scripts" / "minio.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"scripts/minio.sh failed (exit {r.returncode}):\n{r.stderr}")
    minio = MinioServer(r.stdout.strip(), tmp_path_factory.mktemp("minio")).start()
    sextant_e2e.S3_SERVER_FLAGS[:] = minio.server_flags()
    yield minio
    sextant_e2e.S3_SERVER_FLAGS.clear()
    minio.stop()


@pytest.fixture(scope="session", autouse=True)
def postgres_db(tmp_path_factory):
    """With SEXTANT_E2E_DB=postgres every server of the session keeps its
    data in its own database of a PostgreSQL server started here."""
    mode = os.environ.get("SEXTANT_E2E_DB", "sqlite")
    if mode == "sqlite":
        yield None
        return
    if mode != "postgres":
        pytest.fail(f"SEXTANT_E2E_DB={mode!r}: want sqlite or postgres")
    import sextant_e2e

    pg = PostgresServer().start()
    sextant_e2e.POSTGRES = pg
    yield pg
    sextant_e2e.POSTGRES = None
    pg.stop()


# ---------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def server(sextant_bin, tmp_path_factory, request):
    """A fresh server per test module. A module may set SEXTANT_SERVER_FLAGS = {...}
    (flag name -> value, underscores for dashes) to start it with extra flags."""
    flags = getattr(request.module, "SEXTANT_SERVER_FLAGS", {})
    d = tmp_path_factory.mktemp("srv-" + request.module.__name__.rsplit(".", 1)[-1])
    srv = SextantServer(sextant_bin, d / "data", d / "server.log", flags).start()
    yield srv
    srv.stop_and_check()


@pytest.fixture
def start_server(sextant_bin, tmp_path):
    """Factory for function-scoped servers: start_server(**flags) or
    start_server(data_dir=..., **flags) to reuse a data directory."""
    started: list[SextantServer] = []
    counter = [0]

    def _start(data_dir: Path | None = None, **flags) -> SextantServer:
        counter[0] += 1
        n = counter[0]
        srv = SextantServer(sextant_bin, Path(data_dir) if data_dir else tmp_path / f"data{n}",
                            tmp_path / f"server{n}.log", flags)
        started.append(srv)
        return srv.start()

    yield _start
    errors = []
    for srv in started:
        try:
            srv.stop_and_check()
        except BaseException as e:  # keep stopping the others
            errors.append(e)
    if errors:
        raise errors[0]


# ---------------------------------------------------------------- mlflow state


def _reset_mlflow_globals() -> None:
    import mlflow
    import mlflow.tracking.fluent as fluent

    while mlflow.active_run() is not None:
        try:
            mlflow.end_run()
        except Exception:
            # The server may be gone already; drop the run locally.
            fluent._active_run_stack.get().pop()
    fluent._active_experiment_id = None


@pytest.fixture(autouse=True)
def _mlflow_isolation():
    """Each test starts with no active run, no experiment, no tracking URI, and
    fast-failing HTTP retries; the environment is restored afterwards."""
    import mlflow

    saved = dict(os.environ)
    for k in MLFLOW_STATE_ENV:
        os.environ.pop(k, None)
    os.environ.update(FAST_FAIL_ENV)
    _reset_mlflow_globals()
    yield
    _reset_mlflow_globals()
    os.environ.clear()
    os.environ.update(saved)
    mlflow.set_tracking_uri(None)
    for k in MLFLOW_STATE_ENV:
        if k not in saved:
            os.environ.pop(k, None)


@pytest.fixture
def use_server(monkeypatch):
    """use_server(srv) points mlflow (env var and global) at srv and returns an MlflowClient."""
    import mlflow

    def _use(srv: SextantServer):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", srv.url)
        mlflow.set_tracking_uri(srv.url)
        return mlflow.MlflowClient(srv.url)

    return _use


@pytest.fixture
def client(server, use_server):
    """An MlflowClient for the module's server, with mlflow's fluent API pointed at it too."""
    return use_server(server)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tail of every server log this test used."""
    if call.when != "call" or call.excinfo is None:
        return
    logs = []
    funcargs = getattr(item, "funcargs", {})
    srv = funcargs.get("server")
    if isinstance(srv, SextantServer):
        logs.append(srv.log_path)
    tmp = funcargs.get("tmp_path")
    if isinstance(tmp, Path):
        logs += sorted(tmp.glob("server*.log"))
    for p in logs:
        if p.exists():
            item.add_report_section("call", f"sextant stderr {p.name}", tail_file(p, 40))
