"""Two replicas of `sextant server` on one PostgreSQL database and one MinIO
bucket prefix, behind a small round-robin proxy: what is written through
one is read at once through the other, the mlflow client works through the
proxy (multipart uploads whose parts land on different replicas included),
and a replica killed while clients ingest loses no acknowledged point.

Run in the PostgreSQL + S3 session (SEXTANT_E2E_DB=postgres
SEXTANT_E2E_BLOB_STORE=s3); scripts/test.sh does."""

from __future__ import annotations

import hashlib
import http.client
import itertools
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import mlflow
import pytest
import requests

from sextant_e2e import SextantServer, artifacts_url, artifact_key, assert_healthy, report_measurement
from test_volumes import FS, SlowUpload, make_volume

pytestmark = pytest.mark.replicas


class RoundRobinProxy:
    """An HTTP proxy that sends each request to the next upstream in turn."""

    def __init__(self, upstreams: list[str]):
        self.upstreams = [urlsplit(u) for u in upstreams]
        self.turn = itertools.count()
        self.lock = threading.Lock()
        self.served = [0] * len(upstreams)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                with proxy.lock:
                    i = next(proxy.turn) % len(proxy.upstreams)
                    proxy.served[i] += 1
                up = proxy.upstreams[i]
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "transfer-encoding")}
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except OSError as e:
                    msg = f"proxy: upstream {up.netloc}: {e}".encode()
                    self.send_response(502)
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "RoundRobinProxy":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def replicas(sextant_bin, tmp_path_factory, postgres_db, s3_blob_store):
    if postgres_db is None or s3_blob_store is None:
        pytest.fail("the replica tests share one PostgreSQL database and one bucket: run them with "
                    "SEXTANT_E2E_DB=postgres SEXTANT_E2E_BLOB_STORE=s3 (scripts/test.sh does), or deselect -m 'not replicas'")
    d = tmp_path_factory.mktemp("replicas")
    shared = "replicas_" + uuid.uuid4().hex[:8]
    a = SextantServer(sextant_bin, d / "a", d / "a.log", shared=shared).start()
    b = SextantServer(sextant_bin, d / "b", d / "b.log", shared=shared).start()
    proxy = RoundRobinProxy([a.url, b.url]).start()
    yield a, b, proxy
    proxy.stop()
    for srv in (a, b):
        srv.stop_and_check()


def api(srv, method: str, path: str, **kw):
    r = requests.request(method, f"{srv.url}/api/2.0/mlflow{path}", timeout=30, **kw)
    assert r.status_code == 200, (srv.url, path, r.status_code, r.text)
    return r.json()


def test_written_through_one_is_read_through_the_other(replicas):
    a, b, _ = replicas
    name = f"/Shared/replicas/{uuid.uuid4().hex[:8]}"
    exp = api(a, "POST", "/experiments/create", json={"name": name})["experiment_id"]
    assert api(b, "GET", "/experiments/get-by-name", params={"experiment_name": name})["experiment"]["experiment_id"] == exp
    run = api(b, "POST", "/runs/create", json={"experiment_id": exp, "run_name": "r", "start_time": 1})["run"]["info"]["run_id"]
    for step in range(20):
        src = (a, b)[step % 2]
        api(src, "POST", "/runs/log-batch", json={"run_id": run, "metrics": [{"key": "loss", "value": 1 / (step + 1), "timestamp": 100 + step, "step": step}],
                                                 "params": [{"key": f"p{step}", "value": str(step)}]})
        # Immediately visible through the other replica.
        other = (b, a)[step % 2]
        got = api(other, "GET", "/runs/get", params={"run_id": run})["run"]["data"]
        assert {"key": "loss", "value": 1 / (step + 1), "timestamp": 100 + step, "step": step} in got["metrics"], (step, got["metrics"])
        assert {"key": f"p{step}", "value": str(step)} in got["params"]
    hist = api(a, "GET", "/metrics/get-history", params={"run_id": run, "metric_key": "loss"})["metrics"]
    assert [m["step"] for m in hist] == list(range(20))
    found = api(b, "POST", "/runs/search", json={"experiment_ids": [exp], "filter": "metrics.loss < 0.1"})["runs"]
    assert [r["info"]["run_id"] for r in found] == [run]
    api(a, "POST", "/runs/update", json={"run_id": run, "status": "FINISHED", "end_time": 2})
    assert api(b, "GET", "/runs/get", params={"run_id": run})["run"]["info"]["status"] == "FINISHED"
    # A param is immutable whichever replica is asked to change it.
    r = requests.post(f"{b.url}/api/2.0/mlflow/runs/log-parameter", json={"run_id": run, "key": "p0", "value": "other"}, timeout=30)
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_PARAMETER_VALUE", r.text


