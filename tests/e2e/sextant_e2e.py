"""The e2e harness: starting and stopping `sextant server` processes, and
assertions shared by the test modules. Fixtures live in conftest.py."""

from __future__ import annotations

import hashlib
import http.server
import json
import random
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
HEALTH_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 30.0

# mlflow's fluent API keeps state in these environment variables; every test
# starts and ends without them.
MLFLOW_STATE_ENV = (
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


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port free now, for a server or a torch rendezvous the test
    starts next. Drawn at random below the kernel's ephemeral range: a port
    from bind(0) is one the kernel also hands to outgoing connections, and
    on a busy machine one of those took it before torch could listen
    (EADDRINUSE). Never the same port twice in a session."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10000, low) if low > 11000 else 0
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port found below %d" % low)


def tail_file(path: Path, n: int = 60) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"<could not read {path}: {e}>"
    return "\n".join(lines[-n:])


# Set by conftest.py when the session runs against an S3 server
# (SEXTANT_E2E_BLOB_STORE=s3): the server flags that select the bucket. Each
# data directory gets its own key prefix, so that a server restarted on the
# same data directory finds its artifacts again and no two servers share any.
S3_SERVER_FLAGS: list[str] = []

# Set by conftest.py when the session runs against PostgreSQL
# (SEXTANT_E2E_DB=postgres): the running PostgresServer. Each data
# directory gets its own database, so that a restarted server finds its
# data again and no two servers share any.
POSTGRES: "PostgresServer | None" = None


def storage_flags(data_dir: Path, shared: str | None = None) -> list[str]:
    """The flags that put a server's (or `sextant import`'s) database and
    artifacts where the session keeps them for data_dir: nothing beyond
    --data-dir by default; a bucket prefix with S3, a database with
    PostgreSQL. Servers given the same shared name share both instead
    (replicas)."""
    key = shared or hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]
    flags: list[str] = []
    if S3_SERVER_FLAGS:
        flags += S3_SERVER_FLAGS + ["--s3-prefix", f"e2e-{key}/"]
    if POSTGRES is not None:
        flags += ["--db", POSTGRES.database(f"e2e_{key}")]
    return flags


class SextantServer:
    """One `sextant server` process."""

    def __init__(self, binary: str, data_dir: Path, log_path: Path, flags: dict | None = None, shared: str | None = None):
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.flags = dict(flags or {})
        self.shared = shared
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
        return tail_file(self.log_path, n)

    def log_since_start(self) -> str:
        """What the server printed since its last start: the log file holds
        every start's output, and a line an earlier process printed must
        not pass for this one's."""
        if self._log is not None:
            self._log.flush()
        return self.log_path.read_text(errors="replace").rpartition("\n===== start ")[2]

    def _argv(self) -> list[str]:
        argv = [self.binary, "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", str(self.data_dir)]
        for k, v in self.flags.items():
            argv += ["--" + k.replace("_", "-"), str(v)]
        return argv + storage_flags(self.data_dir, self.shared)

    def start(self, read_only: bool = False) -> "SextantServer":
        """Starts the server and waits until /health answers "OK", or with
        read_only until it answers "READ-ONLY: ..." (a database that cannot
        be written for lack of space). A server started read-only knows it
        before it listens: with read_only, a first answer of "OK" fails at
        once instead of waiting for a later write to fail."""
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        want = "READ-ONLY:" if read_only else "OK"
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # as docs/deploy.md makes it
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
                self.stopped = True  # reported here; nothing left for the teardown to check
                self._close_log()
                pytest.fail(f"sextant server exited with code {rc} during startup; stderr:\n{self.stderr_tail()}")
            try:
                r = requests.get(self.url + "/health", timeout=2)
                text = r.text.strip()
                if r.status_code == 200 and (text == want or (read_only and text.startswith(want))):
                    return self
                if read_only and r.status_code == 200 and text == "OK":
                    self.kill()
                    pytest.fail(f"the server answered /health OK where it should start read-only; stderr:\n{self.stderr_tail()}")
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


