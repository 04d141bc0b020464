"""Run artifacts through the artifact proxy (/api/2.0/mlflow-artifacts): the
mlflow client's log_artifact(s)/log_text/log_dict/log_image, listing and
download, deletion; and raw HTTP for what the client hides: Range requests,
download headers, unsafe paths, concurrent and cut-off uploads, multipart
uploads. The checks marked `disk` also look at the files the server keeps on disk."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import threading
import time
import uuid
from email.message import Message
from pathlib import Path
from urllib.parse import quote

import mlflow
import pytest
import requests
from mlflow.exceptions import MlflowException

from sextant_e2e import (
    ARTIFACTS_API,
    artifact_file,
    artifact_key,
    artifact_store_dir,
    artifacts_url,
    assert_healthy,
    run_for,
    assert_json_error,
    files_under,
    raw_request,
)

MIB = 1 << 20


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(p: Path, data: bytes | str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    p.write_bytes(data)
    return p


def tree_contents(root: Path) -> dict[str, bytes]:
    """Relative POSIX path -> bytes of every file under root."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def new_run(client, name: str):
    """A finished run in experiment name; returns (run_id, its artifact proxy path)."""
    mlflow.set_experiment(name)
    with mlflow.start_run() as run:
        pass
    uri = client.get_run(run.info.run_id).info.artifact_uri
    return run.info.run_id, artifact_key(uri)


