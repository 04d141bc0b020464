"""Metric history: large histories, dedupe of retried batches, raw paging, bulk-interval sampling."""

from __future__ import annotations

import math
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from mlflow.entities import Metric

BASE_TS = 1_700_000_000_000


def _key(p):
    """Total order on (step, timestamp, value) points that tolerates NaN."""
    step, ts, v = p
    return (step, ts, (1, 0.0) if math.isnan(v) else (0, v))


def _canon(points):
    return sorted(points, key=_key)


def _same_points(a, b):
    """Compare point lists exactly, NaN equal to NaN."""
    def norm(p):
        return (p[0], p[1], "NaN" if math.isnan(p[2]) else p[2])
    return [norm(p) for p in _canon(a)] == [norm(p) for p in _canon(b)]


def _new_run(client, name):
    exp_id = client.create_experiment(name)
    return client.create_run(exp_id).info.run_id


def raw_history_pages(server, run_id, key, max_results, **params):
    """Follow get-history page tokens over raw HTTP; returns (points, pages)."""
    points, pages, token = [], [], None
    for _ in range(100_000):
        q = {"run_id": run_id, "metric_key": key, "max_results": max_results, **params}
        if token:
            q["page_token"] = token
        r = requests.get(server.api("/mlflow/metrics/get-history"), params=q, timeout=60)
        assert r.status_code == 200, r.text[:500]
        body = r.json()
        page = body.get("metrics", [])
        assert len(page) <= max_results, f"page of {len(page)} > max_results {max_results}"
        for m in page:
            assert m["key"] == key
            v = m["value"]
            points.append((int(m["step"]), int(m["timestamp"]), float(v)))
        pages.append(len(page))
        token = body.get("next_page_token")
        if not token:
            return points, pages
    pytest.fail("get-history paging did not terminate")


def test_history_of_100k_points(client, server):
    run_id = _new_run(client, "/Shared/metrics/100k")
    rng = random.Random(1234)
    n = 100_000
    expected = [(i, BASE_TS + 3 * i + (i % 7), rng.uniform(-1e3, 1e3)) for i in range(n)]
    chunks = [expected[k:k + 1000] for k in range(0, n, 1000)]
    rng.shuffle(chunks)  # out-of-order arrival

    def send(chunk):
        client.log_batch(run_id, metrics=[Metric("loss", v, ts, s) for (s, ts, v) in chunk])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send, chunks))

    hist = client.get_metric_history(run_id, "loss")
    assert len(hist) == n
    got = [(m.step, m.timestamp, m.value) for m in hist]
    assert all(m.key == "loss" for m in hist)
    assert _canon(got) == expected
    # The latest value is the point at the highest step.
    assert client.get_run(run_id).data.metrics["loss"] == expected[-1][2]

    # The client paged: a raw request of the client's page size says there is more.
    r = requests.get(server.api("/mlflow/metrics/get-history"),
                     params={"run_id": run_id, "metric_key": "loss", "max_results": 25000}, timeout=60)
    assert r.status_code == 200
    body = r.json()
    assert len(body["metrics"]) == 25000 and body.get("next_page_token"), \
        "get-history ignored max_results=25000 (the client's page size)"


def test_retried_batch_is_stored_once(client, server):
    run_id = _new_run(client, "/Shared/metrics/dedupe")
    metrics = [{"key": "m", "value": i * 0.5, "timestamp": BASE_TS + i, "step": i} for i in range(50)]
    metrics += [{"key": "m", "value": 0.0, "timestamp": BASE_TS, "step": 0}]  # exact repeat inside the batch
    body = {"run_id": run_id, "metrics": metrics, "params": [{"key": "p", "value": "1"}],
            "tags": [{"key": "t", "value": "1"}]}
    for _ in range(2):  # a client retry after a lost response
        r = requests.post(server.api("/mlflow/runs/log-batch"), json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json() == {}
    # Same step and timestamp but another value is a different point.
    client.log_metric(run_id, "m", 99.0, timestamp=BASE_TS + 3, step=3)
    client.log_metric(run_id, "m", 99.0, timestamp=BASE_TS + 3, step=3)  # and it dedupes too
    got = [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, "m")]
    expected = [(i, BASE_TS + i, i * 0.5) for i in range(50)] + [(3, BASE_TS + 3, 99.0)]
    assert len(got) == len(expected), f"{len(got)} points stored, expected {len(expected)}"
    assert _canon(got) == _canon(expected)
    r = client.get_run(run_id)
    assert r.data.params == {"p": "1"} and r.data.tags["t"] == "1"


