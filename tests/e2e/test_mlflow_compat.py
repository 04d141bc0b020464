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


def message(e: MlflowException) -> str:
    """The server's message: the client prefixes it with the error code."""
    msg = e.message
    prefix = f"{e.error_code}: "
    return msg[len(prefix):] if msg.startswith(prefix) else msg


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


# ---------------------------------------------------------------- 3, 4. model-version sources


def not_vouched(source: str, id_name: str) -> str:
    return (f"Invalid model version source: '{source}'. The {id_name} request parameter must identify "
            "the resource that contains the source.")


def relative_refs(source: str) -> str:
    return (f"Invalid model version source: '{source}'. If supplying a source as an http, https, local file "
            "path, ftp, objectstore, or mlflow-artifacts uri, an absolute path must be provided without "
            "relative path references present. Please provide an absolute path.")


def local_path(source: str) -> str:
    return (f"Invalid model version source: '{source}'. To use a local path as a model version source, the "
            "run_id request parameter has to be specified and the local path has to be contained within the "
            "artifact directory of the run specified by the run_id.")


def host_scheme(scheme: str) -> str:
    return (f"'source' cannot use the '{scheme}' scheme: the '{scheme}' scheme addresses a host other than the "
            "tracking server's configured artifact storage, so the server would connect to the host named in "
            "the URI.")


def test_model_version_sources(server, client):
    exp_id, run_id = new_run(client, "/compat/sources")
    root = client.get_run(run_id).info.artifact_uri
    lm = client.create_logged_model(exp_id, name="src-model", source_run_id=run_id)
    name = "compat-sources"
    client.create_registered_model(name)
    elsewhere = uuid.uuid4().hex  # a run on another tracking server
    madeup_model = "m-" + uuid.uuid4().hex

    refused = [
        # (source, run_id, model_id, message)
        ("/tmp", None, None, local_path("/tmp")),
        ("/tmp/model", run_id, None, local_path("/tmp/model")),
        ("file:///etc/passwd", None, None, local_path("file:///etc/passwd")),
        ("/tmp", elsewhere, None, not_vouched("/tmp", "run_id")),
        ("mlflow-artifacts://host/models/../../../", None, None, host_scheme("mlflow-artifacts")),
        ("http://localhost:5000/api/2.0/mlflow-artifacts/artifacts/../../../", run_id, None, host_scheme("http")),
        ("https://example.com/model", None, None, host_scheme("https")),
        ("mlflow-artifacts:/0/../../../", run_id, None, relative_refs("mlflow-artifacts:/0/../../../")),
        ("mlflow-artifacts:/0/..%2f..%2f..%2f", run_id, None, relative_refs("mlflow-artifacts:/0/..%2f..%2f..%2f")),
        ("s3://bucket/models/../../other", None, None, relative_refs("s3://bucket/models/../../other")),
        (f"runs:/{run_id}/../../x", run_id, None, relative_refs(f"runs:/{run_id}/../../x")),
        (f"runs:/{run_id}/model", None, None, not_vouched(f"runs:/{run_id}/model", "run_id")),
        (f"runs:/{run_id}/model", elsewhere, None, not_vouched(f"runs:/{run_id}/model", "run_id")),
        (f"{root}/model", None, None, not_vouched(f"{root}/model", "run_id")),
        (f"{root}/model", elsewhere, None, not_vouched(f"{root}/model", "run_id")),
        ("mlflow-artifacts:/0/other/artifacts/model", run_id, None,
         not_vouched("mlflow-artifacts:/0/other/artifacts/model", "run_id")),
        (f"models:/{lm.model_id}", None, None, not_vouched(f"models:/{lm.model_id}", "model_id")),
        (f"models:/{lm.model_id}", None, madeup_model, not_vouched(f"models:/{lm.model_id}", "model_id")),
        (f"runs:/{run_id}/model", None, lm.model_id, not_vouched(f"runs:/{run_id}/model", "model_id")),
        ("models:/a/b/c", None, None, not_vouched("models:/a/b/c", "model_id")),
    ]
    for source, rid, mid, text in refused:
        with pytest.raises(MlflowException) as e:
            client.create_model_version(name, source, run_id=rid, model_id=mid)
        assert e.value.error_code == INVALID, (source, e.value)
        assert message(e.value) == text, (source, rid, mid)
        assert e.value.get_http_status_code() == 400
    assert client.search_model_versions(f"name = '{name}'") == []
    # A registered model that does not exist, or a logged model that is not
    # on this server: 404.
    for source, mid in [("models:/missing/1", None), (f"models:/{madeup_model}", madeup_model)]:
        with pytest.raises(MlflowException) as e:
            client.create_model_version(name, source, model_id=mid)
        assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST", (source, e.value)

    accepted = [
        # (source, run_id, model_id, download URI)
        (f"runs:/{run_id}/model", run_id, None, f"{root}/model"),
        (f"runs:/{elsewhere}/model", elsewhere, None, f"runs:/{elsewhere}/model"),
        (f"{root}/model", run_id, None, f"{root}/model"),
        (f"models:/{lm.model_id}", None, lm.model_id, lm.artifact_location),
        (f"{lm.artifact_location}/sub", None, lm.model_id, f"{lm.artifact_location}/sub"),
        ("s3://bucket/models/model", None, None, "s3://bucket/models/model"),
        ("gs://bucket/path/model", run_id, None, "gs://bucket/path/model"),
    ]
    for source, rid, mid, uri in accepted:
        mv = client.create_model_version(name, source, run_id=rid, model_id=mid)
        assert mv.source == source and (mv.run_id or None) == (rid or (lm.source_run_id if mid else None)), mv
        assert client.get_model_version_download_uri(name, mv.version) == uri, source
    # A registered version as the source: run and model come from it.
    v = client.create_model_version(name, "models:/compat-sources/4", model_id=None)
    assert v.source == "models:/compat-sources/4" and v.run_id == run_id
    assert client.get_model_version_download_uri(name, v.version) == lm.artifact_location
    with pytest.raises(MlflowException) as e:
        client.create_model_version(name, "models:/compat-sources/4", run_id=elsewhere)
    assert message(e.value) == ("Invalid model version source: 'models:/compat-sources/4'. The run_id and model_id "
                               "request parameters must match the referenced model version.")


