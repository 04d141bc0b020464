"""PyTorch Distributed Checkpoint (DCP) storage on Sextant volumes.

:class:`VolumeWriter` and :class:`VolumeReader` stage all I/O through a fast
local directory (``staging_dir``, else ``$SEXTANT_STAGING_DIR``, else the
system's temporary directory) and upload to / download from a volume::

    import torch.distributed.checkpoint as dcp
    from sextant.checkpoint import VolumeReader, VolumeWriter

    path = "/Volumes/main/team/ckpt/run1/step_100"
    fut = dcp.async_save(state_dict, storage_writer=VolumeWriter(path))
    ...                      # training continues while the shards upload
    fut.result()             # returns once the checkpoint has landed
    dcp.load(state_dict, storage_reader=VolumeReader(path))

A checkpoint is complete once its ``.metadata`` exists. The writer uploads
each rank's shards inside ``write_data`` (in parallel, as soon as each is
written, retrying for ``retry_seconds``), and DCP calls ``finish`` on the
coordinator only after every rank's ``write_data`` returned; ``finish``
checks that every shard is on the volume and only then uploads
``.metadata``. A save that fails anywhere (a rank killed, the server or the
network gone) leaves no ``.metadata`` and raises :class:`CheckpointSaveError`
(inside torch's ``CheckpointException``), naming the shards that did not
land; :class:`VolumeReader` refuses such a checkpoint with
:class:`IncompleteCheckpointError`, at once when it is created (before
``dcp.load``, which would wrap the error), and :func:`latest_complete` finds
the checkpoint to load instead.

Shard files are named per save (``__<rank>_<save>_<n>.distcp``), so no
``.metadata`` can ever describe another save's bytes, and a coordinator
holds ``.sextant-writer`` in the checkpoint directory while saving, so that
a second job saving into the same directory fails at once with a clear
error instead of racing the first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future as _CFuture
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from torch.distributed.checkpoint.filesystem import (
    DEFAULT_SUFFIX,
    FileSystem,
    FileSystemReader,
    FileSystemWriter,
    _item_size,
    _StoragePrefix,
)
from torch.distributed.checkpoint.metadata import STATE_DICT_TYPE, Metadata, StorageMeta
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, SavePlan, SavePlanner, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from .client import AlreadyExists, Client, Conflict, NotFound, volume_path

__all__ = [
    "VolumeWriter",
    "VolumeReader",
    "IncompleteCheckpointError",
    "CheckpointSaveError",
    "MainGuardError",
    "CheckpointInfo",
    "list_checkpoints",
    "latest_checkpoint",
    "latest_complete",
    "STAGING_MODES",
    "METADATA",
    "WRITER_LOCK",
]

#: The file that marks a checkpoint complete; written last.
METADATA = ".metadata"
#: The file a saving coordinator holds in the checkpoint directory.
WRITER_LOCK = ".sextant-writer"


class IncompleteCheckpointError(FileNotFoundError):
    """The checkpoint directory exists but has no .metadata: its save did not
    finish. ``path`` is the checkpoint; ``latest`` the newest complete
    checkpoint beside it (in the same parent directory), or None."""

    def __init__(self, message: str, *, path: str = "", latest: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.latest = latest


class CheckpointSaveError(RuntimeError):
    """A save that did not complete. ``path`` is the checkpoint directory;
    ``missing`` the shard files (of the rank that raised) that did not land;
    ``replaced`` is True when the directory held a complete checkpoint
    before this save, which is then intact (it is replaced only once every
    new shard has landed). torch raises it inside its ``CheckpointException``
    (a ``BaseException``): ``e.failures[rank][0]``."""

    # path and the others have defaults: torch pickles a rank's exception to
    # send it to the others, and unpickling calls the class with the message.
    def __init__(self, message: str, *, path: str = "", missing: list[str] | None = None, replaced: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.missing = list(missing or [])
        self.replaced = replaced


class MainGuardError(RuntimeError):
    """The training script was started again inside a spawned process (the
    checkpoint process of ``async_save(...,
    async_checkpointer_type=AsyncCheckpointerType.PROCESS)``, or a DataLoader
    worker with the spawn start method): it has no ``if __name__ ==
    "__main__":`` guard, so the spawned process re-runs the training code
    while it imports the script, and would wait for its process group for
    the 30 minutes of gloo's timeout. Raised in that process, at once; the
    training process then fails with torch's "Checkpoint background process
    is dead"."""


_MAIN_GUARD_HINT = (
    "{what} while a spawned process was importing the main script {script!r}: the script has no "
    "'if __name__ == \"__main__\":' guard, so the checkpoint process that "
    "dcp.async_save(..., async_checkpointer_type=AsyncCheckpointerType.PROCESS) starts (or a "
    "spawned DataLoader worker) runs the training code again and would wait for its process group "
    "for 30 minutes. Put the training code in a function called under "
    "'if __name__ == \"__main__\":' (docs/volumes.md, 'Async saves: thread or process')."
)


def _bootstrapping() -> bool:
    """Whether this process is a spawned (or forkserver) child that is still
    importing its parent's main script: multiprocessing sets
    ``_inheriting`` on the process object for that time."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def _main_script() -> str:
    main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
    return str(getattr(main, "__file__", "") or "the main script")


def _refuse_training_while_bootstrapping() -> None:
    """When this module is imported while a spawned child imports the main
    script, makes the training code's first collective step (creating the
    process group) raise MainGuardError instead of hanging. Only calls made
    during that import are refused: a guarded script never makes one, and
    torch's checkpoint process creates its own group after it."""
    if not _bootstrapping():
        return
    import torch.distributed as dist

    init = dist.init_process_group
    if getattr(init, "_sextant_guard", False):
        return

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if _bootstrapping():
            raise MainGuardError(_MAIN_GUARD_HINT.format(what="torch.distributed.init_process_group was called",
                                                         script=_main_script()))
        return init(*args, **kwargs)

    init_process_group._sextant_guard = True  # type: ignore[attr-defined]
    init_process_group.__wrapped__ = init  # type: ignore[attr-defined]
    init_process_group.__doc__ = init.__doc__
    dist.init_process_group = init_process_group


class _SaveStopped(Exception):
    """An upload not attempted because another one of the rank failed."""


@dataclass
class _SavePrefix(_StoragePrefix):
    """The storage data of a save's plans: the shards' file prefix, and
    whether the save replaces a complete checkpoint in its directory."""

    replaces: bool = False


