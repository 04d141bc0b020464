"""A hostile network and hostile web pages against a real server (issue 41,
items 1 and 2): slow bodies from many connections leave the server's memory
bounded and are closed; one address cannot take every connection; a page of
another site cannot write, nor reach the server through a rebinding DNS
name; JSON routes take only JSON; a browser's navigation gets no Basic
dialog; no answer may be framed. The mlflow client works unchanged with
every defence on."""

from __future__ import annotations

import select
import socket
import time
import uuid

import requests

from sextant_e2e import RssSampler, admin_password, assert_json_error, raw_request, report_measurement

ADMIN = "admin@example.com"


def raw(srv, method: str, target: str, *, host: str | None = None, body: bytes = b"",
        headers: dict | None = None, source: str | None = None):
    """One request with the Host header given (default: the server's own
    address); returns (status, lower-case headers, body)."""
    return raw_request(srv, method, target, body, headers, host=host or f"127.0.0.1:{srv.port}", source=source)


def experiment_exists(srv, name: str) -> bool:
    r = requests.get(srv.api("/mlflow/experiments/get-by-name"), params={"experiment_name": name}, timeout=10)
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ------------------------------------------------------------------ bounded reads


def test_slow_bodies_are_closed_and_memory_stays_bounded(start_server):
    """300 connections to the public sign-in route, trickling a byte every
    0.3 s: those that declare a 10 MB body are answered 413 at once (the
    sign-in takes 4 KiB), those that declare 4,000 bytes 408 once
    --body-timeout passes without --body-min-bytes; all are closed, the
    server's memory grows by kilobytes per connection (not the megabyte a
    buffer sized from the declared length took), and an honest client is
    served meanwhile. Today's main keeps them all open and grows by about
    1 MiB each."""
    n = 300
    srv = start_server(auth="on", admin_email=ADMIN, body_timeout="2s", body_min_bytes=1024,
                       max_conns_per_client=0)
    pw = admin_password(srv)
    def head(length: int) -> bytes:
        return (f"POST /api/2.0/sextant/auth/login HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{").encode()
    base_kib = rss_kib(srv.proc.pid)
    socks: list[socket.socket] = []
    answers: dict[socket.socket, bytes] = {}
    closed: set[socket.socket] = set()
    trickled = 0
    with RssSampler(srv.proc.pid) as rss:
        rss.phase = "attack"
        try:
            for i in range(n):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(head(10_000_000 if i % 2 else 4000))
                s.setblocking(False)
                socks.append(s)
                answers[s] = b""
            start = time.monotonic()
            honest = requests.get(srv.api("/mlflow/experiments/search"), params={"max_results": 1},
                                  auth=(ADMIN, pw), timeout=30)
            assert honest.status_code == 200, honest.text
            next_byte = time.monotonic()
            # --body-timeout is 2 s; a generous bound for a busy machine.
            while len(closed) < n and time.monotonic() - start < 30:
                open_socks = [s for s in socks if s not in closed]
                readable, _, _ = select.select(open_socks, [], [], 0.1)
                for s in readable:
                    try:
                        chunk = s.recv(65536)
                    except (ConnectionResetError, BlockingIOError):
                        chunk = b""
                    if chunk:
                        answers[s] += chunk
                    else:
                        closed.add(s)
                if time.monotonic() >= next_byte:
                    next_byte += 0.3
                    for s in open_socks:
                        if s in closed:
                            continue
                        try:
                            s.send(b" ")
                            trickled += 1
                        except (BrokenPipeError, ConnectionResetError, BlockingIOError):
                            pass
            elapsed = time.monotonic() - start
        finally:
            for s in socks:
                s.close()
    grown_kib = rss.peak_kib() - base_kib
    got_408 = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 408"))
    got_413 = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 413"))
    report_measurement("hostile_slow_bodies", {
        "connections": n, "closed_by_server": len(closed), "answered_408": got_408, "answered_413": got_413,
        "bytes_trickled": trickled, "seconds_to_close_all": round(elapsed, 2),
        "rss_base_kib": base_kib, "rss_peak_kib": rss.peak_kib(), "rss_growth_kib": grown_kib})
    assert len(closed) == n, f"{n - len(closed)} of {n} slow connections still open after {elapsed:.1f}s"
    assert got_413 == n // 2, f"{got_413} of {n // 2} declared 10 MB sign-ins were answered 413"
    assert got_408 >= n // 2 * 0.9, f"only {got_408} of {n // 2} slow sign-ins were answered 408"
    sample = next(a for a in answers.values() if a.startswith(b"HTTP/1.1 408"))
    assert b"--body-timeout" in sample and b"application/json" in sample, sample[:600]
    # ~1 MiB per connection on today's main (300 MiB); a few KiB here.
    assert grown_kib < 64 * 1024, f"RSS grew by {grown_kib} KiB for {n} slow connections"
    assert requests.get(srv.url + "/health", timeout=10).status_code == 200


