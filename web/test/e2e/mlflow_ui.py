# Run by mlflow-ui.test.mjs under `sextant run`, with the real mlflow client:
# fills a server the way users do, for the browser tests of the model
# pages, the experiment charts, grouping and the logs.
#
# - the launcher's run ("trainer"): a tqdm-style progress bar on stderr
#   (\r redraws), a line printed in two pieces, 3,000 metric keys in
#   train/, val/ and system/ sections, a scikit-learn model logged with
#   log_model and registered under a name with HTML in it, a metric linked
#   to that model, a tag with HTML;
# - a second run logging a tiny mlflow.pyfunc model as version 2 of the
#   same registered model, with an alias and tags (HTML in a value);
# - a logged model with HTML in its name, tags and params, on that run;
# - 12 sweep runs with lr in three values, for grouping.
#
# It prints one line "UI {json}" with the ids the test needs.
import json
import sys
import time

import mlflow
import numpy as np
from mlflow import MlflowClient
from mlflow.entities import Metric
from sklearn.linear_model import LogisticRegression

HTML = '<img src=x onerror="window.__xss=5">'
MODEL = HTML + "clf"
HOSTILE_MODEL = "<img src=x onerror=__xss=11>lm"
client = MlflowClient()

with mlflow.start_run() as run:  # the launcher's run (MLFLOW_RUN_ID)
    for epoch in range(3):
        for i in range(0, 101, 10):
            sys.stderr.write(f"\repoch {epoch}: {i:3d}%|{'#' * (i // 10):<10}| {i}/100")
            sys.stderr.flush()
            time.sleep(0.03)
        sys.stderr.write("\n")
        sys.stderr.flush()
        print(f"epoch {epoch} loss={1 / (epoch + 1):.3f}", flush=True)
    # A line in two pieces: the first sent as a partial record after 2 s
    # without a newline (sextant run's --partial-after).
    print("waiting for the evaluator... ", end="", flush=True)
    time.sleep(2.6)
    print("ready", flush=True)

    # 3,000 keys, 20 steps each (the client splits the batch in 1,000s).
    ts = int(time.time() * 1000)
    sections = ["train", "val", "system"]
    metrics = [
        Metric(f"{sections[k % 3]}/m_{k:04d}", float(np.sin(s / 3 + k) + k / 3000), ts + s, s)
        for k in range(3000)
        for s in range(20)
    ]
    client.log_batch(run.info.run_id, metrics=metrics)
    mlflow.log_params({"lr": "0.01", "optimizer": "adam"})
    mlflow.set_tag("html", HTML)

    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.9], [0.9, 0.1]])
    y = np.array([0, 1, 0, 1])
    info = mlflow.sklearn.log_model(
        LogisticRegression().fit(X, y), name="clf", registered_model_name=MODEL, pip_requirements=["scikit-learn"]
    )
    mlflow.log_metric("test_acc", 0.75, model_id=info.model_id)
trainer = run.info.run_id


class Tiny(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input):
        return model_input


with mlflow.start_run(run_name="pyfunc-run") as run2:
    mlflow.log_metric("loss", 0.5)
    info2 = mlflow.pyfunc.log_model(name="tiny", python_model=Tiny(), registered_model_name=MODEL, pip_requirements=[])

client.set_registered_model_alias(MODEL, "champion", "1")
client.set_registered_model_tag(MODEL, "team", HTML)
client.update_registered_model(MODEL, description="A classifier. " + HTML)
client.set_model_version_tag(MODEL, "2", "note", HTML)

# A logged model (no files) with HTML in its name (the client refuses / : . % " ' in
# names, not < > =), its tags and params, on the pyfunc run.
hostile = mlflow.initialize_logged_model(
    name=HOSTILE_MODEL, source_run_id=run2.info.run_id, tags={"html": HTML}, params={"html": HTML},
    experiment_id=run2.info.experiment_id,
)
mlflow.finalize_logged_model(hostile.model_id, "READY")

sweep = []
for i in range(12):
    with mlflow.start_run(run_name=f"sweep-{i:02d}") as r:
        lr = ["0.1", "0.01", "0.001"][i % 3]
        mlflow.log_params({"lr": lr, "seed": str(i)})
        base = {"0.1": 1.0, "0.01": 0.5, "0.001": 0.2}[lr]
        client.log_batch(
            r.info.run_id,
            metrics=[Metric("train/loss", base / (s + 1) + 0.01 * i, ts + s, s) for s in range(300)]
            + [Metric("val/acc", 1 - base / (s + 2), ts + s, s) for s in range(0, 300, 10)],
        )
        sweep.append(r.info.run_id)

print(
    "UI "
    + json.dumps(
        {
            "experiment": run.info.experiment_id,
            "trainer": trainer,
            "pyfunc": run2.info.run_id,
            "model": MODEL,
            "model_id": info.model_id,
            "model_id2": info2.model_id,
            "hostile_model": HOSTILE_MODEL,
            "hostile_model_id": hostile.model_id,
            "sweep": sweep,
        }
    ),
    flush=True,
)