class MinioServer:
    """A MinIO server on a free loopback port with its data in tmp_dir."""

    user = "sextant-e2e"
    password = "sextant-e2e-secret"

    def __init__(self, binary: str, tmp_dir: Path):
        self.binary = binary
        self.dir = Path(tmp_dir)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MinioServer":
        import os

        env = dict(os.environ, MINIO_ROOT_USER=self.user, MINIO_ROOT_PASSWORD=self.password,
                   MINIO_BROWSER="off", MINIO_UPDATE="off")
        log = open(self.dir / "minio.log", "ab")
        self.proc = subprocess.Popen(
            [self.binary, "server", "--quiet", "--address", f"127.0.0.1:{self.port}", str(self.dir / "data")],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"minio exited with code {self.proc.returncode}:\n{tail_file(self.dir / 'minio.log')}")
            try:
                if requests.get(self.endpoint + "/minio/health/live", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"minio not live after 60s:\n{tail_file(self.dir / 'minio.log')}")

    def server_flags(self, bucket: str = "sextant-e2e") -> list[str]:
        """The flags of `sextant server` that keep its files in bucket."""
        return ["--blob-store", "s3", "--s3-endpoint", self.endpoint, "--s3-bucket", bucket,
                "--s3-create-bucket", "--s3-access-key", self.user, "--s3-secret-key", self.password]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class PostgresServer:
    """A throwaway PostgreSQL server (initdb into a new directory under /tmp,
    postgres on a free loopback port, trust authentication), removed by stop.
    PostgreSQL refuses to run as root, so as root it runs as the postgres
    user; its directory is not under pytest's tmp_path, which only root may
    enter."""

    def __init__(self):
        import glob
        import shutil
        import tempfile

        found = shutil.which("initdb")
        if found:
            self.bindir = Path(found).resolve().parent  # /usr/local/bin/initdb may be a link
        else:
            dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name))
            if not dirs:
                pytest.fail("PostgreSQL is not installed (initdb not found): apt-get install postgresql")
            self.bindir = Path(dirs[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="sextant-e2e-pg-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.created: set[str] = set()
        self.run_as: dict = {}
        import os

        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            self.run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

    def _run(self, *argv: str) -> None:
        r = subprocess.run([str(self.bindir / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=self.dir, **self.run_as)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def start(self) -> "PostgresServer":
        data = self.dir / "data"
        self._run("initdb", "-D", str(data), "-U", "sextant", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
        log = open(self.dir / "postgres.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.dir),
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=400"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.dir, **self.run_as)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"postgres exited with code {self.proc.returncode}:\n{tail_file(self.dir / 'postgres.log')}")
            r = subprocess.run([str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True)
            if r.returncode == 0:
                return self
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"postgres not ready after 60s:\n{tail_file(self.dir / 'postgres.log')}")

    def database(self, name: str) -> str:
        """The URL of database name, created on first use."""
        if name not in self.created:
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "sextant", name)
            self.created.add(name)
        return f"postgres://sextant@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def query(self, name: str, sql: str) -> list[list[str]]:
        """The rows of one SQL statement on database name (psql, unaligned:
        each value a string)."""
        r = subprocess.run([str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "sextant", "-d", name,
                            "-X", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            pytest.fail(f"psql {sql!r} on {name} failed ({r.returncode}):\n{r.stderr}")
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def run_for(seconds: float, stop, threads) -> None:
    """Starts threads, lets them run for seconds, sets stop and joins them."""
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()


def admin_password(server) -> str:
    """The one-time password a server started with --auth on prints for its
    first administrator."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        m = re.search(r"one-time password (\S+)", server.stderr_tail(200))
        if m:
            return m.group(1)
        time.sleep(0.05)
    pytest.fail("the server printed no one-time admin password:\n" + server.stderr_tail())


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


# ---------------------------------------------------------------- artifacts

ARTIFACTS_API = "/api/2.0/mlflow-artifacts"
ARTIFACT_URI_SCHEME = "mlflow-artifacts:"


def artifact_key(uri: str) -> str:
    """The proxy path of an mlflow-artifacts: URI (as a run's or logged model's
    artifact_uri): mlflow-artifacts:/1/<run>/artifacts -> 1/<run>/artifacts."""
    assert uri.startswith(ARTIFACT_URI_SCHEME + "/"), f"not a proxied artifact URI: {uri!r}"
    return uri[len(ARTIFACT_URI_SCHEME):].strip("/")


def artifacts_url(srv: SextantServer, path: str = "") -> str:
    """URL of an artifact (or, with path "", of the listing endpoint) in the proxy."""
    base = f"{srv.url}{ARTIFACTS_API}/artifacts"
    return f"{base}/{path}" if path else base


def artifact_store_dir(srv: SextantServer) -> Path:
    """The directory that holds the server's artifact files by proxy path:
    <data-dir>/artifacts/blobs/<experiment id>/... (the blob store keeps its
    temporary files and multipart parts in siblings of blobs/). Falls back to
    <data-dir>/artifacts should the blobs/ level go away."""
    base = srv.data_dir / "artifacts"
    blobs = base / "blobs"
    return blobs if blobs.is_dir() else base


def artifact_file(srv: SextantServer, key: str) -> Path:
    """Where the server keeps the artifact at proxy path key on disk."""
    return artifact_store_dir(srv).joinpath(*key.strip("/").split("/"))


def files_under(root: Path) -> dict[str, int]:
    """Every regular file under root (relative POSIX path -> size)."""
    out = {}
    if not root.exists():
        return out
    for p in root.rglob("*"):
        if p.is_file():
            out[p.relative_to(root).as_posix()] = p.stat().st_size
    return out


def raw_request(srv: SextantServer, method: str, target: str, body: bytes = b"",
                headers: dict | None = None, timeout: float = 30, *,
                host: str | None = None, source: str | None = None):
    """One HTTP request with the request target sent exactly as given (no
    normalisation of '..', '//' or '#', unlike requests/urllib3). Returns
    (status, headers as a lower-case dict, body bytes). Never follows redirects.
    host replaces the Host header (a rebinding name), source the local
    address the connection comes from (another loopback address)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout,
                                      source_address=(source, 0) if source else None)
    try:
        conn.putrequest(method, target, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        hdrs = {"Content-Length": str(len(body))} if method in ("PUT", "POST", "PATCH") or body else {}
        hdrs.update(headers or {})
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders(body or None)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# ---------------------------------------------------------------- measurements


class RssSampler:
    """Samples a process's resident set size (VmRSS) every interval seconds in
    a thread, per named phase; vm_hwm() reads the kernel's peak (VmHWM)."""

    def __init__(self, pid: int, interval: float = 0.05):
        import threading

        self.pid = pid
        self.interval = interval
        self.phase = "idle"
        self.peaks: dict[str, int] = {}  # phase -> peak VmRSS in KiB
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def _status_kib(self, field: str) -> int | None:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            kib = self._status_kib("VmRSS")
            if kib is not None:
                self.samples += 1
                self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), kib)
            self._stop.wait(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def vm_hwm_kib(self) -> int | None:
        return self._status_kib("VmHWM")

    def peak_kib(self) -> int:
        return max(self.peaks.values(), default=0)


# (name, data) of every measurement a test reported in this session; conftest
# prints them in the terminal summary.
MEASUREMENTS: list[tuple[str, dict]] = []


def report_measurement(name: str, data: dict) -> None:
    """Records a measurement: shown in pytest's terminal summary, and written
    to $SEXTANT_E2E_REPORT_DIR/<name>.json when that variable is set."""
    import json
    import os

    MEASUREMENTS.append((name, data))
    out_dir = os.environ.get("SEXTANT_E2E_REPORT_DIR")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / f"{name}.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


class WebhookReceiver:
    """A webhook on loopback that keeps the JSON bodies it is sent and
    answers each with status (500: a receiver that fails every delivery)."""

    def __init__(self, status: int = 200) -> None:
        bodies = self.bodies = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
