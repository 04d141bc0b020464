"""MLflow compatibility, driven by the real mlflow client (issue 42): the
behaviours MLflow's own REST tests found different, each as MLflow 3.17.2's
server has it.

- negative metric steps through logging, history, sampled reads and search;
- download_artifacts(run_id, "."): a trailing "." names the directory;
- model-version sources: every form MLflow 3.17.2 refuses is refused with its
  message, every form it accepts is accepted (a runs:/ source whose run is on
  another server included), and a logged model's versions are in its
  mlflow.modelVersions tag;
- search_logged_models(datasets=[...]);
- get-history-bulk checks its request before it reads a run;
- MLflow's wording of the validation errors of its routes, pinned in a
  golden file (internal/httpapi/testdata/mlflow/<version>/compat_errors.json,
  replayed by the Go test TestMLflowGolden);
- the MLflow API families Sextant does not serve answer 404
  ENDPOINT_NOT_FOUND at once (no retries, no 5xx).

Record the golden file again after a deliberate change, once per mlflow
version: SEXTANT_E2E_GOLDEN=record ... -k test_error_texts_golden.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import mlflow
import pytest
import requests
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException

from golden import Recorder, golden_path, read_golden, write_golden
from sextant_e2e import assert_json_error

INVALID = "INVALID_PARAMETER_VALUE"


def api(server, path: str) -> str:
    return f"{server.url}/api/2.0{path}"


def new_run(client, exp_name: str, name: str = "r"):
    exp = mlflow.set_experiment(exp_name)
    run = client.create_run(exp.experiment_id, run_name=name)
    return exp.experiment_id, run.info.run_id


# ---------------------------------------------------------------- 1. negative steps


def test_negative_steps_history_sampling_and_search(server, client):
    exp_id, run_id = new_run(client, "/compat/negative-steps")
    t0 = int(time.time() * 1000)
    client.log_metric(run_id, "loss", 5.0, timestamp=t0, step=-1)
    client.log_batch(run_id, metrics=[Metric("loss", float(s) / 10, t0 + 100 + s, s) for s in range(-300, 300) if s != -1])
    hist = client.get_metric_history(run_id, "loss")
    steps = [m.step for m in hist]
    assert sorted(steps) == list(range(-300, 300))
    assert {m.step: m.value for m in hist}[-1] == 5.0
    # The latest value is at the highest step, as in MLflow.
    assert client.get_run(run_id).data.metrics["loss"] == pytest.approx(29.9)

    # A run whose steps are all negative: its latest is at the least negative step.
    _, neg = new_run(client, "/compat/negative-steps", "all-negative")
    client.log_batch(neg, metrics=[Metric("loss", -2.5, t0, -7), Metric("loss", -1.5, t0, -3), Metric("loss", 4.0, t0, -9)])
    assert client.get_run(neg).data.metrics["loss"] == -1.5
    found = client.search_runs([exp_id], filter_string="metrics.loss < 0")
    assert [r.info.run_id for r in found] == [neg]

    # Sampled reads (the UI's get-history-bulk-interval): the ends of each
    # run are kept, a step range below zero is exact.
    r = requests.get(api(server, "/mlflow/metrics/get-history-bulk-interval"),
                     params={"run_ids": [run_id, neg], "metric_key": "loss", "max_results": 20}, timeout=30)
    assert r.status_code == 200, r.text
    by_run = {}
    for m in r.json()["metrics"]:
        by_run.setdefault(m["run_id"], []).append(int(m["step"]))
    assert by_run[run_id][0] == -300 and by_run[run_id][-1] == 299 and len(by_run[run_id]) <= 24
    assert by_run[neg][0] == -9 and by_run[neg][-1] == -3
    for sampling in ("steps", "minmax"):
        r = requests.get(api(server, "/mlflow/metrics/get-history-bulk-interval"),
                         params={"run_ids": run_id, "metric_key": "loss", "start_step": -250, "end_step": -51,
                                 "max_results": 1000, "sampling": sampling}, timeout=30)
        assert r.status_code == 200, r.text
        got = [int(m["step"]) for m in r.json()["metrics"]]
        assert got[0] == -250 and got[-1] == -51, (sampling, got[:3], got[-3:])
        if sampling == "steps":
            assert got == list(range(-250, -50))
    # The older bulk route too.
    r = requests.get(f"{server.url}/ajax-api/2.0/mlflow/metrics/get-history-bulk",
                     params={"run_id": neg, "metric_key": "loss"}, timeout=30)
    assert r.status_code == 200 and sorted(int(m["step"]) for m in r.json()["metrics"]) == [-9, -7, -3], r.text


def test_negative_step_fluent(server, client):
    mlflow.set_experiment("/compat/negative-fluent")
    with mlflow.start_run() as run:
        mlflow.log_metric("warmup", 0.5, step=-2)
        mlflow.log_metrics({"warmup": 0.25}, step=-1)
    hist = client.get_metric_history(run.info.run_id, "warmup")
    assert [(m.step, m.value) for m in hist] == [(-2, 0.5), (-1, 0.25)]


# ---------------------------------------------------------------- 2. download_artifacts(run_id, ".")


def test_download_artifacts_dot(server, client, tmp_path):
    _, run_id = new_run(client, "/compat/download-dot")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.txt").write_text("b")
    client.log_artifacts(run_id, str(src))
    for path, want in [(".", {"a.txt", "sub/b.txt"}), ("./", {"a.txt", "sub/b.txt"}),
                       ("sub/.", {"b.txt"}), ("./sub", {"b.txt"})]:
        dst = tmp_path / f"dst-{len(want)}-{abs(hash(path))}"
        dst.mkdir()
        out = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=path, dst_path=str(dst))
        got = {p.relative_to(out).as_posix() for p in __import__("pathlib").Path(out).rglob("*") if p.is_file()}
        assert got == want, (path, out, got)
    out = client.download_artifacts(run_id, ".", str(tmp_path / "client"))
    assert open(os.path.join(out, "sub", "b.txt")).read() == "b"
    # '..' is still refused, on the listing and on the run-level listing.
    key = client.get_run(run_id).info.artifact_uri.split("mlflow-artifacts:", 1)[1].strip("/")
    for params in ({"path": key + "/.."}, {"path": key + "/./../x"}):
        r = requests.get(api(server, "/mlflow-artifacts/artifacts"), params=params, timeout=30)
        body = assert_json_error(r, 400, INVALID)
        assert body["message"] == "Invalid path", body
    r = requests.get(api(server, "/mlflow/artifacts/list"), params={"run_id": run_id, "path": "../x"}, timeout=30)
    assert assert_json_error(r, 400, INVALID)["message"] == "Invalid path"
    r = requests.get(api(server, "/mlflow/artifacts/list"), params={"run_id": run_id, "path": "."}, timeout=30)
    assert r.status_code == 200 and {f["path"] for f in r.json()["files"]} == {"a.txt", "sub"}, r.text
