"""mlflow.pytorch.autolog() with a PyTorch Lightning Trainer: a tiny model
trained for three epochs on CPU; what autolog logged (params, per-epoch
metrics, the MLflow 3 logged model, checkpoints, the model summary) must be
on the server and the model must reload with identical outputs.

Marked `ml`: runs only in the ML environment (requirements-ml.txt). torch and
lightning are imported inside the tests, so that collecting this module
without them (under -m "not ml") works, and running it without them fails."""

from __future__ import annotations

import mlflow
import pytest
import yaml
from mlflow.entities import LoggedModelStatus

from sextant_e2e import artifact_file, artifact_key, files_under

pytestmark = pytest.mark.ml

EPOCHS = 3
LR = 0.05


def make_module_class():
    """The LightningModule class, built on first use so that lightning is only
    imported by ml tests. Kept at module level (TinyRegressor) once built so
    that pickled models reload."""
    global TinyRegressor
    if "TinyRegressor" in globals():
        return TinyRegressor
    import lightning as L
    import torch
    import torch.nn.functional as F

    class _TinyRegressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.layer(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.mse_loss(self(x), y)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", F.mse_loss(self(x), y), on_step=False, on_epoch=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=LR)

    _TinyRegressor.__name__ = _TinyRegressor.__qualname__ = "TinyRegressor"
    _TinyRegressor.__module__ = __name__
    TinyRegressor = _TinyRegressor
    return TinyRegressor


def loaders():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 1, generator=g)
    x = torch.randn(96, 8, generator=g)
    y = x @ w + 0.1 * torch.randn(96, 1, generator=g)
    train = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=16, shuffle=False)
    val = DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16)
    return train, val


def test_lightning_autolog(client, server, tmp_path):
    import lightning as L
    import torch

    Tiny = make_module_class()
    exp_id = mlflow.set_experiment("/Shared/autolog/lightning").experiment_id
    mlflow.pytorch.autolog()
    try:
        L.seed_everything(0, workers=True)
        model = Tiny()
        trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=str(tmp_path / "pl"))
        train, val = loaders()
        trainer.fit(model, train, val)
    finally:
        mlflow.pytorch.autolog(disable=True)
    run_id = mlflow.last_active_run().info.run_id
    assert mlflow.active_run() is None, "autolog left its run open"
    run = client.get_run(run_id)
    assert run.info.experiment_id == exp_id
    assert run.info.status == "FINISHED"
    assert run.data.tags.get("mlflow.autologging") == "pytorch"
    assert run.data.tags.get("Mode") == "training"

    # Params: epochs, the optimizer and its defaults.
    params = run.data.params
    assert params["epochs"] == str(EPOCHS)
    assert params["optimizer_name"] == "SGD"
    assert float(params["lr"]) == LR
    assert "momentum" in params and "weight_decay" in params

    # One point per epoch, at steps 0..EPOCHS-1, for both losses.
    for key in ("train_loss", "val_loss"):
        hist = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        assert [m.step for m in hist] == list(range(EPOCHS)), (key, [(m.step, m.value) for m in hist])
        assert all(m.value == m.value and m.value >= 0 for m in hist), hist
        assert run.data.metrics[key] == hist[-1].value
    train_hist = sorted(client.get_metric_history(run_id, "train_loss"), key=lambda m: m.step)
    assert train_hist[-1].value < train_hist[0].value, "the loss did not go down: did training run?"

    # The MLflow 3 logged model autolog created at fit start and finalized at the end.
    models = mlflow.search_logged_models(experiment_ids=[exp_id], output_format="list")
    assert len(models) == 1, models
    lm = models[0]
    assert lm.name == "model" and lm.source_run_id == run_id
    assert lm.status == LoggedModelStatus.READY
    assert [o.model_id for o in run.outputs.model_outputs] == [lm.model_id]
    # Autolog's metrics carry the model id: the model has the latest of each.
    got = {m.key: (m.step, m.value) for m in lm.metrics}
    assert {"train_loss", "val_loss"} <= set(got), lm.metrics
    assert got["val_loss"] == (EPOCHS - 1, run.data.metrics["val_loss"])

    # Its files on the server's disk.
    d = artifact_file(server, artifact_key(lm.artifact_location))
    stored = files_under(d)
    assert {"MLmodel", "data/model.pth", "requirements.txt"} <= set(stored), stored
    mlmodel = yaml.safe_load((d / "MLmodel").read_text())
    assert mlmodel["model_id"] == lm.model_id and "pytorch" in mlmodel["flavors"]

    # Run artifacts: the model summary and the best checkpoint.
    names = {f.path for f in client.list_artifacts(run_id)}
    assert "model_summary.txt" in names, names
    run_key = artifact_key(run.info.artifact_uri)
    summary = artifact_file(server, f"{run_key}/model_summary.txt").read_text()
    assert "Linear" in summary and "layer" in summary
    ckpt = {f.path for f in client.list_artifacts(run_id, "checkpoints")}
    assert {"checkpoints/latest_checkpoint.pth", "checkpoints/latest_checkpoint_metrics.json"} <= ckpt, ckpt

    # The model reloads (by model id and by run) and computes the same outputs.
    model.eval()
    x = torch.linspace(-1, 1, 32).reshape(4, 8)
    with torch.no_grad():
        want = model(x)
    for uri in (f"models:/{lm.model_id}", f"runs:/{run_id}/model"):
        loaded = mlflow.pytorch.load_model(uri)
        loaded.eval()
        with torch.no_grad():
            assert torch.equal(loaded(x), want), uri