def test_log_tail_and_gpu_pane_read_the_shared_store(replicas):
    """A tail waiting on one replica gets lines appended through the other,
    and GPU samples posted to one are the pane's latest on the other."""
    a, b, _ = replicas
    exp = api(a, "POST", "/experiments/create", json={"name": f"/Shared/replicas/logs-{uuid.uuid4().hex[:8]}"})["experiment_id"]
    run = api(a, "POST", "/runs/create", json={"experiment_id": exp, "start_time": 1})["run"]["info"]["run_id"]
    got = {}

    def tail():
        t0 = time.monotonic()
        r = requests.get(f"{a.url}/api/2.0/sextant/logs/tail", params={"run_id": run, "after_line": 0, "wait_ms": 20000}, timeout=60)
        got["status"], got["body"], got["waited"] = r.status_code, r.json(), time.monotonic() - t0

    th = threading.Thread(target=tail)
    th.start()
    time.sleep(1.0)  # the tail on a is waiting now
    r = requests.post(f"{b.url}/api/2.0/sextant/logs/append", timeout=30, json={
        "run_id": run, "source": "test", "first_seq": 0,
        "lines": [{"timestamp": 1, "stream": "stdout", "text": "hello from b"}]})
    assert r.status_code == 200, r.text
    th.join(30)
    assert not th.is_alive()
    assert got["status"] == 200, got
    assert [l["text"] for l in got["body"]["lines"]] == ["hello from b"]
    # Woken by a's poll of the shared store, well before wait_ms.
    assert got["waited"] < 10, got["waited"]

    node = f"node-{uuid.uuid4().hex[:6]}"
    now = int(time.time() * 1000)
    r = requests.post(f"{b.url}/api/2.0/sextant/gpu/samples", timeout=30, json={
        "node": node, "run_id": run, "samples": [{"ts_ms": now, "gpus": [{"index": 0, "util": 87, "mem_used": 1024, "mem_total": 4096, "temp": 61}]}]})
    assert r.status_code == 200, r.text
    r = requests.get(f"{a.url}/api/2.0/sextant/gpu/latest", params={"node": node}, timeout=30)
    assert r.status_code == 200, r.text
    nodes = r.json()["nodes"]
    assert [(n["node"], n["run_id"], n["gpus"][0]["util"]) for n in nodes] == [(node, run, 87)], nodes


def test_checkpoint_guards_hold_across_replicas(replicas):
    """A shard uploading through one replica holds back the checkpoint's
    .metadata sent to the other, and overwrite=false is exclusive across
    both: uploads in flight are claimed in the shared database."""
    a, b, _ = replicas
    vol = make_volume(a, f"rep{uuid.uuid4().hex[:6]}.team.ckpt")
    shard = SlowUpload(a, FS + vol + "/step_1/__0_0.distcp", os.urandom(1 << 20))
    r = requests.put(b.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10)
    assert r.status_code == 409 and r.json()["error_code"] == "RESOURCE_CONFLICT" and "__0_0.distcp" in r.json()["message"], r.text
    assert requests.head(b.url + FS + vol + "/step_1/.metadata", timeout=10).status_code == 404
    assert shard.finish()[0] == 204
    assert requests.put(b.url + FS + vol + "/step_1/.metadata", data=b"meta", timeout=10).status_code == 204

    first = SlowUpload(b, FS + vol + "/lock?overwrite=false", b"first" * 1000)
    r = requests.put(a.url + FS + vol + "/lock?overwrite=false", data=b"second", timeout=10)
    assert r.status_code == 409 and r.json()["error_code"] == "ALREADY_EXISTS", r.text
    assert first.finish()[0] == 204
    assert requests.get(a.url + FS + vol + "/lock", timeout=10).content == b"first" * 1000


