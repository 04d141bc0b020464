"""Experiments through the mlflow client: set_experiment, CRUD, tags, search."""

from __future__ import annotations

import time

import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException


def test_default_experiment_exists_on_fresh_server(client):
    exp = client.get_experiment("0")
    assert exp.experiment_id == "0"
    assert exp.name == "Default"
    assert exp.lifecycle_stage == "active"
    assert exp.artifact_location, "Default experiment has no artifact location"
    by_name = client.get_experiment_by_name("Default")
    assert by_name is not None and by_name.experiment_id == "0"
    # With no experiment configured, the fluent API logs into "0".
    with mlflow.start_run() as run:
        pass
    assert client.get_run(run.info.run_id).info.experiment_id == "0"


@pytest.mark.parametrize("name", ["/Users/alice@example.com/proj/exp1", "/Shared/team/x"])
def test_set_experiment_absolute_path_names(client, name):
    before = time.time() * 1000
    exp = mlflow.set_experiment(name)
    assert exp.name == name
    assert exp.lifecycle_stage == "active"
    assert exp.creation_time is not None and exp.creation_time >= before - 5000
    exp_id = exp.experiment_id

    # Found again by name, same id; set_experiment again does not create a second one.
    again = mlflow.set_experiment(name)
    assert again.experiment_id == exp_id
    got = client.get_experiment_by_name(name)
    assert got is not None and got.experiment_id == exp_id and got.name == name
    assert client.get_experiment(exp_id).name == name
    same_name = client.search_experiments(view_type=ViewType.ALL, filter_string=f"name = '{name}'")
    assert [e.experiment_id for e in same_name] == [exp_id]

    # set_experiment by id resolves to the same experiment, and runs land in it.
    assert mlflow.set_experiment(experiment_id=exp_id).name == name
    with mlflow.start_run() as run:
        mlflow.log_param("p", "1")
    assert client.get_run(run.info.run_id).info.experiment_id == exp_id


def test_experiment_crud_and_tags(client):
    name = "/Users/bob@example.com/crud"
    exp_id = client.create_experiment(name, tags={"owner": "bob", "stage": "dev"})
    assert isinstance(exp_id, str) and exp_id != "0"

    exp = client.get_experiment(exp_id)
    assert exp.experiment_id == exp_id
    assert exp.name == name
    assert exp.lifecycle_stage == "active"
    assert exp.tags == {"owner": "bob", "stage": "dev"}
    assert client.get_experiment_by_name(name).experiment_id == exp_id

    # Tags: set (new and overwrite) and delete.
    client.set_experiment_tag(exp_id, "stage", "prod")
    client.set_experiment_tag(exp_id, "team", "vision")
    assert client.get_experiment(exp_id).tags == {"owner": "bob", "stage": "prod", "team": "vision"}
    client.delete_experiment_tag(exp_id, "owner")
    assert client.get_experiment(exp_id).tags == {"stage": "prod", "team": "vision"}
    with pytest.raises(MlflowException) as ei:
        client.delete_experiment_tag(exp_id, "owner")
    assert ei.value.error_code == "RESOURCE_DOES_NOT_EXIST", str(ei.value)

    # Rename: the new name resolves, the old one no longer does.
    new_name = "/Users/bob@example.com/crud-renamed"
    client.rename_experiment(exp_id, new_name)
    assert client.get_experiment(exp_id).name == new_name
    assert client.get_experiment_by_name(new_name).experiment_id == exp_id
    assert client.get_experiment_by_name(name) is None

    # Delete and restore.
    client.delete_experiment(exp_id)
    deleted = client.get_experiment(exp_id)
    assert deleted.lifecycle_stage == "deleted"
    active_ids = {e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)}
    deleted_ids = {e.experiment_id for e in client.search_experiments(view_type=ViewType.DELETED_ONLY)}
    assert exp_id not in active_ids and exp_id in deleted_ids
    # A deleted experiment cannot be picked by set_experiment.
    with pytest.raises(MlflowException):
        mlflow.set_experiment(new_name)
    client.restore_experiment(exp_id)
    assert client.get_experiment(exp_id).lifecycle_stage == "active"
    assert client.get_experiment(exp_id).tags == {"stage": "prod", "team": "vision"}
    assert mlflow.set_experiment(new_name).experiment_id == exp_id


