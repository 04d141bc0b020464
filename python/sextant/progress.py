"""Per-rank training progress, reported once a step (standard library only).

A training loop calls :meth:`Progress.step` once a step; the step's time,
the time it waited for its batch, the samples and tokens it processed go to
the run in the background, batched every 5 seconds by a daemon thread.
A call never waits for the server: it appends to a bounded queue (the
oldest reports are dropped when the server cannot keep up) and returns. What
is queued is sent when the process exits.

    from sextant.progress import Progress

    progress = Progress()                 # the run, rank and node from the environment
    for batch in loader:
        progress.data_ready()             # optional: the time before this counts as waiting for data
        loss = train_step(batch)
        progress.step(samples=len(batch))  # the step's time is the time since the previous call

The run is ``MLFLOW_RUN_ID`` (``sextant run`` sets it), else mlflow's
active run; the server is ``MLFLOW_TRACKING_URI`` with the mlflow client's
credentials (:class:`sextant.client.Client`); the rank is ``RANK`` (set by
torchrun), the node ``SEXTANT_NODE`` or the host name, and the GPU the
current CUDA device when torch has initialised CUDA. Without a run the
calls do nothing. The server stores the reports as metrics of the run,
``sextant/progress/rank_<r>/step_time_s`` and so on (docs/run.md).
"""

from __future__ import annotations

import atexit
import collections
import logging
import math
import os
import socket
import sys
import threading
import time
import weakref
from typing import Any

__all__ = ["Progress", "step", "data_ready", "flush"]

_log = logging.getLogger("sextant.progress")

_MAX_QUEUE = 100_000
_BATCH = 1000  # reports per request (the server's limit)
# Seconds between two sends of a rank's reports: one request per rank per
# interval is what the server pays for (go run ./bench progress,
# docs/performance.md); the reports reach the run at most this late.
# Nothing waits on them: the run page polls, stragglers are judged over
# minutes, and hang detection reads the heartbeat below, not the server.
_SEND_INTERVAL_S = 5.0
# Seconds between two heartbeats (sextant run's hang detection), whatever
# the send interval.
_HEARTBEAT_S = 1.0
# The server's limits on a report (internal/progress): a report outside them
# would make it refuse the whole request, so step() drops it instead.
_MAX_STEP = 1 << 53
_MAX_SECONDS = 86400.0


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "")
    try:
        return int(v)
    except ValueError:
        return None


