"""A small client for Sextant's Files API on volumes (standard library only).

It finds the server and the credentials the way the mlflow client does:
``MLFLOW_TRACKING_URI``; ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` (HTTP Basic, which wins when both kinds are set,
as in mlflow) or ``MLFLOW_TRACKING_TOKEN`` (a bearer token);
``MLFLOW_TRACKING_INSECURE_TLS`` and ``MLFLOW_TRACKING_SERVER_CERT_PATH`` for
HTTPS.

Every call retries connection failures, 429 and 5xx answers with exponential
backoff: ``retries`` attempts after the first, or, with ``retry_seconds``, as
many as fit in that many seconds. Client mistakes (4xx) raise at once as
:class:`SextantError` subclasses. Bodies stream: uploads of files go
out with ``sendfile``, downloads are written to their destination in 1 MiB
pieces, so memory stays flat whatever the size.
"""

from __future__ import annotations

import base64
import copy
import email.utils
import http.client
import json
import os
import random
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Iterator

__all__ = [
    "Client",
    "FileInfo",
    "DirEntry",
    "SextantError",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "PermissionDenied",
    "InvalidRequest",
    "TransientError",
    "volume_path",
]

_CHUNK = 1 << 20


class SextantError(Exception):
    """An error answered by the server (or a failure to reach it)."""

    def __init__(self, message: str, *, status: int = 0, error_code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class InvalidRequest(SextantError):
    """400: the request is wrong (a bad path, parameter or value)."""


class PermissionDenied(SextantError):
    """401 or 403."""


class NotFound(SextantError):
    """404."""


class AlreadyExists(SextantError):
    """409 ALREADY_EXISTS / RESOURCE_ALREADY_EXISTS."""


class Conflict(SextantError):
    """409 otherwise (a directory that is not empty, a .metadata upload racing its shards)."""


class TransientError(SextantError):
    """The server could not be reached, or answered 429/5xx, after every retry."""


def volume_path(path: str | os.PathLike[str]) -> str:
    """Checks that path is a volume path (/Volumes/<catalog>/<schema>/<volume>[/...])
    and returns it without a trailing slash."""
    p = os.fspath(path)
    if not isinstance(p, str) or not p.startswith("/Volumes/"):
        raise ValueError(f"{p!r} is not a volume path: use /Volumes/<catalog>/<schema>/<volume>/<path>")
    p = p.rstrip("/")
    parts = p.split("/")
    if len(parts) < 5 or any(s in ("", ".", "..") for s in parts[2:]):
        raise ValueError(f"{p!r} is not a volume path: use /Volumes/<catalog>/<schema>/<volume>/<path> "
                         "without empty, '.' or '..' segments")
    return p


@dataclass(frozen=True)
class FileInfo:
    """A file's metadata."""

    path: str
    size: int
    last_modified: float  # seconds since the epoch
    etag: str = ""


@dataclass(frozen=True)
class DirEntry:
    """One child of a listed directory."""

    path: str
    name: str
    is_directory: bool
    size: int = 0
    last_modified: float = 0.0  # seconds since the epoch; 0 for directories


def _error(status: int, body: bytes, what: str) -> SextantError:
    code, msg = "", ""
    try:
        d = json.loads(body)
        code, msg = str(d.get("error_code", "")), str(d.get("message", ""))
    except (ValueError, AttributeError):
        msg = body[:300].decode("utf-8", "replace")
    text = f"{what}: HTTP {status} {code}: {msg}".rstrip(": ")
    if status in (401, 403):
        return PermissionDenied(text, status=status, error_code=code)
    if status == 404:
        return NotFound(text, status=status, error_code=code)
    if status == 409 and code in ("ALREADY_EXISTS", "RESOURCE_ALREADY_EXISTS"):
        return AlreadyExists(text, status=status, error_code=code)
    if status == 409:
        return Conflict(text, status=status, error_code=code)
    if status == 429 or status >= 500:
        return TransientError(text, status=status, error_code=code)
    return InvalidRequest(text, status=status, error_code=code)


class _Retry(Exception):
    """A failure worth another attempt."""

    def __init__(self, cause: BaseException | SextantError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _quote(path: str) -> str:
    return "/".join(urllib.parse.quote(s, safe="") for s in path.split("/"))


class Client:
    """A Files API client for one server. Safe to share between threads: each
    thread keeps its own connection."""

    def __init__(
        self,
        uri: str | None = None,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        retry_seconds: float | None = None,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        env = os.environ.get
        uri = uri or env("MLFLOW_TRACKING_URI") or "http://127.0.0.1:5000"
        u = urllib.parse.urlsplit(uri)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"tracking URI {uri!r} is not an http(s) URL: set MLFLOW_TRACKING_URI to the Sextant server")
        self.uri = uri.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._base = u.path.rstrip("/")
        username = username if username is not None else env("MLFLOW_TRACKING_USERNAME")
        password = password if password is not None else env("MLFLOW_TRACKING_PASSWORD")
        token = token if token is not None else env("MLFLOW_TRACKING_TOKEN")
        self._auth = ""
        if username and password:
            self._auth = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        elif token:
            self._auth = "Bearer " + token
        self.timeout = timeout if timeout is not None else float(env("SEXTANT_HTTP_TIMEOUT") or 120)
        self.retries = retries if retries is not None else int(env("SEXTANT_HTTP_RETRIES") or 5)
        if retry_seconds is None and env("SEXTANT_HTTP_RETRY_SECONDS"):
            retry_seconds = float(env("SEXTANT_HTTP_RETRY_SECONDS") or 0)
        self.retry_seconds = retry_seconds
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._ssl: ssl.SSLContext | None = None
        if self._https:
            ctx = ssl.create_default_context(cafile=env("MLFLOW_TRACKING_SERVER_CERT_PATH") or None)
            if (env("MLFLOW_TRACKING_INSECURE_TLS") or "").lower() == "true":
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._ssl = ctx
        self._local = threading.local()

    def with_retries(self, *, retry_seconds: float | None, max_backoff: float | None = None) -> "Client":
        """A copy of this client (same server and credentials, connections of
        its own) that retries each call for retry_seconds (None: retries
        attempts), waiting at most max_backoff between attempts."""
        c = copy.copy(self)
        c.retry_seconds = retry_seconds
        if max_backoff is not None:
            c.max_backoff = max_backoff
        return c

    def __getstate__(self) -> dict[str, Any]:
        # Connections stay with their process (DataLoader workers get a copy).
        d = dict(self.__dict__)
        d.pop("_local", None)
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._local = threading.local()

    # ------------------------------------------------------------ plumbing

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            if self._https:
                c = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl,
                                                blocksize=_CHUNK)
            else:
                c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout, blocksize=_CHUNK)
            self._local.conn = c
        return c

    def _drop_conn(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            try:
                c.close()
            finally:
                self._local.conn = None

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"User-Agent": "sextant-python/0.1"}
        if self._auth:
            h["Authorization"] = self._auth
        if extra:
            h.update(extra)
        return h

    def _retrying(self, what: str, attempt: Callable[[], Any]) -> Any:
        """Runs attempt until it succeeds, raises a SextantError that is not
        transient, or the retries (or retry_seconds) run out."""
        delay = self.backoff
        start = time.monotonic()
        deadline = start + self.retry_seconds if self.retry_seconds is not None else None
        attempts = 0
        while True:
            attempts += 1
            try:
                return attempt()
            except _Retry as r:
                self._drop_conn()
                last = r.cause
            wait = min(delay, self.max_backoff) * (0.5 + random.random() / 2)
            if deadline is None:
                if attempts > self.retries:
                    break
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            time.sleep(wait)
            delay *= 2
        if isinstance(last, SextantError):
            raise last
        raise TransientError(f"{what}: cannot reach the server at {self.uri} after {attempts} attempts in "
                             f"{time.monotonic() - start:.1f}s: {last!r}") from last

    def _send(self, method: str, target: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
              send_body: Callable[[http.client.HTTPConnection], None] | None = None,
              content_length: int | None = None) -> http.client.HTTPResponse:
        """Sends one request and returns the response (status < 400), or raises
        _Retry / a SextantError. The caller reads and closes the response."""
        conn = self._conn()
        try:
            conn.putrequest(method, self._base + target, skip_accept_encoding=True)
            h = self._headers(headers)
            if body is not None:
                h["Content-Length"] = str(len(body))
            elif content_length is not None:
                h["Content-Length"] = str(content_length)
            elif method in ("PUT", "POST"):
                h["Content-Length"] = "0"
            for k, v in h.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            if send_body is not None:
                send_body(conn)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            raise _Retry(e) from e
        if resp.status >= 400:
            data = resp.read()
            err = _error(resp.status, data, f"{method} {urllib.parse.unquote(target.split('?')[0])}")
            if resp.getheader("Connection", "").lower() == "close":
                self._drop_conn()
            if isinstance(err, TransientError):
                raise _Retry(err)
            raise err
        return resp

    def _json(self, method: str, target: str, payload: Any = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        hdr = {"Content-Type": "application/json"} if body is not None else None

        def attempt() -> Any:
            resp = self._send(method, target, body=body, headers=hdr)
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise _Retry(e) from e
            return json.loads(data) if data else {}

        return self._retrying(f"{method} {target}", attempt)

    def _empty(self, method: str, target: str) -> http.client.HTTPResponse:
        def attempt() -> http.client.HTTPResponse:
            resp = self._send(method, target)
            try:
                resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise _Retry(e) from e
            return resp

        return self._retrying(f"{method} {target}", attempt)

    # ------------------------------------------------------------ files

    def upload_file(self, path: str, local: str | os.PathLike[str], *, overwrite: bool = True) -> int:
        """Uploads the local file to the volume path; returns its size. The file
        appears on the server only once completely received."""
        path = volume_path(path)
        target = "/api/2.0/fs/files" + _quote(path) + ("" if overwrite else "?overwrite=false")

        def attempt() -> int:
            with open(local, "rb") as f:
                size = os.fstat(f.fileno()).st_size

                def send(conn: http.client.HTTPConnection) -> None:
                    sock = conn.sock
                    assert sock is not None
                    sent = sock.sendfile(f, 0, size) if size else 0
                    if sent != size:
                        raise ConnectionError(f"sent {sent} of {size} bytes")

                resp = self._send("PUT", target, headers={"Content-Type": "application/octet-stream"},
                                  send_body=send, content_length=size)
                try:
                    resp.read()
                except (OSError, http.client.HTTPException) as e:
                    raise _Retry(e) from e
                return size

        return self._retrying(f"upload {path}", attempt)

    def upload_bytes(self, path: str, data: bytes, *, overwrite: bool = True) -> None:
        """Uploads data as the file at path."""
        path = volume_path(path)
        target = "/api/2.0/fs/files" + _quote(path) + ("" if overwrite else "?overwrite=false")

        def attempt() -> None:
            resp = self._send("PUT", target, body=data, headers={"Content-Type": "application/octet-stream"})
            try:
                resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise _Retry(e) from e

        self._retrying(f"upload {path}", attempt)

    def _get_range(self, path: str, offset: int, length: int | None, sink: Callable[[memoryview], None],
                   if_unmodified_since: str | None = None) -> int:
        """GETs [offset, offset+length) of path into sink, resuming after a
        dropped connection from where it stopped; returns the bytes read."""
        target = "/api/2.0/fs/files" + _quote(path)
        done = 0
        total: list[int | None] = [length]
        last_modified: list[str | None] = [if_unmodified_since]

        def attempt() -> None:
            nonlocal done
            start = offset + done
            headers: dict[str, str] = {}
            want = None if total[0] is None else total[0] - done
            if want == 0:
                return
            if start or want is not None:
                headers["Range"] = f"bytes={start}-" + ("" if want is None else str(start + want - 1))
            if last_modified[0]:
                headers["If-Unmodified-Since"] = last_modified[0]
            resp = self._send("GET", target, headers=headers)
            last_modified[0] = last_modified[0] or resp.getheader("Last-Modified")
            n = int(resp.getheader("Content-Length", "-1"))
            if total[0] is None:
                total[0] = done + n
            buf = bytearray(_CHUNK)
            view = memoryview(buf)
            try:
                while True:
                    k = resp.readinto(buf)
                    if not k:
                        break
                    sink(view[:k])
                    done += k
            except (OSError, http.client.HTTPException) as e:
                raise _Retry(e) from e
            if total[0] is not None and done < total[0]:
                raise _Retry(ConnectionError(f"download of {path} ended after {done} of {total[0]} bytes"))

        self._retrying(f"download {path}", attempt)
        return done

    def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """Returns the bytes [offset, offset+length) of the file (to its end when
        length is None)."""
        path = volume_path(path)
        out = bytearray()
        if length == 0:
            return b""
        self._get_range(path, offset, length, out.extend)
        return bytes(out)

    def download_file(self, path: str, local: str | os.PathLike[str]) -> int:
        """Downloads the file at path to local (written to local + '.part' and
        renamed when complete); returns its size."""
        path = volume_path(path)
        tmp = os.fspath(local) + ".part"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pos = [0]

            def sink(b: memoryview) -> None:
                while len(b):
                    k = os.pwrite(fd, b, pos[0])
                    pos[0] += k
                    b = b[k:]

            n = self._get_range(path, 0, None, sink)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, local)
        return n

    def download_range_into(self, path: str, offset: int, length: int, fd: int, file_offset: int) -> None:
        """Writes the bytes [offset, offset+length) of the file at path into the
        open file descriptor fd at file_offset."""
        path = volume_path(path)
        pos = [file_offset]

        def sink(b: memoryview) -> None:
            while len(b):
                k = os.pwrite(fd, b, pos[0])
                pos[0] += k
                b = b[k:]

        n = self._get_range(path, offset, length, sink)
        if n != length:
            raise SextantError(f"{path}: read {n} bytes at {offset}, wanted {length} (the file is shorter)")

    def stat(self, path: str) -> FileInfo | None:
        """Returns the file's metadata, or None when there is no file at path."""
        path = volume_path(path)
        try:
            resp = self._empty("HEAD", "/api/2.0/fs/files" + _quote(path))
        except NotFound:
            return None
        lm = resp.getheader("Last-Modified")
        ts = email.utils.parsedate_to_datetime(lm).timestamp() if lm else 0.0
        return FileInfo(path, int(resp.getheader("Content-Length", "0")), ts, (resp.getheader("ETag") or "").strip('"'))

    def server_time(self) -> float:
        """The server's clock (its Date header), in seconds since the epoch."""
        resp = self._empty("GET", "/health")
        d = resp.getheader("Date")
        return email.utils.parsedate_to_datetime(d).timestamp() if d else time.time()

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        """Deletes the file at path."""
        path = volume_path(path)
        try:
            self._empty("DELETE", "/api/2.0/fs/files" + _quote(path))
        except NotFound:
            if not missing_ok:
                raise

    # ------------------------------------------------------------ directories

    def mkdirs(self, path: str) -> None:
        """Creates a directory and its parents (mkdir -p)."""
        self._empty("PUT", "/api/2.0/fs/directories" + _quote(volume_path(path)))

    def is_dir(self, path: str) -> bool:
        """Reports whether path is an existing directory."""
        try:
            self._empty("HEAD", "/api/2.0/fs/directories" + _quote(volume_path(path)))
            return True
        except NotFound:
            return False

    def delete_dir(self, path: str, *, missing_ok: bool = False) -> None:
        """Deletes an empty directory."""
        try:
            self._empty("DELETE", "/api/2.0/fs/directories" + _quote(volume_path(path)))
        except NotFound:
            if not missing_ok:
                raise

    def list_dir(self, path: str, page_size: int = 1000) -> Iterator[DirEntry]:
        """Yields the children of a directory, by name, following pages."""
        path = volume_path(path)
        token = ""
        while True:
            q = {"page_size": str(page_size)}
            if token:
                q["page_token"] = token
            d = self._json("GET", "/api/2.0/fs/directories" + _quote(path) + "?" + urllib.parse.urlencode(q))
            for e in d.get("contents", []):
                yield DirEntry(e["path"], e["name"], bool(e.get("is_directory")), int(e.get("file_size", 0)),
                               e.get("last_modified", 0) / 1000.0)
            token = d.get("next_page_token", "")
            if not token:
                return

    def walk(self, path: str) -> Iterator[DirEntry]:
        """Yields every file under a directory, depth first, by name."""
        for e in self.list_dir(path):
            if e.is_directory:
                yield from self.walk(e.path)
            else:
                yield e

    def delete_tree(self, path: str, *, workers: int = 8) -> int:
        """Deletes a directory and everything under it; returns the files deleted."""
        from concurrent.futures import ThreadPoolExecutor

        files = list(self.walk(path))
        with ThreadPoolExecutor(max(1, workers)) as ex:
            list(ex.map(lambda e: self.delete(e.path, missing_ok=True), files))
        # Directories made with mkdir stay until deleted, deepest first.
        dirs: list[str] = []

        def collect(p: str) -> None:
            for e in self.list_dir(p):
                if e.is_directory:
                    collect(e.path)
                    dirs.append(e.path)

        try:
            collect(path)
        except NotFound:
            return len(files)
        for d in dirs:
            self.delete_dir(d, missing_ok=True)
        if path.rstrip("/").count("/") > 4:
            self.delete_dir(path, missing_ok=True)
        return len(files)

    # ------------------------------------------------------------ runs

    def set_run_tags(self, run_id: str, tags: dict[str, str]) -> None:
        """Sets tags of a run through the MLflow API (``runs/log-batch``),
        without needing the mlflow package."""
        self._json("POST", "/api/2.0/mlflow/runs/log-batch",
                   {"run_id": run_id, "tags": [{"key": k, "value": v} for k, v in tags.items()]})

    # ------------------------------------------------------------ run events

    def append_events(self, run_id: str, events: list[dict[str, Any]]) -> list[int]:
        """Stores events on a run (``POST /api/2.0/sextant/events/append``,
        docs/api.md) and returns the seq of each. An event with the ``key``
        of a stored one replaces it, so sending again is harmless."""
        out = self._json("POST", "/api/2.0/sextant/events/append", {"run_id": run_id, "events": events})
        return list(out.get("seqs", []))

    def list_events(self, run_id: str, *, kinds: list[str] | None = None, after_seq: int = 0,
                    open_only: bool = False) -> list[dict[str, Any]]:
        """Every event of a run (``GET /api/2.0/sextant/events/list``), in seq
        order, following pages."""
        out: list[dict[str, Any]] = []
        while True:
            q = {"run_id": run_id}
            if kinds:
                q["kind"] = ",".join(kinds)
            if after_seq:
                q["after_seq"] = str(after_seq)
            if open_only:
                q["open"] = "true"
            page = self._json("GET", "/api/2.0/sextant/events/list?" + urllib.parse.urlencode(q))
            out.extend(page.get("events", []))
            after_seq = int(page.get("next_seq") or 0)
            if not after_seq:
                return out
