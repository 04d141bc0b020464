"""Benchmark of volumes and checkpoints; prints one JSON object.

    PYTHONPATH=python python bench/volumes_bench.py [--short] [--size-gib 4] [--ranks 4] [--bin sextant]

Run it with the ML environment (torch). It starts a `sextant server` in
single-user mode with its data directory under --dir (default: a temporary
directory, which should be on the disk under test), and measures, in one run:

- dcp: a checkpoint of --size-gib GiB (float32 tensors) from --ranks ranks
  (torch.multiprocessing, gloo): dcp.save with torch's FileSystemWriter to
  the local disk, dcp.save with sextant's VolumeWriter (staging on the same
  disk, upload included), each round into a new directory (step_N) and
  with the page cache warmed first (as before every timed phase: see
  warm_page_cache), and dcp.async_save with VolumeWriter: the time
  training is blocked (async_save returning) against a plain CPU copy of the
  state, and the time until the checkpoint has landed; dcp.load with
  VolumeReader against FileSystemReader, both from cold files (the local
  checkpoint's and the server's pages dropped from the page cache first).
- files: one file of size/ranks uploaded and downloaded through the Files
  API (one stream, and --ranks streams at once) against the raw disk: writing
  the same bytes with fsync (what an upload must do on the server), and
  copying the file from cold pages to a new local file (what a download
  must do), best of two each (downloads from cold server files).
- the server's peak RSS (VmHWM) over the whole run.

Each DCP measurement is the median of --reps (5) rounds, in each of which the
slowest rank decides; the two writers (readers) alternate, each going first in
every other round, with dirty pages flushed before each. dcp_runs_s has every
round. --short uses 512 MiB.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
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


def warm_page_cache(path: Path, n: int) -> None:
    """Writes n bytes to path and deletes it, so that the next n bytes
    written to the page cache land in memory the VM holds. A VM that gives
    freed memory back to its host (this one does: virtio-balloon free page
    reporting) makes the first touch of such memory about 6x as slow as that
    of memory freed a moment ago; without this, whichever writer reuses the
    other's freed pages wins, whatever its own cost."""
    buf = bytes(64 << 20)
    with open(path, "wb") as f:
        for _ in range(0, n, len(buf)):
            f.write(buf)
    path.unlink()


def written_pages() -> int:
    """Pages written out of the page cache since boot (/proc/vmstat)."""
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("nr_written "):
                return int(line.split()[1])
    return 0


def evict(*dirs: Path) -> None:
    """Drops the (clean) pages of the files under dirs from the page cache."""
    for d in dirs:
        evict_files(*(p for p in d.rglob("*") if p.is_file()))


