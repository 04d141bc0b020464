"""A Transformers ``TrainerCallback`` that reports each optimizer step's
progress to the run (:mod:`sextant.progress`): the step's time and the
samples it processed (the per-device batch size times the gradient
accumulation steps).

    from transformers import Trainer
    from sextant.transformers import SextantProgressCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[SextantProgressCallback()])

Every process reports its own rank (``args.process_index``); the step is
``state.global_step``. ``tokens_per_sample`` adds a token count when
samples have a fixed length.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback

from .progress import Progress

__all__ = ["SextantProgressCallback"]


class SextantProgressCallback(TrainerCallback):
    """Reports every optimizer step of every process as a progress step."""

    def __init__(self, *, tokens_per_sample: int | None = None, **progress: Any) -> None:
        self.tokens_per_sample = tokens_per_sample
        self._kw = progress
        self.progress: Progress | None = None
        self._last: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        kw = dict(self._kw)
        kw.setdefault("rank", int(getattr(args, "process_index", 0)))
        self.progress = Progress(**kw)
        self._last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        p = self.progress
        if p is None:
            return
        now = time.perf_counter()
        began = self._last if self._last is not None else now
        n = int(args.per_device_train_batch_size) * int(getattr(args, "gradient_accumulation_steps", 1) or 1)
        p.step(int(state.global_step), step_time_s=now - began, samples=n,
               tokens=n * self.tokens_per_sample if self.tokens_per_sample else None)
        self._last = now

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last = time.perf_counter()  # evaluation is not the next step's time

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last = time.perf_counter()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.close()  # a sweep's next fit() makes its own: its sender thread must not stay