def test_register_model_through_the_client(server, client):
    """mlflow.register_model sends what each client version sends (3.7.0 and
    3.17.2: the run's artifact URI with its run_id; models:/<id> with its
    model_id), and the server accepts it."""
    exp_id, run_id = new_run(client, "/compat/register")
    client.log_text(run_id, "flavors: {}\n", "model/MLmodel")
    mv = mlflow.register_model(f"runs:/{run_id}/model", "compat-register")
    assert mv.run_id == run_id and mv.source.endswith(f"{run_id}/artifacts/model"), mv
    lm = client.create_logged_model(exp_id, name="reg", source_run_id=run_id)
    mv2 = mlflow.register_model(f"models:/{lm.model_id}", "compat-register")
    assert mv2.version == "2" and mv2.source == f"models:/{lm.model_id}"
    assert client.get_model_version("compat-register", "2").run_id == run_id


# ---------------------------------------------------------------- 5. mlflow.modelVersions


def test_model_versions_tag(server, client):
    exp_id, run_id = new_run(client, "/compat/model-versions-tag")
    lm = client.create_logged_model(exp_id, name="tagged", source_run_id=run_id)
    for name in ("compat-tag-a", "compat-tag-b"):
        client.create_registered_model(name)
    client.create_model_version("compat-tag-a", f"models:/{lm.model_id}", model_id=lm.model_id)
    client.create_model_version("compat-tag-a", f"models:/{lm.model_id}", model_id=lm.model_id)
    client.create_model_version("compat-tag-b", f"models:/{lm.model_id}", model_id=lm.model_id)
    tags = client.get_logged_model(lm.model_id).tags
    # As MLflow's tracking store writes it: Python's json.dumps of the list.
    assert tags["mlflow.modelVersions"] == ('[{"name": "compat-tag-a", "version": 1}, '
                                            '{"name": "compat-tag-a", "version": 2}, '
                                            '{"name": "compat-tag-b", "version": 1}]')
    # mlflow.register_model: the server adds the version, and the client
    # (as against MLflow's server) adds it again, with the version as a string.
    mlflow.register_model(f"models:/{lm.model_id}", "compat-tag-b")
    entries = json.loads(client.get_logged_model(lm.model_id).tags["mlflow.modelVersions"])
    assert entries[:4] == [{"name": "compat-tag-a", "version": 1}, {"name": "compat-tag-a", "version": 2},
                           {"name": "compat-tag-b", "version": 1}, {"name": "compat-tag-b", "version": 2}]
    assert {(e["name"], str(e["version"])) for e in entries[4:]} <= {("compat-tag-b", "2")}
    # A version from a run sets no model's tag.
    other = client.create_logged_model(exp_id, name="untouched", source_run_id=run_id)
    client.create_model_version("compat-tag-b", f"runs:/{run_id}/model", run_id=run_id)
    assert "mlflow.modelVersions" not in client.get_logged_model(other.model_id).tags