def evict_files(*files: Path) -> None:
    for p in files:
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue  # the server's reaper deleted it meanwhile (tmp/del-*)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def rank_main(rank: int, a: argparse.Namespace, url: str, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

    from sextant.checkpoint import VolumeReader, VolumeWriter
    from sextant.client import Client

    # Saves and loads are recorded on a run, as in a job under sextant run.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), MLFLOW_RUN_ID=a.run_id)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks, timeout=datetime.timedelta(minutes=30))
    ckpt_pg = dist.new_group(backend="gloo")
    per_rank = a.bytes // a.ranks
    n_tensors = 8
    # Each rank owns distinct tensors (its shard of the model): keys per rank.
    g = torch.Generator().manual_seed(rank)
    state = {f"r{rank}.t{i}": torch.randn(per_rank // 4 // n_tensors, generator=g) for i in range(n_tensors)}
    client = Client(url)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn) -> None:
        # Dirty pages of the previous phase are flushed first, so that no
        # phase pays for another's writeback. Loads start cold: neither the
        # local checkpoint nor the server's files are in the page cache.
        os.sync()
        if rank == 0 and name.endswith("_load_s"):
            evict(Path(a.dir) / "fs_ckpt", Path(a.dir) / "data")
        warm_page_cache(Path(a.dir) / f"warm{rank}", per_rank + (256 << 20))
        dist.barrier()
        w0 = written_pages()
        t = time.perf_counter()
        fn()
        dist.barrier()
        times.setdefault(name, []).append(time.perf_counter() - t)
        # Written out of the page cache meanwhile, by the whole machine: for
        # a VolumeWriter save (the server writes with O_DIRECT, which does
        # not count) that is staged files the kernel wrote before they were
        # deleted, which it should not have to.
        if name.endswith("_save_s"):
            times.setdefault(name[:-2] + "_page_cache_written_gib", []).append((written_pages() - w0) * 4096 / 2**30)

    local = Path(a.dir) / "fs_ckpt"

    def run_async() -> None:
        t = time.perf_counter()
        fut = dcp.async_save(state, storage_writer=VolumeWriter(a.vol + "/async", client=client), process_group=ckpt_pg)
        times.setdefault("volume_async_blocked_s", []).append(time.perf_counter() - t)
        fut.result()

    def alternate(rep: int, *phases) -> None:
        # Each side goes first in every other round.
        for name, fn in (phases if rep % 2 == 0 else phases[::-1]):
            timed(name, fn)

    # Each round saves into a new directory, as a training job does (step_N).
    for rep in range(a.reps):
        alternate(rep, ("fs_save_s", lambda: dcp.save(state, storage_writer=FileSystemWriter(str(local / f"step_{rep}")))),
                  ("volume_save_s", lambda: dcp.save(state, storage_writer=VolumeWriter(f"{a.vol}/sync/step_{rep}", client=client))),
                  # The same save not recorded on the run: what recording costs.
                  ("volume_save_unreported_s", lambda: dcp.save(state, storage_writer=VolumeWriter(
                      f"{a.vol}/unreported/step_{rep}", client=client, report=False))))
        # Only the loads below read the saves of every round; the unreported
        # ones go at once (5 rounds of 4 GiB three ways did not fit the disk).
        if rank == 0:
            client.delete_tree(f"{a.vol}/unreported/step_{rep}")
        dist.barrier()
    # What async_save blocks on should be the CPU copy alone.
    for rep in range(a.reps):
        alternate(rep, ("cpu_copy_s", lambda: {k: v.clone() for k, v in state.items()}), ("volume_async_landed_s", run_async))
    target = {k: torch.empty_like(v) for k, v in state.items()}
    for rep in range(a.reps):
        alternate(rep, ("fs_load_s", lambda: dcp.load(target, storage_reader=FileSystemReader(str(local / f"step_{rep}")))),
                  ("volume_load_s", lambda: dcp.load(target, storage_reader=VolumeReader(f"{a.vol}/sync/step_{rep}", client=client))))
    assert all(torch.equal(target[k], state[k]) for k in state)
    # In each round the slowest rank decides.
    names = sorted(times)
    t = torch.tensor([times[k] for k in names], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        Path(out).write_text(json.dumps(dict(zip(names, t.tolist()))))
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
    # the server).
    disk_write_sync = min(write(src, True) for _ in range(2))
    c = Client(url)
    warm = d / "warm.bin"
    n = a.ranks

    def best(fn, nbytes: int, cold=lambda: evict(d / "data")) -> float:
        # Best of two, each from cold files (as a download of a checkpoint
        # written earlier is) and warm memory.
        ts = []
        for _ in range(2):
            cold()
            warm_page_cache(warm, nbytes + (256 << 20))
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return min(ts)

    def down(name: str, i: int) -> None:
        c.download_file(f"{a.vol}/files/{name}", d / f"d{i}.bin")
        (d / f"d{i}.bin").unlink()

    def copy() -> None:
        with open(src, "rb") as f, open(d / "copy.bin", "wb") as g:
            while b := f.read(8 << 20):
                g.write(b)
        (d / "copy.bin").unlink()

    def read() -> None:
        with open(src, "rb") as f:
            while f.readinto(buf):
                pass

    buf = bytearray(8 << 20)
    # What a download does without HTTP: read a cold file, write a local one.
    evict_src = lambda: evict_files(src)  # noqa: E731
    disk_read = best(lambda: read(), size, evict_src)
    disk_copy = best(lambda: copy(), size, evict_src)
    up1 = best(lambda: c.upload_file(a.vol + "/files/one.bin", src), size)
    down1 = best(lambda: down("one.bin", 0), size)
    down_mem = best(lambda: c._get_range(a.vol + "/files/one.bin", 0, None, lambda b: None), size)
    with ThreadPoolExecutor(n) as ex:
        upn = best(lambda: list(ex.map(lambda i: c.upload_file(f"{a.vol}/files/p{i}.bin", src), range(n))), n * size)
        downn = best(lambda: list(ex.map(lambda i: down(f"p{i}.bin", i), range(n))), n * size)
    src.unlink()
    return {
        "file_bytes": size,
        "disk_write_fsync_gbps": gbps(size, disk_write_sync),
        "upload_gbps": gbps(size, up1),
        "download_gbps": gbps(size, down1),
        "download_to_memory_gbps": gbps(size, down_mem),
        f"upload_{n}_streams_gbps": gbps(n * size, upn),
        f"download_{n}_streams_gbps": gbps(n * size, downn),
        "upload_vs_disk_write_fsync": round(disk_write_sync / up1, 2),
        "disk_read_cold_gbps": gbps(size, disk_read),
        "disk_copy_cold_gbps": gbps(size, disk_copy),
        "download_vs_disk_copy": round(disk_copy / down1, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--short", action="store_true", help="512 MiB instead of --size-gib")
    p.add_argument("--size-gib", type=float, default=4)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bin", default=os.environ.get("SEXTANT_BIN", ""))
    p.add_argument("--dir", default="")
    p.add_argument("--reps", type=int, default=5, help="rounds of the DCP measurements; the median counts")
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
        r = requests.post(url + "/api/2.0/mlflow/runs/create", json={"experiment_id": "0"}, timeout=10)
        r.raise_for_status()
        a.run_id = r.json()["run"]["info"]["run_id"]
        os.environ["MLFLOW_TRACKING_URI"] = url
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
        runs = json.loads(Path(out).read_text())
        stop.set()
        d = {k: statistics.median(v) for k, v in runs.items()}
        dcp = {k: round(v, 3) for k, v in d.items()}
        dcp["bytes"] = a.bytes
        dcp["ranks"] = a.ranks
        dcp["volume_save_vs_fs_save"] = round(d["volume_save_s"] / d["fs_save_s"], 2)
        dcp["async_blocked_vs_cpu_copy"] = round(d["volume_async_blocked_s"] / d["cpu_copy_s"], 2)
        dcp["volume_load_vs_fs_load"] = round(d["volume_load_s"] / d["fs_load_s"], 2)
        # Recording each save on the run (two small requests a save).
        dcp["report_overhead"] = round(d["volume_save_s"] / d["volume_save_unreported_s"] - 1, 4)
        evs = requests.get(url + "/api/2.0/sextant/events/list", params={"run_id": a.run_id}, timeout=30).json()["events"]
        dcp["recorded_events"] = {k: sum(e["kind"] == k for e in evs) for k in ("checkpoint_save", "checkpoint_load")}
        # The same, measured directly: a save records two events (writing,
        # then complete), each one request; the paired rounds above are
        # noisier than the 1% they would show.
        from sextant.client import Client

        c = Client(url)
        ev = {"kind": "checkpoint_save", "time_ms": int(time.time() * 1000), "step": 1, "open": True,
              "checkpoint": {"path": a.vol + "/sync/step_0", "outcome": "writing", "mode": "sync", "ranks": a.ranks}}
        took = []
        for i in range(40):
            t = time.perf_counter()
            c.append_events(a.run_id, [dict(ev, key=f"bench-{i}")])
            took.append(time.perf_counter() - t)
        dcp["report_request_ms"] = round(statistics.median(took) * 1000, 2)
        dcp["report_cost_vs_volume_save"] = round(2 * statistics.median(took) / d["volume_save_s"], 5)
        result = {"benchmark": "volumes", "short": a.short, "cpus": os.cpu_count(), "reps": a.reps, "dcp": dcp, "files": files,
                  "dcp_runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items()},
                  "server_peak_rss_mb": round(max(peak[0], rss_kib(srv.pid)) / 1024, 1)}
        print(json.dumps(result, indent=2))
    finally:
        srv.terminate()
        srv.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
