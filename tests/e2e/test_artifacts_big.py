"""A 1 GiB artifact round trip through the mlflow client, with a single
streamed PUT and with the proxy multipart upload, while sampling the server's
memory: the server must stream (peak RSS well under the file size).

Each case starts its own server so that its VmHWM (the kernel's peak RSS)
covers this transfer only. Measurements show in pytest's terminal summary and
go to $SEXTANT_E2E_REPORT_DIR/artifact_1gib_<mode>.json when that is set."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import mlflow
import pytest
import requests

from sextant_e2e import (
    RssSampler,
    artifact_file,
    artifact_key,
    artifacts_url,
    assert_json_error,
    files_under,
    report_measurement,
)

pytestmark = pytest.mark.slow

MIB = 1 << 20
GIB = 1 << 30
BLOCK = 64 * MIB
# The server streams: its peak resident memory stays far below the file size.
PEAK_RSS_LIMIT_BYTES = 200 * 1000 * 1000


def make_random_file(path: Path, size: int) -> str:
    """Writes size pseudo-random (incompressible) bytes; returns their sha256."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            block = os.urandom(min(BLOCK, left))
            h.update(block)
            f.write(block)
            left -= len(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 * MIB):
            h.update(block)
    return h.hexdigest()


@pytest.mark.parametrize("mode", ["single_put", "multipart"])
def test_1gib_round_trip_streams(start_server, use_server, tmp_path, monkeypatch, mode):
    srv = start_server()
    client = use_server(srv)
    parts: list[int] = []
    if mode == "multipart":
        from mlflow.store.artifact.http_artifact_repo import HttpArtifactRepository

        monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "true")
        monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(6 * MIB))
        monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_CHUNK_SIZE", str(16 * MIB))
        orig = HttpArtifactRepository._upload_part
        lock = threading.Lock()

        def spy(*args, **kwargs):
            part = orig(*args, **kwargs)
            with lock:
                parts.append(part.part_number)
            return part

        monkeypatch.setattr(HttpArtifactRepository, "_upload_part", staticmethod(spy))

    src = tmp_path / "src" / "blob.bin"
    src.parent.mkdir()
    t0 = time.monotonic()
    want = make_random_file(src, GIB)
    t_generate = time.monotonic() - t0

    mlflow.set_experiment(f"/Shared/artifacts/1gib-{mode}")
    with RssSampler(srv.proc.pid, interval=0.05) as rss:
        rss.phase = "upload"
        with mlflow.start_run() as run:
            t0 = time.monotonic()
            mlflow.log_artifact(str(src), "big")
            t_upload = time.monotonic() - t0
        src.unlink()  # the sha256 is known; free the disk now
        key = artifact_key(client.get_run(run.info.run_id).info.artifact_uri)
        stored = artifact_file(srv, f"{key}/big/blob.bin")
        assert stored.stat().st_size == GIB

        rss.phase = "download"
        dst = tmp_path / "dl"
        t0 = time.monotonic()
        got = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="big/blob.bin",
                                                       dst_path=str(dst)))
        t_download = time.monotonic() - t0
        rss.phase = "idle"
        hwm_kib = rss.vm_hwm_kib()
    assert got.stat().st_size == GIB
    got_sha = sha256_file(got)
    got.unlink()

    # Free the server's copy too (and check that a 1 GiB file deletes).
    r = requests.delete(artifacts_url(srv, f"{key}/big/blob.bin"), timeout=120)
    assert r.status_code == 200, r.text
    assert not stored.exists()
    assert_json_error(requests.get(artifacts_url(srv, f"{key}/big/blob.bin"), timeout=30), 404)
    assert sum(files_under(srv.data_dir / "artifacts").values()) < MIB, "parts or temporary files left behind"

    m = {
        "mode": mode,
        "bytes": GIB,
        "parts": len(parts),
        "generate_s": round(t_generate, 2),
        "upload_s": round(t_upload, 2),
        "download_s": round(t_download, 2),
        "upload_mib_s": round(GIB / MIB / t_upload, 1),
        "download_mib_s": round(GIB / MIB / t_download, 1),
        "peak_rss_upload_mib": round(rss.peaks.get("upload", 0) / 1024, 1),
        "peak_rss_download_mib": round(rss.peaks.get("download", 0) / 1024, 1),
        "vm_hwm_mib": round((hwm_kib or 0) / 1024, 1),
        "rss_samples": rss.samples,
    }
    report_measurement(f"artifact_1gib_{mode}", m)
    print(m)

    assert got_sha == want, "the downloaded file differs from the uploaded one"
    if mode == "multipart":
        assert sorted(parts) == list(range(1, GIB // (16 * MIB) + 1)), f"multipart not used: {len(parts)} parts"
    assert rss.samples > 10, m
    assert hwm_kib is not None
    peak = max(rss.peak_kib(), hwm_kib) * 1024
    assert peak < PEAK_RSS_LIMIT_BYTES, f"server peak RSS {peak / 1e6:.0f} MB while moving 1 GiB: {m}"