def _gpu_index() -> int | None:
    """The current CUDA device's index on the node, when torch has
    initialised CUDA in this process (never initialises it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        dev = int(torch.cuda.current_device())
    except Exception:
        return None
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if dev < len(visible):
        try:
            return int(visible[dev])
        except ValueError:
            return dev  # UUIDs: the index within the visible ones
    return dev


def _mlflow_run_id() -> str | None:
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return None
    try:
        r = mlflow.active_run()
    except Exception:
        return None
    return r.info.run_id if r is not None else None


_live: "weakref.WeakSet[Progress]" = weakref.WeakSet()


class Progress:
    """Reports the steps of one rank of a run.

    ``run_id``, ``rank``, ``node`` and ``gpu`` default to what the
    environment says (see the module's documentation); ``interval`` is the
    time between two sends, in seconds; ``client`` is a
    :class:`sextant.client.Client` (default: one from the environment).

    ``flops_per_sample`` or ``flops_per_token`` (the model's FLOPs for one
    sample or token, forward and backward) and ``dtype`` ("bf16", "fp16",
    "tf32", "fp32", "fp8", "fp64") are what the server's MFU needs: rank 0
    logs them once as the run params ``sextant.flops_per_sample``,
    ``sextant.flops_per_token`` and ``sextant.dtype`` (docs/run.md);
    ``peak_tflops`` (one device's peak) overrides the server's table as
    ``sextant.peak_tflops``.
    """

    def __init__(self, *, run_id: str | None = None, rank: int | None = None, node: str | None = None,
                 gpu: int | None = None, interval: float = _SEND_INTERVAL_S, client: Any = None, max_queue: int = _MAX_QUEUE,
                 flops_per_sample: float | None = None, flops_per_token: float | None = None,
                 dtype: str | None = None, peak_tflops: float | None = None) -> None:
        self.run_id = run_id or os.environ.get("MLFLOW_RUN_ID") or _mlflow_run_id()
        r = rank if rank is not None else _env_int("RANK")
        self.rank = r if r is not None and r >= 0 else 0
        self.node = node if node is not None else (os.environ.get("SEXTANT_NODE") or socket.gethostname())
        self._gpu = gpu
        self.interval = interval
        self._client = client
        self._queue: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_queue)
        self._max = max_queue
        #: Reports dropped because the queue was full (the server too slow or gone).
        self.dropped = 0
        #: Reports the server accepted.
        self.sent = 0
        #: Reports not queued because a value was out of range (a warning says which, once).
        self.invalid = 0
        self._failed = False
        self._last = time.perf_counter()
        self._ready: float | None = None
        self._step = -1
        self._wake = threading.Event()
        self._lock = threading.Lock()  # one sender at a time
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False
        # Run params for MFU, logged by rank 0 with its first batch.
        self._params = [{"key": k, "value": repr(float(v)) if k != "sextant.dtype" else str(v)}
                        for k, v in (("sextant.flops_per_sample", flops_per_sample),
                                     ("sextant.flops_per_token", flops_per_token), ("sextant.dtype", dtype),
                                     ("sextant.peak_tflops", peak_tflops))
                        if v is not None] if self.rank == 0 else []
        _live.add(self)
        if self.run_id:
            self._start()  # here, not in the first step(): starting a thread can take a while on a busy machine

    @property
    def enabled(self) -> bool:
        """Whether reports go anywhere: a run is known and the server has not refused them."""
        return bool(self.run_id) and not self._failed

    def data_ready(self) -> None:
        """Marks the moment this step's batch arrived: the time since the
        previous :meth:`step` counts as waiting for data."""
        self._ready = time.perf_counter()

    def reset(self) -> None:
        """Starts timing the next step now (after a pause, an evaluation, a checkpoint)."""
        self._last = time.perf_counter()
        self._ready = None

    def step(self, step: int | None = None, *, step_time_s: float | None = None, data_wait_s: float | None = None,
             samples: float | None = None, tokens: float | None = None) -> None:
        """Reports one step of this rank. ``step`` defaults to the previous
        one plus one (0 first); ``step_time_s`` to the time since the
        previous call (the first: since the Progress was made or reset);
        ``data_wait_s`` to the time from the previous call to
        :meth:`data_ready`, when it was called. Never blocks on the server."""
        now = time.perf_counter()
        if not self.run_id or self._failed:
            self._last, self._ready = now, None
            return
        if step is None:
            step = self._step + 1
        if step_time_s is None:
            step_time_s = now - self._last
        if data_wait_s is None and self._ready is not None:
            data_wait_s = max(0.0, self._ready - self._last)
        self._last, self._ready = now, None
        why = _invalid(step, step_time_s, data_wait_s, samples, tokens)
        if why:
            # Dropped here, not sent: the server would refuse the whole
            # batch, and with it every good report of the rank.
            if not self.invalid:
                _log.warning("sextant: progress report of step %r not sent: %s", step, why)
            self.invalid += 1
            return
        self._step = step
        rep: dict[str, Any] = {"rank": self.rank, "step": int(step), "time_ms": int(time.time() * 1000),
                               "step_time_s": float(step_time_s)}
        if data_wait_s is not None:
            rep["data_wait_s"] = float(data_wait_s)
        if samples is not None:
            rep["samples"] = float(samples)
        if tokens is not None:
            rep["tokens"] = float(tokens)
        if self._gpu is None:
            g = _gpu_index()  # in the training thread: CUDA's current device is per thread
            self._gpu = g if g is not None else -1
        if self._gpu >= 0:
            rep["gpu"] = self._gpu
        q = self._queue
        if len(q) >= self._max:
            self.dropped += 1
        q.append(rep)
        if self._thread is None or self._pid != os.getpid():
            self._start()
        elif len(q) == _BATCH:
            # Once, as a batch fills: a queue above it means the server is
            # away, and the sender's own interval paces the retries.
            self._wake.set()

    def _start(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's thread is not here
            self._pid = os.getpid()
            self._lock = threading.Lock()
            self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sextant-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        beat = -1
        next_send = time.monotonic() + self.interval
        while not self._closed:
            # Wake for the heartbeat every second, for a send every interval,
            # and at once when a batch fills or the Progress closes.
            woken = self._wake.wait(max(0.0, min(_HEARTBEAT_S, next_send - time.monotonic())))
            self._wake.clear()
            if self._step != beat:
                beat = self._step
                _heartbeat()
            if woken or time.monotonic() >= next_send:
                next_send = time.monotonic() + self.interval
                self._send()

    def _send(self, deadline: float | None = None) -> None:
        # At exit, a sender stuck on a dead server must not hold the job up.
        if not self._lock.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            return
        try:
            while self._queue and not self._failed:
                batch = []
                try:
                    while len(batch) < _BATCH:
                        batch.append(self._queue.popleft())
                except IndexError:
                    pass
                if not self._post(batch, deadline):
                    # Put them back for the next try, oldest first, as room allows.
                    for rep in reversed(batch):
                        if len(self._queue) >= self._max:
                            self.dropped += 1
                            break
                        self._queue.appendleft(rep)
                    return
        finally:
            self._lock.release()

    def _post(self, batch: list[dict[str, Any]], deadline: float | None) -> bool:
        from .client import Client, InvalidRequest, NotFound, PermissionDenied, SextantError

        if self._client is None:
            self._client = Client(retries=0)
        c = self._client
        if deadline is not None:
            left = max(0.1, deadline - time.monotonic())
            c = c.with_retries(retry_seconds=left, max_backoff=1.0)
            c.timeout = left  # a server that accepts but never answers must not outlast the deadline
        if self._params:
            try:
                c._json("POST", "/api/2.0/mlflow/runs/log-batch", {"run_id": self.run_id, "params": self._params})
                self._params = []
            except InvalidRequest as e:  # logged before with another value: keep reporting progress
                self._params = []
                _log.warning("sextant: MFU params not logged: %s", e)
            except (SextantError, OSError):
                pass  # sent again with the next batch
        try:
            c._json("POST", "/api/2.0/sextant/progress", {"run_id": self.run_id, "node": self.node, "reports": batch})
        except (InvalidRequest, NotFound, PermissionDenied) as e:
            # Refused for good (a deleted run, no permission, an old server): stop reporting.
            self._failed = True
            _log.warning("sextant: progress reports stopped: %s", e)
            return True
        except (SextantError, OSError) as e:
            _log.debug("sextant: progress reports wait for the server: %s", e)
            return False
        self.sent += len(batch)
        return True

    def flush(self, timeout: float = 5.0) -> None:
        """Sends what is queued now, trying for at most ``timeout`` seconds."""
        if self.run_id and self._queue:
            self._send(deadline=time.monotonic() + timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Sends what is queued and stops the sender thread."""
        self._closed = True
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread() and self._pid == os.getpid():
            t.join(timeout)
        self.flush(timeout)


def _invalid(step: Any, step_time_s: Any, data_wait_s: Any, samples: Any, tokens: Any) -> str:
    """Why a report would be refused by the server, or ""."""
    try:
        if isinstance(step, bool) or int(step) != step or not 0 <= int(step) <= _MAX_STEP:
            return "step must be an integer from 0 to 2**53, got %r" % (step,)
        if not 0.0 <= float(step_time_s) <= _MAX_SECONDS:  # false for NaN too
            return "step_time_s must be 0 to %d seconds, got %r" % (_MAX_SECONDS, step_time_s)
        if data_wait_s is not None and not float(data_wait_s) <= _MAX_SECONDS:
            return "data_wait_s must be at most %d seconds, got %r" % (_MAX_SECONDS, data_wait_s)
        for name, v in (("samples", samples), ("tokens", tokens)):
            if v is not None and not math.isfinite(float(v)):
                return "%s must be a finite number, got %r" % (name, v)
    except (TypeError, ValueError, OverflowError):
        return "step, step_time_s, data_wait_s, samples and tokens must be numbers"
    return ""


def _heartbeat() -> None:
    """Tells `sextant run`'s hang detection that this process made progress:
    touches <SEXTANT_AGENT_DIR>/<pid>.hb (docs/run.md, "Hangs")."""
    d = os.environ.get("SEXTANT_AGENT_DIR")
    if not d:
        return
    try:
        with open(os.path.join(d, "%d.hb" % os.getpid()), "w"):
            pass
    except OSError:
        pass


@atexit.register
def _flush_all() -> None:
    for p in list(_live):
        try:
            p.close(timeout=5.0)
        except Exception:  # never fail the job's exit
            pass


_default: Progress | None = None


def _get() -> Progress:
    global _default
    if _default is None:
        _default = Progress()
    return _default


def step(step: int | None = None, *, step_time_s: float | None = None, data_wait_s: float | None = None,
         samples: float | None = None, tokens: float | None = None) -> None:
    """:meth:`Progress.step` of this process's default Progress (made at the first call)."""
    _get().step(step, step_time_s=step_time_s, data_wait_s=data_wait_s, samples=samples, tokens=tokens)


def data_ready() -> None:
    """:meth:`Progress.data_ready` of this process's default Progress."""
    _get().data_ready()


def flush(timeout: float = 5.0) -> None:
    """Sends what this process's default Progress has queued."""
    if _default is not None:
        _default.flush(timeout)
