"""Volumes and the Files API against real servers: the curl walkthrough of
docs/volumes.md run as written, uploads and downloads that stream (server RSS
sampled), Range/HEAD/If-Unmodified-Since, listings, Unity Catalog shapes,
permissions in multi-user mode, and bad input: paths that leave the volume
(raw targets, never normalised), cut-off uploads, a .metadata upload racing
its shards, concurrent overwrite=false, a volume deleted while written."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from sextant_e2e import REPO_ROOT, RssSampler, admin_password, assert_json_error, raw_request, report_measurement, run_for

FS = "/api/2.0/fs/files"
DIRS = "/api/2.0/fs/directories"
UC = "/api/2.1/unity-catalog"


def make_volume(srv, full: str, auth=None, catalog: bool = True) -> str:
    """Creates catalog (unless catalog is False), schema and volume (tolerating
    existing parents) and returns the volume's /Volumes path."""
    c, s, v = full.split(".")
    steps = [(UC + "/catalogs", {"name": c})] if catalog else []
    for target, body in steps + [(UC + "/schemas", {"catalog_name": c, "name": s}),
                                 (UC + "/volumes", {"catalog_name": c, "schema_name": s, "name": v})]:
        r = requests.post(srv.url + target, json=body, auth=auth, timeout=10)
        assert r.status_code == 200 or (r.status_code == 409 and target != UC + "/volumes"), (target, r.status_code, r.text)
    return f"/Volumes/{c}/{s}/{v}"


def listing(srv, path: str, auth=None) -> list[str]:
    r = requests.get(srv.url + DIRS + path, auth=auth, timeout=10)
    assert r.status_code == 200, r.text
    return [e["name"] + ("/" if e["is_directory"] else "") for e in r.json()["contents"]]


