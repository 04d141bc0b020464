"""MLflow 3 logged models and the model registry, driven by
mlflow.pyfunc.log_model with a tiny PythonModel: the LoggedModel lifecycle
(create, upload, finalize), loading by models:/<id>, runs:/<run>/model and
registry URIs, registered models, versions, aliases, search, tags, deletion.
Artifacts are checked on the server's disk too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import requests
import yaml
from mlflow.entities import LoggedModelStatus
from mlflow.exceptions import MlflowException

from sextant_e2e import artifact_file, artifact_key, files_under


class AddN(mlflow.pyfunc.PythonModel):
    """Adds n to column x."""

    def __init__(self, n: float):
        self.n = n

    def predict(self, context, model_input, params=None):
        return model_input["x"] + self.n


X = pd.DataFrame({"x": [1.0, 2.0, 5.5]})


def predicts_add(model, n: float) -> None:
    assert list(model.predict(X)) == [1.0 + n, 2.0 + n, 5.5 + n]


def log_add_model(n: float, name: str = "model", **kwargs):
    # pip_requirements skips the slow requirement inference (a subprocess).
    return mlflow.pyfunc.log_model(name=name, python_model=AddN(n), pip_requirements=["mlflow"], **kwargs)


def error_code(excinfo) -> str:
    return getattr(excinfo.value, "error_code", "")


@pytest.mark.disk
def test_log_model_creates_a_ready_logged_model(client, server, tmp_path):
    exp_id = mlflow.set_experiment("/Shared/models/pyfunc").experiment_id
    with mlflow.start_run() as run:
        mlflow.log_param("alpha", "0.5")
        mlflow.log_metric("acc", 0.875)  # step 0, the step log_model links
        info = log_add_model(10)
    run_id = run.info.run_id
    model_id = info.model_id
    assert re.fullmatch(r"m-[0-9a-f]{32}", model_id), model_id
    assert info.model_uri == f"models:/{model_id}"

    lm = client.get_logged_model(model_id)
    assert lm.model_id == model_id
    assert lm.name == "model"
    assert lm.status == LoggedModelStatus.READY, lm.status
    assert lm.experiment_id == exp_id
    assert lm.source_run_id == run_id
    assert lm.artifact_location == f"mlflow-artifacts:/{exp_id}/models/{model_id}/artifacts"
    assert lm.params == {"alpha": "0.5"}  # the run's params are copied onto the model
    assert lm.creation_timestamp and lm.last_updated_timestamp >= lm.creation_timestamp

    # The run records the model as an output.
    r = client.get_run(run_id)
    assert [o.model_id for o in r.outputs.model_outputs] == [model_id]
    # log_model re-sends the run's metrics with model_id: no duplicate points.
    hist = client.get_metric_history(run_id, "acc")
    assert [(m.step, m.value) for m in hist] == [(0, 0.875)]

    # The files, on the server's disk, where the model's artifact_uri says.
    d = artifact_file(server, artifact_key(lm.artifact_location))
    stored = files_under(d)
    assert {"MLmodel", "python_model.pkl", "requirements.txt"} <= set(stored), stored
    mlmodel = yaml.safe_load((d / "MLmodel").read_text())
    assert mlmodel["model_id"] == model_id
    assert mlmodel["run_id"] == run_id
    assert "python_function" in mlmodel["flavors"]
    assert (d / "requirements.txt").read_text().split() == ["mlflow"]

    # Download: the same files.
    local = mlflow.artifacts.download_artifacts(f"models:/{model_id}", dst_path=str(tmp_path / "dl"))
    got = {p.relative_to(local).as_posix(): p.read_bytes() for p in Path(local).rglob("*") if p.is_file()}
    got.pop("registered_model_meta", None)  # written by the client into the download
    assert got == {k: (d / k).read_bytes() for k in stored}

    # Loading by model id and by run.
    predicts_add(mlflow.pyfunc.load_model(f"models:/{model_id}"), 10)
    predicts_add(mlflow.pyfunc.load_model(f"runs:/{run_id}/model"), 10)


def test_logged_model_links_run_metrics(client):
    """log_model re-sends the run's metrics of its step (0 by default) with
    model_id (reference 3(c) step 4): they become the logged model's metrics,
    and the run's histories keep one point each."""
    mlflow.set_experiment("/Shared/models/metrics")
    with mlflow.start_run() as run:
        mlflow.log_metrics({"acc": 0.75, "loss": 0.25})
        mlflow.log_metric("acc", 0.5, step=1)
        mlflow.log_metric("late", 1.0, step=5)
        info = log_add_model(1)
    lm = client.get_logged_model(info.model_id)
    got = sorted((m.key, m.value, m.step, m.run_id, m.model_id) for m in lm.metrics)
    assert got == [("acc", 0.75, 0, run.info.run_id, info.model_id),
                   ("loss", 0.25, 0, run.info.run_id, info.model_id)], lm.metrics
    for key, n in [("acc", 2), ("loss", 1), ("late", 1)]:
        assert len(client.get_metric_history(run.info.run_id, key)) == n, key
    # Metric filters on logged models see the link.
    found = mlflow.search_logged_models(filter_string="metrics.acc > 0.7", output_format="list")
    assert [m.model_id for m in found] == [info.model_id]