# How long after a replica's death its upload claims may still hold back a
# .metadata: its liveness lease (15 s, renewed every 5 s) runs out at most
# 15 s after the kill, and a survivor releases the claims of a replica whose
# lease ran out at its next renewal, at most 5 s later: 20 s. The other 10 s
# are for a loaded 2-core machine (renewals that tick late, slow
# transactions on PostgreSQL). The test's clock starts after the kill and
# the re-upload of shard 0, so the 20 s hold from there too.
CLAIMS_RELEASED_S = 30.0


def test_killed_replica_releases_its_upload_claims(sextant_bin, tmp_path, postgres_db, s3_blob_store):
    """Replica a is killed with two shard uploads in flight. A replica
    started while a was alive kept a's claims (the .metadata waited); after
    the kill, shard 0 uploaded again through b supersedes a's attempt at
    once, and a's claim on shard 1 goes when a's liveness lease expires
    (InstanceTTL, 15 s, renewed every 5 s) and a survivor's next renewal
    (every 5 s) sees it: the .metadata lands through b within 20 s of the
    kill (CLAIMS_RELEASED_S allows 30), not after the claims' two minutes."""
    if postgres_db is None or s3_blob_store is None:
        pytest.fail("needs SEXTANT_E2E_DB=postgres SEXTANT_E2E_BLOB_STORE=s3")
    shared = "claims_" + uuid.uuid4().hex[:8]
    a = SextantServer(sextant_bin, tmp_path / "a", tmp_path / "a.log", shared=shared).start()
    b = SextantServer(sextant_bin, tmp_path / "b", tmp_path / "b.log", shared=shared).start()
    c = None
    try:
        vol = make_volume(a, f"kill{uuid.uuid4().hex[:6]}.team.ckpt")
        meta = FS + vol + "/step_1/.metadata"
        shards = [os.urandom(1 << 20) for _ in range(2)]
        uploads = [SlowUpload(a, FS + vol + f"/step_1/__{i}_0.distcp", shards[i]) for i in range(2)]
        c = SextantServer(sextant_bin, tmp_path / "c", tmp_path / "c.log", shared=shared).start()
        r = requests.put(c.url + meta, data=b"meta", timeout=10)
        assert r.status_code == 409 and "__0_0.distcp" in r.text and "__1_0.distcp" in r.text, r.text
        a.kill()
        for u in uploads:
            u.cut()
        r = requests.put(b.url + FS + vol + "/step_1/__0_0.distcp", data=shards[0], timeout=30)
        assert r.status_code == 204, r.text
        t0 = time.monotonic()
        while True:
            r = requests.put(b.url + meta, data=b"meta", timeout=10)
            if r.status_code == 204:
                break
            assert r.status_code == 409 and "__1_0.distcp" in r.text, r.text
            assert "__0_0.distcp" not in r.text, "a landed retry did not release the killed replica's claim: " + r.text
            assert time.monotonic() - t0 < CLAIMS_RELEASED_S, "the killed replica's claims were not released: " + r.text
            time.sleep(0.5)
        report_measurement("replica_claims_released", {"after_kill_s": round(time.monotonic() - t0, 2)})
        assert requests.head(c.url + meta, timeout=10).status_code == 200
    finally:
        for srv in (a, b, c):
            if srv is not None:
                srv.stop_and_check()


def test_mlflow_client_through_the_proxy(replicas, use_server, tmp_path, monkeypatch):
    a, b, proxy = replicas

    class Via:  # use_server takes anything with a url
        url = proxy.url

    client = use_server(Via)
    monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "true")
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(5 << 20))
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_CHUNK_SIZE", str(5 << 20))
    big = os.urandom(17 << 20)  # four parts, spread over both replicas
    (tmp_path / "big.bin").write_bytes(big)
    (tmp_path / "small.txt").write_text("hello\n")
    before = list(proxy.served)

    mlflow.set_experiment(f"/Shared/replicas/client-{uuid.uuid4().hex[:8]}")
    with mlflow.start_run() as run:
        mlflow.log_params({"lr": "0.1", "layers": "4"})
        for step in range(50):
            mlflow.log_metric("loss", 1 / (step + 1), step=step)
        mlflow.set_tag("where", "proxy")
        mlflow.log_artifact(str(tmp_path / "small.txt"))
        mlflow.log_artifact(str(tmp_path / "big.bin"), artifact_path="weights")
    rid = run.info.run_id
    served = [n - m for n, m in zip(proxy.served, before)]
    assert min(served) > 20, f"the proxy did not spread the requests: {served}"

    views = [mlflow.MlflowClient(s.url).get_run(rid) for s in (a, b)]
    for v in views:
        assert v.info.status == "FINISHED"
        assert v.data.params == {"lr": "0.1", "layers": "4"}
        assert v.data.tags["where"] == "proxy"
        assert v.data.metrics["loss"] == 1 / 50
    for s in (a, b):
        hist = mlflow.MlflowClient(s.url).get_metric_history(rid, "loss")
        assert [m.step for m in sorted(hist, key=lambda m: m.step)] == list(range(50))
        key = artifact_key(views[0].info.artifact_uri)
        got = requests.get(artifacts_url(s, f"{key}/weights/big.bin"), timeout=120)
        assert got.status_code == 200 and hashlib.sha256(got.content).digest() == hashlib.sha256(big).digest()
        got = requests.get(artifacts_url(s, f"{key}/small.txt"), timeout=30)
        assert got.content == b"hello\n"