def test_duplicate_experiment_name_is_refused(client):
    name = "/Shared/dup/exp"
    exp_id = client.create_experiment(name)
    with pytest.raises(MlflowException) as ei:
        client.create_experiment(name)
    assert ei.value.error_code == "RESOURCE_ALREADY_EXISTS", str(ei.value)
    # Still exactly one experiment of that name.
    found = client.search_experiments(view_type=ViewType.ALL, filter_string=f"name = '{name}'")
    assert [e.experiment_id for e in found] == [exp_id]
    # The name of a deleted experiment stays taken (as in MLflow).
    client.delete_experiment(exp_id)
    with pytest.raises(MlflowException) as ei:
        client.create_experiment(name)
    assert ei.value.error_code == "RESOURCE_ALREADY_EXISTS", str(ei.value)


def test_missing_experiment_lookups(client):
    assert client.get_experiment_by_name("/Users/nobody@example.com/none") is None
    with pytest.raises(MlflowException) as ei:
        client.get_experiment("987654321")
    assert ei.value.error_code == "RESOURCE_DOES_NOT_EXIST", str(ei.value)


def _all_pages(client, page_size, **kw):
    """Follow page tokens to the end; returns (experiments, page sizes)."""
    out, sizes, token = [], [], None
    for _ in range(1000):
        page = client.search_experiments(max_results=page_size, page_token=token, **kw)
        assert len(page) <= page_size
        sizes.append(len(page))
        out.extend(page)
        token = page.token
        if not token:
            return out, sizes
    pytest.fail("search_experiments paging did not terminate")