def test_register_versions_aliases_and_load(client, server):
    exp_id = mlflow.set_experiment("/Shared/models/registry").experiment_id
    with mlflow.start_run() as run1:
        info1 = log_add_model(1)
    with mlflow.start_run() as run2:
        info2 = log_add_model(100)

    mv1 = mlflow.register_model(info1.model_uri, "my-model")
    assert str(mv1.version) == "1"
    mv2 = mlflow.register_model(info2.model_uri, "my-model")
    assert str(mv2.version) == "2"

    v1 = client.get_model_version("my-model", "1")
    assert v1.name == "my-model"
    assert v1.source == f"models:/{info1.model_id}"
    assert v1.run_id == run1.info.run_id
    assert v1.status == "READY"
    # The client does not read model_id back into ModelVersion; the wire does.
    r = requests.get(server.api("/mlflow/model-versions/get"), params={"name": "my-model", "version": "1"}, timeout=30)
    assert r.status_code == 200 and r.json()["model_version"].get("model_id") == info1.model_id, r.text
    # The version is recorded on the logged model, as a tag, twice, as with
    # MLflow's server: the server adds it (version as a number), then
    # register_model adds it again (as a string).
    assert json.loads(client.get_logged_model(info1.model_id).tags["mlflow.modelVersions"]) == [
        {"name": "my-model", "version": 1}, {"name": "my-model", "version": "1"}]
    v2 = client.get_model_version("my-model", "2")
    assert v2.source == f"models:/{info2.model_id}" and v2.run_id == run2.info.run_id

    rm = client.get_registered_model("my-model")
    assert rm.name == "my-model"
    assert sorted(str(v.version) for v in rm.latest_versions) == ["2"]
    assert sorted(str(v.version) for v in client.search_model_versions("name = 'my-model'")) == ["1", "2"]

    # The download URI of a version is its logged model's artifact location.
    uri = client.get_model_version_download_uri("my-model", "1")
    assert uri == f"mlflow-artifacts:/{exp_id}/models/{info1.model_id}/artifacts", uri

    predicts_add(mlflow.pyfunc.load_model("models:/my-model/1"), 1)
    predicts_add(mlflow.pyfunc.load_model("models:/my-model/2"), 100)
    predicts_add(mlflow.pyfunc.load_model("models:/my-model/latest"), 100)

    # Aliases.
    client.set_registered_model_alias("my-model", "champion", "1")
    assert str(client.get_model_version_by_alias("my-model", "champion").version) == "1"
    predicts_add(mlflow.pyfunc.load_model("models:/my-model@champion"), 1)
    client.set_registered_model_alias("my-model", "champion", "2")  # moves the alias
    client.set_registered_model_alias("my-model", "baseline", "1")
    assert client.get_registered_model("my-model").aliases == {"champion": "2", "baseline": "1"}
    assert sorted(client.get_model_version("my-model", "1").aliases) == ["baseline"]
    predicts_add(mlflow.pyfunc.load_model("models:/my-model@champion"), 100)
    client.delete_registered_model_alias("my-model", "champion")
    with pytest.raises(MlflowException) as e:
        client.get_model_version_by_alias("my-model", "champion")
    assert error_code(e) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"), e.value
    with pytest.raises(MlflowException):
        mlflow.pyfunc.load_model("models:/my-model@champion")
    assert client.get_registered_model("my-model").aliases == {"baseline": "1"}

    # A missing version or model is RESOURCE_DOES_NOT_EXIST.
    with pytest.raises(MlflowException) as e:
        client.get_model_version("my-model", "3")
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(MlflowException) as e:
        client.get_registered_model("no-such-model")
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"

    # Deleting a version, then the model.
    client.delete_model_version("my-model", "1")
    assert sorted(str(v.version) for v in client.search_model_versions("name = 'my-model'")) == ["2"]
    assert "baseline" not in client.get_registered_model("my-model").aliases
    client.delete_registered_model("my-model")
    with pytest.raises(MlflowException) as e:
        client.get_registered_model("my-model")
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"
    # The logged models themselves stay.
    assert client.get_logged_model(info1.model_id).status == LoggedModelStatus.READY