def _left(client: Client, remote: str, replaces: bool) -> str:
    """What a failed save left, said after "no .metadata was published, so":
    with replaces, the complete checkpoint it was replacing in its own
    directory, which still loads; else that remote is incomplete, and what
    _others says of the checkpoints beside it."""
    if replaces:
        return (f"{remote} still holds the complete checkpoint it held before this save, intact and loading: it is "
                "replaced only when this save's .metadata lands, which it did not.")
    return f"{remote} is incomplete and nothing will load it. {_others(client, remote)}"


def _others(client: Client, remote: str) -> str:
    """That a failed save touched no other checkpoint, and the newest
    complete one beside it, asked of the server now (a listing of the parent
    and a HEAD per directory, newest first, until one is complete: this runs
    only when a save fails, on each rank whose shards did not land), or that
    there is none, or that the server could not be asked (once, with a short
    timeout: the server may be what failed)."""
    parent = remote.rsplit("/", 1)[0]
    if parent.count("/") < 4:  # remote is a volume itself: nothing beside it
        return "No other checkpoint was touched."
    try:
        latest = _newest_complete(_quick(client), parent, exclude=remote)
    except Exception as e:  # noqa: BLE001 - the save's own error matters, not this one
        return (f"No other checkpoint was touched; which is the newest complete one under {parent} could not be asked "
                f"({_why(e)}): `sextant ckpt latest {parent}` names it.")
    if latest is None:
        return (f"No other checkpoint was touched, and there is no complete checkpoint beside it under {parent} "
                "(as before a run's first save): nothing there loads.")
    return f"No other checkpoint was touched: the newest complete one beside it, {latest}, is intact and loads."


def _quick(client: Client) -> Client:
    """A copy of client that tries each request once, with a short timeout."""
    c = client.with_retries(retry_seconds=None)
    c.retries = 0
    c.timeout = min(c.timeout, 5.0)
    return c


def _why(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}" if not isinstance(e, _SaveStopped) else str(e)
    return text if len(text) <= 300 else text[:300] + "..."


def _staging_root(staging_dir: str | os.PathLike[str] | None) -> str:
    root = os.fspath(staging_dir) if staging_dir else os.environ.get("SEXTANT_STAGING_DIR") or tempfile.gettempdir()
    os.makedirs(root, exist_ok=True)
    return root


def _step_of(path: str) -> int | None:
    m = re.search(r"(\d+)$", path.rstrip("/").rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def _active_run_id() -> str | None:
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        try:
            run = mlflow.active_run()
            if run is not None:
                return str(run.info.run_id)
        except Exception:  # noqa: BLE001 - tagging is best effort
            pass
    return os.environ.get("MLFLOW_RUN_ID") or os.environ.get("SEXTANT_RUN_ID") or None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except Exception:  # noqa: BLE001
        return 0


def _world() -> int:
    try:
        import torch.distributed as dist

        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    except Exception:  # noqa: BLE001
        return 1


_warned_report = False


def _report(client: Client, run_id: str | None, event: dict[str, Any]) -> None:
    """Records a checkpoint event on the run (best effort: a failure is one
    warning, never the save's failure). Retries for at most 5 s."""
    global _warned_report
    if not run_id:
        return
    try:
        client.with_retries(retry_seconds=5.0, max_backoff=1.0).append_events(run_id, [event])
    except Exception as e:  # noqa: BLE001
        if not _warned_report:
            _warned_report = True
            warnings.warn(f"could not record checkpoint {event.get('checkpoint', {}).get('path')} on run {run_id}: {e} "
                          "(the checkpoint itself is not affected; further failures are not reported)", stacklevel=3)


#: How VolumeWriter stages the state for dcp.async_save (its ``staging``).
STAGING_MODES = ("copy", "shared", "pinned")

# Stagers by (pinned, shared), kept for the life of the process: they cache
# their staging buffers by source tensor, so the second save copies into
# the buffers of the first instead of allocating (and faulting in) new ones.
_STAGERS: dict[tuple[bool, bool], Any] = {}
_STAGERS_LOCK = threading.Lock()


def _stage_shared(state_dict: Any, pinned: bool) -> Any:
    """Stages state_dict into shared (and, with pinned, pinned) memory with
    the process's stager of that kind. torch 2.11's DefaultStager closes
    its own StateDictStager after each stage (dropping its buffers and the
    copier table a second stage needs: the second save failed with
    ``KeyError: <class 'type'>`` on an H200), so a stager that did is
    dropped and the next save makes a new one."""
    st = _stager(pinned, True)
    out = st.stage(state_dict)
    inner = getattr(st, "_state_dict_stager", None)
    if inner is not None and not getattr(inner, "_deepcopy_dispatch", True):
        with _STAGERS_LOCK:
            if _STAGERS.get((pinned, True)) is st:
                del _STAGERS[(pinned, True)]
    return out


def _stager(pinned: bool, shared: bool) -> Any:
    with _STAGERS_LOCK:
        st = _STAGERS.get((pinned, shared))
        if st is None:
            import torch
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

            cuda = torch.cuda.is_available()
            st = DefaultStager(StagingOptions(use_pinned_memory=pinned and cuda, use_shared_memory=shared,
                                              use_async_staging=False, use_non_blocking_copy=cuda))
            _STAGERS[(pinned, shared)] = st
        return st


def _rmtree(path: str | os.PathLike[str]) -> None:
    shutil.rmtree(path, ignore_errors=True)


class _StagingFileSystem(FileSystem):
    """The local file system of the staging directory. While they are set,
    before_write is called before a file is opened for writing (it may wait)
    and on_written with each file written completely."""

    def __init__(self) -> None:
        super().__init__()
        self.before_write: Any = None
        self.on_written: Any = None

    @contextmanager
    def create_stream(self, path: str | os.PathLike[str], mode: str) -> Generator[IO[bytes], None, None]:
        before = self.before_write
        if before is not None and "w" in mode:
            before()
        with super().create_stream(path, mode) as stream:
            yield cast(IO[bytes], stream)
        cb = self.on_written
        if cb is not None and "w" in mode:
            cb(Path(path))


class _Heartbeat:
    """Keeps a writer lock fresh while a save is in progress: every interval
    it re-uploads the lock's content, as long as the lock is still that of
    this save."""

    def __init__(self, client: Client, lock: str, save: str, interval: float) -> None:
        self.client, self.lock, self.save, self.interval = client, lock, save, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sextant-ckpt-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                body = self.client.read(self.lock)
                if json.loads(body).get("save") != self.save or self._stop.is_set():
                    return
                self.client.upload_bytes(self.lock, body, overwrite=True)
            except Exception:  # noqa: BLE001 - a missed beat only ages the lock
                continue

    def stop(self) -> None:
        # Not waiting long: a beat stuck on a dead network must not hold up
        # the save's failure. A beat that lands after the lock was released
        # leaves a lock that is stale one lease later.
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=2)


