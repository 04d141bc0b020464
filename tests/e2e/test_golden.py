"""The MLflow JSON both ways, pinned in golden files (golden.py).

One scenario drives a fresh server through the real mlflow client: the
tracking calls (experiments, runs, params, tags, metrics with NaN and
infinities, history, search), the model registry, logged models and an
error the client turns into an exception. The exchanges it records, with
ids and timestamps normalised, must equal
internal/httpapi/testdata/mlflow/<mlflow version>/tracking.json. The fast Go
test TestMLflowGolden replays those requests against the server in-process
and checks the answers, so a change in a shape fails there first.

Record them again after a deliberate change, once per mlflow version:

    SEXTANT_E2E_GOLDEN=record SEXTANT_BIN=... python -m pytest tests/e2e/test_golden.py

(`go test ./internal/httpapi -run TestMLflowGolden -update` rewrites only
the answers, from the server; the requests always come from the client.)
"""

from __future__ import annotations

import math
import os
import time

import mlflow
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from golden import Recorder, golden_path, read_golden, write_golden

def scenario(client) -> None:
    # The times the scenario gives are after those the client takes itself
    # (start_run's), and grow in the order they are sent, as the times of
    # TestMLflowGolden's replay do.
    T0 = int(time.time() * 1000) + 600_000
    exp_id = client.create_experiment("/Shared/golden", tags={"team": "vision"})
    client.get_experiment(exp_id)
    client.get_experiment_by_name("/Shared/golden")
    client.set_experiment_tag(exp_id, "stage", "dev")
    client.search_experiments(filter_string="name LIKE '/Shared/gold%'")

    mlflow.set_experiment(experiment_id=exp_id)
    # The tags the client would fill from the machine (the OS user, the
    # entry point's path) are set, so that the recording is the same
    # everywhere.
    machine = {"mlflow.user": "golden-user", "mlflow.source.name": "golden.py", "mlflow.source.type": "LOCAL"}
    with mlflow.start_run(run_name="golden-run", tags={"kind": "train", **machine}) as run:
        run_id = run.info.run_id
        mlflow.log_param("lr", "0.01")
        mlflow.log_params({"epochs": "3", "optimizer": "adam"})
        mlflow.set_tag("note", "a tag with \"quotes\" and unicode é")
        mlflow.log_metric("loss", 0.5, step=0, timestamp=T0)
        mlflow.log_metrics({"loss": 0.25, "acc": 0.75}, step=1, timestamp=T0 + 1000)
        client.log_batch(run_id, metrics=[
            Metric("loss", 0.125, T0 + 2000, 2),
            Metric("weird", math.nan, T0 + 2000, 2),
            Metric("weird", math.inf, T0 + 3000, 3),
            Metric("weird", -math.inf, T0 + 4000, 4),
        ], params=[Param("batch_size", "32")], tags=[RunTag("phase", "two")])
    client.get_run(run_id)
    client.get_metric_history(run_id, "loss")
    client.get_metric_history(run_id, "weird")
    client.search_runs([exp_id], filter_string="metrics.loss < 1 and params.lr = '0.01'",
                       order_by=["metrics.loss ASC"], max_results=10)

    other = client.create_run(exp_id, run_name="second", start_time=T0 + 5000)
    client.log_metric(other.info.run_id, "loss", 2.0, timestamp=T0 + 6000, step=0)
    client.set_terminated(other.info.run_id, status="FAILED", end_time=T0 + 7000)
    client.update_run(other.info.run_id, name="second-renamed")
    client.delete_run(other.info.run_id)
    client.restore_run(other.info.run_id)
    client.search_runs([exp_id], order_by=["attributes.start_time DESC"])

    client.create_registered_model("golden-model", tags={"owner": "vision"}, description="a model")
    mv = client.create_model_version("golden-model", f"runs:/{run_id}/model", run_id=run_id)
    client.set_registered_model_alias("golden-model", "champion", mv.version)
    client.get_model_version_by_alias("golden-model", "champion")
    client.get_registered_model("golden-model")
    client.search_registered_models(filter_string="name = 'golden-model'")

    lm = client.create_logged_model(exp_id, name="golden-logged", source_run_id=run_id,
                                    tags={"t": "v"}, params={"p": "1"}, model_type="agent")
    client.finalize_logged_model(lm.model_id, "READY")
    client.get_logged_model(lm.model_id)
    client.search_logged_models(experiment_ids=[exp_id])

    with pytest.raises(MlflowException) as e:
        client.get_run("0" * 32)
    assert e.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    with pytest.raises(MlflowException) as e:
        client.create_experiment("/Shared/golden")
    assert e.value.error_code == "RESOURCE_ALREADY_EXISTS"


def test_mlflow_golden(start_server, use_server):
    srv = start_server()
    client = use_server(srv)
    with Recorder(srv.url) as rec:
        scenario(client)
    got = rec.exchanges()
    path = golden_path(mlflow.__version__, "tracking")
    if os.environ.get("SEXTANT_E2E_GOLDEN") == "record":
        write_golden(path, mlflow.__version__, got)
        return
    assert path.exists(), (f"no golden file for mlflow {mlflow.__version__} at {path}: record it with "
                           "SEXTANT_E2E_GOLDEN=record (see this file's docstring)")
    want = read_golden(path)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"exchange {i} ({w['method']} {w['path']}) differs from {path}"
    assert len(got) == len(want), f"{len(got)} exchanges, the golden file has {len(want)}"