def test_search_registered_models(client, server):
    for name in ("search-alpha", "search-beta", "other-gamma"):
        client.create_registered_model(name, tags={"team": name.split("-")[1]})
    # The client appends "AND tag.`mlflow.prompt.is_prompt` != 'true'" to every
    # filter (prompts live in the registry too): models without that tag match.
    assert [m.name for m in client.search_registered_models(filter_string="name = 'search-alpha'")] == ["search-alpha"]
    assert sorted(m.name for m in client.search_registered_models(filter_string="name LIKE 'search-%'")) == [
        "search-alpha", "search-beta"]
    assert {"search-alpha", "search-beta", "other-gamma"} <= {m.name for m in client.search_registered_models()}
    assert [m.name for m in client.search_registered_models(filter_string="tags.team = 'beta'")] == ["search-beta"]
    # On the wire, without the client's prompt clause.
    r = requests.get(server.api("/mlflow/registered-models/search"), params={"filter": "name = 'search-beta'"},
                     timeout=30)
    assert r.status_code == 200 and [m["name"] for m in r.json()["registered_models"]] == ["search-beta"], r.text


def test_log_model_with_registered_model_name(client):
    mlflow.set_experiment("/Shared/models/register-on-log")
    with mlflow.start_run() as run:
        info = log_add_model(3, registered_model_name="registered-on-log")
    assert str(info.registered_model_version) == "1"
    mv = client.get_model_version("registered-on-log", "1")
    assert mv.source == f"models:/{info.model_id}"
    assert mv.run_id == run.info.run_id
    predicts_add(mlflow.pyfunc.load_model("models:/registered-on-log/1"), 3)
    # Logging again registers version 2.
    with mlflow.start_run():
        info2 = log_add_model(4, registered_model_name="registered-on-log")
    assert str(info2.registered_model_version) == "2"
    predicts_add(mlflow.pyfunc.load_model("models:/registered-on-log/2"), 4)


def test_search_logged_models(client):
    exp_id = mlflow.set_experiment("/Shared/models/search").experiment_id
    ids = {}
    for n, name in [(1, "model"), (2, "model"), (3, "other")]:
        with mlflow.start_run():
            mlflow.log_param("n", str(n))
            ids[n] = log_add_model(n, name=name).model_id
    other_exp = mlflow.set_experiment("/Shared/models/search-elsewhere").experiment_id
    with mlflow.start_run():
        elsewhere = log_add_model(9).model_id

    def search(filt=None, exps=(exp_id,), **kw):
        return [m.model_id for m in mlflow.search_logged_models(experiment_ids=list(exps), filter_string=filt,
                                                                output_format="list", **kw)]

    assert sorted(search("name = 'model'")) == sorted([ids[1], ids[2]])
    assert search("name = 'other'") == [ids[3]]
    assert search("params.n = '2'") == [ids[2]]
    assert sorted(search(None)) == sorted(ids.values())
    assert sorted(search("name = 'model'", exps=(exp_id, other_exp))) == sorted([ids[1], ids[2], elsewhere])
    assert search("name = 'nothing'") == []
    # Newest first by default; an explicit order.
    ordered = search(None, order_by=[{"field_name": "creation_timestamp", "ascending": True}])
    assert ordered == [ids[1], ids[2], ids[3]], ordered
    # Paging through the client.
    page = client.search_logged_models(experiment_ids=[exp_id], max_results=2)
    assert len(page) == 2 and page.token
    rest = client.search_logged_models(experiment_ids=[exp_id], max_results=2, page_token=page.token)
    assert sorted([m.model_id for m in page] + [m.model_id for m in rest]) == sorted(ids.values())


