"""Benchmark of volumes and checkpoints; prints one JSON object.

    PYTHONPATH=python python bench/volumes_bench.py [--short] [--size-gib 4] [--ranks 4] [--bin sextant]

Run it with the ML environment (torch). It starts a `sextant server` in
single-user mode with its data directory under --dir (default: a temporary
directory, which should be on the disk under test), and measures, in one run:

- dcp: a checkpoint of --size-gib GiB (float32 tensors) from --ranks ranks
  (torch.multiprocessing, gloo): dcp.save with torch's FileSystemWriter to
  the local disk, dcp.save with sextant's VolumeWriter (staging on the same
  disk, upload included), and dcp.async_save with VolumeWriter: the time
  training is blocked (async_save returning) against a plain CPU copy of the
  state, and the time until the checkpoint has landed; dcp.load with
  VolumeReader against FileSystemReader.
- files: one file of size/ranks uploaded and downloaded through the Files
  API (one stream, and --ranks streams at once) against the raw disk: writing
  the same bytes with fsync (what an upload must do on the server), and
  without (what a download to a local file must do), best of two each.
- the server's peak RSS (VmHWM) over the whole run.

Each measurement is the best of --reps (2) runs, saves and loads alternating
between the two writers/readers, with dirty pages flushed before each. --short
uses 512 MiB.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int, field: str = "VmHWM") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def gbps(nbytes: int, seconds: float) -> float:
    return round(nbytes / seconds / 1e9, 3)


# ---------------------------------------------------------------- ranks


def rank_main(rank: int, a: argparse.Namespace, url: str, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

    from sextant.checkpoint import VolumeReader, VolumeWriter
    from sextant.client import Client

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks, timeout=datetime.timedelta(minutes=30))
    ckpt_pg = dist.new_group(backend="gloo")
    per_rank = a.bytes // a.ranks
    n_tensors = 8
    # Each rank owns distinct tensors (its shard of the model): keys per rank.
    g = torch.Generator().manual_seed(rank)
    state = {f"r{rank}.t{i}": torch.randn(per_rank // 4 // n_tensors, generator=g) for i in range(n_tensors)}
    client = Client(url)
    times: dict[str, float] = {}

    def timed(name: str, fn) -> None:
        # Best of --reps; dirty pages of the previous phase are flushed
        # first, so that no phase pays for another's writeback.
        for _ in range(a.reps):
            os.sync()
            dist.barrier()
            t = time.perf_counter()
            fn()
            dist.barrier()
            times[name] = min(times.get(name, float("inf")), time.perf_counter() - t)

    local = Path(a.dir) / "fs_ckpt"
    blocked: list[float] = []

    def run_async() -> None:
        t = time.perf_counter()
        fut = dcp.async_save(state, storage_writer=VolumeWriter(a.vol + "/async", client=client), process_group=ckpt_pg)
        blocked.append(time.perf_counter() - t)
        fut.result()

    for _ in range(a.reps):  # alternated, so that neither side always goes first
        timed("fs_save_s", lambda: dcp.save(state, storage_writer=FileSystemWriter(str(local))))
        timed("volume_save_s", lambda: dcp.save(state, storage_writer=VolumeWriter(a.vol + "/sync", client=client)))
    # What async_save blocks on should be the CPU copy alone.
    timed("cpu_copy_s", lambda: {k: v.clone() for k, v in state.items()})
    timed("volume_async_landed_s", run_async)
    times["volume_async_blocked_s"] = min(blocked)
    target = {k: torch.empty_like(v) for k, v in state.items()}
    for _ in range(a.reps):
        timed("fs_load_s", lambda: dcp.load(target, storage_reader=FileSystemReader(str(local))))
        timed("volume_load_s", lambda: dcp.load(target, storage_reader=VolumeReader(a.vol + "/sync", client=client)))
    assert all(torch.equal(target[k], state[k]) for k in state)
    # The slowest rank decides.
    t = torch.tensor([times[k] for k in sorted(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        Path(out).write_text(json.dumps(dict(zip(sorted(times), t.tolist()))))
    dist.destroy_process_group()


# ---------------------------------------------------------------- files


def bench_files(a: argparse.Namespace, url: str) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from sextant.client import Client

    size = a.bytes // a.ranks
    d = Path(a.dir)
    src = d / "src.bin"
    chunk = os.urandom(8 << 20)

    def write(path: Path, sync: bool) -> float:
        t = time.perf_counter()
        with open(path, "wb") as f:
            for _ in range(size // len(chunk)):
                f.write(chunk)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        return time.perf_counter() - t

    # Raw disk, best of two: writing with fsync (what an upload must do on
    # the server) and without (what a download to a local file must do).
    disk_write_sync = min(write(src, True) for _ in range(2))
    disk_write = min(write(d / "plain.bin", False) for _ in range(2))
    (d / "plain.bin").unlink()
    c = Client(url)
    t = time.perf_counter()
    c.upload_file(a.vol + "/files/one.bin", src)
    up1 = time.perf_counter() - t
    t = time.perf_counter()
    c.download_file(a.vol + "/files/one.bin", d / "down.bin")
    down1 = time.perf_counter() - t
    (d / "down.bin").unlink()
    t = time.perf_counter()
    c._get_range(a.vol + "/files/one.bin", 0, None, lambda b: None)
    down_mem = time.perf_counter() - t
    n = a.ranks
    with ThreadPoolExecutor(n) as ex:
        t = time.perf_counter()
        list(ex.map(lambda i: c.upload_file(f"{a.vol}/files/p{i}.bin", src), range(n)))
        upn = time.perf_counter() - t
        t = time.perf_counter()
        list(ex.map(lambda i: c.download_file(f"{a.vol}/files/p{i}.bin", d / f"d{i}.bin"), range(n)))
        downn = time.perf_counter() - t
    for i in range(n):
        (d / f"d{i}.bin").unlink()
    src.unlink()
    return {
        "file_bytes": size,
        "disk_write_fsync_gbps": gbps(size, disk_write_sync),
        "disk_write_gbps": gbps(size, disk_write),
        "upload_gbps": gbps(size, up1),
        "download_gbps": gbps(size, down1),
        "download_to_memory_gbps": gbps(size, down_mem),
        f"upload_{n}_streams_gbps": gbps(n * size, upn),
        f"download_{n}_streams_gbps": gbps(n * size, downn),
        "upload_vs_disk_write_fsync": round(disk_write_sync / up1, 2),
        "download_vs_disk_write": round(disk_write / down1, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--short", action="store_true", help="512 MiB instead of --size-gib")
    p.add_argument("--size-gib", type=float, default=4)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bin", default=os.environ.get("SEXTANT_BIN", ""))
    p.add_argument("--dir", default="")
    p.add_argument("--reps", type=int, default=2, help="runs of each measurement; the best counts")
    a = p.parse_args()
    a.bytes = int((0.5 if a.short else a.size_gib) * (1 << 30))
    tmp = tempfile.mkdtemp(prefix="sextant-vbench-", dir=a.dir or None)
    a.dir = tmp
    os.environ["SEXTANT_STAGING_DIR"] = str(Path(tmp) / "staging")
    binary = a.bin
    if not binary:
        binary = str(Path(tmp) / "sextant")
        subprocess.run(["go", "build", "-o", binary, "./cmd/sextant"], cwd=ROOT, check=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(Path(tmp) / "server.log", "wb")
    srv = subprocess.Popen([binary, "server", "--port", str(port), "--data-dir", str(Path(tmp) / "data")], stdout=log, stderr=log)
    try:
        for _ in range(200):
            try:
                if requests.get(url + "/health", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        for target, body in (("/catalogs", {"name": "bench"}), ("/schemas", {"catalog_name": "bench", "name": "b"}),
                             ("/volumes", {"catalog_name": "bench", "schema_name": "b", "name": "v"})):
            requests.post(url + "/api/2.1/unity-catalog" + target, json=body, timeout=10).raise_for_status()
        a.vol = "/Volumes/bench/b/v"
        peak = [0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                peak[0] = max(peak[0], rss_kib(srv.pid, "VmRSS"))

        threading.Thread(target=sample, daemon=True).start()
        files = bench_files(a, url)
        import torch.multiprocessing as mp

        out = str(Path(tmp) / "dcp.json")
        mp.start_processes(rank_main, args=(a, url, free_port(), out), nprocs=a.ranks, start_method="fork")
        d = json.loads(Path(out).read_text())
        stop.set()
        dcp = {k: round(v, 3) for k, v in d.items()}
        dcp["bytes"] = a.bytes
        dcp["ranks"] = a.ranks
        dcp["volume_save_vs_fs_save"] = round(d["volume_save_s"] / d["fs_save_s"], 2)
        dcp["async_blocked_vs_cpu_copy"] = round(d["volume_async_blocked_s"] / d["cpu_copy_s"], 2)
        dcp["volume_load_vs_fs_load"] = round(d["volume_load_s"] / d["fs_load_s"], 2)
        result = {"benchmark": "volumes", "short": a.short, "cpus": os.cpu_count(), "reps": a.reps, "dcp": dcp, "files": files,
                  "server_peak_rss_mb": round(max(peak[0], rss_kib(srv.pid)) / 1024, 1)}
        print(json.dumps(result, indent=2))
    finally:
        srv.terminate()
        srv.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