def put(server, key: str, data: bytes) -> None:
    r = requests.put(artifacts_url(server, key), data=data, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.json() == {}


def listing(server, path: str) -> list[dict]:
    r = requests.get(artifacts_url(server), params={"path": path}, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    body = r.json()
    assert set(body) <= {"files"}, body
    return body.get("files", [])


def settle(fn, want, timeout: float = 10.0):
    """Polls fn() until it returns want (cleanup after a failed request may
    finish just after the response); returns the last value."""
    deadline = time.monotonic() + timeout
    got = fn()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.1)
        got = fn()
    return got


# ---------------------------------------------------------------- locations


def test_artifact_locations_are_proxied(client):
    exp_id = mlflow.set_experiment("/Shared/artifacts/locations").experiment_id
    assert client.get_experiment(exp_id).artifact_location == f"mlflow-artifacts:/{exp_id}"
    assert client.get_experiment("0").artifact_location == "mlflow-artifacts:/0"
    with mlflow.start_run() as run:
        assert mlflow.get_artifact_uri() == f"mlflow-artifacts:/{exp_id}/{run.info.run_id}/artifacts"
    assert client.get_run(run.info.run_id).info.artifact_uri == f"mlflow-artifacts:/{exp_id}/{run.info.run_id}/artifacts"


def test_artifacts_land_in_the_selected_blob_store(client, server, s3_blob_store):
    """The session's blob store is the one in use: with S3 nothing lands under
    the data directory, with the local directory the bytes are there."""
    _, key = new_run(client, "/Shared/artifacts/where")
    marker = uuid.uuid4().hex.encode()
    put(server, f"{key}/where.txt", marker)
    on_disk = [p for p in server.data_dir.rglob("*") if p.is_file() and marker in p.read_bytes()]
    if s3_blob_store is None:
        assert on_disk == [artifact_file(server, f"{key}/where.txt")]
    else:
        assert on_disk == []
        r = requests.get(artifacts_url(server, f"{key}/where.txt"), timeout=30)
        assert r.status_code == 200 and r.content == marker


# ---------------------------------------------------------------- the mlflow client


@pytest.mark.disk
def test_log_artifact_root_and_subdir(client, server, tmp_path):
    a = write(tmp_path / "a.txt", "alpha\n")
    weights = os.urandom(300_000)
    b = write(tmp_path / "weights.bin", weights)
    mlflow.set_experiment("/Shared/artifacts/log-artifact")
    with mlflow.start_run() as run:
        mlflow.log_artifact(str(a))
        mlflow.log_artifact(str(b), "sub/dir")
    run_id = run.info.run_id
    key = artifact_key(client.get_run(run_id).info.artifact_uri)

    assert artifact_file(server, f"{key}/a.txt").read_bytes() == b"alpha\n"
    assert artifact_file(server, f"{key}/sub/dir/weights.bin").read_bytes() == weights
    assert files_under(artifact_file(server, key)) == {"a.txt": 6, "sub/dir/weights.bin": 300_000}

    def entries(path=None):
        return [(f.path, f.is_dir, f.file_size) for f in client.list_artifacts(run_id, path)]

    assert entries() == [("a.txt", False, 6), ("sub", True, None)]
    assert entries("sub") == [("sub/dir", True, None)]
    assert entries("sub/dir") == [("sub/dir/weights.bin", False, 300_000)]

    # On the wire: immediate children, basenames only, is_dir always present.
    root = sorted(listing(server, key), key=lambda f: f["path"])
    assert [(f["path"], f["is_dir"]) for f in root] == [("a.txt", False), ("sub", True)]
    assert int(root[0]["file_size"]) == 6
    sub = listing(server, f"{key}/sub/dir")
    assert [(f["path"], f["is_dir"], int(f["file_size"])) for f in sub] == [("weights.bin", False, 300_000)]


@pytest.mark.disk
def test_log_artifacts_tree_and_download(client, server, tmp_path):
    src = tmp_path / "src"
    write(src / "top.txt", "top\n")
    write(src / "empty.dat", b"")
    write(src / "a" / "b" / "c" / "deep.bin", os.urandom(70_000))
    write(src / "a" / "sibling.json", json.dumps({"k": [1, 2, 3]}))
    write(src / "with space" / "naïve café.txt", "unicode name\n")
    write(src / "with space" / "v1+final.txt", "plus\n")
    want = tree_contents(src)

    mlflow.set_experiment("/Shared/artifacts/log-artifacts")
    with mlflow.start_run() as run:
        mlflow.log_artifacts(str(src), "tree")
    run_id = run.info.run_id
    key = artifact_key(client.get_run(run_id).info.artifact_uri)

    # What the server stored, file by file.
    assert tree_contents(artifact_file(server, f"{key}/tree")) == want

    assert [(f.path, f.is_dir) for f in client.list_artifacts(run_id, "tree")] == [
        ("tree/a", True), ("tree/empty.dat", False), ("tree/top.txt", False), ("tree/with space", True)]
    assert [(f.path, f.file_size) for f in client.list_artifacts(run_id, "tree/with space")] == [
        ("tree/with space/naïve café.txt", len("unicode name\n")), ("tree/with space/v1+final.txt", 5)]

    # A directory downloads as the same tree.
    got = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="tree", dst_path=str(tmp_path / "dl")))
    assert got.name == "tree"
    assert tree_contents(got) == want

    # A single file, through a runs:/ URI.
    f = mlflow.artifacts.download_artifacts(artifact_uri=f"runs:/{run_id}/tree/a/b/c/deep.bin",
                                            dst_path=str(tmp_path / "dl1"))
    assert Path(f).read_bytes() == want["a/b/c/deep.bin"]
    f = mlflow.artifacts.download_artifacts(artifact_uri=f"runs:/{run_id}/tree/empty.dat", dst_path=str(tmp_path / "dl2"))
    assert Path(f).read_bytes() == b""

    # The whole run.
    everything = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "all")))
    assert tree_contents(everything) == {f"tree/{k}": v for k, v in want.items()}