# ---------------------------------------------------------------- 6. search_logged_models(datasets=)


def test_search_logged_models_datasets(server, client):
    exp_id, run_id = new_run(client, "/compat/model-datasets")
    a, b, c = (client.create_logged_model(exp_id, name=n, source_run_id=run_id).model_id for n in "abc")
    t = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[
        Metric("acc", 0.9, t, 0, model_id=a, dataset_name="eval", dataset_digest="d1"),
        Metric("acc", 0.5, t, 0, model_id=b, dataset_name="eval", dataset_digest="d2"),
        Metric("acc", 0.99, t, 0, model_id=b, dataset_name="train", dataset_digest="d3"),
        Metric("acc", 0.7, t, 0, model_id=c),
    ])

    def ids(**kw):
        return sorted(m.model_id for m in client.search_logged_models(experiment_ids=[exp_id], **kw))

    assert ids() == sorted([a, b, c])
    assert ids(datasets=[{"dataset_name": "eval"}]) == sorted([a, b])
    assert ids(datasets=[{"dataset_name": "eval", "dataset_digest": "d2"}]) == [b]
    assert ids(datasets=[{"dataset_name": "train"}, {"dataset_name": "eval", "dataset_digest": "d1"}]) == sorted([a, b])
    assert ids(datasets=[{"dataset_name": "test"}]) == []
    assert ids(filter_string="metrics.acc > 0.8", datasets=[{"dataset_name": "eval"}]) == [a]
    r = requests.post(api(server, "/mlflow/logged-models/search"),
                      json={"experiment_ids": [exp_id], "datasets": [{"dataset_digest": "d1"}]}, timeout=30)
    assert assert_json_error(r, 400, INVALID)["message"] == "`dataset_name` in the `datasets` clause must be specified."


# ---------------------------------------------------------------- 7. validation before reads


def test_history_bulk_validates_before_reading(server, client):
    unknown = uuid.uuid4().hex
    url = f"{server.url}/ajax-api/2.0/mlflow/metrics/get-history-bulk"
    r = requests.get(url, params={"run_id": unknown}, timeout=30)
    assert assert_json_error(r, 400, INVALID)["message"] == "GetMetricHistoryBulk request must specify a metric_key."
    r = requests.get(url, params={"metric_key": "m"}, timeout=30)
    assert assert_json_error(r, 400, INVALID)["message"] == "GetMetricHistoryBulk request must specify at least one run_id."


# ---------------------------------------------------------------- 8. MLflow's error texts, golden