def test_connections_per_client_are_capped(start_server):
    """Past --conns-before-client-cap connections, one address gets no more
    than --max-conns-per-client: the rest are answered a JSON 429 at once,
    and a client at another address is still served."""
    # The idle connections must stay for the test's length: the default
    # 10 s for a request's headers closed them on a busy machine, and the
    # address was served again (200) where it should be refused.
    srv = start_server(max_conns_per_client=4, conns_before_client_cap=8, read_header_timeout="5m")
    socks = []
    try:
        for _ in range(20):
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        time.sleep(0.5)
        readable, _, _ = select.select(socks, [], [], 2)
        refused = []
        for s in readable:
            data = b""
            s.settimeout(5)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            refused.append(data)
        # 8 admitted, less the one the start's health check may still hold
        # (requests keeps it until its response object goes).
        assert len(refused) in (12, 13), f"{len(refused)} of 20 idle connections from one address refused, want 12 (8 admitted)"
        assert all(r.startswith(b"HTTP/1.1 429") and b"--max-conns-per-client" in r for r in refused), refused[0][:400]
        # The same address is refused while it holds its 8 ...
        status, hdrs, body = raw(srv, "GET", "/health")
        if status == 200 and len(refused) == 13:
            # The start's health check held a place during the 20 and let it
            # go since (when, depends on the machine): the address holds 7.
            # One more idle connection (accepted before the next request's,
            # in order) makes it 8 again, and then it must be refused.
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
            status, hdrs, body = raw(srv, "GET", "/health")
        assert status == 429 and hdrs["content-type"] == "application/json", (status, body)
        # ... another is not.
        status, _, body = raw(srv, "GET", "/health", source="127.0.0.2")
        assert status == 200, (status, body)
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 10
    while raw(srv, "GET", "/health")[0] != 200:
        assert time.monotonic() < deadline, "the address stayed refused after closing its connections"
        time.sleep(0.05)


# ------------------------------------------------------------------ host and origin


