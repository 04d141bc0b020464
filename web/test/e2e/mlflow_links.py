# Run by mlflow-links.test.mjs under `sextant run`, with the real mlflow
# client: logs to the launcher's run, then to a second run, registers a
# model version of the first, and prints the run ids. The client itself
# prints its "View run ... at:" and "View experiment at:" links.
import os

import mlflow
from mlflow import MlflowClient

with mlflow.start_run() as run:  # the launcher's run (MLFLOW_RUN_ID)
    for step in range(5):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
    mlflow.log_param("lr", "0.1")
first = run.info.run_id

os.environ.pop("MLFLOW_RUN_ID", None)  # a run of its own next (mlflow may have dropped it already)
with mlflow.start_run(run_name="second-run") as run2:
    for step in range(5):
        mlflow.log_metric("loss", 2.0 / (step + 1), step=step)
second = run2.info.run_id

client = MlflowClient()
client.create_registered_model("link-model")
mv = client.create_model_version("link-model", source=f"runs:/{first}/model", run_id=first)
print(f"LINKS first={first} second={second} experiment={run.info.experiment_id} model_version={mv.version}", flush=True)