def error_scenario(srv, client) -> None:
    """Requests that MLflow 3.17.2's server refuses, each with its words.
    Raw requests (the client checks some of these before it sends them)
    but for the set-up. Ids in request bodies are the server's own (a
    made-up one goes in a query string only: the golden normaliser learns
    ids from bodies)."""
    exp_id = client.create_experiment("/compat/errors")
    run_id = client.create_run(exp_id, run_name="errors", tags={"mlflow.user": "golden-user"}).info.run_id
    client.log_metric(run_id, "m", 1.0, timestamp=1_700_000_000_000, step=-5)
    client.create_registered_model("compat-errors")
    madeup = "0" * 32

    def post(path, body):
        requests.post(api(srv, path), json=body, timeout=30)

    def get(path, params):
        requests.get(api(srv, path), params=params, timeout=30)

    # A value of the wrong type, on every MLflow route that logs.
    post("/mlflow/experiments/create", {"name": 123})
    post("/mlflow/experiments/create", {"name": "x", "tags": {"a": "b"}})
    post("/mlflow/runs/log-metric", {"run_id": run_id, "key": "m", "value": "abc", "timestamp": 1})
    post("/mlflow/runs/log-metric", {"run_id": run_id, "key": "m", "value": 1, "timestamp": 1, "step": "x"})
    post("/mlflow/runs/log-parameter", {"run_id": run_id, "key": 5, "value": "v"})
    post("/mlflow/runs/log-parameter", {"run_id": run_id, "key": "p", "value": ["v"]})
    post("/mlflow/runs/set-tag", {"run_id": run_id, "key": "t", "value": 1})
    post("/mlflow/runs/set-tag", {"run_id": run_id, "key": {"é": True}, "value": "v"})
    post("/mlflow/runs/log-batch", {"run_id": 7})
    post("/mlflow/runs/log-batch", {"run_id": run_id, "metrics": [{"key": "a", "value": 1, "timestamp": 1},
                                                                 {"key": "b", "value": "x", "timestamp": 1}]})
    post("/mlflow/runs/search", {"experiment_ids": [exp_id], "order_by": [1]})
    # Missing required values.
    post("/mlflow/runs/log-metric", {"run_id": run_id, "key": "m", "value": 1})
    post("/mlflow/runs/log-metric", {"run_id": run_id, "value": 1, "timestamp": 1})
    post("/mlflow/runs/log-parameter", {"key": "p", "value": "v"})
    post("/mlflow/runs/set-tag", {"run_id": run_id, "value": "v"})
    post("/mlflow/runs/log-batch", {"run_id": run_id, "metrics": [{"key": "a", "value": 1}]})
    post("/mlflow/runs/log-batch", {"run_id": run_id, "params": [{"value": "v"}]})
    post("/mlflow/experiments/create", {})
    # max_results.
    post("/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 50001})
    post("/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": -1})
    post("/mlflow/experiments/search", {"max_results": 50001})
    post("/mlflow/experiments/search", {"max_results": -1})
    get("/mlflow/metrics/get-history", {"run_id": run_id, "metric_key": "m", "max_results": 0})
    get("/mlflow/metrics/get-history", {"run_id": run_id, "metric_key": "m", "max_results": "ten"})
    get("/mlflow/registered-models/search", {"max_results": 0})
    get("/mlflow/registered-models/search", {"max_results": 50001})
    # get-history-bulk-interval, in MLflow's order.
    get("/mlflow/metrics/get-history-bulk-interval", {"metric_key": "m"})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": [madeup] * 101, "metric_key": "m"})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id, "metric_key": "m", "max_results": 0})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id, "metric_key": "m", "max_results": 2501})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id, "metric_key": "m", "start_step": -1})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id, "metric_key": "m", "start_step": 3, "end_step": -3})
    get("/mlflow/metrics/get-history-bulk-interval", {"run_ids": run_id, "metric_key": "m", "start_step": -9, "end_step": 0})
    requests.get(f"{srv.url}/ajax-api/2.0/mlflow/metrics/get-history-bulk", params={"run_id": madeup}, timeout=30)
    # Paths.
    get("/mlflow/artifacts/list", {"run_id": run_id, "path": "../x"})
    get("/mlflow-artifacts/artifacts", {"path": f"{exp_id}/{run_id}/artifacts/.."})
    # Model-version sources and the datasets of logged-model searches.
    for body in ({"name": "compat-errors", "source": "/tmp"},
                 {"name": "compat-errors", "source": f"runs:/{run_id}/model"},
                 {"name": "compat-errors", "source": "mlflow-artifacts://host/models/../../../"},
                 {"name": "compat-errors", "source": "mlflow-artifacts:/0/%2e%2e/%2e%2e/", "run_id": run_id},
                 {"name": "compat-errors", "source": 5}):
        post("/mlflow/model-versions/create", body)
    post("/mlflow/logged-models/search", {"experiment_ids": [exp_id], "datasets": [{"dataset_digest": "d"}]})


