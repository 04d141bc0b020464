"""runs/search over 2,600 runs: filters, ordering and pagination, checked against
a Python-side computation over the data that was logged."""

from __future__ import annotations

import functools
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, ViewType

SEXTANT_SERVER_FLAGS = {"sqlite_synchronous": "NORMAL"}
N_RUNS = 2600
PAGE = 100
LRS = ["0.1", "0.01", "0.001", "0.05"]
BASE_START = 1_690_000_000_000


@dataclass
class RunRec:
    run_id: str
    name: str
    start_time: int
    status: str
    team: str
    lr: str | None
    loss: float | None
    extra: dict = field(default_factory=dict)


_worker_clients: dict = {}


def _make_run(args):
    """Create one run of the data set (runs in a worker process or thread)."""
    url, exp_id, s = args
    client = _worker_clients.get(url)
    if client is None:
        client = _worker_clients[url] = MlflowClient(url)
    run = client.create_run(exp_id, start_time=s["start_time"], tags={"team": s["team"]}, run_name=s["name"])
    rid = run.info.run_id
    metrics = [] if s["loss"] is None else [Metric("loss", s["loss"], s["start_time"] + 1, 0)]
    params = [] if s["lr"] is None else [Param("lr", s["lr"])]
    if metrics or params:
        client.log_batch(rid, metrics=metrics, params=params)
    if s["finished"]:
        client.update_run(rid, status="FINISHED")
    return RunRec(rid, s["name"], s["start_time"], "FINISHED" if s["finished"] else "RUNNING",
                  s["team"], s["lr"], s["loss"])


def create_runs_fast(url, exp_id, specs):
    """The mlflow client is CPU-bound in Python (about 2 ms a request), so
    threads barely help; forked worker processes do. Threads are the fallback
    where fork is unavailable or unsafe (other threads alive)."""
    import multiprocessing
    import threading

    work = [(url, exp_id, s) for s in specs]
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        import gc
        from concurrent.futures import ProcessPoolExecutor

        # Keep the children's garbage collector off the inherited heap, so that
        # they do not copy it page by page.
        gc.collect()
        gc.freeze()
        try:
            with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context("fork")) as pool:
                return list(pool.map(_make_run, work, chunksize=50))
        finally:
            gc.unfreeze()
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(_make_run, work))