def test_raw_get_history_paging(client, server):
    run_id = _new_run(client, "/Shared/metrics/raw-paging")
    rng = random.Random(5)
    pts = [(s, BASE_TS + rng.randrange(1000), rng.random()) for s in range(200)]
    # Many points at one step with one timestamp, so a page boundary falls among ties,
    # plus several timestamps per step.
    pts += [(100, BASE_TS + 5, float(v)) for v in range(15)]
    pts += [(150, BASE_TS + t, 1.0) for t in range(12)]
    pts = list(dict.fromkeys(pts))
    shuffled = pts[:]
    rng.shuffle(shuffled)
    client.log_batch(run_id, metrics=[Metric("p", v, ts, s) for (s, ts, v) in shuffled])

    for page_size in (10, 7, 1000):
        got, pages = raw_history_pages(server, run_id, "p", page_size)
        assert len(got) == len(set(got)), f"duplicate points across pages (max_results={page_size})"
        assert _canon(got) == _canon(pts), f"max_results={page_size}: pages do not add up to the history"
        expected_pages = -(-len(pts) // page_size)
        assert len(pages) in (expected_pages, expected_pages + 1), (page_size, pages)
        assert all(p == page_size for p in pages[:expected_pages - 1]), pages

    # Page size 1 over ties, NaN and infinities at one step.
    special = [(7, BASE_TS, v) for v in (1.0, 2.0, float("nan"), float("inf"), float("-inf"), -1.0, 0.0)]
    special += [(7, BASE_TS + 1, float("nan")), (7, BASE_TS - 1, float("nan")), (6, BASE_TS, float("nan"))]
    client.log_batch(run_id, metrics=[Metric("s", v, ts, st) for (st, ts, v) in special])
    got, pages = raw_history_pages(server, run_id, "s", 1)
    assert len(got) == len(special), f"{len(got)} points paged one by one, expected {len(special)}: {got}"
    assert _same_points(got, special)

    # The client's own paging agrees.
    via_client = [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, "s")]
    assert _same_points(via_client, special)


def _bulk_interval(server, run_ids, key, **params):
    q = [("run_ids", r) for r in run_ids] + [("metric_key", key)] + list(params.items())
    r = requests.get(server.url + "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval", params=q, timeout=60)
    assert r.status_code == 200, r.text[:500]
    per_run = {rid: [] for rid in run_ids}
    for m in r.json().get("metrics", []):
        assert m["key"] == key
        per_run[m["run_id"]].append((int(m["step"]), int(m["timestamp"]), float(m["value"])))
    return per_run


@pytest.fixture(scope="module")
def two_runs(server):
    """Run A: steps 0..999. Run B: even steps 500..2498. Same key 'm'."""
    from mlflow import MlflowClient

    c = MlflowClient(server.url)
    exp_id = c.create_experiment("/Shared/metrics/bulk-interval")
    a = c.create_run(exp_id).info.run_id
    b = c.create_run(exp_id).info.run_id
    pa = [(s, BASE_TS + s, math.sin(s / 50.0)) for s in range(1000)]
    pb = [(s, BASE_TS + 10 * s, math.cos(s / 70.0)) for s in range(500, 2500, 2)]
    for run, pts in ((a, pa), (b, pb)):
        for k in range(0, len(pts), 1000):
            c.log_batch(run, metrics=[Metric("m", v, ts, s) for (s, ts, v) in pts[k:k + 1000]])
    return {a: pa, b: pb}


