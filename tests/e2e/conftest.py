"""End-to-end harness: a real `sextant server` driven by the official mlflow client.

Run with a Python that has mlflow, pytest and requests installed:

    SEXTANT_BIN=/path/to/sextant python -m pytest tests/e2e -q

Without SEXTANT_BIN the binary is built once per session with
`go build -o <tmp>/sextant ./cmd/sextant` from the repository root.

Every server is started on a free loopback port with a fresh data directory,
waited on through GET /health, and stopped with SIGTERM at teardown; the
teardown asserts exit code 0. A server's stderr goes to a file in its tmp dir,
and its tail is shown whenever a server dies, fails to start, or exits badly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The client must never try to reach the internet (telemetry). Set these
# before any test module imports mlflow.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"

import requests  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
HEALTH_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 30.0

# mlflow's fluent API keeps state in these environment variables; every test
# starts and ends without them.
_MLFLOW_STATE_ENV = (
    "MLFLOW_RUN_ID",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_TRACKING_URI",
)

# Outside the limit test (which restores the client defaults explicitly), a
# server bug that answers 5xx should fail a test in seconds, not after the
# client's default ~4 minutes of retries. Correct servers never trigger a retry.
FAST_FAIL_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "60",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 60) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"<could not read {path}: {e}>"
    return "\n".join(lines[-n:])


class SextantServer:
    """One `sextant server` process."""

    def __init__(self, binary: str, data_dir: Path, log_path: Path, flags: dict | None = None):
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.flags = dict(flags or {})
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.killed = False
        self.stopped = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str) -> str:
        """URL of an MLflow REST path such as /mlflow/runs/get (under /api/2.0)."""
        return f"{self.url}/api/2.0{path}"

    def stderr_tail(self, n: int = 60) -> str:
        if self._log is not None:
            self._log.flush()
        return _tail(self.log_path, n)

    def _argv(self) -> list[str]:
        argv = [self.binary, "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", str(self.data_dir)]
        for k, v in self.flags.items():
            argv += ["--" + k.replace("_", "-"), str(v)]
        return argv

    def start(self) -> "SextantServer":
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.killed = False
        self.stopped = False
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n===== start {' '.join(self._argv())}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(self._argv(), stdout=self._log, stderr=self._log,
                                     stdin=subprocess.DEVNULL, cwd=str(self.data_dir.parent))
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        last_err = None
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                pytest.fail(f"sextant server exited with code {rc} during startup; stderr:\n{self.stderr_tail()}")
            try:
                r = requests.get(self.url + "/health", timeout=2)
                if r.status_code == 200 and r.text.strip() == "OK":
                    return self
                last_err = f"HTTP {r.status_code}: {r.text[:200]!r}"
            except requests.RequestException as e:
                last_err = repr(e)
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"sextant server not healthy after {HEALTH_TIMEOUT_S}s (last: {last_err}); stderr:\n{self.stderr_tail()}")

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: simulates a crash. The teardown then skips the exit-code check."""
        if self.is_running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.killed = True
        self._close_log()

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._close_log()
                pytest.fail(f"sextant server did not exit within {STOP_TIMEOUT_S}s of SIGTERM; stderr:\n{self.stderr_tail()}")
        self._close_log()
        return self.proc.returncode

    def stop_and_check(self) -> None:
        """Teardown: stop with SIGTERM and require exit code 0 (unless it was killed on purpose)."""
        if self.proc is None or self.killed or self.stopped:
            self._close_log()
            return
        died_early = self.proc.poll() is not None
        rc = self.stop()
        self.stopped = True
        if died_early:
            pytest.fail(f"sextant server died during the test (exit code {rc}); stderr:\n{self.stderr_tail()}")
        assert rc == 0, f"sextant server exited with code {rc} after SIGTERM; stderr:\n{self.stderr_tail()}"

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


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
    for k in _MLFLOW_STATE_ENV:
        os.environ.pop(k, None)
    os.environ.update(FAST_FAIL_ENV)
    _reset_mlflow_globals()
    yield
    _reset_mlflow_globals()
    os.environ.clear()
    os.environ.update(saved)
    mlflow.set_tracking_uri(None)
    for k in _MLFLOW_STATE_ENV:
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


# ---------------------------------------------------------------- helpers


def assert_json_error(resp, status: int | tuple, error_code: str | None = None, *mentions: str) -> dict:
    """The response is an MLflow error: the given HTTP status, a JSON body with
    error_code and message, and the message mentions every string in mentions
    (case-insensitive). Returns the body."""
    statuses = status if isinstance(status, tuple) else (status,)
    ctx = f"{resp.request.method} {resp.request.url} -> HTTP {resp.status_code}: {resp.text[:600]!r}"
    assert resp.status_code < 500, "server answered 5xx to a client error: " + ctx
    assert resp.status_code in statuses, f"expected HTTP {statuses}: " + ctx
    try:
        body = resp.json()
    except ValueError:
        pytest.fail("error body is not JSON: " + ctx)
    assert isinstance(body, dict), ctx
    assert isinstance(body.get("error_code"), str) and body["error_code"], ctx
    assert isinstance(body.get("message"), str) and body["message"].strip(), ctx
    if error_code is not None:
        assert body["error_code"] == error_code, ctx
    low = body["message"].lower()
    for m in mentions:
        assert m.lower() in low, f"message does not mention {m!r}: " + ctx
    return body


def assert_healthy(srv: SextantServer) -> None:
    assert srv.is_running(), f"server is not running; stderr:\n{srv.stderr_tail()}"
    r = requests.get(srv.url + "/health", timeout=5)
    assert r.status_code == 200 and r.text.strip() == "OK", (r.status_code, r.text)


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
            item.add_report_section("call", f"sextant stderr {p.name}", _tail(p, 40))
