"""Training data on Sextant volumes, with exact resume.

:class:`VolumeDataset` streams samples from the shard files of a volume
directory. Each rank reads its own shards; inside a rank the samples form one
stream whose batches are dealt to DataLoader workers in turn (batch ``j`` to
worker ``j % num_workers``), which is exactly the order in which the
DataLoader hands them out: the sequence of samples a rank sees is the same
with any number of workers, and after a resume.

:class:`PipelineState` is the small, exact way to keep the position of a data
pipeline you run yourself (epoch, shard, offset, samples seen, RNG states) in
the DCP state dict next to the model.

Both are DCP ``Stateful``: put them in the state dict you give ``dcp.save`` /
``dcp.load``. Their state is kept per rank (under ``rank_<r>``), so a resume
needs the same world size.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pickle
import random
import shutil
import sys
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .client import Client, volume_path

__all__ = ["VolumeDataset", "VolumeDataLoader", "PipelineState", "write_shards", "INDEX_NAME"]

#: The optional index of a dataset directory: {"shards": [{"name", "samples"}]}.
INDEX_NAME = "_index.json"


def _rank_world(rank: int | None, world: int | None) -> tuple[int, int]:
    if rank is not None and world is not None:
        return rank, world
    if dist.is_available() and dist.is_initialized():
        return (rank if rank is not None else dist.get_rank()), (world if world is not None else dist.get_world_size())
    return (rank if rank is not None else int(os.environ.get("RANK", 0))), (
        world if world is not None else int(os.environ.get("WORLD_SIZE", 1)))


def decode_jsonl(data: bytes) -> list[Any]:
    """One JSON value per non-empty line."""
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def decode_lines(data: bytes) -> list[str]:
    """One string per line."""
    return data.decode("utf-8").splitlines()


def decode_torch(data: bytes) -> list[Any]:
    """A torch.save'd list, or a tensor whose first dimension indexes samples."""
    obj = torch.load(io.BytesIO(data), weights_only=True)
    return list(obj.unbind(0)) if isinstance(obj, torch.Tensor) else list(obj)


_DECODERS: dict[str, Callable[[bytes], list[Any]]] = {
    ".jsonl": decode_jsonl,
    ".json": decode_jsonl,
    ".txt": decode_lines,
    ".pt": decode_torch,
    ".pth": decode_torch,
}