def test_run_level_listing_endpoint(client, server, tmp_path):
    mlflow.set_experiment("/Shared/artifacts/run-listing")
    with mlflow.start_run() as run:
        mlflow.log_text("x" * 10, "d/x.txt")
        mlflow.log_text("y", "y.txt")
    r = requests.get(server.api("/mlflow/artifacts/list"), params={"run_id": run.info.run_id}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["root_uri"] == client.get_run(run.info.run_id).info.artifact_uri
    assert sorted((f["path"], f["is_dir"]) for f in body["files"]) == [("d", True), ("y.txt", False)]
    r = requests.get(server.api("/mlflow/artifacts/list"), params={"run_id": run.info.run_id, "path": "d"}, timeout=30)
    assert r.status_code == 200, r.text
    assert [(f["path"], f["is_dir"], int(f["file_size"])) for f in r.json()["files"]] == [("d/x.txt", False, 10)]


@pytest.mark.disk
def test_log_text_and_dict(client, server, tmp_path):
    import yaml

    text = "héllo\nwörld ✓\n"
    d = {"lr": 0.001, "layers": [64, 32], "name": "tiny", "nested": {"dropout": 0.1, "flag": True}}
    mlflow.set_experiment("/Shared/artifacts/text-dict")
    with mlflow.start_run() as run:
        mlflow.log_text(text, "notes/hello.txt")
        mlflow.log_dict(d, "config/params.json")
        mlflow.log_dict(d, "config/params.yaml")
    run_id = run.info.run_id
    key = artifact_key(client.get_run(run_id).info.artifact_uri)

    assert artifact_file(server, f"{key}/notes/hello.txt").read_bytes() == text.encode("utf-8")
    assert json.loads(artifact_file(server, f"{key}/config/params.json").read_text()) == d
    assert yaml.safe_load(artifact_file(server, f"{key}/config/params.yaml").read_text()) == d

    assert mlflow.artifacts.load_text(f"runs:/{run_id}/notes/hello.txt") == text
    assert mlflow.artifacts.load_dict(f"runs:/{run_id}/config/params.json") == d
    assert yaml.safe_load(mlflow.artifacts.load_text(f"runs:/{run_id}/config/params.yaml")) == d

    r = requests.get(artifacts_url(server, f"{key}/config/params.json"), timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    assert r.json() == d


@pytest.mark.disk
def test_log_image(client, server, tmp_path):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(24, 40, 3), dtype=np.uint8)
    gray = Image.fromarray(np.arange(32 * 16, dtype=np.uint16).reshape(32, 16).astype(np.uint8), mode="L")
    mlflow.set_experiment("/Shared/artifacts/images")
    with mlflow.start_run() as run:
        mlflow.log_image(rgb, artifact_file="images/random.png")
        mlflow.log_image(gray, artifact_file="images/gray.png")
    run_id = run.info.run_id
    key = artifact_key(client.get_run(run_id).info.artifact_uri)

    with Image.open(artifact_file(server, f"{key}/images/random.png")) as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), rgb)
    dl = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="images", dst_path=str(tmp_path)))
    assert sorted(p.name for p in dl.iterdir()) == ["gray.png", "random.png"]
    with Image.open(dl / "random.png") as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), rgb)
    with Image.open(dl / "gray.png") as im:
        assert np.array_equal(np.asarray(im), np.asarray(gray))
    r = requests.get(artifacts_url(server, f"{key}/images/random.png"), timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/png", r.headers


# ---------------------------------------------------------------- deletion


@pytest.mark.disk
def test_delete_artifacts(client, server, tmp_path):
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    mlflow.set_experiment("/Shared/artifacts/delete")
    with mlflow.start_run() as run:
        mlflow.log_text("keep", "keep.txt")
        mlflow.log_text("one", "gone.txt")
        mlflow.log_text("two", "dir/a.txt")
        mlflow.log_text("three", "dir/sub/b.txt")
        mlflow.log_text("four", "other/c.txt")
    run_id = run.info.run_id
    uri = client.get_run(run_id).info.artifact_uri
    key = artifact_key(uri)
    assert set(files_under(artifact_file(server, key))) == {"keep.txt", "gone.txt", "dir/a.txt", "dir/sub/b.txt", "other/c.txt"}

    # A file, with raw HTTP.
    r = requests.delete(artifacts_url(server, f"{key}/gone.txt"), timeout=30)
    assert r.status_code == 200 and r.json() == {}, (r.status_code, r.text)
    assert not artifact_file(server, f"{key}/gone.txt").exists()
    r = requests.get(artifacts_url(server, f"{key}/gone.txt"), timeout=30)
    assert_json_error(r, 404, "RESOURCE_DOES_NOT_EXIST")

    # A directory and everything under it, with raw HTTP.
    r = requests.delete(artifacts_url(server, f"{key}/dir"), timeout=30)
    assert r.status_code == 200 and r.json() == {}, (r.status_code, r.text)
    assert not artifact_file(server, f"{key}/dir/a.txt").exists()
    assert not artifact_file(server, f"{key}/dir/sub/b.txt").exists()
    assert_json_error(requests.get(artifacts_url(server, f"{key}/dir/sub/b.txt"), timeout=30), 404)

    # A directory through the client's artifact repository (what delete_artifacts sends).
    get_artifact_repository(uri).delete_artifacts("other")
    assert not artifact_file(server, f"{key}/other/c.txt").exists()

    assert files_under(artifact_file(server, key)) == {"keep.txt": 4}
    assert [(f.path, f.is_dir) for f in client.list_artifacts(run_id)] == [("keep.txt", False)]


# ---------------------------------------------------------------- raw HTTP: downloads


def test_range_requests(client, server):
    _, key = new_run(client, "/Shared/artifacts/range")
    data = bytes(range(100))
    url = artifacts_url(server, f"{key}/range.bin")
    put(server, f"{key}/range.bin", data)

    r = requests.get(url, timeout=30)
    assert r.status_code == 200 and r.content == data
    assert r.headers.get("Accept-Ranges") == "bytes", r.headers
    assert r.headers["Content-Length"] == "100"

    for rng, want, content_range in [
        ("bytes=0-9", data[0:10], "bytes 0-9/100"),
        ("bytes=10-", data[10:], "bytes 10-99/100"),
        ("bytes=-5", data[95:], "bytes 95-99/100"),
        ("bytes=42-42", data[42:43], "bytes 42-42/100"),
        ("bytes=90-500", data[90:], "bytes 90-99/100"),  # the end is clamped
        ("bytes=-500", data, "bytes 0-99/100"),  # a suffix longer than the file
    ]:
        r = requests.get(url, headers={"Range": rng}, timeout=30)
        assert r.status_code == 206, (rng, r.status_code, r.text[:200])
        assert r.content == want, rng
        assert r.headers.get("Content-Range") == content_range, (rng, r.headers)
        assert r.headers["Content-Length"] == str(len(want)), (rng, r.headers)

    for rng in ("bytes=100-", "bytes=500-600", "bytes=-0"):
        r = requests.get(url, headers={"Range": rng}, timeout=30)
        assert r.status_code == 416, (rng, r.status_code, r.text[:200])
        assert r.headers.get("Content-Range") == "bytes */100", (rng, r.headers)
    # The file is unchanged and still served whole.
    assert requests.get(url, timeout=30).content == data


def content_disposition_filename(value: str) -> tuple[str, str | None]:
    m = Message()
    m["content-disposition"] = value
    return m.get_content_disposition(), m.get_filename()


def test_download_headers(client, server):
    _, key = new_run(client, "/Shared/artifacts/headers")
    for name, body in [("report.txt", b"plain"), ("my report.html", b"<script>alert(1)</script>"),
                       ("résumé.pdf", b"%PDF-1.4")]:
        put(server, f"{key}/{name}", body)
        r = requests.get(artifacts_url(server, f"{key}/{name}"), timeout=30)
        assert r.status_code == 200 and r.content == body, (name, r.status_code)
        cd = r.headers.get("Content-Disposition", "")
        assert content_disposition_filename(cd) == ("attachment", name), (name, cd)
        assert r.headers.get("X-Content-Type-Options") == "nosniff", r.headers
    # An HTML artifact is user data: never served as something a browser renders.
    r = requests.get(artifacts_url(server, f"{key}/my report.html"), timeout=30)
    assert not r.headers["Content-Type"].startswith("text/html"), r.headers


def test_listing_of_a_file_or_missing_path_is_empty(client, server):
    run_id, key = new_run(client, "/Shared/artifacts/listing")
    put(server, f"{key}/only.txt", b"x")
    assert listing(server, f"{key}/only.txt") == []
    assert listing(server, f"{key}/does/not/exist") == []
    assert client.list_artifacts(run_id, "only.txt") == []
    assert client.list_artifacts(run_id, "nope") == []
    assert [(f["path"], f["is_dir"]) for f in listing(server, key)] == [("only.txt", False)]
    r = requests.get(artifacts_url(server, f"{key}/nope.txt"), timeout=30)
    assert_json_error(r, 404, "RESOURCE_DOES_NOT_EXIST")


# ---------------------------------------------------------------- raw HTTP: unsafe paths


MARK = "escape-" + uuid.uuid4().hex[:12]

# Request targets after /api/2.0/mlflow-artifacts/artifacts/, sent verbatim.
# {m} is a marker file name; {abs} an absolute path (a file in the test's tmp dir).
UNSAFE_PATHS = {
    "dotdot": "0/e2e/../../../../{m}",
    "dotdot-deep": "0/e2e/x/../../../../../../../../../../tmp/{m}",
    "dotdot-encoded": "0/e2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/{m}",
    "dotdot-encoded-slash": "0/e2e/..%2f..%2f..%2f..%2f{m}",
    "absolute": "/{abs}",
    "absolute-encoded": "%2F{abs_enc}",
    "hash": "0/e2e/a#{m}",
    "hash-encoded": "0/e2e/a%23{m}",
    "backslash": "0/e2e/..\\..\\..\\..\\{m}",
    "backslash-encoded": "0/e2e/..%5C..%5C..%5C{m}",
    "nul": "0/e2e/{m}%00.txt",
}


def _target(case: str, abs_path: Path) -> str:
    return UNSAFE_PATHS[case].format(m=MARK, abs=str(abs_path).lstrip("/"),
                                     abs_enc=quote(str(abs_path).lstrip("/"), safe=""))


def _assert_invalid_path(status, headers, body, what):
    ctx = f"{what} -> HTTP {status} {headers.get('location', '')} {body[:300]!r}"
    assert status == 400, "expected 400 INVALID_PARAMETER_VALUE 'Invalid path': " + ctx
    err = json.loads(body)
    assert err.get("error_code") == "INVALID_PARAMETER_VALUE", ctx
    assert err.get("message", "").startswith("Invalid path"), ctx


@pytest.mark.disk
@pytest.mark.parametrize("case", sorted(UNSAFE_PATHS))
def test_unsafe_paths_are_refused(server, client, tmp_path, case):
    abs_path = tmp_path / MARK
    target = _target(case, abs_path)
    store = server.data_dir / "artifacts"
    before = files_under(store)
    for method, prefix, body in [("PUT", "/artifacts/", b"pwned"), ("GET", "/artifacts/", b""),
                                 ("DELETE", "/artifacts/", b""),
                                 ("POST", "/mpu/create/", json.dumps({"path": "f.bin", "num_parts": 1}).encode())]:
        status, headers, resp = raw_request(server, method, ARTIFACTS_API + prefix + target, body,
                                            {"Content-Type": "application/json"} if method == "POST" else None)
        _assert_invalid_path(status, headers, resp, f"{method} {prefix}{target}")
    assert_healthy(server)
    # Nothing was written anywhere: not at the absolute target, not next to the
    # data directory, not inside the artifact store.
    assert not abs_path.exists()
    assert files_under(store) == before
    assert not [p for p in server.data_dir.parent.parent.rglob(f"*{MARK}*")]
    assert not Path("/tmp", MARK).exists()


@pytest.mark.parametrize("path", ["0/e2e/../../..", "/etc", "0/e2e/a#b", "0/e2e/..\\..", "0/e2e/a\x00b", "../.."])
def test_unsafe_listing_paths_are_refused(server, client, path):
    r = requests.get(artifacts_url(server), params={"path": path}, timeout=30)
    body = assert_json_error(r, 400, "INVALID_PARAMETER_VALUE")
    assert body["message"].startswith("Invalid path"), body


# ---------------------------------------------------------------- raw HTTP: concurrency and failures


@pytest.mark.disk
def test_concurrent_puts_to_one_path_leave_one_whole_version(client, server):
    _, key = new_run(client, "/Shared/artifacts/concurrent-puts")
    path = f"{key}/contended.bin"
    # Different lengths, so that a mix of two versions cannot pass for one.
    payloads = [os.urandom(3 * MIB + 4099 * i) for i in range(8)]
    hashes = {sha256(p) for p in payloads}
    errors: list[str] = []

    def writer(p: bytes):
        try:
            with requests.Session() as s:
                for _ in range(2):
                    r = s.put(artifacts_url(server, path), data=p, timeout=60)
                    if r.status_code != 200:
                        errors.append(f"PUT -> {r.status_code} {r.text[:200]}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"PUT raised {e!r}")

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    r = requests.get(artifacts_url(server, path), timeout=60)
    assert r.status_code == 200
    assert sha256(r.content) in hashes, f"a mix of versions: {len(r.content)} bytes"
    on_disk = artifact_file(server, path).read_bytes()
    assert on_disk == r.content
    assert [f["path"] for f in listing(server, key)] == ["contended.bin"]


def test_reads_during_overwrites_see_whole_versions(client, server):
    """Readers racing with writers of different-length versions get one whole
    version every time: never a prefix of one with the length of another."""
    _, key = new_run(client, "/Shared/artifacts/read-while-write")
    path = f"{key}/hot.bin"
    payloads = [os.urandom(20_000 + 7919 * i) for i in range(6)]
    hashes = {sha256(p) for p in payloads}
    put(server, path, payloads[0])
    stop = threading.Event()
    errors: list[str] = []
    reads = [0]

    def writer(i: int):
        with requests.Session() as s:
            n = 0
            while not stop.is_set():
                r = s.put(artifacts_url(server, path), data=payloads[(i + n) % len(payloads)], timeout=30)
                n += 1
                if r.status_code != 200:
                    errors.append(f"PUT -> {r.status_code} {r.text[:200]}")

    def reader():
        with requests.Session() as s:
            while not stop.is_set():
                try:
                    r = s.get(artifacts_url(server, path), timeout=30)
                    body = r.content
                except requests.RequestException as e:
                    errors.append(f"GET raised {e!r}")
                    continue
                reads[0] += 1
                if r.status_code != 200:
                    errors.append(f"GET -> {r.status_code} {r.text[:200]}")
                elif sha256(body) not in hashes:
                    errors.append(f"GET returned {len(body)} bytes (Content-Length {r.headers.get('Content-Length')}) "
                                  "that are no whole version")

    run_for(4, stop, [threading.Thread(target=writer, args=(i,)) for i in range(3)] +
            [threading.Thread(target=reader) for _ in range(3)])
    assert reads[0] > 50, reads
    assert not errors, f"{len(errors)} bad reads/writes of {reads[0]} reads; first: {errors[:5]}"


def _cut_off_put(server, target: str, declared: int, sent: bytes, how: str) -> None:
    """Starts a PUT that announces `declared` bytes (or uses chunked encoding),
    sends only `sent`, and drops the connection (FIN or RST)."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        head = f"PUT {target} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/octet-stream\r\n"
        if how == "chunked":
            s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            s.sendall(f"{len(sent):x}\r\n".encode() + sent + b"\r\n")  # no terminating 0-chunk
        else:
            s.sendall((head + f"Content-Length: {declared}\r\n\r\n").encode())
            s.sendall(sent)
        time.sleep(0.3)  # let the server start writing
        if how == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            s.shutdown(socket.SHUT_WR)
    finally:
        s.close()


@pytest.mark.disk
@pytest.mark.parametrize("how", ["fin", "rst", "chunked"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
def test_cut_off_upload_leaves_nothing(client, server, how, existing):
    _, key = new_run(client, f"/Shared/artifacts/cut-off-{how}-{existing}")
    path = f"{key}/partial.bin"
    old = os.urandom(100_000)
    if existing:
        put(server, path, old)
    store = server.data_dir / "artifacts"
    before = files_under(store)

    _cut_off_put(server, f"{ARTIFACTS_API}/artifacts/{path}", 10 * MIB, os.urandom(MIB), how)

    # Nothing new on disk once the server has noticed: no partial file under
    # the final name, no stray temporary file.
    assert settle(lambda: files_under(store), before) == before
    r = requests.get(artifacts_url(server, path), timeout=30)
    if existing:
        assert r.status_code == 200 and r.content == old, (r.status_code, len(r.content))
        assert artifact_file(server, path).read_bytes() == old
    else:
        assert_json_error(r, 404, "RESOURCE_DOES_NOT_EXIST")
        assert not artifact_file(server, path).exists()
        assert listing(server, key) == []
    assert_healthy(server)


# ---------------------------------------------------------------- multipart uploads


@pytest.fixture
def multipart_env(monkeypatch):
    """The client's proxy multipart upload, on, for files of 6 MiB and more in
    5 MiB parts; returns the list of parts the client uploads (number, size, url)."""
    from mlflow.store.artifact.http_artifact_repo import HttpArtifactRepository

    monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "true")
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(6 * MIB))
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_CHUNK_SIZE", str(5 * MIB))
    parts: list[tuple[int, int, str]] = []
    lock = threading.Lock()
    orig = HttpArtifactRepository._upload_part

    def spy(*args, **kwargs):
        credential = kwargs.get("credential", args[0] if args else None)
        part = orig(*args, **kwargs)
        with lock:
            parts.append((credential.part_number, kwargs.get("size"), credential.url))
        return part

    monkeypatch.setattr(HttpArtifactRepository, "_upload_part", staticmethod(spy))
    return parts


@pytest.mark.disk
def test_multipart_upload_through_the_client(client, server, tmp_path, multipart_env):
    big = os.urandom(13 * MIB + 123)  # parts of 5, 5 and 3 MiB
    even = os.urandom(10 * MIB)  # exactly two parts
    small = os.urandom(2 * MIB)  # under the threshold: one PUT
    src = tmp_path / "src"
    write(src / "big.bin", big)
    write(src / "even.bin", even)
    write(src / "small.bin", small)
    store = server.data_dir / "artifacts"
    before = files_under(store)

    mlflow.set_experiment("/Shared/artifacts/multipart")
    with mlflow.start_run() as run:
        mlflow.log_artifact(str(src / "big.bin"), "mp")
        big_parts = sorted(multipart_env)
        mlflow.log_artifact(str(src / "even.bin"), "mp")
        mlflow.log_artifact(str(src / "small.bin"), "mp")
    run_id = run.info.run_id
    key = artifact_key(client.get_run(run_id).info.artifact_uri)

    # The server accepted multipart (no fallback to a single PUT) and its part
    # URLs point back at it.
    assert [n for n, _, _ in big_parts] == [1, 2, 3], big_parts
    assert sorted(n for n, _, _ in multipart_env) == [1, 1, 2, 2, 3], multipart_env
    assert all(url.startswith(server.url + "/") for _, _, url in multipart_env), multipart_env

    assert artifact_file(server, f"{key}/mp/big.bin").read_bytes() == big
    assert artifact_file(server, f"{key}/mp/even.bin").read_bytes() == even
    got = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="mp", dst_path=str(tmp_path / "dl")))
    assert tree_contents(got) == {"big.bin": big, "even.bin": even, "small.bin": small}
    # Only the three files are new: no parts or temporary files left behind.
    new = {k: v for k, v in files_under(store).items() if k not in before}
    assert sorted(new.values()) == sorted([len(big), len(even), len(small)]), new


def _mpu(server, op: str, dir_key: str, body: dict):
    return requests.post(f"{server.url}{ARTIFACTS_API}/mpu/{op}/{dir_key}", json=body, timeout=60)


@pytest.mark.disk
def test_multipart_protocol_raw(client, server):
    _, key = new_run(client, "/Shared/artifacts/multipart-raw")
    d = f"{key}/raw"
    local = "/home/someone/data/model.bin"  # the client sends its local file name
    r = _mpu(server, "create", d, {"path": local, "num_parts": 2})
    assert r.status_code == 200, r.text
    create = r.json()
    upload_id = create["upload_id"]
    creds = sorted(create["credentials"], key=lambda c: int(c["part_number"]))
    assert [int(c["part_number"]) for c in creds] == [1, 2]
    assert all(c["url"].startswith(server.url + "/") for c in creds), creds

    # A part URL without its signed header, or with a wrong one, is refused.
    r = requests.put(creds[0]["url"], data=b"x" * 10, timeout=30)
    assert 400 <= r.status_code < 500 and r.status_code in (401, 403), (r.status_code, r.text)
    bad = {k: "0" * len(v) for k, v in creds[0].get("headers", {}).items()}
    r = requests.put(creds[0]["url"], data=b"x" * 10, headers=bad, timeout=30)
    assert r.status_code in (401, 403), (r.status_code, r.text)

    def upload(cred, data):
        r = requests.put(cred["url"], data=data, headers=cred.get("headers", {}), timeout=60)
        assert r.status_code == 200, (r.status_code, r.text)
        assert r.headers.get("ETag"), r.headers
        return {"part_number": int(cred["part_number"]), "etag": r.headers["ETag"], "url": cred["url"]}

    p1_small, p2 = os.urandom(1024), os.urandom(1024)
    parts = [upload(creds[0], p1_small), upload(creds[1], p2)]
    # Every part but the last must be at least 5 MiB.
    r = _mpu(server, "complete", d, {"path": local, "upload_id": upload_id, "parts": parts})
    assert_json_error(r, 400, "INVALID_PARAMETER_VALUE")
    # Re-uploading part 1 replaces it.
    p1 = os.urandom(5 * MIB)
    parts[0] = upload(creds[0], p1)
    # A wrong ETag is refused.
    wrong = [parts[0], dict(parts[1], etag='"' + "0" * 32 + '"')]
    r = _mpu(server, "complete", d, {"path": local, "upload_id": upload_id, "parts": wrong})
    assert_json_error(r, 400)
    assert requests.get(artifacts_url(server, f"{d}/model.bin"), timeout=30).status_code == 404
    r = _mpu(server, "complete", d, {"path": local, "upload_id": upload_id, "parts": parts})
    assert r.status_code == 200, r.text
    # The file lands in the directory of the URL, under the local file's base name.
    r = requests.get(artifacts_url(server, f"{d}/model.bin"), timeout=60)
    assert r.status_code == 200 and r.content == p1 + p2
    assert artifact_file(server, f"{d}/model.bin").read_bytes() == p1 + p2

    # A token is bound to its upload's path: it cannot write elsewhere.
    r = _mpu(server, "create", d, {"path": "other.bin", "num_parts": 1})
    assert r.status_code == 200, r.text
    other = r.json()
    cred = other["credentials"][0]
    stolen = cred["url"].replace("/raw/other.bin", "/raw/hijacked.bin")
    assert stolen != cred["url"], cred["url"]
    r = requests.put(stolen, data=b"x", headers=cred.get("headers", {}), timeout=30)
    assert r.status_code in (401, 403), (r.status_code, r.text)

    # Abort: the upload is gone and nothing appears.
    upload(cred, b"y" * 100)
    r = _mpu(server, "abort", d, {"path": "other.bin", "upload_id": other["upload_id"]})
    assert r.status_code == 200, r.text
    r = _mpu(server, "complete", d, {"path": "other.bin", "upload_id": other["upload_id"],
                                      "parts": [{"part_number": 1, "etag": "x", "url": cred["url"]}]})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert requests.get(artifacts_url(server, f"{d}/other.bin"), timeout=30).status_code == 404
    assert not artifact_file(server, f"{d}/other.bin").exists()
    assert not artifact_file(server, f"{d}/hijacked.bin").exists()
    assert sorted(f["path"] for f in listing(server, d)) == ["model.bin"]


@pytest.mark.disk
def test_multipart_part_failure_aborts_cleanly(client, server, tmp_path, multipart_env, monkeypatch):
    """When a part upload fails the client aborts the upload and raises: the
    server must be left with nothing under the final name and no parts."""
    from mlflow.store.artifact.http_artifact_repo import HttpArtifactRepository

    spy = HttpArtifactRepository._upload_part

    def failing(*args, **kwargs):
        cred = kwargs.get("credential", args[0] if args else None)
        if cred.part_number == 2:
            raise OSError("simulated network failure")
        return spy(*args, **kwargs)

    monkeypatch.setattr(HttpArtifactRepository, "_upload_part", staticmethod(failing))
    f = write(tmp_path / "doomed.bin", os.urandom(12 * MIB))
    store = server.data_dir / "artifacts"
    mlflow.set_experiment("/Shared/artifacts/multipart-abort")
    with mlflow.start_run() as run:
        before = files_under(store)
        with pytest.raises((MlflowException, OSError)):
            mlflow.log_artifact(str(f))
    key = artifact_key(client.get_run(run.info.run_id).info.artifact_uri)
    assert not artifact_file(server, f"{key}/doomed.bin").exists()
    assert settle(lambda: files_under(store), before) == before