def test_error_texts_golden(start_server, use_server):
    srv = start_server()
    client = use_server(srv)
    with Recorder(srv.url) as rec:
        error_scenario(srv, client)
    got = rec.exchanges()
    for g in got:
        assert g["status"] < 500, g
    path = golden_path(mlflow.__version__, "compat_errors")
    if os.environ.get("SEXTANT_E2E_GOLDEN") == "record":
        write_golden(path, mlflow.__version__, got)
        return
    assert path.exists(), f"no golden file at {path}: record it with SEXTANT_E2E_GOLDEN=record"
    want = read_golden(path)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"exchange {i} ({w['method']} {w['path']} {w['query']}) differs from {path}"
    assert len(got) == len(want), f"{len(got)} exchanges, the golden file has {len(want)}"


# ---------------------------------------------------------------- MLflow APIs Sextant does not serve


NOT_SERVED = [
    ("GET", "/api/2.0/mlflow/traces"),
    ("POST", "/api/3.0/mlflow/traces"),
    ("POST", "/api/3.0/mlflow/traces/search"),
    ("POST", "/ajax-api/3.0/mlflow/gateway/chat"),
    ("GET", "/api/2.0/mlflow/gateway/routes"),
    ("POST", "/api/3.0/mlflow/datasets/search"),
    ("GET", "/api/3.0/mlflow/scorers/list"),
    ("POST", "/api/3.0/mlflow/issues/search"),
    ("POST", "/graphql"),
    ("POST", "/ajax-api/2.0/mlflow/prompts/optimize"),
]


@pytest.mark.parametrize("method,path", NOT_SERVED)
def test_unserved_api_families_answer_404(server, method, path):
    t = time.monotonic()
    r = requests.request(method, server.url + path, json={}, timeout=10)
    assert assert_json_error(r, 404, "ENDPOINT_NOT_FOUND")
    assert time.monotonic() - t < 5


def test_unserved_apis_through_the_client(server, client):
    """Traces and prompts through the real client: an exception at once,
    one request each (404 is not retried), never a hang or a 5xx."""
    with Recorder(server.url) as rec:
        t = time.monotonic()
        with pytest.raises(MlflowException) as e:
            client.search_traces(experiment_ids=["0"])
        assert e.value.error_code == "ENDPOINT_NOT_FOUND"
        with pytest.raises(MlflowException) as e:
            mlflow.genai.register_prompt(name="compat-prompt", template="Hello {{name}}")
        assert e.value.error_code == "ENDPOINT_NOT_FOUND" and "Prompts are not served" in message(e.value)
        # No prompt exists, so none is found.
        assert list(client.search_prompts()) == []
        with pytest.raises(MlflowException) as e:
            mlflow.genai.load_prompt("prompts:/compat-prompt/1")
        assert time.monotonic() - t < 10
    paths = [(m, u.split("?")[0].replace(server.url, "")) for m, u, _, status, _ in rec.raw]
    assert all(status < 500 for *_, status, _ in rec.raw), rec.raw
    for p in [("POST", "/api/3.0/mlflow/traces/search"), ("GET", "/api/2.0/mlflow/traces"),
              ("POST", "/api/2.0/mlflow/registered-models/create")]:
        assert paths.count(p) == 1, f"{p} was retried: {paths}"
    assert "compat-prompt" not in {m.name for m in client.search_registered_models()}