@pytest.fixture(scope="module")
def dataset(server):
    """2,600 runs in one experiment. Some lack the lr param or the loss metric;
    start times come in pairs (ties); a third of the runs stay RUNNING."""
    client = MlflowClient(server.url)
    exp_id = client.create_experiment("/Shared/search/big")
    rng = random.Random(20240601)
    specs = []
    for i in range(N_RUNS):
        specs.append(dict(
            i=i,
            name=(f"RUN-{i}" if i % 5 == 0 else f"run-{i}"),
            start_time=BASE_START + (i // 2) * 1000,
            team=rng.choice("abc"),
            lr=None if i % 29 == 0 else rng.choice(LRS),
            loss=None if i % 31 == 0 else round(rng.random(), 3),
            finished=(i % 3 != 0),
        ))
    t0 = time.time()
    recs = create_runs_fast(server.url, exp_id, specs)
    print(f"created {N_RUNS} runs in {time.time() - t0:.1f}s")
    assert len({r.run_id for r in recs}) == N_RUNS
    return exp_id, {r.run_id: r for r in recs}


def search_all(client, exp_id, filter_string="", order_by=None, page_size=PAGE, view=ViewType.ACTIVE_ONLY):
    """Follow page tokens to the end. Asserts page sizes and that no run repeats."""
    runs, token, pages = [], None, 0
    while True:
        page = client.search_runs([exp_id], filter_string=filter_string, run_view_type=view,
                                  max_results=page_size, order_by=order_by, page_token=token)
        pages += 1
        assert len(page) <= page_size, f"page of {len(page)} runs > max_results={page_size}"
        runs.extend(page)
        token = page.token
        if not token:
            break
        assert len(page) == page_size, "a short page carried a next_page_token"
        assert pages <= N_RUNS, "paging does not terminate"
    ids = [r.info.run_id for r in runs]
    dup = {i for i in ids if ids.count(i) > 1} if len(set(ids)) != len(ids) else set()
    assert not dup, f"{len(dup)} runs returned more than once across pages (filter={filter_string!r}, order={order_by})"
    return runs


def _cmp(a, b):
    return (a > b) - (a < b)


def expected_order(recs, order_by):
    """MLflow's order: the order_by terms (missing values last, whatever the
    direction), then start_time DESC, then run_id ASC."""
    terms = []
    for t in order_by or []:
        parts = t.rsplit(" ", 1)
        desc = len(parts) == 2 and parts[1].upper() == "DESC"
        col = parts[0] if len(parts) == 2 and parts[1].upper() in ("ASC", "DESC") else t
        terms.append((col.strip(), desc))
    if not any(c in ("attributes.start_time", "start_time") for c, _ in terms):
        terms.append(("attributes.start_time", True))
    terms.append(("attributes.run_id", False))

    def value(r, col):
        return {
            "metrics.loss": r.loss, "metrics.`loss`": r.loss, "params.lr": r.lr, "tags.team": r.team,
            "attributes.start_time": r.start_time, "start_time": r.start_time,
            "attributes.run_id": r.run_id, "attributes.run_name": r.name,
        }[col]

    def cmp(a, b):
        for col, desc in terms:
            va, vb = value(a, col), value(b, col)
            if va is None or vb is None:
                c = (va is None) - (vb is None)  # missing last
            else:
                c = _cmp(va, vb) * (-1 if desc else 1)
            if c:
                return c
        return 0

    return [r.run_id for r in sorted(recs, key=functools.cmp_to_key(cmp))]


# (filter, python predicate over RunRec)
FILTERS = [
    ("metrics.loss < 0.5", lambda r: r.loss is not None and r.loss < 0.5),
    ("params.lr = '0.01'", lambda r: r.lr == "0.01"),
    ("tags.team = 'a'", lambda r: r.team == "a"),
    ("attributes.status = 'FINISHED'", lambda r: r.status == "FINISHED"),
    ("params.lr LIKE '0.0%'", lambda r: r.lr is not None and r.lr.startswith("0.0")),
    ("metrics.`loss` >= 0.2 AND params.lr != '0.1'",
     lambda r: r.loss is not None and r.loss >= 0.2 and r.lr is not None and r.lr != "0.1"),
    ("attributes.run_name ILIKE 'RUN-1%'", lambda r: r.name.lower().startswith("run-1")),
    ("attributes.run_name LIKE 'run-1%'", lambda r: r.name.startswith("run-1")),
    ("metrics.loss = 0.5", lambda r: r.loss == 0.5),
    ("metrics.loss <= 0.1 AND tags.team != 'b' AND attributes.status = 'RUNNING'",
     lambda r: r.loss is not None and r.loss <= 0.1 and r.team != "b" and r.status == "RUNNING"),
    ("params.lr ILIKE '%5'", lambda r: r.lr is not None and r.lr.endswith("5")),
    ("attributes.start_time >= %d" % (BASE_START + 1000 * 1000), lambda r: r.start_time >= BASE_START + 1000 * 1000),
]


@pytest.mark.parametrize("filter_string,pred", FILTERS, ids=[f for f, _ in FILTERS])
def test_filters_with_pagination(server, dataset, filter_string, pred):
    exp_id, recs = dataset
    client = MlflowClient(server.url)
    expected = {rid for rid, r in recs.items() if pred(r)}
    assert expected, "test data produces no match; the filter would prove nothing"
    runs = search_all(client, exp_id, filter_string)
    got = [r.info.run_id for r in runs]
    assert len(got) == len(expected), f"{filter_string!r}: {len(got)} runs, expected {len(expected)}"
    assert set(got) == expected
    # Default order: start_time DESC, run_id ASC.
    assert got == expected_order([recs[i] for i in expected], None)
    # The returned data is what was logged.
    for r in runs[:50]:
        rec = recs[r.info.run_id]
        assert r.info.run_name == rec.name and r.info.status == rec.status
        assert r.data.params.get("lr") == rec.lr and r.data.metrics.get("loss") == rec.loss
        assert r.data.tags.get("team") == rec.team and r.info.start_time == rec.start_time


def test_run_id_in_filter(server, dataset):
    exp_id, recs = dataset
    client = MlflowClient(server.url)
    some = sorted(recs)[:3]
    flt = "attributes.run_id IN ('%s', '%s', '%s', '%s')" % (*some, "0" * 32)
    got = search_all(client, exp_id, flt)
    assert sorted(r.info.run_id for r in got) == some
    flt = "attributes.run_id NOT IN ('%s', '%s') AND params.lr = '0.001'" % tuple(some[:2])
    got = {r.info.run_id for r in search_all(client, exp_id, flt)}
    assert got == {rid for rid, r in recs.items() if r.lr == "0.001" and rid not in some[:2]}


ORDERS = [
    ["metrics.loss DESC"],
    ["metrics.loss ASC"],
    ["params.lr ASC"],
    ["params.lr DESC", "metrics.loss ASC"],
    ["tags.team ASC", "params.lr DESC", "metrics.loss DESC"],
    ["attributes.start_time ASC"],
    ["attributes.start_time DESC"],
    ["attributes.run_name DESC"],
]


@pytest.mark.parametrize("order_by", ORDERS, ids=[",".join(o) for o in ORDERS])
def test_order_by_with_pagination(server, dataset, order_by):
    exp_id, recs = dataset
    client = MlflowClient(server.url)
    runs = search_all(client, exp_id, order_by=order_by)
    got = [r.info.run_id for r in runs]
    assert len(got) == N_RUNS and set(got) == set(recs)
    # Check the primary key's order on the values the server returned.
    first, desc = order_by[0].rsplit(" ", 1)
    vals = {"metrics.loss": lambda r: r.data.metrics.get("loss"), "params.lr": lambda r: r.data.params.get("lr"),
            "tags.team": lambda r: r.data.tags.get("team"), "attributes.start_time": lambda r: r.info.start_time,
            "attributes.run_name": lambda r: r.info.run_name}[first]
    present = [vals(r) for r in runs if vals(r) is not None]
    assert present == sorted(present, reverse=(desc == "DESC")), f"{order_by}: primary key out of order"
    missing_at = [i for i, r in enumerate(runs) if vals(r) is None]
    assert missing_at == list(range(len(present), len(runs))), f"{order_by}: runs missing the key are not last"
    # Full order, tie-breakers included.
    exp = expected_order(list(recs.values()), order_by)
    if got != exp:
        bad = next(i for i, (a, b) in enumerate(zip(got, exp)) if a != b)
        pytest.fail(f"{order_by}: order differs from MLflow's at position {bad}: "
                    f"got {recs[got[bad]]}, expected {recs[exp[bad]]}")


def test_filter_and_order_combined(server, dataset):
    exp_id, recs = dataset
    client = MlflowClient(server.url)
    flt = "metrics.loss < 0.5 AND tags.team = 'b'"
    order = ["metrics.loss DESC", "attributes.start_time ASC"]
    got = [r.info.run_id for r in search_all(client, exp_id, flt, order, page_size=37)]
    sel = [r for r in recs.values() if r.loss is not None and r.loss < 0.5 and r.team == "b"]
    assert got == expected_order(sel, order)


def test_fluent_search_runs(client, server, dataset):
    exp_id, recs = dataset
    df = mlflow.search_runs(experiment_ids=[exp_id], filter_string="params.lr = '0.05' AND metrics.loss > 0.5",
                            order_by=["metrics.loss ASC"])
    sel = [r for r in recs.values() if r.lr == "0.05" and r.loss is not None and r.loss > 0.5]
    assert list(df["run_id"]) == expected_order(sel, ["metrics.loss ASC"])
    assert list(df["metrics.loss"]) == sorted(r.loss for r in sel)
    assert set(df["params.lr"]) == {"0.05"}
    # Everything, in one call (the client pages internally).
    df_all = mlflow.search_runs(experiment_ids=[exp_id])
    assert len(df_all) == N_RUNS and set(df_all["run_id"]) == set(recs)
    runs = mlflow.search_runs(experiment_ids=[exp_id], filter_string="tags.team = 'c'", output_format="list")
    assert {r.info.run_id for r in runs} == {rid for rid, r in recs.items() if r.team == "c"}


def test_runs_created_while_paging_do_not_shift_pages(server):
    client = MlflowClient(server.url)
    exp_id = client.create_experiment("/Shared/search/while-paging")
    base = 1_695_000_000_000
    n = 230

    def make(i):
        return client.create_run(exp_id, start_time=base + (i // 3) * 1000, run_name=f"orig-{i}").info.run_id

    with ThreadPoolExecutor(8) as pool:
        originals = list(pool.map(make, range(n)))
    page_size = 25
    seen, token, pages, inserted = [], None, 0, []
    rng = random.Random(3)
    while True:
        page = client.search_runs([exp_id], max_results=page_size, page_token=token)
        assert len(page) <= page_size
        seen.extend(r.info.run_id for r in page)
        token = page.token
        pages += 1
        if not token:
            break
        assert pages < 100
        # New runs between page fetches: newest first in the order, some in the middle,
        # and one tying with the last start_time returned.
        last = page[-1].info.start_time
        for st in (int(time.time() * 1000), base + rng.randrange(n // 3) * 1000, last):
            inserted.append(client.create_run(exp_id, start_time=st, run_name="inserted").info.run_id)
    counts = {}
    for rid in seen:
        counts[rid] = counts.get(rid, 0) + 1
    repeated = [rid for rid, c in counts.items() if c > 1]
    skipped = [rid for rid in originals if rid not in counts]
    assert not repeated, f"{len(repeated)} runs returned twice while runs were being added"
    assert not skipped, f"{len(skipped)} original runs skipped while runs were being added"
    assert set(seen) - set(originals) <= set(inserted)

    # Deleted runs leave ACTIVE_ONLY and show up in DELETED_ONLY and ALL.
    gone = originals[:5]
    for rid in gone:
        client.delete_run(rid)
    active = {r.info.run_id for r in search_all(client, exp_id, page_size=50)}
    deleted = {r.info.run_id for r in search_all(client, exp_id, page_size=50, view=ViewType.DELETED_ONLY)}
    everything = {r.info.run_id for r in search_all(client, exp_id, page_size=50, view=ViewType.ALL)}
    assert deleted == set(gone)
    assert active == set(originals + inserted) - set(gone)
    assert everything == set(originals + inserted)


def test_order_by_metric_with_nan_infinity_and_missing(server):
    """Present values, then NaN, then missing, in both directions (MLflow's
    order); pages of 4 put page boundaries inside each group."""
    client = MlflowClient(server.url)
    exp_id = client.create_experiment("/Shared/search/nan-order")
    values = [0.5, 0.25, 0.75, 0.25, 1.0, -3.0, 0.0, 2.0] + [float("nan")] * 5 + [float("inf")] * 3 + \
             [float("-inf")] * 3 + [None] * 5
    recs = []
    for i, v in enumerate(values):
        run = client.create_run(exp_id, start_time=1_600_000_000_000 + (i % 4) * 1000, run_name=f"n{i}")
        if v is not None:
            client.log_metric(run.info.run_id, "score", v, timestamp=1000, step=0)
        client.log_metric(run.info.run_id, "other", 1.0, timestamp=1000, step=0)
        recs.append((run.info.run_id, v, run.info.start_time))

    def expected(desc):
        def cmp(a, b):
            def group(v):
                return 2 if v is None else (1 if v != v else 0)
            ga, gb = group(a[1]), group(b[1])
            if ga != gb:
                return ga - gb
            if ga == 0 and a[1] != b[1]:
                return _cmp(a[1], b[1]) * (-1 if desc else 1)
            if a[2] != b[2]:
                return _cmp(b[2], a[2])  # start_time DESC
            return _cmp(a[0], b[0])  # run_id ASC
        return [r[0] for r in sorted(recs, key=functools.cmp_to_key(cmp))]

    for desc in (False, True):
        order = ["metrics.score " + ("DESC" if desc else "ASC")]
        got = [r.info.run_id for r in search_all(client, exp_id, order_by=order, page_size=4)]
        exp = expected(desc)
        assert len(got) == len(recs) and set(got) == {r[0] for r in recs}, order
        assert got == exp, f"{order}: got values {[dict((r[0], r[1]) for r in recs)[i] for i in got]}"


def test_search_across_experiments_and_view_types(server):
    client = MlflowClient(server.url)
    e1 = client.create_experiment("/Shared/search/multi-1")
    e2 = client.create_experiment("/Shared/search/multi-2")
    ids = {e1: [], e2: []}
    for i in range(14):
        e = e1 if i % 2 else e2
        rid = client.create_run(e, start_time=1_650_000_000_000 + i, run_name=f"m{i}").info.run_id
        client.log_metric(rid, "acc", i / 10.0, timestamp=1000, step=0)
        ids[e].append(rid)
    got = []
    token = None
    while True:
        page = client.search_runs([e1, e2], max_results=3, order_by=["metrics.acc DESC"], page_token=token)
        got.extend(page)
        token = page.token
        if not token:
            break
    assert [r.info.run_id for r in got] == [rid for rid in reversed(
        [x for i in range(14) for x in [ids[e1 if i % 2 else e2][i // 2]]])]
    assert {r.info.experiment_id for r in got} == {e1, e2}
    # Deleting an experiment hides its runs from ACTIVE_ONLY searches.
    client.delete_experiment(e1)
    active = client.search_runs([e1, e2], max_results=100)
    assert {r.info.run_id for r in active} == set(ids[e2])
    client.restore_experiment(e1)
    assert len(client.search_runs([e1, e2], max_results=100)) == 14
