"""Runs through the mlflow fluent API and MlflowClient: lifecycle, logging, resume."""

from __future__ import annotations

import math
import re
import time

import mlflow
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException


def now_ms() -> int:
    return int(time.time() * 1000)


def history(client, run_id, key):
    return sorted(((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key)),
                  key=lambda t: (t[0], t[1], -math.inf if math.isnan(t[2]) else t[2]))


def test_start_and_end_named_run(client):
    exp = mlflow.set_experiment("/Shared/runs/basic")
    t0 = now_ms()
    with mlflow.start_run(run_name="my-first-run") as run:
        run_id = run.info.run_id
        live = client.get_run(run_id)
        assert live.info.status == "RUNNING"
        assert live.info.end_time is None
        assert live.info.lifecycle_stage == "active"
    r = client.get_run(run_id)
    assert r.info.run_id == run_id
    assert r.info.experiment_id == exp.experiment_id
    assert r.info.status == "FINISHED"
    assert r.info.run_name == "my-first-run"
    assert r.data.tags.get("mlflow.runName") == "my-first-run"
    assert r.info.start_time is not None and r.info.start_time >= t0 - 5000
    assert r.info.end_time is not None and r.info.end_time >= r.info.start_time
    assert r.info.end_time <= now_ms() + 5000
    assert re.fullmatch(r"[0-9a-f]{32}", run_id), run_id
    assert r.info.artifact_uri and run_id in r.info.artifact_uri
    assert mlflow.active_run() is None


def test_run_without_name_gets_generated_name(client):
    mlflow.set_experiment("/Shared/runs/generated-names")
    with mlflow.start_run() as run:
        pass
    r = client.get_run(run.info.run_id)
    assert r.info.run_name, "no generated run name"
    assert r.data.tags.get("mlflow.runName") == r.info.run_name
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", r.info.run_name), r.info.run_name
    # A run created through the client without a name gets one too.
    r2 = client.create_run(r.info.experiment_id)
    assert r2.info.run_name and client.get_run(r2.info.run_id).data.tags["mlflow.runName"] == r2.info.run_name


def test_log_params_metrics_tags(client):
    mlflow.set_experiment("/Shared/runs/logging")
    t = now_ms() - 100_000
    with mlflow.start_run(run_name="logging") as run:
        run_id = run.info.run_id
        mlflow.log_param("lr", 0.01)
        mlflow.log_params({"batch_size": 32, "optimizer": "adam", "empty": ""})
        mlflow.log_metric("loss", 0.9, step=0, timestamp=t)
        mlflow.log_metric("loss", 0.5, step=1, timestamp=t + 10)
        mlflow.log_metric("loss", 0.25, step=2, timestamp=t + 20)
        mlflow.log_metrics({"acc": 0.75, "f1": 0.5}, step=7)
        mlflow.set_tag("phase", "train")
        mlflow.set_tags({"team": "vision", "doomed": "yes", "note": ""})
        mlflow.delete_tag("doomed")
    r = client.get_run(run_id)
    assert r.data.params == {"lr": "0.01", "batch_size": "32", "optimizer": "adam", "empty": ""}
    assert r.data.metrics == {"loss": 0.25, "acc": 0.75, "f1": 0.5}
    assert r.data.tags["phase"] == "train"
    assert r.data.tags["team"] == "vision"
    assert r.data.tags["note"] == ""
    assert "doomed" not in r.data.tags
    assert history(client, run_id, "loss") == [(0, t, 0.9), (1, t + 10, 0.5), (2, t + 20, 0.25)]
    acc = client.get_metric_history(run_id, "acc")
    assert [(m.step, m.value) for m in acc] == [(7, 0.75)]
    assert abs(acc[0].timestamp - now_ms()) < 60_000
    # Deleting a tag that does not exist is a RESOURCE_DOES_NOT_EXIST.
    with pytest.raises(MlflowException) as ei:
        client.delete_tag(run_id, "doomed")
    assert ei.value.error_code == "RESOURCE_DOES_NOT_EXIST", str(ei.value)
    # Setting tag mlflow.runName renames the run.
    client.set_tag(run_id, "mlflow.runName", "renamed")
    assert client.get_run(run_id).info.run_name == "renamed"