class SlowUpload:
    """A PUT whose body is sent in two halves, so that the test can act while
    the upload is in flight. It returns once the server has claimed the
    upload: the request says "Expect: 100-continue", and the server answers
    "100 Continue" when the handler first reads the body, which it does
    after the claim (a sleep "to let the server start reading" is a margin
    that a loaded machine can outlast)."""

    def __init__(self, srv, target: str, body: bytes) -> None:
        self.body = body
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        head = (f"PUT {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
                "Content-Type: application/octet-stream\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n").encode()
        self.sock.sendall(head)
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            chunk = self.sock.recv(1)  # one byte at a time: nothing of the final answer is read here
            assert chunk, f"the server closed the upload: {interim!r}"
            interim += chunk
        assert interim.startswith(b"HTTP/1.1 100 "), f"the upload was not taken: {interim!r}"
        self.sock.sendall(body[: len(body) // 2])

    def finish(self) -> tuple[int, bytes]:
        self.sock.sendall(self.body[len(self.body) // 2:])
        data = b""
        while chunk := self.sock.recv(65536):
            data += chunk
        self.sock.close()
        status = int(data.split(b" ", 2)[1])
        return status, data.split(b"\r\n\r\n", 1)[1]

    def cut(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------- the docs


def test_docs_curl_walkthrough(start_server, tmp_path):
    """The curl block of docs/volumes.md runs as written and prints what its
    #=> comments say."""
    srv = start_server()
    doc = (REPO_ROOT / "docs" / "volumes.md").read_text()
    m = re.search(r"<!-- e2e: test_volumes.py::test_docs_curl_walkthrough runs the next block -->\n```sh\n(.*?)```", doc, re.S)
    assert m, "docs/volumes.md lost its curl block"
    block = m.group(1)
    expected = [e.strip() for e in re.findall(r"#=> (.*)$", block, re.M)]
    assert len(expected) >= 10
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, SEXTANT=srv.url), timeout=60)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    got = [line.strip() for line in r.stdout.splitlines()]
    assert got == expected, "\n".join(f"{'OK ' if g == e else 'BAD'} got {g!r}\n    want {e!r}" for g, e in zip(got, expected))


# ---------------------------------------------------------------- files


def test_big_file_streams_both_ways(server, tmp_path):
    """256 MiB up and down: the bytes come back identical, and the server's RSS
    stays under 200 MB (bodies stream)."""
    vol = make_volume(server, "main.big.v")
    src = tmp_path / "big.bin"
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for _ in range(256):
            b = os.urandom(1 << 20)
            h.update(b)
            f.write(b)
    with RssSampler(server.proc.pid) as rss:
        rss.phase = "upload"
        t = time.monotonic()
        with open(src, "rb") as f:
            r = requests.put(server.url + FS + vol + "/blobs/big.bin", data=f, timeout=300)
        up = time.monotonic() - t
        assert r.status_code == 204, r.text
        rss.phase = "download"
        t = time.monotonic()
        got = hashlib.sha256()
        n = 0
        with requests.get(server.url + FS + vol + "/blobs/big.bin", stream=True, timeout=300) as r:
            assert r.status_code == 200
            assert r.headers["Content-Length"] == str(256 << 20)
            for chunk in r.iter_content(1 << 20):
                got.update(chunk)
                n += len(chunk)
        down = time.monotonic() - t
    assert n == 256 << 20 and got.hexdigest() == h.hexdigest()
    peak_mb = rss.peak_kib() / 1024
    report_measurement("volume_256mib_round_trip", {"upload_s": round(up, 2), "download_s": round(down, 2),
                                                     "server_peak_rss_mb": round(peak_mb, 1)})
    assert peak_mb < 200, f"server RSS reached {peak_mb:.0f} MB"


def test_range_head_and_conditions(server):
    vol = make_volume(server, "main.rng.v")
    url = server.url + FS + vol + "/f.bin"
    data = bytes(range(256)) * 4
    assert requests.put(url, data=data, timeout=10).status_code == 204
    r = requests.get(url, headers={"Range": "bytes=10-19"}, timeout=10)
    assert r.status_code == 206 and r.content == data[10:20] and r.headers["Content-Range"] == "bytes 10-19/1024"
    r = requests.get(url, headers={"Range": "bytes=-5"}, timeout=10)
    assert r.status_code == 206 and r.content == data[-5:]
    r = requests.get(url, headers={"Range": "bytes=1024-"}, timeout=10)
    assert_json_error(r, 416)
    assert r.headers["Content-Range"] == "bytes */1024"
    r = requests.head(url, timeout=10)
    assert r.status_code == 200 and r.headers["Content-Length"] == "1024" and r.content == b""
    assert r.headers["Content-Type"] == "application/octet-stream" and r.headers["Last-Modified"]
    lm = r.headers["Last-Modified"]
    assert requests.get(url, headers={"If-Unmodified-Since": lm}, timeout=10).status_code == 200
    time.sleep(1.1)
    assert requests.put(url, data=b"new", timeout=10).status_code == 204
    assert_json_error(requests.get(url, headers={"If-Unmodified-Since": lm, "Range": "bytes=100-"}, timeout=10), 412,
                      "PRECONDITION_FAILED", "modified")
    assert requests.head(server.url + FS + vol + "/missing", timeout=10).status_code == 404


def test_listings_and_directories(server):
    vol = make_volume(server, "main.ls.v")
    for i in range(25):
        assert requests.put(f"{server.url}{FS}{vol}/many/f{i:02d}", data=b"x" * i, timeout=10).status_code == 204
    assert requests.put(server.url + DIRS + vol + "/many/sub/deeper", timeout=10).status_code == 204
    names, token, pages = [], "", 0
    while True:
        r = requests.get(server.url + DIRS + vol + "/many", params={"page_size": 10, "page_token": token} if token else {"page_size": 10}, timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["contents"]) <= 10
        pages += 1
        for e in body["contents"]:
            names.append(e["name"])
            assert e["path"] == vol + "/many/" + e["name"]
            if e["is_directory"]:
                assert "file_size" not in e
            else:
                assert e["file_size"] == int(e["name"][1:]) and e["last_modified"] > 0
        token = body.get("next_page_token", "")
        if not token:
            break
    assert pages == 3 and names == [f"f{i:02d}" for i in range(25)] + ["sub"]
    assert requests.head(server.url + DIRS + vol + "/many/sub/deeper", timeout=10).status_code == 200
    assert listing(server, vol + "/many/sub/deeper") == []
    assert_json_error(requests.delete(server.url + DIRS + vol + "/many", timeout=10), 409, "RESOURCE_CONFLICT", "not empty")
    assert requests.delete(server.url + DIRS + vol + "/many/sub/deeper", timeout=10).status_code == 204
    assert requests.delete(server.url + DIRS + vol + "/many/sub", timeout=10).status_code == 204
    assert_json_error(requests.get(server.url + DIRS + vol + "/nope", timeout=10), 404, "NOT_FOUND")
    assert_json_error(requests.put(server.url + FS + vol + "/many", data=b"x", timeout=10), 409, None, "directory")
    assert_json_error(requests.put(server.url + DIRS + vol + "/many/f01/x", timeout=10), 409, None, "file")
    assert_json_error(requests.get(server.url + DIRS + vol + "/many?page_size=-1", timeout=10), 400)


def test_unity_catalog_shapes(server):
    make_volume(server, "shapes.s.v")
    r = requests.get(server.url + UC + "/volumes/shapes.s.v", timeout=10)
    assert r.status_code == 200
    v = r.json()
    assert {k: v[k] for k in ("name", "catalog_name", "schema_name", "full_name", "volume_type")} == {
        "name": "v", "catalog_name": "shapes", "schema_name": "s", "full_name": "shapes.s.v", "volume_type": "MANAGED"}
    assert re.fullmatch(r"[0-9a-f]{32}", v["volume_id"]) and v["owner"] == "local" and v["created_at"] > 0
    assert_json_error(requests.post(server.url + UC + "/volumes", json={"catalog_name": "shapes", "schema_name": "s", "name": "v"}, timeout=10),
                      409, "RESOURCE_ALREADY_EXISTS")
    assert_json_error(requests.post(server.url + UC + "/volumes", json={"catalog_name": "shapes", "schema_name": "s", "name": "e", "volume_type": "EXTERNAL"}, timeout=10),
                      400, "INVALID_PARAMETER_VALUE", "EXTERNAL")
    assert_json_error(requests.post(server.url + UC + "/volumes", json={"catalog_name": "shapes", "schema_name": "s", "name": "a.b"}, timeout=10), 400)
    assert_json_error(requests.post(server.url + UC + "/volumes", json={"catalog_name": "shapes", "schema_name": "s", "name": "x", "bogus": 1}, timeout=10),
                      400, None, "bogus")
    assert [s["full_name"] for s in requests.get(server.url + UC + "/schemas", params={"catalog_name": "shapes"}, timeout=10).json()["schemas"]] == ["shapes.s"]
    # PATCH: comment and owner; a rename is refused, saying what to do instead.
    r = requests.patch(server.url + UC + "/volumes/shapes.s.v", json={"comment": "run 42"}, timeout=10)
    assert r.status_code == 200 and r.json()["comment"] == "run 42" and r.json()["updated_at"] >= v["updated_at"], r.text
    assert requests.get(server.url + UC + "/volumes/shapes.s.v", timeout=10).json()["comment"] == "run 42"
    assert requests.patch(server.url + UC + "/schemas/shapes.s", json={"comment": "team"}, timeout=10).json()["comment"] == "team"
    assert requests.patch(server.url + UC + "/catalogs/shapes", json={"comment": "all"}, timeout=10).json()["comment"] == "all"
    assert_json_error(requests.patch(server.url + UC + "/volumes/shapes.s.v", json={"new_name": "w"}, timeout=10),
                      400, "INVALID_PARAMETER_VALUE", "renaming a volume is not supported", "volumes cp")
    assert_json_error(requests.patch(server.url + UC + "/volumes/shapes.s.v", json={"owner": "nobody@example.com"}, timeout=10),
                      400, "INVALID_PARAMETER_VALUE", "nobody@example.com")
    assert_json_error(requests.patch(server.url + UC + "/volumes/shapes.s.v", json={"bogus": 1}, timeout=10), 400, None, "bogus")
    assert_json_error(requests.patch(server.url + UC + "/volumes/shapes.s.nope", json={"comment": "x"}, timeout=10), 404)
    assert_json_error(requests.delete(server.url + UC + "/catalogs/shapes", timeout=10), 409, "RESOURCE_CONFLICT", "force=true")
    assert requests.delete(server.url + UC + "/catalogs/shapes", params={"force": "true"}, timeout=10).status_code == 200
    assert_json_error(requests.get(server.url + UC + "/volumes/shapes.s.v", timeout=10), 404)


# ---------------------------------------------------------------- bad input


BAD_TARGETS = [
    ("/../../other/v/x", 400), ("/a/../../../x", 400), ("/%2e%2e/%2e%2e/x", 400), ("/%2E%2E/x", 400),
    ("/a%2F..%2F..%2Fx", 400), ("/..%2f..%2fx", 400), ("/a//b", 400), ("/./a", 400), ("/a%5C..%5Cb", 400),
    ("/a%00b", 400), ("/a%0Ab", 400), ("/.sextant-dir", 400),
]


def test_paths_outside_volumes_are_refused(server):
    """Every spelling of a path that leaves the volume is a 400 JSON error, and
    nothing is written anywhere."""
    vol = make_volume(server, "main.bad.v")
    make_volume(server, "main.bad.other")
    before = listing(server, vol)
    for suffix, status in BAD_TARGETS:
        for method in ("PUT", "GET", "DELETE"):
            st, _, body = raw_request(server, method, FS + vol + suffix, b"data" if method == "PUT" else b"")
            assert st == status, (method, suffix, st, body)
            d = json.loads(body)
            assert d["error_code"] == "INVALID_PARAMETER_VALUE" and d["message"], (suffix, d)
    for target in (FS + "/Volumes/main", FS + "/Volumes/main/bad", DIRS + "/Volumes/main/bad", FS + "/Volumes/Ma.in/bad/v/x"):
        st, _, body = raw_request(server, "PUT", target, b"x")
        assert st == 400 and b"INVALID_PARAMETER_VALUE" in body, (target, st, body)
    st, _, body = raw_request(server, "PUT", FS + "/Volumes/main/bad/nope/x", b"x")
    assert st == 404 and json.loads(body)["message"] == "volume main.bad.nope does not exist"
    assert listing(server, vol) == before
    assert listing(server, "/Volumes/main/bad/other") == []
    assert_json_error(requests.put(server.url + FS + vol + "/f?overwrite=maybe", data=b"x", timeout=10), 400, None, "overwrite")
    assert_json_error(requests.put(server.url + FS + vol + "/f?offset=1", data=b"x", timeout=10), 400, None, "offset")


def test_cut_off_upload_leaves_nothing(server):
    vol = make_volume(server, "main.cut.v")
    up = SlowUpload(server, FS + vol + "/partial.bin", os.urandom(1 << 20))
    up.cut()
    time.sleep(0.3)
    assert requests.head(server.url + FS + vol + "/partial.bin", timeout=10).status_code == 404
    assert listing(server, vol) == []


def test_metadata_waits_for_shards(server):
    """A .metadata upload while a shard of its directory is still uploading is
    refused; once the shard landed it is accepted."""
    vol = make_volume(server, "main.meta.v")
    shard = SlowUpload(server, FS + vol + "/step_1/__0_ab_0.distcp", os.urandom(1 << 20))
    r = requests.put(server.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10)
    assert_json_error(r, 409, "RESOURCE_CONFLICT", "__0_ab_0.distcp", "still being uploaded")
    assert requests.head(server.url + FS + vol + "/step_1/.metadata", timeout=10).status_code == 404
    status, _ = shard.finish()
    assert status == 204
    assert requests.put(server.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10).status_code == 204


def test_server_killed_mid_upload_then_restarted(start_server, tmp_path):
    """The reproducer of issue 20, as written: a 50 MB shard PUT with
    `curl --limit-rate 5M`, the server killed with SIGKILL in the middle,
    restarted on the same data; the shard PUT again, then the checkpoint's
    .metadata. The restarted server knows that the killed one's claim on
    the shard is gone: the .metadata lands at once (it was refused for two
    minutes, naming the shard that had landed again)."""
    data_dir = tmp_path / "data"
    srv = start_server(data_dir=data_dir)
    vol = make_volume(srv, "main.restart.ckpt")
    shard = tmp_path / "shard.bin"
    shard.write_bytes(os.urandom(50_000_000))
    target = FS + vol + "/step_1/__0_0.distcp"
    curl = subprocess.Popen(["curl", "-sS", "--limit-rate", "5M", "-X", "PUT", "--data-binary", f"@{shard}",
                             srv.url + target, "-o", "/dev/null", "-w", "%{http_code}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The upload is in flight (claimed) once the .metadata is refused.
    deadline = time.monotonic() + 30
    while True:
        r = requests.put(srv.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10)
        if r.status_code == 409:
            break
        assert r.status_code == 204 and time.monotonic() < deadline, r.text
        requests.delete(srv.url + FS + vol + "/step_1/.metadata", timeout=10)
        time.sleep(0.05)
    assert_json_error(r, 409, "RESOURCE_CONFLICT", "__0_0.distcp", "still being uploaded")
    assert curl.poll() is None, "the upload ended before the kill"
    srv.kill()
    curl.wait(timeout=60)
    srv.start()  # same data, a new port
    r = requests.put(srv.url + target, data=shard.read_bytes(), timeout=60)
    assert r.status_code == 204, r.text
    r = requests.put(srv.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10)
    assert r.status_code == 204, r.text
    got = requests.get(srv.url + target, timeout=60).content
    assert hashlib.sha256(got).digest() == hashlib.sha256(shard.read_bytes()).digest()
    # The killed upload left nothing else in the directory.
    assert listing(srv, vol + "/step_1") == [".metadata", "__0_0.distcp"]


def test_overwrite_false_is_exclusive(server):
    vol = make_volume(server, "main.excl.v")
    first = SlowUpload(server, FS + vol + "/lock?overwrite=false", b"first" * 1000)
    r = requests.put(server.url + FS + vol + "/lock?overwrite=false", data=b"second", timeout=10)
    assert_json_error(r, 409, "ALREADY_EXISTS", "another upload")
    assert first.finish()[0] == 204
    assert requests.get(server.url + FS + vol + "/lock", timeout=10).content == b"first" * 1000
    assert_json_error(requests.put(server.url + FS + vol + "/lock?overwrite=false", data=b"third", timeout=10), 409, "ALREADY_EXISTS")


def test_reads_during_overwrites_see_whole_versions(server):
    """Readers racing with writers of different-length versions of one file
    get one whole version every time (whole-file GETs), or a slice of one
    version (Range GETs, checked against Content-Range): never a 5xx, never
    bytes of two versions. Runs on the local directory and on S3."""
    vol = make_volume(server, "main.hot.v")
    url = server.url + FS + vol + "/hot.bin"
    payloads = [os.urandom(200_000 + 7919 * i) for i in range(6)]
    by_len = {len(p): p for p in payloads}
    assert requests.put(url, data=payloads[0], timeout=10).status_code == 204
    stop = threading.Event()
    errors: list[str] = []
    reads = [0, 0]

    def writer(i: int) -> None:
        with requests.Session() as s:
            n = 0
            while not stop.is_set():
                r = s.put(url, data=payloads[(i + n) % len(payloads)], timeout=30)
                n += 1
                if r.status_code != 204:
                    errors.append(f"PUT -> {r.status_code} {r.text[:200]}")

    def reader(ranged: bool) -> None:
        with requests.Session() as s:
            while not stop.is_set():
                r = s.get(url, headers={"Range": "bytes=1000-150999"} if ranged else {}, timeout=30)
                reads[ranged] += 1
                if ranged:
                    total = int(r.headers.get("Content-Range", "/0").rsplit("/", 1)[1])
                    if r.status_code != 206 or total not in by_len or r.content != by_len[total][1000:151000]:
                        errors.append(f"ranged GET -> {r.status_code} {r.headers.get('Content-Range')} {len(r.content)} bytes")
                elif r.status_code != 200 or by_len.get(len(r.content)) != r.content:
                    errors.append(f"GET -> {r.status_code}, {len(r.content)} bytes that are no whole version: {r.text[:200] if r.status_code != 200 else ''}")

    run_for(4, stop, [threading.Thread(target=writer, args=(i,)) for i in range(3)] +
            [threading.Thread(target=reader, args=(ranged,)) for ranged in (False, False, True)])
    assert reads[0] > 20 and reads[1] > 10, reads
    assert not errors, errors[:5]


def test_volume_deleted_while_writing(server):
    vol = make_volume(server, "main.gone.v")
    up = SlowUpload(server, FS + vol + "/late.bin", os.urandom(1 << 20))
    assert requests.delete(server.url + UC + "/volumes/main.gone.v", timeout=10).status_code == 200
    status, body = up.finish()
    assert status == 404 and b"deleted while" in body, body
    make_volume(server, "main.gone.v")
    assert listing(server, vol) == []


# ---------------------------------------------------------------- permissions

ADMIN = "admin@example.com"


def test_permissions_multi_user(start_server, sextant_bin, tmp_path):
    srv = start_server(auth="on", admin_email=ADMIN)
    admin = (ADMIN, admin_password(srv))
    users = {"alice@example.com": "alice-password-1", "bob@example.com": "bob-password-1", "carol@example.com": "carol-password-1"}
    for email, pw in users.items():
        assert requests.post(srv.url + "/api/2.0/sextant/users", json={"email": email, "password": pw}, auth=admin, timeout=10).status_code == 200
    alice, bob, carol = ((e, users[e]) for e in users)
    perms = srv.url + "/api/2.0/sextant/permissions"

    assert_json_error(requests.post(srv.url + UC + "/catalogs", json={"name": "mine"}, auth=alice, timeout=10), 403, "PERMISSION_DENIED", "administrators")
    assert requests.post(srv.url + UC + "/catalogs", json={"name": "main"}, auth=admin, timeout=10).status_code == 200
    # A catalog alice may not see answers as a missing one (docs/auth.md, Enumeration).
    assert_json_error(requests.post(srv.url + UC + "/schemas", json={"catalog_name": "main", "name": "vision"}, auth=alice, timeout=10), 404, None, "catalog main does not exist")
    assert requests.put(perms, json={"resource": "catalog:main", "principal": alice[0], "level": "CAN_EDIT"}, auth=admin, timeout=10).status_code == 200
    vol = make_volume(srv, "main.vision.ckpt", auth=alice, catalog=False)
    url = srv.url + FS + vol + "/step_1/__0_x_0.distcp"
    assert requests.put(url, data=b"shard", auth=alice, timeout=10).status_code == 204

    assert_json_error(requests.get(url, timeout=10), 401, "UNAUTHENTICATED")
    r = requests.get(url, auth=bob, timeout=10)
    assert_json_error(r, 404, None, "volume main.vision.ckpt does not exist")
    assert_json_error(requests.get(srv.url + DIRS + vol, auth=bob, timeout=10), 404)
    assert requests.get(srv.url + UC + "/catalogs", auth=bob, timeout=10).json()["catalogs"] == []
    assert_json_error(requests.put(perms, json={"resource": "volume:main.vision.ckpt", "principal": bob[0], "level": "CAN_READ"}, auth=bob, timeout=10), 404)
    assert requests.put(perms, json={"resource": "volume:main.vision.ckpt", "principal": bob[0], "level": "CAN_READ"}, auth=alice, timeout=10).status_code == 200
    assert requests.get(url, auth=bob, timeout=10).content == b"shard"
    assert [c["name"] for c in requests.get(srv.url + UC + "/catalogs", auth=bob, timeout=10).json()["catalogs"]] == ["main"]
    assert_json_error(requests.put(url, data=b"evil", auth=bob, timeout=10), 403, "PERMISSION_DENIED", "CAN_EDIT")
    assert_json_error(requests.delete(url, auth=bob, timeout=10), 403)
    assert_json_error(requests.put(srv.url + DIRS + vol + "/d", auth=bob, timeout=10), 403)
    assert_json_error(requests.delete(srv.url + UC + "/volumes/main.vision.ckpt", auth=bob, timeout=10), 403, None, "CAN_MANAGE")
    # A group grant on the schema reaches its volumes.
    assert requests.post(srv.url + "/api/2.0/sextant/groups", json={"name": "vision"}, auth=admin, timeout=10).status_code == 200
    assert requests.post(srv.url + "/api/2.0/sextant/groups/members", json={"group": "vision", "email": carol[0]}, auth=admin, timeout=10).status_code == 200
    assert requests.put(perms, json={"resource": "schema:main.vision", "principal": "group:vision", "level": "CAN_EDIT"}, auth=alice, timeout=10).status_code == 200
    assert requests.put(srv.url + FS + vol + "/carol.txt", data=b"c", auth=carol, timeout=10).status_code == 204
    # Tokens work as passwords do; the CLI uses them.
    tok = requests.post(srv.url + "/api/2.0/sextant/tokens", json={"name": "ci"}, auth=bob, timeout=10).json()["token"]["token"]
    r = requests.get(url, headers={"Authorization": "Bearer " + tok}, timeout=10)
    assert r.status_code == 200
    # The Python client finds the server and credentials as mlflow does.
    sys.path.insert(0, str(REPO_ROOT / "python"))
    from sextant.client import Client, PermissionDenied

    for creds in ({"MLFLOW_TRACKING_TOKEN": tok}, {"MLFLOW_TRACKING_USERNAME": bob[0], "MLFLOW_TRACKING_PASSWORD": bob[1]}):
        saved = {k: os.environ.pop(k, None) for k in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
        try:
            os.environ.update(creds, MLFLOW_TRACKING_URI=srv.url)
            c = Client()
            assert c.read(vol + "/step_1/__0_x_0.distcp") == b"shard"
            with pytest.raises(PermissionDenied, match="CAN_EDIT"):
                c.upload_bytes(vol + "/x", b"x")
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
    with pytest.raises(PermissionDenied, match="UNAUTHENTICATED"):
        Client(srv.url, token="", username="", password="").read(vol + "/step_1/__0_x_0.distcp")
    env = dict(os.environ, MLFLOW_TRACKING_URI=srv.url, MLFLOW_TRACKING_TOKEN=tok)
    env.pop("MLFLOW_TRACKING_USERNAME", None)
    env.pop("MLFLOW_TRACKING_PASSWORD", None)
    out = subprocess.run([sextant_bin, "volumes", "cp", "-r", vol, str(tmp_path / "copy")], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "copy" / "step_1" / "__0_x_0.distcp").read_bytes() == b"shard"
    out = subprocess.run([sextant_bin, "volumes", "rm", vol + "/carol.txt"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "CAN_EDIT" in out.stderr, out.stderr
    # Deleting the volume (its owner) takes its files and grants along.
    assert requests.delete(srv.url + UC + "/volumes/main.vision.ckpt", auth=alice, timeout=10).status_code == 200
    make_volume(srv, "main.vision.ckpt", auth=alice, catalog=False)
    assert_json_error(requests.get(srv.url + DIRS + vol, auth=bob, timeout=10), 404)
    assert listing(srv, vol, auth=carol) == []  # the schema grant still reaches the new volume


# ---------------------------------------------------------------- the Databricks SDK


def test_databricks_sdk_files(start_server, caplog):
    """The stock Databricks SDK for Python (WorkspaceClient().files) against a
    multi-user server with a personal access token: directories, a small file
    (one PUT) and a 60 MiB one (the multipart flow this host announces at
    /api/2.0/fs/endpoints: parts in parallel, then complete), metadata,
    listings, downloads, and the errors it maps to its own exception
    classes."""
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.core import Config
    from databricks.sdk.errors import AlreadyExists, NotFound, PermissionDenied, Unauthenticated

    srv = start_server(auth="on", admin_email=ADMIN)
    admin = (ADMIN, admin_password(srv))
    vol = make_volume(srv, "main.sdk.files", auth=admin)
    tok = requests.post(srv.url + "/api/2.0/sextant/tokens", json={"name": "sdk"}, auth=admin, timeout=10).json()["token"]["token"]
    with caplog.at_level(logging.WARNING, logger="databricks.sdk"):
        w = WorkspaceClient(config=Config(host=srv.url, token=tok, auth_type="pat"))
    # Its host-metadata probe finds an answer: no warning on every start.
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("databricks")], caplog.text

    # Unity Catalog through the SDK: read and update the volume.
    assert w.volumes.read("main.sdk.files").volume_type.value == "MANAGED"
    assert w.volumes.update("main.sdk.files", comment="sdk files").comment == "sdk files"
    assert w.volumes.read("main.sdk.files").comment == "sdk files"

    w.files.create_directory(vol + "/run1/ckpt")
    w.files.get_directory_metadata(vol + "/run1/ckpt")
    small = b"hello from the sdk\n"
    big = os.urandom(60 << 20)
    w.files.upload(vol + "/run1/small.txt", io.BytesIO(small), overwrite=True)
    with caplog.at_level(logging.DEBUG, logger="databricks.sdk"):
        w.files.upload(vol + "/run1/ckpt/model.bin", io.BytesIO(big), overwrite=True)
        assert w.files.download(vol + "/run1/small.txt").contents.read() == small
        got = w.files.download(vol + "/run1/ckpt/model.bin").contents.read()
    parts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Uploading part")]
    assert len(parts) == 6, parts  # 10 MiB parts
    assert "initiate-upload" in caplog.text and "complete-upload" in caplog.text
    # Discovery sends downloads to the Files API directly, not to presigned URLs first.
    assert "create-download-url" not in caplog.text and "GET /api/2.0/fs/files" + vol in caplog.text
    caplog.clear()
    assert hashlib.sha256(got).digest() == hashlib.sha256(big).digest()
    meta = w.files.get_metadata(vol + "/run1/ckpt/model.bin")
    assert meta.content_length == len(big), meta
    entries = {(e.name, e.is_directory) for e in w.files.list_directory_contents(vol + "/run1")}
    assert entries == {("small.txt", False), ("ckpt", True)}, entries

    with pytest.raises(AlreadyExists):
        w.files.upload(vol + "/run1/small.txt", io.BytesIO(b"other"), overwrite=False)
    assert w.files.download(vol + "/run1/small.txt").contents.read() == small
    with pytest.raises(NotFound):
        w.files.get_metadata(vol + "/run1/missing.bin")
    with pytest.raises(NotFound):
        w.files.download(vol + "/nope/missing.bin").contents.read()
    w.files.delete(vol + "/run1/ckpt/model.bin")
    with pytest.raises(NotFound):
        w.files.get_metadata(vol + "/run1/ckpt/model.bin")
    w.files.delete_directory(vol + "/run1/ckpt")
    assert [e.name for e in w.files.list_directory_contents(vol + "/run1")] == ["small.txt"]

    # Credentials: a wrong token, and a user without a grant on the volume.
    bad = WorkspaceClient(config=Config(host=srv.url, token="dapi-not-a-token", auth_type="pat"))
    with pytest.raises(Unauthenticated):
        bad.files.get_metadata(vol + "/run1/small.txt")
    assert requests.post(srv.url + "/api/2.0/sextant/users", json={"email": "eve@example.com", "password": "eve-password-1"},
                         auth=admin, timeout=10).status_code == 200
    eve_tok = requests.post(srv.url + "/api/2.0/sextant/tokens", json={"name": "sdk"}, auth=("eve@example.com", "eve-password-1"),
                            timeout=10).json()["token"]["token"]
    eve = WorkspaceClient(config=Config(host=srv.url, token=eve_tok, auth_type="pat"))
    # A volume eve may not read answers as a missing one (docs/auth.md, Enumeration).
    with pytest.raises(NotFound):
        eve.files.download(vol + "/run1/small.txt").contents.read()
    with pytest.raises(NotFound):
        eve.files.upload(vol + "/run1/eve.txt", io.BytesIO(b"x"), overwrite=True)