class VolumeWriter(FileSystemWriter):
    """A DCP StorageWriter that writes shards to a local staging directory and
    uploads them to the volume path, publishing .metadata last.

    Args:
        path: the checkpoint directory, ``/Volumes/<catalog>/<schema>/<volume>/...``
            (one directory per checkpoint, such as ``.../run1/step_100``).
        staging_dir: where shards are written before upload (default
            ``$SEXTANT_STAGING_DIR`` or the temporary directory). Each rank
            needs room for ``max_staged_files`` files of about ``file_bytes``
            (or one tensor, when larger); each is deleted once uploaded.
        client: the :class:`sextant.client.Client` to use (default: from the
            environment, as the mlflow client).
        step: the training step, for the run's tags (default: the number that
            ends the path's last segment, as in ``step_100``).
        upload_threads: parallel uploads per rank (2: more streams per rank
            did not upload faster on loopback, and each holds a staged file).
        file_bytes: a rank's shards are cut into files of about this size
            (a tensor is never split), written one after the other: each file
            uploads while the next is being written.
        max_staged_files: at most this many of a rank's files are in the
            staging directory at once, written and not yet uploaded (default
            ``upload_threads + 1``): writing waits for uploads, and the
            staging directory needs room for this many files only. Staged
            files are deleted before the kernel writes them out, as long as
            all ranks' staged bytes stay under its background writeback
            threshold (``vm.dirty_background_ratio``, 10% of memory by
            default); past it, the disk writes the staged files too, and the
            saves that measured 1.3x of FileSystemWriter's time took 1.7x.
        thread_count: threads writing files to the staging directory.
        overwrite: replace an existing checkpoint at path (the new one
            becomes visible at once when its .metadata lands); False refuses.
        retry_seconds: how long each request of the save (a shard's upload,
            the .metadata's) retries connection failures, 429 and 5xx, with
            waits from 0.5 s growing to 2 s, before the save fails (30): long
            enough for a server to restart, short enough that a save against
            a dead server fails in about that time (plus at most one request
            timeout, ``SEXTANT_HTTP_TIMEOUT``, for a server that stops
            answering). None keeps the client's own retries.
        publish_timeout: how long ``finish`` waits while the server refuses
            .metadata because other uploads into the directory are in flight
            (409), trying again every 0.5 s, before the save fails (30).
        lease_seconds: a writer lock not refreshed for this long is stale and
            may be taken over by another save.
        keep_staging: keep the staged files (for debugging).
        staging: how ``dcp.async_save`` copies the state before training
            goes on (the time training is blocked): ``"copy"`` (torch's
            default: new CPU tensors each save), ``"shared"`` (into shared
            memory, reused from one save to the next: no allocation after the
            first save, and the process-based checkpointer
            (``AsyncCheckpointerType.PROCESS``) hands the tensors to its
            process without copying them through its pipe), ``"pinned"`` (as
            shared, in pinned memory when CUDA is available, for the fastest
            copy from the GPU). Shared and pinned buffers stay allocated, one
            copy of the state per process, until the process ends. Give
            VolumeWriter the staging rather than ``async_save`` a stager of
            its own: the writer then knows how long training was blocked.
        report: record the save on the run (the launcher's, ``MLFLOW_RUN_ID``
            or the active mlflow run) as a ``checkpoint_save`` event: step,
            path, bytes, ranks, how long training was blocked, when it landed,
            and the outcome (``sextant ckpt ls --run``, the run page). Best
            effort: a failure to record is a warning.
        run_id: the run to record on, instead of the one found.
        nice: how many levels the CPU priority of an async save's
            background work is lowered by, so that training goes first on
            cores it keeps busy: the checkpoint process of the process-based
            checkpointer (once, for the life of that process), or, with the
            thread-based one, the threads that write and upload the shards
            (Linux sets priorities per thread). Default 10 for the process
            mode, 0 (none) for threads, which share the training process's
            interpreter lock anyway; a synchronous save never lowers it.

    A failed save raises :class:`CheckpointSaveError` (in torch's
    ``CheckpointException``), saying which shards did not land and what it
    left: the checkpoint it was replacing, intact, or the newest complete
    checkpoint beside it (or that there is none, or that the server could
    not be asked).

    Works with ``dcp.save`` and ``dcp.async_save`` (which needs a CPU backend
    in the process group: ``gloo``, or ``cpu:gloo,cuda:nccl`` on GPUs); the
    future returns once the checkpoint has landed. When an mlflow run is
    active where the writer is created (or where ``async_save`` is called),
    the coordinator tags it with the checkpoint: ``sextant.checkpoint.latest``
    (path), ``sextant.checkpoint.latest_step`` and
    ``sextant.checkpoint.step.<step>`` (path).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        staging_dir: str | os.PathLike[str] | None = None,
        *,
        client: Client | None = None,
        step: int | None = None,
        upload_threads: int = 2,
        file_bytes: int = 64 << 20,
        max_staged_files: int | None = None,
        thread_count: int = 1,
        single_file_per_rank: bool = True,
        sync_files: bool = False,
        overwrite: bool = True,
        retry_seconds: float | None = 30.0,
        publish_timeout: float = 30.0,
        lease_seconds: float = 60.0,
        keep_staging: bool = False,
        cache_staged_state_dict: bool = False,
        staging: str = "copy",
        report: bool = True,
        run_id: str | None = None,
        nice: int | None = None,
        **kwargs: Any,
    ) -> None:
        if _bootstrapping():
            raise MainGuardError(_MAIN_GUARD_HINT.format(what="VolumeWriter was created", script=_main_script()))
        if staging not in STAGING_MODES:
            raise ValueError(f"staging={staging!r}: use one of {', '.join(STAGING_MODES)}")
        self._remote = volume_path(path)
        self._root = _staging_root(staging_dir)
        super().__init__(
            path=self._root,
            single_file_per_rank=single_file_per_rank,
            sync_files=sync_files,
            thread_count=thread_count,
            cache_staged_state_dict=cache_staged_state_dict,
            overwrite=overwrite,
            **kwargs,
        )
        self.fs = _StagingFileSystem()
        base = client or Client()
        self.retry_seconds = retry_seconds
        self.publish_timeout = publish_timeout
        self.client = base.with_retries(retry_seconds=retry_seconds, max_backoff=2.0) if retry_seconds is not None else base
        self.step = step
        self.upload_threads = max(1, upload_threads)
        self.file_bytes = max(1, file_bytes)
        self.max_staged_files = max(1, max_staged_files if max_staged_files is not None else self.upload_threads + 1)
        self.lease_seconds = lease_seconds
        self.keep_staging = keep_staging
        self.writer_id = uuid.uuid4().hex
        self.is_coordinator = False
        self.staging = staging
        self.nice = nice
        self.report = report
        self._run_id = run_id or _active_run_id()
        self._run_fixed = run_id is not None
        # The save being timed: start (wall ms), time blocked in stage (ms),
        # the pid that staged (a different pid saving: the process-based
        # checkpointer), and the step found in the state dict.
        self._t_start: int | None = None
        self._blocked_ms: int | None = None
        self._stage_pid: int | None = None
        self._state_step: int | None = None
        self._mode = "sync"
        self._save_tag = ""
        self._replaces = False
        self._staging: Path | None = None
        self._heartbeat: _Heartbeat | None = None
        self._staged_dirs: list[str] = []
        weakref.finalize(self, _cleanup_dirs, self._staged_dirs)

    # ---- DCP's StorageWriter ----

    @property
    def checkpoint_id(self) -> str:  # type: ignore[override]
        """The checkpoint's volume path."""
        return self._remote

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        return str(checkpoint_id).startswith("/Volumes/")

    def storage_meta(self) -> StorageMeta | None:
        return StorageMeta(checkpoint_id=self._remote, save_id=self.save_id)

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id:
            self._remote = volume_path(checkpoint_id)
        self._stop_heartbeat()
        super().reset(None)

    def stage(self, state_dict: STATE_DICT_TYPE) -> STATE_DICT_TYPE:
        # async_save stages in the caller's thread: the mlflow run is visible
        # here, and this is the time training is blocked.
        if not self._run_fixed:
            self._run_id = _active_run_id() or self._run_id
        self._t_start, t = _now_ms(), time.perf_counter()
        step = state_dict.get("step") if isinstance(state_dict, dict) else None
        self._state_step = int(step) if isinstance(step, int) and not isinstance(step, bool) else None
        if self.staging == "copy":
            out = super().stage(state_dict)
        else:
            out = _stage_shared(state_dict, self.staging == "pinned")
        self._blocked_ms = int((time.perf_counter() - t) * 1000)
        self._stage_pid = os.getpid()
        return out

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)
        if not self.use_collectives:
            raise ValueError("VolumeWriter needs use_collectives=True: its .metadata is published once, by the "
                             "coordinator, after every rank's shards have landed")
        self.is_coordinator = is_coordinator
        if not self._run_fixed:
            self._run_id = _active_run_id() or self._run_id
        if self._stage_pid is None:
            # Not staged by this writer: a synchronous save, blocked all along
            # (or async_save with a stager of its own: not known).
            self._mode, self._t_start, self._blocked_ms = "sync", _now_ms(), None
        else:
            self._mode = "thread" if self._stage_pid == os.getpid() else "process"
            if self._mode == "process":
                _nice_process(10 if self.nice is None else self.nice)
        self._stop_heartbeat()
        self._staging = Path(tempfile.mkdtemp(prefix="sextant-ckpt-", dir=self._root))
        self._staged_dirs.append(str(self._staging))
        self.path = self._staging

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        self._replaces = False
        if self.is_coordinator and self.client.stat(self._remote + "/" + METADATA) is not None:
            self._replaces = True
            if not self.overwrite:
                raise RuntimeError(f"Checkpoint already exists at {self._remote} and overwrite=False.")
            warnings.warn(f"Overwriting the checkpoint at {self._remote} (overwrite=True): the new one replaces it "
                          "when its .metadata lands", stacklevel=2)
        return super().prepare_local_plan(plan)

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        self._save_tag = uuid.uuid4().hex[:8]
        self._acquire_lock()
        self._report_save("writing", ranks=len(plans))
        return [dataclasses.replace(p, storage_data=_SavePrefix(f"__{i}_{self._save_tag}_", self._replaces))
                for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        storage = cast(_StoragePrefix, plan.storage_data)
        prefix = storage.prefix
        replaces = getattr(storage, "replaces", False)
        tag = prefix.rstrip("_").rsplit("_", 1)[-1]
        if self._heartbeat is None:
            self._heartbeat = _Heartbeat(self.client, self._remote + "/" + WRITER_LOCK, tag, self.lease_seconds / 4)
        lower = (self.nice or 0) if self._mode == "thread" else 0
        if lower > 0:
            _nice_thread(lower)  # the thread that writes the staged files
        pool = ThreadPoolExecutor(self.upload_threads, thread_name_prefix="sextant-upload",
                                  initializer=_nice_thread if lower > 0 else None, initargs=(lower,) if lower > 0 else ())
        uploads: dict[str, _CFuture[int]] = {}
        mu = threading.Lock()
        # A file is written only when fewer than max_staged_files of this
        # rank are staged and not yet uploaded: the staging directory needs
        # room for that many, the kernel deletes them before it would write
        # them out, and the pages an upload frees are the next file's.
        slots = threading.Semaphore(self.max_staged_files)
        # Once an upload has failed (after retry_seconds), the others are
        # not attempted and writing stops: the save fails in about
        # retry_seconds, not in that much per file.
        failed = threading.Event()

        def upload(p: Path) -> int:
            try:
                if failed.is_set():
                    raise _SaveStopped("not uploaded: another upload of this rank had failed")
                return self._upload(p)
            except BaseException:
                failed.set()
                raise
            finally:
                slots.release()

        def on_written(p: Path) -> None:
            with mu:
                if p.name not in uploads:
                    uploads[p.name] = pool.submit(upload, p)

        def before_write() -> None:
            slots.acquire()
            if failed.is_set():
                slots.release()
                raise _SaveStopped("not written: an upload of this rank had failed")

        def on_staged(p: Path) -> None:
            with mu:
                if p.name in uploads:  # written twice: its first upload holds the slot
                    slots.release()
                    return
            on_written(p)

        self.fs.before_write = before_write
        self.fs.on_written = on_staged
        planned: list[str] = []
        error: BaseException | None = None
        try:
            files: queue.Queue[tuple[Any, str, list[WriteItem]]] = queue.Queue()
            for i, bucket in enumerate(_cut(plan.items, self.file_bytes)):
                name = f"{prefix}{i}{DEFAULT_SUFFIX}"
                planned.append(name)
                files.put((self.fs.concat_path(cast(Path, self.path), name), name, bucket))
            fut = self._write_data(planner, files)
            fut.wait()
            results = fut.value()
            for name in sorted({r.storage_data.relative_path for r in results}):
                with mu:
                    if name in uploads:
                        continue
                slots.acquire()  # a file written by other means: its upload releases it
                on_written(cast(Path, self.path) / name)
            for f in list(uploads.values()):
                f.result()
        except Exception as e:  # noqa: BLE001 - reported below with what did not land
            error = e
        finally:
            self.fs.before_write = None
            self.fs.on_written = None
            pool.shutdown(wait=True, cancel_futures=True)
            self._stop_heartbeat()
            if not self.is_coordinator:
                self._drop_staging()
        if error is not None:
            err = self._upload_error(error, planned, uploads, replaces)
            self._save_tag = tag
            self._report_save("failed", error=str(err))
            self._end_save()
            raise err from error
        out: Future[list[WriteResult]] = Future()
        out.set_result(results)
        return out

    def _upload_error(self, error: BaseException, planned: list[str], uploads: dict[str, _CFuture[int]],
                      replaces: bool) -> CheckpointSaveError:
        """The error of a rank whose shards did not all land: which did not,
        and why, the first failure first."""
        missing: list[tuple[str, str]] = []
        first = ""
        for name in planned:
            f = uploads.get(name)
            if f is not None and f.done() and not f.cancelled() and f.exception() is None:
                continue
            if f is None or f.cancelled():
                why = "not uploaded: the save stopped first"
            else:
                exc = f.exception()
                why = _why(exc) if exc is not None else "not uploaded"
                if not first and exc is not None and not isinstance(exc, _SaveStopped):
                    first = name
            missing.append((name, why))
        missing.sort(key=lambda m: (m[0] != first, m[0]))
        shown = "; ".join(f"{n} ({why})" for n, why in missing[:4])
        more = f"; and {len(missing) - 4} more" if len(missing) > 4 else ""
        what = f"{len(missing)} of {len(planned)} shard file(s)" if planned else "its shard files"
        cause = "" if first else f" Writing them failed: {_why(error)}."
        rank = f"rank {self.rank}" if getattr(self, "rank", None) is not None else "this rank"
        left = _left(self.client, self._remote, replaces)
        return CheckpointSaveError(
            f"checkpoint {self._remote} was not saved: {what} of {rank} did not land: {shown}{more}.{cause} No .metadata "
            f"was published, so {left}",
            path=self._remote, missing=[n for n, _ in missing], replaced=replaces)

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        try:
            self._finish(metadata, results)
        except BaseException as e:
            self._report_save("failed", error=str(e), results=results)
            self._end_save()
            raise
        self._report_save("complete", results=results)
        self._end_save()

    def _finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        super().finish(metadata, results)
        names = {r.storage_data.relative_path for rs in results for r in rs}
        try:
            present = {e.name for e in self.client.list_dir(self._remote)}
        except Exception as e:
            raise CheckpointSaveError(
                f"checkpoint {self._remote} was not saved: its {len(names)} shard file(s) were uploaded, but listing "
                f"them to check failed ({_why(e)}), so .metadata was not published: "
                f"{_left(self.client, self._remote, self._replaces)}", path=self._remote, replaced=self._replaces) from e
        missing = sorted(names - present)
        if missing:
            raise CheckpointSaveError(
                f"checkpoint {self._remote} was not saved: {len(missing)} of {len(names)} shard file(s) are not on the "
                f"volume ({', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}; deleted while saving?), so "
                f".metadata was not published: {_left(self.client, self._remote, self._replaces)}",
                path=self._remote, missing=missing, replaced=self._replaces)
        self._publish(cast(Path, self.path) / METADATA)
        # The checkpoint is complete: what follows is upkeep, and its
        # failures are warnings.
        try:
            # Shards of earlier saves into this directory are garbage now.
            stale = [self._remote + "/" + n for n in sorted(present) if n.endswith(".distcp") and n not in names]
            if stale:
                with ThreadPoolExecutor(min(8, len(stale)), thread_name_prefix="sextant-delete") as ex:
                    list(ex.map(lambda p: self.client.delete(p, missing_ok=True), stale))
            self._release_lock()
        except Exception as e:  # noqa: BLE001
            warnings.warn(f"checkpoint {self._remote} saved, but removing the previous save's shards or the writer "
                          f"lock failed ({_why(e)}): `sextant ckpt gc` removes them later", stacklevel=2)
        self._tag_run()
        self._drop_staging()

    def _publish(self, local: Path) -> None:
        """Uploads .metadata, waiting up to publish_timeout while the server
        refuses it for uploads into the directory in flight."""
        deadline = time.monotonic() + self.publish_timeout
        while True:
            try:
                self.client.upload_file(self._remote + "/" + METADATA, local)
                return
            except Conflict as e:
                # Uploads into the directory are in flight (another writer's,
                # or attempts of ours the server has not seen end): the server
                # refuses .metadata until they end, and says which they are.
                if time.monotonic() > deadline:
                    raise CheckpointSaveError(
                        f"checkpoint {self._remote} was not saved: every shard landed, but for {self.publish_timeout:.0f}s "
                        f"(publish_timeout) the server refused its .metadata because other uploads into the directory "
                        f"were in flight: {e}. {_left(self.client, self._remote, self._replaces)}",
                        path=self._remote, replaced=self._replaces) from e
                time.sleep(0.5)
            except Exception as e:
                either = ("this directory holds a complete checkpoint either way: the previous one, or this one if its "
                          ".metadata landed before the failure") if self._replaces else (
                          f"{self._remote} is incomplete unless its .metadata landed before the failure (`sextant ckpt "
                          f"ls` tells). {_others(self.client, self._remote)}")
                raise CheckpointSaveError(
                    f"checkpoint {self._remote} was not saved: every shard landed, but publishing its .metadata failed "
                    f"({_why(e)}); {either}", path=self._remote, replaced=self._replaces) from e

    def close(self) -> None:
        """Stops background work and removes staged files."""
        self._stop_heartbeat()
        _cleanup_dirs(self._staged_dirs)

    # ---- helpers ----

    def _step(self) -> int | None:
        if self.step is not None:
            return self.step
        if self._state_step is not None:
            return self._state_step
        return _step_of(self._remote)

    def _report_save(self, outcome: str, *, error: str = "", ranks: int = 0,
                     results: list[list[WriteResult]] | None = None) -> None:
        """Records this save on the run: "writing" when it starts (an open
        span), "complete" or "failed" when it ends. Any rank whose shards
        fail reports the failure; the coordinator the rest. One event per
        save: its key is the save's tag."""
        if not self.report or not self._run_id or not self._save_tag:
            return
        now = _now_ms()
        start = self._t_start or now
        ck: dict[str, Any] = {"path": self._remote, "outcome": outcome, "mode": self._mode}
        if self._mode != "sync":
            ck["staging"] = self.staging
        blocked = self._blocked_ms
        if self._mode == "sync" and outcome != "writing":
            blocked = now - start  # a synchronous save blocks training all along
        if blocked is not None:
            ck["blocked_ms"] = max(0, int(blocked))
        if error:
            ck["error"] = error[:4000]
        if results is not None:
            ck["ranks"] = len(results)
            ck["bytes"] = sum(r.size_in_bytes for rs in results for r in rs)
            ck["files"] = len({r.storage_data.relative_path for rs in results for r in rs})
        elif ranks:
            ck["ranks"] = ranks
        ev: dict[str, Any] = {"kind": "checkpoint_save", "key": f"ckpt-save:{self._save_tag}", "time_ms": start,
                              "checkpoint": ck, "node": socket.gethostname()}
        step = self._step()
        if step is not None:
            ev["step"] = step
        if outcome == "writing":
            ev["open"] = True
            ev["message"] = f"saving {self._remote}"
        else:
            ev["end_ms"] = max(now, start)
            ev["message"] = (f"saved {self._remote}" if outcome == "complete" else f"save of {self._remote} failed")
            if outcome == "failed":
                ev["severity"] = "error"
        _report(self.client, self._run_id, ev)

    def _end_save(self) -> None:
        self._t_start = self._blocked_ms = self._stage_pid = self._state_step = None

    def _upload(self, local: Path) -> int:
        n = self.client.upload_file(self._remote + "/" + local.name, local)
        if not self.keep_staging:
            local.unlink(missing_ok=True)
        return n

    def _drop_staging(self) -> None:
        if self._staging is not None and not self.keep_staging:
            _rmtree(self._staging)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _acquire_lock(self) -> None:
        lock = self._remote + "/" + WRITER_LOCK
        body = json.dumps({"save": self._save_tag, "writer": self.writer_id, "host": socket.gethostname(),
                           "pid": os.getpid(), "started": time.time(), "lease": self.lease_seconds}).encode()
        for _ in range(5):
            try:
                self.client.upload_bytes(lock, body, overwrite=False)
                break
            except AlreadyExists:
                info = self.client.stat(lock)
                if info is None:
                    continue  # released meanwhile
                try:
                    holder = json.loads(self.client.read(lock))
                except (NotFound, ValueError):
                    holder = {}
                age = self.client.server_time() - info.last_modified
                if holder.get("writer") != self.writer_id and age < self.lease_seconds and not _holder_gone(holder):
                    raise RuntimeError(
                        f"another writer is saving to {self._remote} (host {holder.get('host')}, pid "
                        f"{holder.get('pid')}, lock refreshed {age:.0f}s ago): two jobs must not save into one "
                        f"checkpoint directory. If that job is gone, wait {self.lease_seconds - age:.0f}s or "
                        f"delete {lock}.") from None
                if holder.get("writer") != self.writer_id:
                    why = (f"its process {holder.get('pid')} on this host is gone" if _holder_gone(holder) else
                           f"not refreshed for {age:.0f}s")
                    warnings.warn(f"taking over the stale writer lock of {self._remote} ({why})", stacklevel=2)
                self.client.upload_bytes(lock, body, overwrite=True)
                break
        self._heartbeat = _Heartbeat(self.client, lock, self._save_tag, self.lease_seconds / 4)

    def _release_lock(self) -> None:
        lock = self._remote + "/" + WRITER_LOCK
        try:
            if json.loads(self.client.read(lock)).get("save") == self._save_tag:
                self.client.delete(lock, missing_ok=True)
        except (NotFound, ValueError):
            pass

    def _tag_run(self) -> None:
        if not self._run_id:
            return
        step = self.step if self.step is not None else _step_of(self._remote)
        # Through Sextant's own client: a job under `sextant run` need not
        # have the mlflow package (the tagging used to warn at every save
        # on a machine without it).
        tags = {"sextant.checkpoint.latest": self._remote}
        if step is not None:
            tags["sextant.checkpoint.latest_step"] = str(step)
            tags[f"sextant.checkpoint.step.{step}"] = self._remote
        try:
            self.client.with_retries(retry_seconds=5.0, max_backoff=1.0).set_run_tags(self._run_id, tags)
        except Exception as e:  # noqa: BLE001 - the checkpoint landed; tagging is best effort
            warnings.warn(f"checkpoint {self._remote} saved, but tagging mlflow run {self._run_id} failed: {e}",
                          stacklevel=2)


_niced_pid = 0


def _nice_process(n: int) -> None:
    """Lowers this process's CPU priority by n levels, once per process."""
    global _niced_pid
    if n <= 0 or _niced_pid == os.getpid():
        return
    _niced_pid = os.getpid()
    try:
        os.nice(n)
    except OSError:
        pass


def _nice_thread(n: int) -> None:
    """Lowers the calling thread's CPU priority by n levels (Linux: per
    thread; elsewhere nothing)."""
    if n <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + n))
    except OSError:
        pass