def test_nested_runs(client):
    mlflow.set_experiment("/Shared/runs/nested")
    with mlflow.start_run(run_name="parent") as parent:
        with mlflow.start_run(run_name="child", nested=True) as child:
            assert mlflow.active_run().info.run_id == child.info.run_id
            with mlflow.start_run(run_name="grandchild", nested=True) as grandchild:
                pass
        assert mlflow.active_run().info.run_id == parent.info.run_id
    c = client.get_run(child.info.run_id)
    g = client.get_run(grandchild.info.run_id)
    p = client.get_run(parent.info.run_id)
    assert c.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    assert g.data.tags.get("mlflow.parentRunId") == child.info.run_id
    assert "mlflow.parentRunId" not in p.data.tags
    assert {c.info.status, g.info.status, p.info.status} == {"FINISHED"}
    children = client.search_runs([p.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert [r.info.run_id for r in children] == [child.info.run_id]


def test_exception_marks_run_failed(client):
    mlflow.set_experiment("/Shared/runs/failed")
    with pytest.raises(ZeroDivisionError):
        with mlflow.start_run(run_name="boom") as run:
            mlflow.log_metric("before", 1.0)
            1 / 0
    r = client.get_run(run.info.run_id)
    assert r.info.status == "FAILED"
    assert r.info.end_time is not None
    assert r.data.metrics == {"before": 1.0}
    assert mlflow.active_run() is None


def test_resume_run_by_id(client):
    exp = mlflow.set_experiment("/Shared/runs/resume")
    t = now_ms() - 50_000
    with mlflow.start_run(run_name="resumable") as run:
        run_id = run.info.run_id
        mlflow.log_param("seed", "1")
        mlflow.set_tag("attempt", "1")
        mlflow.log_metric("loss", 1.0, step=0, timestamp=t)
        mlflow.log_metric("loss", 0.8, step=1, timestamp=t + 1)
    first = client.get_run(run_id)
    assert first.info.status == "FINISHED"
    first_end = first.info.end_time
    assert first_end is not None

    with mlflow.start_run(run_id=run_id) as resumed:
        assert resumed.info.run_id == run_id
        live = client.get_run(run_id)
        assert live.info.status == "RUNNING"
        assert live.info.run_name == "resumable"
        # The client re-sends the old end_time with RUNNING; the server keeps it.
        assert live.info.end_time == first_end
        mlflow.log_metric("loss", 0.6, step=2, timestamp=t + 2)
        mlflow.set_tag("attempt", "2")
    r = client.get_run(run_id)
    assert r.info.status == "FINISHED"
    assert r.info.end_time is not None and r.info.end_time >= first_end
    assert r.info.experiment_id == exp.experiment_id
    assert r.info.run_name == "resumable"
    assert r.data.params == {"seed": "1"}
    assert r.data.tags["attempt"] == "2"
    assert r.data.metrics == {"loss": 0.6}
    assert history(client, run_id, "loss") == [(0, t, 1.0), (1, t + 1, 0.8), (2, t + 2, 0.6)]
    # Exactly one run in the experiment: resuming did not create another.
    assert [x.info.run_id for x in client.search_runs([exp.experiment_id])] == [run_id]


def test_resume_run_from_env_var(client, monkeypatch):
    exp = mlflow.set_experiment("/Shared/runs/resume-env")
    with mlflow.start_run(run_name="env-resume") as run:
        run_id = run.info.run_id
        mlflow.log_metric("m", 1.0, step=0)
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    with mlflow.start_run() as resumed:
        assert resumed.info.run_id == run_id
        assert client.get_run(run_id).info.status == "RUNNING"
        mlflow.log_metric("m", 2.0, step=1)
    r = client.get_run(run_id)
    assert r.info.status == "FINISHED"
    assert r.data.metrics == {"m": 2.0}
    assert [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, "m"), key=lambda m: m.step)] == [
        (0, 1.0), (1, 2.0)]
    assert [x.info.run_id for x in client.search_runs([exp.experiment_id])] == [run_id]


def test_experiment_name_env_var_picks_or_creates(client, monkeypatch):
    name = "/Users/env@example.com/from-env"
    assert client.get_experiment_by_name(name) is None
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", name)
    with mlflow.start_run() as r1:
        pass
    exp = client.get_experiment_by_name(name)
    assert exp is not None, "MLFLOW_EXPERIMENT_NAME did not create the experiment"
    assert r1.info.experiment_id == exp.experiment_id
    with mlflow.start_run() as r2:
        pass
    assert r2.info.experiment_id == exp.experiment_id
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_id for r in runs) == sorted([r1.info.run_id, r2.info.run_id])


def test_log_to_finished_run_through_client(client):
    mlflow.set_experiment("/Shared/runs/finished-writes")
    with mlflow.start_run() as run:
        pass
    run_id = run.info.run_id
    assert client.get_run(run_id).info.status == "FINISHED"
    client.log_metric(run_id, "late", 3.5, step=4)
    client.log_param(run_id, "late_param", "x")
    client.set_tag(run_id, "late_tag", "y")
    client.log_batch(run_id, metrics=[Metric("late_batch", 1.5, now_ms(), 0)], params=[Param("bp", "1")],
                     tags=[RunTag("bt", "2")])
    r = client.get_run(run_id)
    assert r.info.status == "FINISHED"
    assert r.data.metrics == {"late": 3.5, "late_batch": 1.5}
    assert r.data.params == {"late_param": "x", "bp": "1"}
    assert r.data.tags["late_tag"] == "y" and r.data.tags["bt"] == "2"