class VolumeDataset(IterableDataset):  # type: ignore[type-arg]
    """Samples from the shard files under a volume directory.

    Args:
        path: the directory (``/Volumes/...``); shards are the files under it
            (recursively) whose names end in one of ``suffixes``, in path order.
        batch_size: the DataLoader's batch size: workers are dealt whole
            batches. Use :class:`VolumeDataLoader` or pass the same number to
            the DataLoader (with ``drop_last=False``).
        shuffle: shuffle the shards, and the samples in each shard, per epoch
            (seeded by ``seed`` and the epoch: every run sees the same order).
        decode: turns a shard's bytes into its samples (default by suffix:
            ``.jsonl``/``.json`` lines of JSON, ``.txt`` lines, ``.pt`` a list
            or tensor).
        transform: applied to each sample a worker yields.
        rank, world_size: default from torch.distributed, else $RANK and
            $WORLD_SIZE. Rank ``r`` reads shards ``r, r + world_size, ...``.
        cache_dir: where shards are downloaded (shared by the workers of a
            node; default ``$SEXTANT_STAGING_DIR`` or the temporary directory).

    ``state_dict()`` / ``load_state_dict()`` give the exact position: iterated
    in the main process the dataset counts what it yields; with DataLoader
    workers, :class:`VolumeDataLoader` counts the batches it hands out. A
    resumed epoch starts at the next sample. With an ``_index.json`` in the
    directory (:func:`write_shards` writes one) resuming skips whole shards
    without reading them; without it, the shards already consumed in the
    epoch are read again to count their samples.
    """

    def __init__(
        self,
        path: str,
        *,
        batch_size: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        suffixes: Iterable[str] = (".jsonl", ".json", ".txt", ".pt", ".pth"),
        decode: Callable[[bytes], Iterable[Any]] | None = None,
        transform: Callable[[Any], Any] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        client: Client | None = None,
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.path = volume_path(path)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.suffixes = tuple(suffixes)
        self.decode = decode
        self.transform = transform
        self._rank, self._world = rank, world_size
        self.client = client or Client()
        self.cache_dir = cache_dir or os.environ.get("SEXTANT_STAGING_DIR") or tempfile.gettempdir()
        self.epoch = 0
        # Position in the epoch: samples consumed, and (when known) the index
        # of the shard in this rank's list and the offset in it.
        self._consumed = 0
        self._shard = -1
        self._offset = 0
        self._shards: list[tuple[str, int | None]] | None = None  # (path, samples or None)
        self._fingerprint = ""  # of the shard list: a resume must see the same shards
        self._want_fingerprint = ""  # from a loaded state
        # Shards are cached per dataset object (its DataLoader workers share
        # the directory), removed when the process that made it exits.
        self._cache = Path(self.cache_dir) / f"sextant-dataset-{uuid.uuid4().hex[:12]}"
        weakref.finalize(self, _remove_cache, str(self._cache), os.getpid())

    # ---- shards ----

    def shards(self) -> list[tuple[str, int | None]]:
        """Every shard (path, samples if indexed), in path order."""
        if self._shards is None:
            counts: dict[str, int] = {}
            try:
                idx = json.loads(self.client.read(self.path + "/" + INDEX_NAME))
                counts = {self.path + "/" + s["name"]: int(s["samples"]) for s in idx["shards"]}
            except Exception:  # noqa: BLE001 - no index, or an unreadable one: count by reading
                counts = {}
            entries = sorted((e for e in self.client.walk(self.path)
                              if e.name.endswith(self.suffixes) and e.name != INDEX_NAME and not e.name.startswith(".")),
                             key=lambda e: e.path)
            if not entries:
                raise FileNotFoundError(f"no shards under {self.path} (files ending in {', '.join(self.suffixes)})")
            self._shards = [(e.path, counts.get(e.path)) for e in entries]
            self._fingerprint = hashlib.sha256("\n".join(f"{e.path}:{e.size}" for e in entries).encode()).hexdigest()[:16]
        if self._want_fingerprint and self._want_fingerprint != self._fingerprint:
            raise ValueError(f"the shards under {self.path} changed since the position was saved: resuming would "
                             "not continue at the next sample")
        return self._shards

    def rank_shards(self, epoch: int | None = None) -> list[tuple[str, int | None]]:
        """This rank's shards for an epoch, in reading order."""
        shards = list(self.shards())
        e = self.epoch if epoch is None else epoch
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + e).shuffle(shards)
        rank, world = _rank_world(self._rank, self._world)
        return shards[rank::world]

    def _samples(self, shard: str, epoch: int, workers: int) -> list[Any]:
        data = self._fetch(shard, workers)
        decode = self.decode or _DECODERS.get(os.path.splitext(shard)[1])
        if decode is None:
            raise ValueError(f"no decoder for {shard}: pass decode=")
        samples = list(decode(data))
        if self.shuffle:
            random.Random(f"{self.seed}/{epoch}/{shard}").shuffle(samples)
        return samples

    def _fetch(self, shard: str, workers: int) -> bytes:
        """A shard's bytes; with several workers, downloaded once per node into
        the cache directory (workers take turns under a file lock)."""
        if workers <= 1:
            return self.client.read(shard)
        d = self._cache
        d.mkdir(parents=True, exist_ok=True)
        key = shard.strip("/").replace("/", "__")
        local = d / key
        with open(d / (key + ".lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                if not local.exists():
                    self.client.download_file(shard, local)
                return local.read_bytes()
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)

    # ---- iteration ----

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch (a resumed epoch keeps its position)."""
        if epoch != self.epoch:
            self.epoch, self._consumed, self._shard, self._offset = epoch, 0, -1, 0

    def _start(self, shards: list[tuple[str, int | None]], workers: int) -> tuple[int, int]:
        """(shard index, offset) of the next sample."""
        if self._shard >= 0:
            return self._shard, self._offset
        left = self._consumed
        for i, (shard, n) in enumerate(shards):
            if n is None:
                n = len(self._samples(shard, self.epoch, workers))
            if left < n:
                return i, left
            left -= n
        return len(shards), 0

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        workers, wid = (info.num_workers, info.id) if info is not None else (1, 0)
        main = info is None
        shards = self.rank_shards()
        si, off = self._start(shards, workers)
        k = 0  # samples since the start position
        while si < len(shards):
            samples = self._samples(shards[si][0], self.epoch, workers)
            while off < len(samples):
                if (k // self.batch_size) % workers == wid:
                    s = samples[off]
                    if main:
                        # Counted before the consumer gets it: a state_dict taken
                        # after receiving sample i resumes at i + 1.
                        self._consumed += 1
                        self._shard, self._offset = si, off + 1
                    yield self.transform(s) if self.transform else s
                off += 1
                k += 1
            si, off = si + 1, 0
            if main:
                self._shard, self._offset = si, 0

    # ---- state ----

    def _key(self) -> str:
        return f"rank_{_rank_world(self._rank, self._world)[0]}"

    def state_dict(self) -> dict[str, Any]:
        """This rank's position, under rank_<r>."""
        self.shards()
        return {self._key(): {"epoch": self.epoch, "consumed": self._consumed, "shard": self._shard,
                              "offset": self._offset, "seed": self.seed, "batch_size": self.batch_size,
                              "shards": self._fingerprint}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores a position saved by state_dict (same rank)."""
        s = state.get(self._key())
        if s is None:
            raise KeyError(f"no data position for {self._key()} in the state (keys: {sorted(state)}): "
                           "resume with the same world size")
        if int(s["seed"]) != self.seed:
            raise ValueError(f"the saved position is for seed {s['seed']}, this dataset has seed {self.seed}")
        self.epoch, self._consumed = int(s["epoch"]), int(s["consumed"])
        self._shard, self._offset = int(s["shard"]), int(s["offset"])
        self._want_fingerprint = str(s.get("shards", ""))
        self._shards = None  # listed again, and checked against the fingerprint

    def _advance(self, n: int) -> None:
        """Counts n samples handed out by a DataLoader with workers."""
        self._consumed += n
        self._shard, self._offset = -1, 0  # known by count only


def _remove_cache(path: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


def _batch_len(batch: Any) -> int | None:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        return _batch_len(next(iter(batch.values()))) if batch else 0
    if isinstance(batch, (list, tuple)):
        if batch and isinstance(batch[0], (torch.Tensor, dict, list, tuple)):
            return _batch_len(batch[0])
        return len(batch)
    return None


class VolumeDataLoader(DataLoader):  # type: ignore[type-arg]
    """A DataLoader over a :class:`VolumeDataset` that keeps the dataset's
    position as it hands out batches, with any number of workers.

    It sets the dataset's batch size to its own, and refuses
    ``persistent_workers`` (a persistent worker would not see a restored
    position) and ``drop_last`` (the last batch of a worker is partial).
    ``state_dict()`` / ``load_state_dict()`` are the dataset's.
    """

    def __init__(self, dataset: VolumeDataset, batch_size: int = 1, **kwargs: Any) -> None:
        if kwargs.get("persistent_workers"):
            raise ValueError("VolumeDataLoader needs persistent_workers=False: workers must start from the dataset's position")
        if kwargs.get("drop_last"):
            raise ValueError("VolumeDataLoader needs drop_last=False")
        dataset.batch_size = batch_size
        # Creating an iterator draws a seed from the generator: a private one
        # keeps the global RNG (which PipelineState restores) out of it.
        kwargs.setdefault("generator", torch.Generator().manual_seed(dataset.seed))
        super().__init__(dataset, batch_size=batch_size, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        ds: VolumeDataset = self.dataset  # type: ignore[assignment]
        ds.shards()  # listed once, here: every worker gets the same list
        it = super().__iter__()
        if self.num_workers == 0:
            yield from it  # the dataset counts in this process
            return
        for batch in it:
            n = _batch_len(batch)
            ds._advance(self.batch_size if n is None else n)
            yield batch

    def state_dict(self) -> dict[str, Any]:
        return self.dataset.state_dict()  # type: ignore[attr-defined,no-any-return]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.dataset.load_state_dict(state)  # type: ignore[attr-defined]


class PipelineState:
    """The position of a data pipeline you run yourself, for the DCP state dict.

    It holds ``epoch``, ``shard``, ``offset`` (in the shard) and
    ``samples_seen``, small ``extra`` values of your own, and (with
    ``rng=True``) the RNG states of Python's ``random``, NumPy (if imported)
    and torch (CPU and CUDA), captured by ``state_dict()`` and restored by
    ``load_state_dict()``::

        pos = PipelineState()
        state = {"model": model, "optim": optim, "data": pos}
        for batch in my_batches(start=(pos.epoch, pos.shard, pos.offset)):
            ...; pos.advance(len(batch))
        dcp.save(state, storage_writer=VolumeWriter(path))
        # resume: dcp.load(state, storage_reader=VolumeReader(path)); continue from pos

    The state is per rank (under ``rank_<r>``).
    """

    def __init__(self, *, epoch: int = 0, shard: int = 0, offset: int = 0, samples_seen: int = 0,
                 rng: bool = True, rank: int | None = None, extra: dict[str, Any] | None = None) -> None:
        self.epoch, self.shard, self.offset, self.samples_seen = epoch, shard, offset, samples_seen
        self.rng = rng
        self.extra: dict[str, Any] = dict(extra or {})
        self._rank = rank

    def advance(self, n: int = 1) -> None:
        """n more samples consumed from the current shard."""
        self.offset += n
        self.samples_seen += n

    def next_shard(self) -> None:
        """The current shard is done."""
        self.shard, self.offset = self.shard + 1, 0

    def next_epoch(self) -> None:
        """The epoch is done."""
        self.epoch, self.shard, self.offset = self.epoch + 1, 0, 0

    def _key(self) -> str:
        return f"rank_{_rank_world(self._rank, None)[0]}"

    def state_dict(self) -> dict[str, Any]:
        rng: dict[str, Any] = {}
        if self.rng:
            rng["python"] = random.getstate()
            np = sys.modules.get("numpy")
            if np is not None:
                rng["numpy"] = np.random.get_state()
            rng["torch"] = torch.get_rng_state()
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                rng["cuda"] = torch.cuda.get_rng_state_all()
        blob = pickle.dumps({"rng": rng, "extra": self.extra})
        return {self._key(): {"epoch": self.epoch, "shard": self.shard, "offset": self.offset,
                              "samples_seen": self.samples_seen, "blob": blob}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        s = state.get(self._key())
        if s is None:
            raise KeyError(f"no pipeline state for {self._key()} (keys: {sorted(state)}): resume with the same world size")
        self.epoch, self.shard, self.offset, self.samples_seen = (int(s["epoch"]), int(s["shard"]), int(s["offset"]),
                                                                  int(s["samples_seen"]))
        b = pickle.loads(s["blob"])
        self.extra = b["extra"]
        rng = b["rng"]
        if "python" in rng:
            random.setstate(rng["python"])
        if "numpy" in rng:
            import numpy as np

            np.random.set_state(rng["numpy"])
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])


def write_shards(path: str, samples: Iterable[Any], *, samples_per_shard: int, client: Client | None = None,
                 prefix: str = "shard") -> int:
    """Writes samples (JSON values) as .jsonl shards under the volume directory
    path, with an _index.json; returns the number of shards."""
    client = client or Client()
    path = volume_path(path)
    index: list[dict[str, Any]] = []
    buf: list[bytes] = []

    def flush() -> None:
        name = f"{prefix}-{len(index):05d}.jsonl"
        client.upload_bytes(path + "/" + name, b"".join(buf))
        index.append({"name": name, "samples": len(buf)})
        buf.clear()

    for s in samples:
        buf.append(json.dumps(s).encode() + b"\n")
        if len(buf) == samples_per_shard:
            flush()
    if buf:
        flush()
    client.upload_bytes(path + "/" + INDEX_NAME, json.dumps({"shards": index}).encode())
    return len(index)