def test_search_experiments_filter_order_view_and_paging(start_server, use_server):
    # A server of its own, so that the full set of experiments is known here.
    client = use_server(start_server())
    names = [
        "/Users/alice@example.com/a1",
        "/Users/alice@example.com/a2",
        "/Users/bob@example.com/b1",
        "/Users/carol@example.com/deep/c1",
        "/users/lowercase/l1",
        "/Shared/team/x",
        "/Shared/y",
        "Users-not-absolute",
        "plain",
        "/Users/dave@example.com/gone",
    ]
    ids = {}
    for i, n in enumerate(names):
        ids[n] = client.create_experiment(n, tags={"owner": n.split("/")[2] if n.count("/") > 2 else "none",
                                                   "idx": str(i)})
    client.delete_experiment(ids["/Users/dave@example.com/gone"])
    deleted = {"/Users/dave@example.com/gone"}
    everything = set(names) | {"Default"}
    active = everything - deleted

    def got(exps):
        return [e.name for e in exps]

    # view_type
    all_exps, _ = _all_pages(client, 1000, view_type=ViewType.ALL)
    assert sorted(got(all_exps)) == sorted(everything)
    act, _ = _all_pages(client, 1000, view_type=ViewType.ACTIVE_ONLY)
    assert sorted(got(act)) == sorted(active)
    dele, _ = _all_pages(client, 1000, view_type=ViewType.DELETED_ONLY)
    assert got(dele) == sorted(deleted)

    # filter: LIKE is case-sensitive, ILIKE is not.
    like, _ = _all_pages(client, 1000, filter_string="name LIKE '/Users/%'")
    assert sorted(got(like)) == sorted(n for n in active if n.startswith("/Users/"))
    like_all, _ = _all_pages(client, 1000, filter_string="name LIKE '/Users/%'", view_type=ViewType.ALL)
    assert sorted(got(like_all)) == sorted(n for n in everything if n.startswith("/Users/"))
    ilike, _ = _all_pages(client, 1000, filter_string="name ILIKE '/users/%'")
    assert sorted(got(ilike)) == sorted(n for n in active if n.lower().startswith("/users/"))
    tagged, _ = _all_pages(client, 1000, filter_string="tags.owner = 'alice@example.com'")
    assert sorted(got(tagged)) == ["/Users/alice@example.com/a1", "/Users/alice@example.com/a2"]
    combo, _ = _all_pages(client, 1000, filter_string="name LIKE '/Users/%' AND tags.idx != '0'")
    assert sorted(got(combo)) == sorted(n for n in active if n.startswith("/Users/") and ids[n] != ids[names[0]])

    # order_by
    asc, _ = _all_pages(client, 1000, order_by=["name ASC"], view_type=ViewType.ALL)
    assert got(asc) == sorted(everything)
    desc, _ = _all_pages(client, 1000, order_by=["name DESC"], filter_string="name LIKE '/Shared/%'")
    assert got(desc) == sorted((n for n in active if n.startswith("/Shared/")), reverse=True)
    by_time, _ = _all_pages(client, 1000, order_by=["creation_time DESC"], view_type=ViewType.ALL)
    times = [e.creation_time for e in by_time]
    assert times == sorted(times, reverse=True)
    assert len(by_time) == len(everything)
    by_id, _ = _all_pages(client, 1000, order_by=["experiment_id ASC"], view_type=ViewType.ALL)
    assert [e.experiment_id for e in by_id] == sorted((e.experiment_id for e in by_id), key=int)

    # Pagination with a small page size: every experiment exactly once.
    for kw in ({"view_type": ViewType.ALL}, {"view_type": ViewType.ALL, "order_by": ["name ASC"]},
               {"filter_string": "name LIKE '/Users/%'", "order_by": ["name DESC"]}):
        paged, sizes = _all_pages(client, 2, **kw)
        full, _ = _all_pages(client, 1000, **kw)
        assert [e.experiment_id for e in paged] == [e.experiment_id for e in full], kw
        assert len({e.experiment_id for e in paged}) == len(paged), f"duplicates across pages: {kw}"
        assert len(sizes) >= len(full) // 2, (kw, sizes)
    paged, _ = _all_pages(client, 3, view_type=ViewType.ALL)
    assert sorted(got(paged)) == sorted(everything)

    # The fluent search_experiments sees the same.
    fluent = mlflow.search_experiments(filter_string="name LIKE '/Shared/%'", order_by=["name ASC"])
    assert got(fluent) == sorted(n for n in active if n.startswith("/Shared/"))


def test_client_is_usable_without_fluent_state(server):
    # A plain MlflowClient with an explicit URI, no env var set.
    c = MlflowClient(server.url)
    exp_id = c.create_experiment("/Shared/plain-client")
    assert c.get_experiment(exp_id).name == "/Shared/plain-client"


@pytest.mark.parametrize("name", [
    "/Users/josé.müller@example.com/实验/ü",
    "/Shared/a+b&c=d%20e?f#g",
    "/Shared/it's \"quoted\"",
    "  spaced name  ",
])
def test_unusual_experiment_names(client, name):
    exp = mlflow.set_experiment(name)
    assert exp.name == name
    assert mlflow.set_experiment(name).experiment_id == exp.experiment_id
    assert client.get_experiment_by_name(name).experiment_id == exp.experiment_id
    assert client.get_experiment(exp.experiment_id).name == name


def test_concurrent_creation_of_one_name(client, server):
    from concurrent.futures import ThreadPoolExecutor

    name = "/Shared/race/one-name"

    def create(_):
        try:
            return ("ok", MlflowClient(server.url).create_experiment(name))
        except MlflowException as e:
            return ("err", e.error_code)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(create, range(8)))
    oks = [r for r in results if r[0] == "ok"]
    assert len(oks) == 1, results
    assert all(r == ("err", "RESOURCE_ALREADY_EXISTS") for r in results if r[0] == "err"), results
    assert client.get_experiment_by_name(name).experiment_id == oks[0][1]

    # set_experiment racing from threads resolves to that one experiment.
    def set_exp(_):
        return MlflowClient(server.url).get_experiment_by_name(name).experiment_id
    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(set_exp, range(8))) == {oks[0][1]}