def test_delete_and_restore_run(client):
    exp = mlflow.set_experiment("/Shared/runs/delete")
    with mlflow.start_run() as run:
        mlflow.log_metric("m", 1.0)
    run_id = run.info.run_id
    client.delete_run(run_id)
    assert client.get_run(run_id).info.lifecycle_stage == "deleted"
    assert run_id not in [r.info.run_id for r in client.search_runs([exp.experiment_id])]

    refused = [
        lambda: client.log_metric(run_id, "m", 2.0, step=1),
        lambda: client.log_param(run_id, "p", "1"),
        lambda: client.set_tag(run_id, "t", "1"),
        lambda: client.log_batch(run_id, metrics=[Metric("m", 3.0, now_ms(), 2)]),
    ]
    for call in refused:
        with pytest.raises(MlflowException) as ei:
            call()
        assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
    # Resuming a deleted run is refused (client-side, from the lifecycle the server reports).
    with pytest.raises(MlflowException):
        mlflow.start_run(run_id=run_id)
    mlflow.end_run()

    r = client.get_run(run_id)
    assert r.data.metrics == {"m": 1.0} and r.data.params == {} and "t" not in r.data.tags
    assert len(client.get_metric_history(run_id, "m")) == 1

    client.restore_run(run_id)
    assert client.get_run(run_id).info.lifecycle_stage == "active"
    client.log_metric(run_id, "m", 2.0, step=1)
    assert client.get_run(run_id).data.metrics == {"m": 2.0}
    assert run_id in [r.info.run_id for r in client.search_runs([exp.experiment_id])]


def test_params_are_immutable(client):
    mlflow.set_experiment("/Shared/runs/params")
    with mlflow.start_run() as run:
        mlflow.log_param("lr", "0.1")
        mlflow.log_param("lr", "0.1")  # same value: fine
        mlflow.log_params({"lr": "0.1", "other": "a"})
        with pytest.raises(MlflowException) as ei:
            mlflow.log_param("lr", "0.2")
        assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
        with pytest.raises(MlflowException) as ei:
            mlflow.log_params({"lr": "0.3", "new": "b"})
        assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
    r = client.get_run(run.info.run_id)
    assert r.data.params == {"lr": "0.1", "other": "a"}


def test_latest_metric_is_highest_step_then_timestamp_then_value(client):
    exp_id = client.create_experiment("/Shared/runs/latest")
    run_id = client.create_run(exp_id).info.run_id

    def latest():
        return client.get_run(run_id).data.metrics["m"]

    client.log_metric(run_id, "m", 1.0, timestamp=100, step=5)
    assert latest() == 1.0
    client.log_metric(run_id, "m", 2.0, timestamp=50, step=10)  # higher step wins despite older timestamp
    assert latest() == 2.0
    client.log_metric(run_id, "m", 9.0, timestamp=999_999, step=3)  # lower step: not latest
    assert latest() == 2.0
    client.log_metric(run_id, "m", 3.0, timestamp=40, step=10)  # same step, older timestamp
    assert latest() == 2.0
    client.log_metric(run_id, "m", 4.0, timestamp=60, step=10)  # same step, newer timestamp
    assert latest() == 4.0
    client.log_metric(run_id, "m", 0.5, timestamp=60, step=10)  # same step and timestamp, lower value
    assert latest() == 4.0
    client.log_metric(run_id, "m", 4.5, timestamp=60, step=10)  # same step and timestamp, higher value
    assert latest() == 4.5
    # Out of order inside one batch too.
    client.log_batch(run_id, metrics=[Metric("b", 7.0, 10, 20), Metric("b", 1.0, 30, 2), Metric("b", 5.0, 20, 20)])
    assert client.get_run(run_id).data.metrics["b"] == 5.0
    # Search filters on the latest value.
    assert [r.info.run_id for r in client.search_runs([exp_id], "metrics.m = 4.5 AND metrics.b = 5")] == [run_id]
    assert client.search_runs([exp_id], "metrics.m = 9") == []
    assert len(client.get_metric_history(run_id, "m")) == 7


