"""Server-side limits: refused promptly (no client retries), with a useful
message, and all or nothing."""

from __future__ import annotations

import os
import re
import time

import mlflow
import pytest
import requests
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from sextant_e2e import FAST_FAIL_ENV, assert_json_error

MAX_STEPS = 1000
MAX_PARAMS = 5
SEXTANT_SERVER_FLAGS = {"max_metric_steps_per_run": MAX_STEPS, "max_params_per_run": MAX_PARAMS}

PROMPT_S = 10.0


@pytest.fixture
def default_retries():
    """The client's DEFAULT retry settings (7 retries, backoff factor 2): a limit
    answered with a retryable status would take minutes to surface."""
    for k in FAST_FAIL_ENV:
        os.environ.pop(k, None)
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR,
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
    )

    for var in (MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR):
        assert var.name not in os.environ
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() >= 5
    assert MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() >= 1
    yield


def ints_in(msg: str) -> set[int]:
    return {int(x) for x in re.findall(r"(?<![\w.])\d+(?!\w)(?!\.\d)", msg)}


def test_metric_steps_per_run_limit(client, default_retries):
    exp_id = client.create_experiment("/Shared/limits/steps")
    run_id = client.create_run(exp_id).info.run_id
    client.log_batch(run_id, metrics=[Metric("m", float(i), 1000 + i, i) for i in range(990)])

    t0 = time.monotonic()
    with pytest.raises(MlflowException) as ei:
        client.log_batch(run_id, metrics=[Metric("m", float(i), 1000 + i, i) for i in range(990, 1010)])
    elapsed = time.monotonic() - t0
    msg = str(ei.value)
    assert elapsed < PROMPT_S, f"limit error took {elapsed:.1f}s to surface (client retried?): {msg}"
    assert "metric steps per run" in msg.lower(), msg
    assert {990, MAX_STEPS} <= ints_in(msg), f"message does not give the current count 990 and the maximum: {msg}"
    assert ei.value.error_code != "INTERNAL_ERROR", msg
    # Nothing of the refused batch was stored.
    assert len(client.get_metric_history(run_id, "m")) == 990

    # Up to the limit exactly is fine.
    last = [Metric("m", float(i), 1000 + i, i) for i in range(990, 1000)]
    client.log_batch(run_id, metrics=last)
    assert len(client.get_metric_history(run_id, "m")) == MAX_STEPS
    # A client retry of that batch (exact duplicates) at the limit is not an error.
    client.log_batch(run_id, metrics=last)
    client.log_metric(run_id, "m", 999.0, timestamp=1999, step=999)
    assert len(client.get_metric_history(run_id, "m")) == MAX_STEPS

    # One more through the fluent API, on another key: refused, promptly, naming count and max.
    with mlflow.start_run(run_id=run_id):
        t0 = time.monotonic()
        with pytest.raises(MlflowException) as ei:
            mlflow.log_metric("other", 1.0, step=0)
        elapsed = time.monotonic() - t0
    msg = str(ei.value)
    assert elapsed < PROMPT_S, f"limit error took {elapsed:.1f}s: {msg}"
    assert "metric steps per run" in msg.lower() and MAX_STEPS in ints_in(msg), msg
    assert client.get_metric_history(run_id, "other") == []
    # Other runs are not affected.
    other = client.create_run(exp_id).info.run_id
    client.log_metric(other, "m", 1.0)


def test_params_per_run_limit(client, default_retries):
    exp_id = client.create_experiment("/Shared/limits/params")
    run_id = client.create_run(exp_id).info.run_id
    client.log_batch(run_id, params=[Param(f"p{i}", str(i)) for i in range(4)])

    t0 = time.monotonic()
    with pytest.raises(MlflowException) as ei:
        client.log_batch(run_id, params=[Param("p4", "4"), Param("p5", "5")])
    elapsed = time.monotonic() - t0
    msg = str(ei.value)
    assert elapsed < PROMPT_S, f"limit error took {elapsed:.1f}s: {msg}"
    assert "params per run" in msg.lower(), msg
    assert {4, MAX_PARAMS} <= ints_in(msg), f"message does not give the current count 4 and the maximum 5: {msg}"
    assert sorted(client.get_run(run_id).data.params) == ["p0", "p1", "p2", "p3"]

    client.log_param(run_id, "p4", "4")
    client.log_param(run_id, "p4", "4")  # re-logging an existing param does not count
    t0 = time.monotonic()
    with pytest.raises(MlflowException) as ei:
        client.log_param(run_id, "p5", "5")
    assert time.monotonic() - t0 < PROMPT_S
    msg = str(ei.value)
    assert "params per run" in msg.lower() and MAX_PARAMS in ints_in(msg), msg
    assert len(client.get_run(run_id).data.params) == MAX_PARAMS
    # Re-logging existing params at the limit (a retry) is fine.
    client.log_param(run_id, "p0", "0")
    client.log_batch(run_id, params=[Param(f"p{i}", str(i)) for i in range(MAX_PARAMS)])
    assert len(client.get_run(run_id).data.params) == MAX_PARAMS


