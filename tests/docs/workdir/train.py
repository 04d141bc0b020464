# The docs test's stand-in for the reader's own training script: the docs'
# `python train.py` and `sextant run -- python train.py` run this. It logs a
# few steps to the run the environment names (MLFLOW_RUN_ID under sextant
# run), as a training script calling mlflow would.
import argparse

import mlflow

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

with mlflow.start_run():
    mlflow.log_param("lr", args.lr)
    for step in range(5):
        loss = 1.0 / (step + 1)
        mlflow.log_metric("loss", loss, step=step)
        print(f"step {step} loss={loss:.3f}", flush=True)
print("done")