def test_nan_and_infinity_round_trip(client):
    mlflow.set_experiment("/Shared/runs/nan")
    with mlflow.start_run() as run:
        mlflow.log_metric("nan", float("nan"), step=0)
        mlflow.log_metric("pinf", float("inf"), step=0)
        mlflow.log_metric("ninf", float("-inf"), step=0)
        mlflow.log_metric("mixed", 1.0, step=0)
        mlflow.log_metric("mixed", float("nan"), step=1)
        mlflow.log_metric("mixed", float("inf"), step=2)
        mlflow.log_metric("mixed", float("-inf"), step=3)
        mlflow.log_metrics({"batch_nan": float("nan"), "batch_inf": float("inf")}, step=5)
    run_id = run.info.run_id
    m = client.get_run(run_id).data.metrics
    assert math.isnan(m["nan"])
    assert m["pinf"] == math.inf
    assert m["ninf"] == -math.inf
    assert m["mixed"] == -math.inf
    assert math.isnan(m["batch_nan"]) and m["batch_inf"] == math.inf
    h = sorted(client.get_metric_history(run_id, "mixed"), key=lambda x: x.step)
    assert [x.step for x in h] == [0, 1, 2, 3]
    assert h[0].value == 1.0 and math.isnan(h[1].value) and h[2].value == math.inf and h[3].value == -math.inf
    (n,) = client.get_metric_history(run_id, "nan")
    assert math.isnan(n.value)
    (pi,) = client.get_metric_history(run_id, "pinf")
    assert pi.value == math.inf
    (ni,) = client.get_metric_history(run_id, "ninf")
    assert ni.value == -math.inf


def test_float_values_round_trip_exactly(client):
    exp_id = client.create_experiment("/Shared/runs/floats")
    run_id = client.create_run(exp_id).info.run_id
    values = [0.1, 1 / 3, -2.5e-300, 5e-324, 1.7976931348623157e308, -0.0, 123456789.123456789, 1e21, 1e-7,
              2.0 ** 53 + 2, -1e-6]
    client.log_batch(run_id, metrics=[Metric("f", v, 1000 + i, i) for i, v in enumerate(values)])
    got = sorted(client.get_metric_history(run_id, "f"), key=lambda m: m.step)
    assert [m.value for m in got] == values
    assert [m.step for m in got] == list(range(len(values)))
    assert [m.timestamp for m in got] == [1000 + i for i in range(len(values))]


def test_rename_run_with_update_run(client):
    exp_id = client.create_experiment("/Shared/runs/rename")
    run = client.create_run(exp_id, run_name="before")
    run_id = run.info.run_id
    client.update_run(run_id, name="after")
    r = client.get_run(run_id)
    assert r.info.run_name == "after" and r.data.tags["mlflow.runName"] == "after"
    assert r.info.status == "RUNNING", "renaming changed the status"
    client.update_run(run_id, status="KILLED")
    r = client.get_run(run_id)
    assert r.info.status == "KILLED" and r.info.run_name == "after"
    assert [x.info.run_id for x in client.search_runs([exp_id], "attributes.run_name = 'after'")] == [run_id]
    assert client.search_runs([exp_id], "attributes.run_name = 'before'") == []
    # Both run_name and a different mlflow.runName tag at creation: refused.
    with pytest.raises(MlflowException) as ei:
        client.create_run(exp_id, run_name="x", tags={"mlflow.runName": "y"})
    assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
    # The tag alone names the run.
    tagged = client.create_run(exp_id, tags={"mlflow.runName": "from-tag"})
    assert client.get_run(tagged.info.run_id).info.run_name == "from-tag"


def test_client_create_run_with_explicit_fields(client):
    exp_id = client.create_experiment("/Shared/runs/explicit")
    run = client.create_run(exp_id, start_time=1_234_567_890_123, tags={"a": "1", "b": ""}, run_name="explicit")
    r = client.get_run(run.info.run_id)
    assert r.info.start_time == 1_234_567_890_123
    assert r.info.status == "RUNNING" and r.info.end_time is None
    assert r.data.tags["a"] == "1" and r.data.tags["b"] == ""
    client.set_terminated(run.info.run_id, status="FAILED", end_time=1_234_567_899_999)
    r = client.get_run(run.info.run_id)
    assert r.info.status == "FAILED" and r.info.end_time == 1_234_567_899_999


def test_deleting_experiment_deletes_its_runs(client):
    exp_id = client.create_experiment("/Shared/runs/cascade")
    run_ids = [client.create_run(exp_id).info.run_id for _ in range(3)]
    client.delete_experiment(exp_id)
    assert {client.get_run(r).info.lifecycle_stage for r in run_ids} == {"deleted"}
    # No new runs in a deleted experiment.
    with pytest.raises(MlflowException) as ei:
        client.create_run(exp_id)
    assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
    client.restore_experiment(exp_id)
    assert {client.get_run(r).info.lifecycle_stage for r in run_ids} == {"active"}
    client.log_metric(run_ids[0], "m", 1.0)