def test_bulk_interval_sampling(server, two_runs):
    ids = list(two_runs)
    out = _bulk_interval(server, ids, "m", max_results=50)
    union_all = sorted({p[0] for pts in two_runs.values() for p in pts})
    chosen = sorted({p[0] for pts in out.values() for p in pts})
    for rid, pts in out.items():
        logged = two_runs[rid]
        steps = [p[0] for p in pts]
        assert len(pts) <= 50 + 2 * len(ids), f"{len(pts)} points for one run with max_results=50"
        assert len(pts) >= 10, f"only {len(pts)} points for run {rid}"
        assert steps == sorted(steps), "points not in step order"
        assert logged[0][0] in steps and logged[-1][0] in steps, "run's first or last step missing"
        assert set(pts) <= set(logged), "returned points that were never logged"
        # Every logged point at a chosen step is returned for each run.
        logged_steps = {p[0] for p in logged}
        assert {s for s in chosen if s in logged_steps} == set(steps)
    # Evenly spread over the union of steps: no big holes.
    assert len(chosen) <= 50 + 2 * len(ids)
    idx = [union_all.index(s) for s in chosen]
    gaps = [b - a for a, b in zip(idx, idx[1:])]
    assert max(gaps) <= 2 * len(union_all) / 50, f"uneven sampling, largest gap {max(gaps)} union steps"
    assert chosen[0] == union_all[0] and chosen[-1] == union_all[-1]


def test_bulk_interval_with_step_range(server, two_runs):
    ids = list(two_runs)
    out = _bulk_interval(server, ids, "m", max_results=50, start_step=600, end_step=800)
    for rid, pts in out.items():
        steps = [p[0] for p in pts]
        in_range = [p for p in two_runs[rid] if 600 <= p[0] <= 800]
        assert steps, "nothing returned in range"
        assert all(600 <= s <= 800 for s in steps), steps
        assert len(pts) <= 50 + 2 * len(ids)
        assert in_range[0][0] in steps and in_range[-1][0] in steps
        assert set(pts) <= set(in_range)
    # A range holding fewer steps than max_results returns every point in it.
    out = _bulk_interval(server, ids, "m", max_results=50, start_step=990, end_step=1004)
    for rid, pts in out.items():
        assert _canon(pts) == [p for p in two_runs[rid] if 990 <= p[0] <= 1004]


def test_bulk_interval_minmax_keeps_spike(client, server):
    run_id = _new_run(client, "/Shared/metrics/spike")
    n = 10_000
    pts = [(s, BASE_TS + s, 1.0 + 0.01 * math.sin(s)) for s in range(n)]
    spike, dip = (4321, BASE_TS + 4321, 1e6), (7777, BASE_TS + 7777, -1e6)
    pts[4321], pts[7777] = spike, dip
    for k in range(0, n, 1000):
        client.log_batch(run_id, metrics=[Metric("noisy", v, ts, s) for (s, ts, v) in pts[k:k + 1000]])

    mm = _bulk_interval(server, [run_id], "noisy", max_results=20, sampling="minmax")[run_id]
    assert spike in mm, f"minmax sampling lost the spike: {mm}"
    assert dip in mm, f"minmax sampling lost the dip: {mm}"
    assert len(mm) <= 20 + 2, f"{len(mm)} points for max_results=20"
    assert set(mm) <= set(pts)
    plain = _bulk_interval(server, [run_id], "noisy", max_results=20)[run_id]
    assert len(plain) <= 20 + 2
    assert pts[0] in plain and pts[-1] in plain
    print(f"plain sampling of 20 points {'kept' if spike in plain else 'missed'} the spike")


def test_concurrent_identical_batches_are_stored_once(client, server):
    """Several clients replaying the same batches at once (retries landing in
    the same group commit) store each point once."""
    run_id = _new_run(client, "/Shared/metrics/concurrent-dupes")
    batches = [[{"key": "c", "value": b + j / 100.0, "timestamp": BASE_TS + b * 100 + j, "step": b * 100 + j}
                for j in range(100)] for b in range(20)]

    def send(b):
        r = requests.post(server.api("/mlflow/runs/log-batch"), json={"run_id": run_id, "metrics": batches[b]},
                          timeout=60)
        assert r.status_code == 200, r.text
        return r.status_code

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, [b for b in range(20) for _ in range(4)]))
    got = [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, "c")]
    expected = [(m["step"], m["timestamp"], m["value"]) for b in batches for m in b]
    assert len(got) == len(expected), f"{len(got)} points stored for {len(expected)} distinct points"
    assert _canon(got) == _canon(expected)
