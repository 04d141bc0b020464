"""The Hugging Face Transformers Trainer with report_to="mlflow" (its
MLflowCallback): a tiny randomly initialised BERT built from a config in code,
a synthetic dataset, ten CPU steps. The run, its params, its loss history and
(with HF_MLFLOW_LOG_ARTIFACTS=1) the checkpoints it logs as MLflow 3 logged
models must be on the server. Nothing is downloaded (HF_HUB_OFFLINE=1 is set
by conftest).

Marked `ml`: runs only in the ML environment (requirements-ml.txt); torch and
transformers are imported inside the tests."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.entities import LoggedModelStatus

from sextant_e2e import artifact_file, artifact_key, files_under

pytestmark = pytest.mark.ml

EXPERIMENT = "/Users/e2e@example.com/transformers/tiny-bert"
RUN_NAME = "tiny-bert-test"
MAX_STEPS = 10
LOGGING_STEPS = 2


def tiny_bert():
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2)
    return BertForSequenceClassification(config)


def synthetic_dataset(n: int = 64, seq_len: int = 12):
    import torch

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 100, (n, seq_len), generator=g)
    labels = (ids[:, 0] > 50).long()

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"input_ids": ids[i], "attention_mask": torch.ones(seq_len, dtype=torch.long), "labels": labels[i]}

    return DS()


def train(tmp_path, **args):
    from transformers import Trainer, TrainingArguments

    targs = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        report_to="mlflow",
        run_name=RUN_NAME,
        logging_steps=LOGGING_STEPS,
        max_steps=MAX_STEPS,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
        **args,
    )
    trainer = Trainer(model=tiny_bert(), args=targs, train_dataset=synthetic_dataset())
    trainer.train()
    return trainer


def finished_run(client, exp_id):
    runs = client.search_runs([exp_id], order_by=["attributes.start_time DESC"])
    assert runs, "the Trainer created no run"
    return runs[0]


def test_trainer_reports_to_mlflow(client, server, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", EXPERIMENT)
    monkeypatch.setenv("MLFLOW_TAGS", '{"team": "nlp", "release.candidate": "RC1"}')
    monkeypatch.delenv("HF_MLFLOW_LOG_ARTIFACTS", raising=False)
    train(tmp_path, save_strategy="no")
    assert mlflow.active_run() is None, "the MLflowCallback left its run open"

    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None and exp.name == EXPERIMENT
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_name for r in runs]
    run = client.get_run(runs[0].info.run_id)
    assert run.info.run_name == RUN_NAME
    assert run.data.tags["mlflow.runName"] == RUN_NAME
    assert run.info.status == "FINISHED"
    assert run.data.tags["team"] == "nlp" and run.data.tags["release.candidate"] == "RC1"

    # Training arguments and the model config, as params (sent asynchronously,
    # in batches of 100).
    p = run.data.params
    assert float(p["learning_rate"]) == 1e-3
    assert p["max_steps"] == str(MAX_STEPS)
    assert p["logging_steps"] == str(LOGGING_STEPS)
    assert p["per_device_train_batch_size"] == "4"
    assert p["run_name"] == RUN_NAME
    assert p["hidden_size"] == "16" and p["num_hidden_layers"] == "1"  # from the model config
    assert len(p) > 100, f"only {len(p)} params: a batch went missing?"

    # The loss every LOGGING_STEPS steps.
    hist = sorted(client.get_metric_history(run.info.run_id, "loss"), key=lambda m: m.step)
    assert [m.step for m in hist] == list(range(LOGGING_STEPS, MAX_STEPS + 1, LOGGING_STEPS)), \
        [(m.step, m.value) for m in hist]
    assert all(m.value > 0 for m in hist)
    lr_hist = client.get_metric_history(run.info.run_id, "learning_rate")
    assert sorted(m.step for m in lr_hist) == [2, 4, 6, 8, 10]
    # The end-of-training summary, at the last step.
    summary = client.get_metric_history(run.info.run_id, "train_loss")
    assert [m.step for m in summary] == [MAX_STEPS]
    assert "train_runtime" in run.data.metrics
    # No checkpoint models without HF_MLFLOW_LOG_ARTIFACTS.
    assert mlflow.search_logged_models(experiment_ids=[exp.experiment_id], output_format="list") == []


def test_trainer_logs_checkpoints_as_models(client, server, tmp_path, monkeypatch):
    experiment = EXPERIMENT + "-checkpoints"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", experiment)
    monkeypatch.setenv("HF_MLFLOW_LOG_ARTIFACTS", "1")
    train(tmp_path, save_strategy="steps", save_steps=5)
    assert mlflow.active_run() is None

    exp = client.get_experiment_by_name(experiment)
    run = finished_run(client, exp.experiment_id)
    assert run.info.run_name == RUN_NAME and run.info.status == "FINISHED"

    # One logged model per save, named after the checkpoint directory.
    models = mlflow.search_logged_models(experiment_ids=[exp.experiment_id], output_format="list")
    by_name = {m.name: m for m in models}
    assert sorted(by_name) == ["checkpoint-10", "checkpoint-5"], [m.name for m in models]
    for step in (5, 10):
        lm = by_name[f"checkpoint-{step}"]
        assert lm.status == LoggedModelStatus.READY
        assert lm.source_run_id == run.info.run_id
        d = artifact_file(server, artifact_key(lm.artifact_location))
        stored = files_under(d)
        assert "MLmodel" in stored, stored
        # The checkpoint directory travels as the pyfunc's artifact: byte for byte.
        local = tmp_path / "out" / f"checkpoint-{step}"
        want = {p.relative_to(local).as_posix(): p.read_bytes() for p in local.rglob("*") if p.is_file()}
        assert "config.json" in want and any(k.endswith(".safetensors") for k in want), sorted(want)
        prefix = next((k[: -len("config.json")] for k in stored if k.endswith("/config.json")), None)
        assert prefix is not None, sorted(stored)
        got = {k[len(prefix):]: (d / k).read_bytes() for k in stored if k.startswith(prefix)}
        assert got == want, (sorted(got), sorted(want))
    assert sorted(o.model_id for o in client.get_run(run.info.run_id).outputs.model_outputs) == sorted(
        m.model_id for m in models)
