"""A Lightning callback that reports each training step's progress to the
run (:mod:`sextant.progress`): the step's time, the part of it spent
waiting for the batch (from the end of the previous batch to the start of
this one), and the samples in the batch.

    import lightning as L
    from sextant.lightning import SextantProgress

    trainer = L.Trainer(callbacks=[SextantProgress()])

Every rank reports its own (``trainer.global_rank``); the step is
``trainer.global_step``. ``tokens_per_sample`` adds a token count when
samples have a fixed length.
"""

from __future__ import annotations

import time
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from .progress import Progress

__all__ = ["SextantProgress", "batch_size"]


def batch_size(batch: Any) -> int | None:
    """The number of samples in a batch: the first dimension of its first
    tensor (in a tuple, list or dict), or its length."""
    seen = 0
    while seen < 8:
        seen += 1
        shape = getattr(batch, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(batch, dict) and batch:
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)) and batch:
            batch = batch[0]
        else:
            break
    try:
        return len(batch)
    except TypeError:
        return None


class SextantProgress(Callback):
    """Reports every training batch of every rank as a progress step."""

    def __init__(self, *, tokens_per_sample: int | None = None, **progress: Any) -> None:
        self.tokens_per_sample = tokens_per_sample
        self._kw = progress
        self.progress: Progress | None = None
        self._end: float | None = None
        self._start = 0.0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        kw = dict(self._kw)
        kw.setdefault("rank", int(getattr(trainer, "global_rank", 0)))
        self.progress = Progress(**kw)
        self._end = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        p = self.progress
        if p is None:
            return
        now = time.perf_counter()
        # From the previous batch's end: the loader's time for this batch, then the step.
        began = self._end if self._end is not None else self._start
        n = batch_size(batch)
        p.step(int(trainer.global_step), step_time_s=now - began, data_wait_s=max(0.0, self._start - began),
               samples=n, tokens=n * self.tokens_per_sample if n is not None and self.tokens_per_sample else None)
        self._end = now

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._end = None  # validation and checkpoints between epochs are not the next batch's wait

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.progress is not None:
            self.progress.close()  # a sweep's next fit() makes its own: its sender thread must not stay