def test_killed_replica_loses_no_acknowledged_point(sextant_bin, tmp_path, postgres_db, s3_blob_store):
    if postgres_db is None or s3_blob_store is None:
        pytest.fail("needs SEXTANT_E2E_DB=postgres SEXTANT_E2E_BLOB_STORE=s3")
    shared = "kill_" + uuid.uuid4().hex[:8]
    a = SextantServer(sextant_bin, tmp_path / "a", tmp_path / "a.log", shared=shared).start()
    b = SextantServer(sextant_bin, tmp_path / "b", tmp_path / "b.log", shared=shared).start()
    try:
        exp = api(b, "POST", "/experiments/create", json={"name": f"/Shared/kill-{shared}"})["experiment_id"]
        runs = [api(b, "POST", "/runs/create", json={"experiment_id": exp, "start_time": 1})["run"]["info"]["run_id"] for _ in range(4)]
        acked: dict[str, list[int]] = {r: [] for r in runs}
        stop = threading.Event()
        errors: list[str] = []

        def worker(run_id: str):
            step = 0
            session = requests.Session()
            for i in itertools.count():
                if stop.is_set():
                    return
                srv = (a, b)[i % 2]
                batch = [{"key": "m", "value": float(s), "timestamp": 1000 + s, "step": s} for s in range(step, step + 50)]
                try:
                    r = session.post(f"{srv.url}/api/2.0/mlflow/runs/log-batch", json={"run_id": run_id, "metrics": batch}, timeout=10)
                except requests.RequestException:
                    continue  # not acknowledged: the client would retry
                if r.status_code == 200:
                    acked[run_id].extend(range(step, step + 50))
                    step += 50
                elif r.status_code < 500:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                    return

        threads = [threading.Thread(target=worker, args=(r,)) for r in runs]
        for t in threads:
            t.start()
        # Kill a once enough went through to mean something (the check at
        # the end), however slow the machine, not after a fixed 1.5 s.
        deadline = time.monotonic() + 120
        while sum(len(steps) for steps in acked.values()) <= 400 and not errors:
            assert time.monotonic() < deadline, f"only {sum(len(s) for s in acked.values())} points acknowledged in 2 minutes"
            time.sleep(0.05)
        a.kill()
        # Writes go on through b: wait for more of them to be acknowledged
        # rather than for a fixed time.
        killed_at = sum(len(steps) for steps in acked.values())
        deadline = time.monotonic() + 120
        while sum(len(steps) for steps in acked.values()) < killed_at + 200 and not errors:
            assert time.monotonic() < deadline, "no writes acknowledged through b after a was killed"
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert not errors, errors
        assert_healthy(b)
        total = 0
        for run_id, steps in acked.items():
            hist = api(b, "GET", "/metrics/get-history", params={"run_id": run_id, "metric_key": "m", "max_results": 100000})["metrics"]
            stored = sorted(m["step"] for m in hist)
            missing = sorted(set(steps) - set(stored))
            assert not missing, f"run {run_id}: {len(missing)} acknowledged points lost, e.g. {missing[:5]}"
            assert stored == sorted(set(stored)), "duplicated points"
            total += len(steps)
        assert total > 400, f"too little was ingested to mean anything: {total} points"
    finally:
        for srv in (a, b):
            srv.stop_and_check()