def _holder_gone(holder: dict[str, Any]) -> bool:
    """Whether a writer lock's holder is a process of this host that no
    longer runs (a job killed while saving, resumed on the same machine):
    its lock need not age out."""
    if holder.get("host") != socket.gethostname():
        return False
    try:
        pid = int(holder.get("pid", 0))
    except (TypeError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _cut(items: list[WriteItem], limit: int) -> list[list[WriteItem]]:
    """The items in order, cut into buckets of about limit bytes (byte items
    count as nothing; a tensor is never split)."""
    out: list[list[WriteItem]] = [[]]
    size = 0
    for it in items:
        n = _item_size(it) if it.type != WriteItemType.BYTE_IO else 0
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append(it)
        size += n
    return out


def _cleanup_dirs(dirs: list[str]) -> None:
    for d in dirs:
        _rmtree(d)
    dirs.clear()


class VolumeReader(FileSystemReader):
    """A DCP StorageReader that downloads .metadata and then only the byte
    ranges of the shards this rank needs, through the staging directory.

    Args:
        path: the checkpoint directory on the volume.
        staging_dir: where downloads are staged (default
            ``$SEXTANT_STAGING_DIR`` or the temporary directory); the staged
            files are sparse (only the needed ranges) and deleted after the load.
        client: the :class:`sextant.client.Client` to use.
        download_threads: parallel range downloads per rank.
        coalesce_bytes: ranges of one file closer than this are fetched as one.
        chunk_bytes: ranges longer than this are split across threads.
        max_staged_files: shard files staged at once (default 3): the next
            ones download while one is read.
        check: check at once, here (one request), that the checkpoint is
            complete (default True).
        report: record the load on the run (as VolumeWriter records saves)
            as a ``checkpoint_load`` event, from the coordinator.
        run_id: the run to record on, instead of the one found.

    A checkpoint without .metadata is refused with
    :class:`IncompleteCheckpointError` (no checkpoint at all:
    ``FileNotFoundError``), raised by the constructor (and by ``reset`` with
    a new path, as ``dcp.load(..., checkpoint_id=path)`` calls it) so that it
    reaches the caller: inside ``dcp.load`` torch catches the reader's error
    and raises ``CheckpointException`` (a ``BaseException``) holding an
    ``AssertionError("metadata is None; global metadata read failed: ...")``
    with the message. :func:`latest_complete` finds the checkpoint to load.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        staging_dir: str | os.PathLike[str] | None = None,
        *,
        client: Client | None = None,
        download_threads: int = 8,
        coalesce_bytes: int = 1 << 20,
        chunk_bytes: int = 64 << 20,
        max_staged_files: int = 3,
        keep_staging: bool = False,
        check: bool = True,
        report: bool = True,
        run_id: str | None = None,
    ) -> None:
        self._remote = volume_path(path)
        self._root = _staging_root(staging_dir)
        super().__init__(self._root)
        self.report = report
        self._run_id = run_id or _active_run_id()
        self._t_load: int | None = None
        self._load_bytes = 0
        self._load_files = 0
        self._coordinator = False
        self.client = client or Client()
        self.download_threads = max(1, download_threads)
        self.coalesce_bytes = coalesce_bytes
        self.chunk_bytes = max(1 << 20, chunk_bytes)
        self.max_staged_files = max(1, max_staged_files)
        self.keep_staging = keep_staging
        self.check = check
        self._staged_dirs: list[str] = []
        weakref.finalize(self, _cleanup_dirs, self._staged_dirs)
        if check:
            self._check_complete()

    @property
    def checkpoint_id(self) -> str:  # type: ignore[override]
        """The checkpoint's volume path."""
        return self._remote

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        return str(checkpoint_id).startswith("/Volumes/")

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id:
            old, self._remote = self._remote, volume_path(checkpoint_id)
            if self.check and self._remote != old:
                self._check_complete()
        super().reset(None)

    def _check_complete(self) -> None:
        if self.client.stat(self._remote + "/" + METADATA) is None:
            raise self._missing()

    def _missing(self) -> FileNotFoundError:
        """Why the checkpoint has no .metadata: it is incomplete, or not there."""
        if self.client.is_dir(self._remote):
            return _incomplete(self.client, self._remote)
        return FileNotFoundError(f"no checkpoint at {self._remote}")

    # No **kwargs: DCP would then retry with per-rank metadata, which this
    # writer never makes, and bury the reason below.
    def read_metadata(self) -> Metadata:  # type: ignore[override]
        self._t_load = _now_ms()
        try:
            data = self.client.read(self._remote + "/" + METADATA)
        except NotFound:
            raise self._missing() from None
        staging = Path(tempfile.mkdtemp(prefix="sextant-load-", dir=self._root))
        self._staged_dirs.append(str(staging))
        (staging / METADATA).write_bytes(data)
        self.path = staging
        return super().read_metadata()

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._coordinator = is_coordinator
        infos = list((metadata.storage_data or {}).values())
        self._load_bytes = sum(int(getattr(i, "length", 0) or 0) for i in infos)
        self._load_files = len({getattr(i, "relative_path", "") for i in infos})

    def _report_load(self, outcome: str, error: str = "") -> None:
        if not self.report or not self._coordinator or not self._run_id:
            return
        start = self._t_load or _now_ms()
        ck: dict[str, Any] = {"path": self._remote, "outcome": outcome, "bytes": self._load_bytes,
                              "files": self._load_files, "ranks": _world()}
        if error:
            ck["error"] = error[:4000]
        ev: dict[str, Any] = {"kind": "checkpoint_load", "key": f"ckpt-load:{uuid.uuid4().hex[:12]}", "time_ms": start,
                              "end_ms": max(start, _now_ms()), "checkpoint": ck, "node": socket.gethostname(),
                              "message": f"loaded {self._remote}" if outcome == "complete" else f"loading {self._remote} failed"}
        if outcome != "complete":
            ev["severity"] = "error"
        step = _step_of(self._remote)
        if step is not None:
            ev["step"] = step
        _report(self.client, self._run_id, ev)

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        try:
            out = self._read_data(plan, planner)
        except BaseException as e:
            self._report_load("failed", str(e))
            raise
        self._report_load("complete")
        return out

    def _read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        # Per file: the ranges its items need, merged when close, cut into
        # chunks that download in the pool. Files are read (and their staged
        # copy deleted) in order as soon as their chunks landed, while the
        # next max_staged_files - 1 files download: staging holds that many
        # files at most, which the page cache keeps without writing them out.
        per_file: dict[str, list[Any]] = {}
        for item in plan.items:
            per_file.setdefault(self.storage_data[item.storage_index].relative_path, []).append(item)
        pool = ThreadPoolExecutor(self.download_threads, thread_name_prefix="sextant-download")
        fds: dict[str, int] = {}
        todo = list(per_file.items())
        pending: deque[tuple[str, list[_CFuture[None]], list[Any]]] = deque()

        def start(name: str, items: list[Any]) -> None:
            ranges = sorted((self.storage_data[i.storage_index].offset, self.storage_data[i.storage_index].length)
                            for i in items)
            merged: list[list[int]] = []
            for off, n in ranges:
                if merged and off <= merged[-1][1] + self.coalesce_bytes:
                    merged[-1][1] = max(merged[-1][1], off + n)
                else:
                    merged.append([off, off + n])
            fd = fds[name] = os.open(cast(Path, self.path) / name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.ftruncate(fd, merged[-1][1])  # sparse: only the ranges are written
            futs = [pool.submit(self._fetch, name, fd, off, min(self.chunk_bytes, end - off))
                    for begin, end in merged for off in range(begin, end, self.chunk_bytes)]
            pending.append((name, futs, items))

        try:
            for name, items in todo[:self.max_staged_files]:
                start(name, items)
            nxt = self.max_staged_files
            while pending:
                name, futs, items = pending.popleft()
                for f in futs:
                    f.result()
                os.close(fds.pop(name))
                try:
                    super().read_data(dataclasses.replace(plan, items=items), planner).wait()
                finally:
                    if not self.keep_staging:
                        (cast(Path, self.path) / name).unlink(missing_ok=True)
                if nxt < len(todo):
                    start(*todo[nxt])
                    nxt += 1
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for fd in fds.values():
                os.close(fd)
            for name in per_file:
                if not self.keep_staging:
                    (cast(Path, self.path) / name).unlink(missing_ok=True)
        out: Future[None] = Future()
        out.set_result(None)
        return out

    def _fetch(self, name: str, fd: int, off: int, n: int) -> None:
        try:
            self.client.download_range_into(self._remote + "/" + name, off, n, fd, off)
        except NotFound:
            raise FileNotFoundError(f"shard {name} of checkpoint {self._remote} is missing on the volume "
                                    "(deleted or overwritten after its .metadata was read)") from None


# ---------------------------------------------------------------- listings


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint directory and its state."""

    path: str
    name: str
    complete: bool  # .metadata exists
    writing: bool  # a writer holds a fresh lock
    size: int  # bytes of its files
    mtime: float  # .metadata's time when complete, else the newest file's
    step: int | None


def _describe(client: Client, path: str, name: str, now: float) -> CheckpointInfo | None:
    files = list(client.walk(path))
    if not files:
        return None
    by_name = {f.name: f for f in files if f.path == path + "/" + f.name}
    meta = by_name.get(METADATA)
    lock = by_name.get(WRITER_LOCK)
    if meta is None and lock is None and not any(f.name.endswith(".distcp") for f in files):
        return None  # not a checkpoint
    writing = False
    if lock is not None:
        try:
            lease = float(json.loads(client.read(lock.path)).get("lease", 60.0))
        except (NotFound, ValueError, TypeError):
            lease = 60.0
        writing = now - lock.last_modified < lease
    mtime = meta.last_modified if meta else max(f.last_modified for f in files)
    return CheckpointInfo(path, name, meta is not None, writing, sum(f.size for f in files), mtime, _step_of(name))


def list_checkpoints(parent: str, client: Client | None = None) -> list[CheckpointInfo]:
    """The checkpoints in the directories under parent, oldest first (by step
    when every one has a number, else by time)."""
    client = client or Client()
    parent = volume_path(parent)
    now = client.server_time()
    out = [c for e in client.list_dir(parent) if e.is_directory
           for c in [_describe(client, e.path, e.name, now)] if c is not None]
    if out and all(c.step is not None for c in out):
        out.sort(key=lambda c: (c.step, c.mtime))
    else:
        out.sort(key=lambda c: c.mtime)
    return out


def latest_checkpoint(parent: str, client: Client | None = None) -> str | None:
    """The path of the newest complete checkpoint under parent, or None: also
    when parent does not exist yet (a first run, before its first save)."""
    try:
        found = list_checkpoints(parent, client)
    except NotFound:
        return None
    done = [c for c in found if c.complete]
    return done[-1].path if done else None


def _newest_complete(client: Client, parent: str, exclude: str = "") -> str | None:
    """The newest complete checkpoint directly under parent (but exclude),
    or None: by the number ending their names, newest first, asking for
    .metadata one at a time; by time when the names have no numbers."""
    try:
        dirs = [e for e in client.list_dir(parent) if e.is_directory and e.path != exclude]
    except NotFound:
        return None
    if dirs and all(_step_of(e.name) is not None for e in dirs):
        for e in sorted(dirs, key=lambda e: (cast(int, _step_of(e.name)), e.name), reverse=True):
            if client.stat(e.path + "/" + METADATA) is not None:
                return e.path
        return None
    done = [c for c in list_checkpoints(parent, client) if c.complete and c.path != exclude]
    return done[-1].path if done else None


def _incomplete(client: Client, path: str) -> IncompleteCheckpointError:
    """The error for a checkpoint directory without .metadata, naming the
    newest complete checkpoint beside it."""
    parent = path.rsplit("/", 1)[0]
    latest = _newest_complete(client, parent, exclude=path) if parent.count("/") >= 4 else None
    hint = (f"The newest complete checkpoint beside it is {latest}." if latest else
            f"There is no complete checkpoint beside it (`sextant ckpt ls {parent}`).")
    return IncompleteCheckpointError(
        f"checkpoint {path} is incomplete: it has no {METADATA}, so its save did not finish (it failed, was killed, "
        f"or is still running) and it cannot be loaded. {hint}", path=path, latest=latest)


def latest_complete(path: str | os.PathLike[str], client: Client | None = None) -> str:
    """The checkpoint to load for path, checked before ``dcp.load`` (which
    wraps every error of its reader in ``CheckpointException``):

    - path itself, when it is a complete checkpoint (it has .metadata);
    - when path is a checkpoint directory whose save did not finish (shards
      or a writer lock, no .metadata): raises
      :class:`IncompleteCheckpointError`, whose ``latest`` is the newest
      complete checkpoint beside it (or None);
    - when path holds checkpoint directories (a run's): the newest complete
      one, by the number ending their names (else by time); with none
      complete, :class:`IncompleteCheckpointError`;
    - nothing at path, or no checkpoint under it: ``FileNotFoundError``.

    ::

        ckpt = latest_complete("/Volumes/main/vision/ckpt/run42")
        dcp.load(state, storage_reader=VolumeReader(ckpt))
    """
    client = client or Client()
    path = volume_path(path)
    if client.stat(path + "/" + METADATA) is not None:
        return path
    try:
        entries = list(client.list_dir(path))
    except NotFound:
        raise FileNotFoundError(f"no checkpoint at {path}: no such directory") from None
    if any(not e.is_directory and (e.name == WRITER_LOCK or e.name.endswith(".distcp")) for e in entries):
        raise _incomplete(client, path)
    latest = _newest_complete(client, path)
    if latest:
        return latest
    found = list_checkpoints(path, client)
    if found:
        raise IncompleteCheckpointError(
            f"no complete checkpoint under {path}: its {len(found)} checkpoint(s) ({', '.join(c.name for c in found[:5])}"
            f"{'...' if len(found) > 5 else ''}) have no {METADATA}: their saves did not finish", path=path)
    raise FileNotFoundError(f"no checkpoint at {path}: it holds no .metadata and no checkpoint directories")


_refuse_training_while_bootstrapping()
