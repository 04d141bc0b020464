"""`sextant import`: a tracking database written by real MLflow (its own
Python API on a SQLite file, artifacts in its mlruns directory) is copied
into a fresh Sextant data directory, and everything compares equal through
the mlflow client: experiments, runs, params, tags, latest metrics, every
metric point, dataset inputs and artifact bytes."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import ViewType
from sextant_e2e import storage_flags

pytestmark = pytest.mark.mlflow_sql


def sextant(bin_path: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([bin_path, *args], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, f"sextant {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def mlflow_db(tmp_path_factory):
    """An MLflow database and mlruns directory written by MLflow itself."""
    root = tmp_path_factory.mktemp("mlflow-src")
    uri = f"sqlite:///{root}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    c = mlflow.MlflowClient(uri)
    art_root = (root / "mlruns").as_uri()

    vision = c.create_experiment("vision/resnet", artifact_location=art_root + "/vision", tags={"team": "vision", "empty": ""})
    nlp = c.create_experiment("nlp", artifact_location=art_root + "/nlp")
    gone = c.create_experiment("abandoned", artifact_location=art_root + "/abandoned")

    data = root / "files"
    (data / "sub" / "deep").mkdir(parents=True)
    (data / "weights.bin").write_bytes(bytes(range(256)) * 4096)
    (data / "sub" / "notes.txt").write_text("hello\n")
    (data / "sub" / "deep" / "cfg.json").write_text(json.dumps({"lr": 0.1}))

    mlflow.set_experiment(experiment_id=vision)
    with mlflow.start_run(run_name="baseline") as parent:
        mlflow.log_params({"lr": "0.1", "batch": "64", "long": "x" * 5000})
        mlflow.set_tags({"stage": "dev", "mlflow.note.content": "# notes"})
        from mlflow.entities import Metric

        c.log_batch(parent.info.run_id, metrics=[
            Metric("loss", 1.0 / (step + 1), 1_700_000_000_000 + step, step) for step in range(3000)])
        mlflow.log_metric("odd", float("nan"), step=1)
        mlflow.log_metric("odd", float("inf"), step=2)
        mlflow.log_metric("odd", float("-inf"), step=3)
        mlflow.log_metric("same_step", 1.0, step=5, timestamp=10)
        mlflow.log_metric("same_step", 2.0, step=5, timestamp=12)
        mlflow.log_artifacts(str(data))
        mlflow.log_dict({"a": 1}, "dicts/a.json")
        import numpy as np

        ds = mlflow.data.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3), source="s3://bucket/train.npy", name="train")
        mlflow.log_input(ds, context="training")
        with mlflow.start_run(run_name="child", nested=True):
            mlflow.log_metric("acc", 0.5, step=0)
    with mlflow.start_run(run_name="crashed") as failed:
        mlflow.log_param("seed", "7")
    c.set_terminated(failed.info.run_id, "FAILED")
    with mlflow.start_run(run_name="bin me") as binned:
        mlflow.log_metric("x", 1)
    c.delete_run(binned.info.run_id)
    # A run still going when the database was copied.
    running = c.create_run(vision, run_name="still running", tags={"k": "v"})
    c.log_metric(running.info.run_id, "live", 3.0, step=9)

    mlflow.set_experiment(experiment_id=nlp)
    for i in range(5):
        with mlflow.start_run(run_name=f"sweep-{i}"):
            mlflow.log_param("i", str(i))
            mlflow.log_metric("score", i * 1.5)
    mlflow.set_experiment(experiment_id=gone)
    with mlflow.start_run(run_name="in the bin"):
        mlflow.log_metric("y", 2)
    c.delete_experiment(gone)
    mlflow.set_tracking_uri(None)
    return {"root": root, "uri": uri, "parent": parent.info.run_id}


def all_runs(c, exp_ids):
    runs = []
    token = None
    while True:
        page = c.search_runs(exp_ids, run_view_type=ViewType.ALL, max_results=1000, page_token=token)
        runs += list(page)
        token = page.token
        if not token:
            return {r.info.run_id: r for r in runs}


def same_value(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def history(c, run_id: str, key: str):
    return sorted((m.step, m.timestamp, "nan" if math.isnan(m.value) else m.value) for m in c.get_metric_history(run_id, key))


def artifact_tree(c, run_id: str, path: str | None = None) -> dict[str, int]:
    out = {}
    for f in c.list_artifacts(run_id, path):
        if f.is_dir:
            out.update(artifact_tree(c, run_id, f.path))
        else:
            out[f.path] = f.file_size
    return out


def test_import_copies_everything(mlflow_db, sextant_bin, start_server, use_server, tmp_path):
    data_dir = tmp_path / "sextant"
    r = sextant(sextant_bin, "import", "--from", mlflow_db["uri"], "--artifacts-root", str(mlflow_db["root"] / "mlruns"),
                "--data-dir", str(data_dir), *storage_flags(data_dir), "--json")
    rep = json.loads(r.stdout)
    assert rep["experiments"] == 4  # the three and Default
    assert rep["runs"] == 11 and rep["skipped_runs"] == 0
    assert rep["metric_points"] == 3000 + 3 + 2 + 1 + 1 + 1 + 5 + 1
    assert rep["dataset_inputs"] == 1
    assert rep["artifact_files"] == 4 and not rep.get("missing_artifacts")

    src = mlflow.MlflowClient(mlflow_db["uri"])
    srv = start_server(data_dir=data_dir)
    dst = use_server(srv)

    src_exps = {e.experiment_id: e for e in src.search_experiments(view_type=ViewType.ALL)}
    dst_exps = {e.experiment_id: e for e in dst.search_experiments(view_type=ViewType.ALL)}
    assert set(dst_exps) == set(src_exps)
    for eid, se in src_exps.items():
        de = dst_exps[eid]
        assert (de.name, de.lifecycle_stage, de.creation_time, de.tags) == (se.name, se.lifecycle_stage, se.creation_time, se.tags), eid
        assert de.artifact_location == f"mlflow-artifacts:/{eid}"

    src_runs = all_runs(src, list(src_exps))
    dst_runs = all_runs(dst, list(dst_exps))
    assert set(dst_runs) == set(src_runs) and len(src_runs) == 11
    for rid, s in src_runs.items():
        d = dst_runs[rid]
        si, di = s.info, d.info
        for f in ("run_name", "experiment_id", "user_id", "status", "start_time", "end_time", "lifecycle_stage"):
            assert getattr(di, f) == getattr(si, f), (rid, f, getattr(si, f), getattr(di, f))
        assert di.artifact_uri == f"mlflow-artifacts:/{si.experiment_id}/{rid}/artifacts"
        assert d.data.params == s.data.params, rid
        assert d.data.tags == s.data.tags, rid
        assert set(d.data.metrics) == set(s.data.metrics), rid
        for k, v in s.data.metrics.items():
            assert same_value(d.data.metrics[k], v), (rid, k, v, d.data.metrics[k])
            assert history(dst, rid, k) == history(src, rid, k), (rid, k)
        assert [(x.dataset.name, x.dataset.digest, x.dataset.source, x.dataset.schema, x.dataset.profile, sorted((t.key, t.value) for t in x.tags))
                for x in d.inputs.dataset_inputs] == \
               [(x.dataset.name, x.dataset.digest, x.dataset.source, x.dataset.schema, x.dataset.profile, sorted((t.key, t.value) for t in x.tags))
                for x in s.inputs.dataset_inputs], rid
        assert artifact_tree(dst, rid) == artifact_tree(src, rid), rid

    # The bytes, through the mlflow client.
    parent = mlflow_db["parent"]
    got = Path(mlflow.artifacts.download_artifacts(run_id=parent, artifact_path="", dst_path=str(tmp_path / "dl")))
    want = Path(mlflow.artifacts.download_artifacts(artifact_uri=src_runs[parent].info.artifact_uri, dst_path=str(tmp_path / "want")))
    got_files = {p.relative_to(got).as_posix(): p.read_bytes() for p in got.rglob("*") if p.is_file()}
    want_files = {p.relative_to(want).as_posix(): p.read_bytes() for p in want.rglob("*") if p.is_file()}
    assert got_files == want_files and len(got_files) == 4

    # The imported server keeps working: new experiments and runs get fresh ids.
    mlflow.set_experiment("after the move")
    with mlflow.start_run() as run:
        mlflow.log_metric("m", 1)
    assert int(run.info.experiment_id) > max(int(i) for i in src_exps)
    assert run.info.run_id not in src_runs


def test_import_again_is_refused_or_skipped(mlflow_db, sextant_bin, tmp_path):
    data_dir = tmp_path / "sextant"
    sextant(sextant_bin, "import", "--from", mlflow_db["uri"], "--data-dir", str(data_dir), *storage_flags(data_dir), "--no-artifacts")
    r = sextant(sextant_bin, "import", "--from", mlflow_db["uri"], "--data-dir", str(data_dir), *storage_flags(data_dir), check=False)
    assert r.returncode != 0
    assert "already exists" in r.stderr and "--skip-existing" in r.stderr, r.stderr
    r = sextant(sextant_bin, "import", "--from", mlflow_db["uri"], "--data-dir", str(data_dir), *storage_flags(data_dir), "--skip-existing", "--json")
    rep = json.loads(r.stdout)
    assert rep["runs"] == 0 and rep["skipped_runs"] == 11


def test_import_finds_a_moved_artifact_directory(mlflow_db, sextant_bin, start_server, use_server, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(mlflow_db["root"] / "mlruns", moved)
    db = tmp_path / "copy.db"
    shutil.copy(mlflow_db["root"] / "mlflow.db", db)
    # Point the copy's locations at a directory that is gone.
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (str(mlflow_db["root"]), "/nonexistent/old-host"))
    con.commit()
    con.close()
    data_dir = tmp_path / "sextant"
    r = sextant(sextant_bin, "import", "--from", f"sqlite:///{db}", "--data-dir", str(data_dir), *storage_flags(data_dir), "--json", check=False)
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["artifact_files"] == 0 and len(rep["missing_artifacts"]) == 11, r.stdout + r.stderr
    assert "not found" in r.stderr

    data_dir = tmp_path / "sextant2"
    r = sextant(sextant_bin, "import", "--from", f"sqlite:///{db}", "--artifacts", str(moved), "--data-dir", str(data_dir), *storage_flags(data_dir), "--json")
    rep = json.loads(r.stdout)
    assert rep["artifact_files"] == 4 and not rep.get("missing_artifacts"), rep
    srv = start_server(data_dir=data_dir)
    c = use_server(srv)
    assert artifact_tree(c, mlflow_db["parent"]) == artifact_tree(mlflow.MlflowClient(mlflow_db["uri"]), mlflow_db["parent"])


@pytest.mark.parametrize("source,message", [
    ("http://127.0.0.1:5000", "unsupported database"),
    ("mlflow.db", "want sqlite:///"),
    ("sqlite:///{tmp}/not-mlflow.db", "not an MLflow tracking database"),
    ("sqlite:///{tmp}/missing/nothing.db", "not an MLflow tracking database"),
])
def test_import_bad_sources(sextant_bin, tmp_path, source, message):
    import sqlite3

    sqlite3.connect(tmp_path / "not-mlflow.db").execute("CREATE TABLE t (x)").connection.close()
    r = sextant(sextant_bin, "import", "--from", source.format(tmp=tmp_path), "--data-dir", str(tmp_path / "d"), check=False)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert "panic" not in r.stderr