def test_cross_site_post_refused(server):
    """The default server (single-user, loopback): a page of another site
    cannot create an experiment, whatever type it gives the body; the
    server's own page can."""
    name = f"/Shared/evil-{uuid.uuid4().hex[:8]}"
    body = f'{{"name": "{name}"}}'.encode()
    for headers in ({"Origin": "http://evil.example"},
                    {"Origin": "http://evil.example", "Content-Type": "text/plain"},
                    {"Origin": "http://evil.example", "Content-Type": "application/json"},
                    {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example", "Content-Type": "application/json"}):
        status, hdrs, resp = raw(server, "POST", "/api/2.0/mlflow/experiments/create", body=body, headers=headers)
        assert status == 403 and b"cross-origin" in resp, (headers, status, resp)
    assert not experiment_exists(server, name)
    own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json",
           "X-Requested-With": "XMLHttpRequest"}
    status, _, resp = raw(server, "POST", "/ajax-api/2.0/mlflow/experiments/create", body=body, headers=own)
    assert status == 200, resp
    assert experiment_exists(server, name)


def test_rebinding_host_refused(server):
    """A request that reaches the loopback server under a DNS name of the
    attacker's is refused, with the flag to set named; loopback names and
    addresses are answered."""
    target = "/api/2.0/mlflow/experiments/search?max_results=1"
    status, hdrs, body = raw(server, "GET", target, host=f"rebind.evil.example:{server.port}")
    assert status == 403 and hdrs["content-type"] == "application/json", (status, body)
    assert b"--allowed-hosts rebind.evil.example" in body, body
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", f"[::1]:{server.port}"):
        status, _, body = raw(server, "GET", target, host=host)
        assert status == 200, (host, status, body)


def test_allowed_hosts_admits_configured_names(start_server):
    srv = start_server(allowed_hosts="mlflow.example.test,*.corp.example.test")
    target = "/api/2.0/mlflow/experiments/search?max_results=1"
    for host, want in ((f"mlflow.example.test:{srv.port}", 200), ("gpu.corp.example.test", 200),
                       ("corp.example.test", 403), (f"rebind.evil.example:{srv.port}", 403),
                       (f"localhost:{srv.port}", 200)):
        status, _, body = raw(srv, "GET", target, host=host)
        assert status == want, (host, status, body)


def test_json_routes_require_json(server):
    url = server.api("/mlflow/experiments/create")
    for ct in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        headers = {"Content-Type": ct} if ct else {}
        status, _, body = raw(server, "POST", "/api/2.0/mlflow/experiments/create", body=b'{"name": "/Shared/ct"}',
                              headers=headers)
        assert status == 400 and b"Content-Type must be application/json" in body, (ct, status, body)
    r = requests.post(url, data=b'{"name": "/Shared/ct-charset"}',
                      headers={"Content-Type": "application/json; charset=utf-8"}, timeout=10)
    assert r.status_code == 200, r.text


def test_no_basic_challenge_for_navigation_and_no_framing(start_server):
    srv = start_server(auth="on", admin_email=ADMIN)
    url = srv.api("/mlflow/experiments/search")
    r = requests.get(url, params={"max_results": 1}, timeout=10)
    assert_json_error(r, 401)
    assert r.headers.get("WWW-Authenticate", "").startswith("Basic"), r.headers  # the mlflow client's challenge
    for headers in ({"Sec-Fetch-Mode": "navigate", "Accept": "text/html,application/xhtml+xml"},
                    {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}):
        r = requests.get(url, params={"max_results": 1}, headers=headers, timeout=10)
        assert r.status_code == 401 and "WWW-Authenticate" not in r.headers, (headers, r.headers)
    for path in ("/", "/health", "/api/2.0/mlflow/experiments/search?max_results=1"):
        r = requests.get(srv.url + path, timeout=10)
        assert r.headers.get("X-Frame-Options") == "DENY", (path, r.status_code, r.headers)


def test_mlflow_client_works_with_defences_on(server, use_server, tmp_path):
    """The official client, through localhost and 127.0.0.1, with every
    defence at its default: JSON calls, a binary artifact upload and
    download, a search."""
    import mlflow

    use_server(server)
    for uri in (server.url, f"http://localhost:{server.port}"):
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(f"/Shared/defences-{uuid.uuid4().hex[:6]}")
        art = tmp_path / "model.bin"
        art.write_bytes(b"\x00\x01" * 50_000)
        with mlflow.start_run() as run:
            mlflow.log_param("lr", 0.1)
            for step in range(5):
                mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            mlflow.log_artifact(str(art))
            mlflow.set_tag("t", "v")
        c = mlflow.MlflowClient(uri)
        got = c.get_run(run.info.run_id)
        assert got.data.params == {"lr": "0.1"} and got.data.metrics["loss"] == 0.2
        assert [f.path for f in c.list_artifacts(run.info.run_id)] == ["model.bin"]
        local = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="model.bin", dst_path=str(tmp_path / uri[-5:]))
        assert open(local, "rb").read() == art.read_bytes()
        assert len(c.search_runs([run.info.experiment_id])) == 1