def test_logged_model_tags_and_params(client):
    mlflow.set_experiment("/Shared/models/tags")
    with mlflow.start_run():
        model_id = log_add_model(1).model_id
    mlflow.set_logged_model_tags(model_id, {"team": "vision", "stage": "dev"})
    tags = client.get_logged_model(model_id).tags
    assert tags["team"] == "vision" and tags["stage"] == "dev"
    mlflow.set_logged_model_tags(model_id, {"stage": "prod"})  # overwrite
    assert client.get_logged_model(model_id).tags["stage"] == "prod"
    mlflow.delete_logged_model_tag(model_id, "stage")
    tags = client.get_logged_model(model_id).tags
    assert "stage" not in tags and tags["team"] == "vision"
    with pytest.raises(MlflowException) as e:
        mlflow.delete_logged_model_tag(model_id, "stage")
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"

    mlflow.log_model_params({"depth": "4", "width": "16"}, model_id=model_id)
    assert client.get_logged_model(model_id).params == {"depth": "4", "width": "16"}
    assert [m.model_id for m in mlflow.search_logged_models(filter_string="tags.team = 'vision'",
                                                            output_format="list")] == [model_id]


def test_initialize_and_finalize_logged_model(client, server):
    exp_id = mlflow.set_experiment("/Shared/models/lifecycle").experiment_id
    lm = mlflow.initialize_logged_model(name="external-ish", model_type="agent", tags={"k": "v"})
    assert lm.status == LoggedModelStatus.PENDING
    got = client.get_logged_model(lm.model_id)
    assert got.status == LoggedModelStatus.PENDING
    assert got.name == "external-ish" and got.model_type == "agent" and got.tags["k"] == "v"
    assert got.experiment_id == exp_id and not got.source_run_id
    client.finalize_logged_model(lm.model_id, LoggedModelStatus.FAILED)
    assert client.get_logged_model(lm.model_id).status == LoggedModelStatus.FAILED
    r = requests.get(server.api(f"/mlflow/logged-models/{lm.model_id}"), timeout=30)
    assert r.status_code == 200
    assert r.json()["model"]["info"]["status"] == "LOGGED_MODEL_UPLOAD_FAILED"


def test_delete_logged_model(client, server):
    exp_id = mlflow.set_experiment("/Shared/models/delete").experiment_id
    with mlflow.start_run() as run:
        keep = log_add_model(1).model_id
    with mlflow.start_run() as run2:
        doomed = log_add_model(2).model_id
    client.delete_logged_model(doomed)
    with pytest.raises(MlflowException) as e:
        client.get_logged_model(doomed)
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"
    assert [m.model_id for m in mlflow.search_logged_models(experiment_ids=[exp_id], output_format="list")] == [keep]
    with pytest.raises(MlflowException):
        mlflow.pyfunc.load_model(f"models:/{doomed}")
    with pytest.raises(MlflowException):
        mlflow.pyfunc.load_model(f"runs:/{run2.info.run_id}/model")
    predicts_add(mlflow.pyfunc.load_model(f"models:/{keep}"), 1)


def test_missing_logged_model(client, server):
    with pytest.raises(MlflowException) as e:
        client.get_logged_model("m-" + "0" * 32)
    assert error_code(e) == "RESOURCE_DOES_NOT_EXIST"
    r = requests.get(server.api("/mlflow/logged-models/m-" + "0" * 32), timeout=30)
    assert r.status_code == 404 and r.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