def test_batch_of_1001_metrics_is_refused(client, server):
    exp_id = client.create_experiment("/Shared/limits/batch-size")
    run_id = client.create_run(exp_id).info.run_id
    body = {"run_id": run_id,
            "metrics": [{"key": "m", "value": 1.0, "timestamp": 1000 + i, "step": i} for i in range(1001)]}
    r = requests.post(server.api("/mlflow/runs/log-batch"), json=body, timeout=30)
    assert_json_error(r, 400, None, "1000")
    assert client.get_metric_history(run_id, "m") == []
    # 1000 is accepted.
    body["metrics"] = body["metrics"][:1000]
    r = requests.post(server.api("/mlflow/runs/log-batch"), json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert len(client.get_metric_history(run_id, "m")) == 1000
    # 101 params in one batch are refused too (MLflow's limit of 100).
    r = requests.post(server.api("/mlflow/runs/log-batch"), timeout=30,
                      json={"run_id": run_id, "params": [{"key": f"k{i}", "value": "v"} for i in range(101)]})
    assert_json_error(r, 400, None, "100")


def test_refused_batch_stores_nothing(client, server):
    exp_id = client.create_experiment("/Shared/limits/all-or-nothing")
    run_id = client.create_run(exp_id).info.run_id
    # Valid params and metrics plus one over-long param key.
    body = {"run_id": run_id,
            "params": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}, {"key": "x" * 300, "value": "3"}],
            "metrics": [{"key": "m", "value": 1.0, "timestamp": 1000, "step": 0}],
            "tags": [{"key": "t", "value": "1"}]}
    r = requests.post(server.api("/mlflow/runs/log-batch"), json=body, timeout=30)
    assert_json_error(r, 400, "INVALID_PARAMETER_VALUE")
    run = client.get_run(run_id)
    assert run.data.params == {}, f"a refused batch stored params: {run.data.params}"
    assert run.data.metrics == {} and "t" not in run.data.tags

    # The same through the client.
    with pytest.raises(MlflowException):
        client.log_batch(run_id, params=[Param("a", "1"), Param("b", "2"), Param("bad key!", "3")],
                         metrics=[Metric("m", 1.0, 1000, 0)], tags=[RunTag("t", "1")])
    run = client.get_run(run_id)
    assert run.data.params == {} and run.data.metrics == {} and "t" not in run.data.tags

    # A batch that changes an existing param stores none of its other entries.
    client.log_param(run_id, "fixed", "1")
    with pytest.raises(MlflowException) as ei:
        client.log_batch(run_id, params=[Param("new", "x"), Param("fixed", "2")],
                         metrics=[Metric("m2", 5.0, 1000, 0)], tags=[RunTag("t2", "1")])
    assert ei.value.error_code == "INVALID_PARAMETER_VALUE", str(ei.value)
    run = client.get_run(run_id)
    assert run.data.params == {"fixed": "1"}, run.data.params
    assert run.data.metrics == {} and "t2" not in run.data.tags

    # A batch breaching the per-run params limit stores none of its metrics either.
    with pytest.raises(MlflowException):
        client.log_batch(run_id, params=[Param(f"q{i}", "v") for i in range(MAX_PARAMS)],
                         metrics=[Metric("m3", 1.0, 1000, 0)])
    run = client.get_run(run_id)
    assert run.data.params == {"fixed": "1"} and run.data.metrics == {}
