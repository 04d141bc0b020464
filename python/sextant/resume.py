"""Resume a training job where it stopped, in one command.

``sextant run --resume latest -- python train.py`` continues the same run
(``MLFLOW_RUN_ID``) from the newest complete checkpoint it recorded, and
hands the checkpoint to the job in ``SEXTANT_RESUME_FROM``. In the job::

    from sextant.resume import TrainState, resume

    train = TrainState(model, optimizer)                # model, optimizer, step
    state = {"train": train, "data": dataset, "rng": PipelineState()}
    res = resume(state)                                 # None on a fresh start
    for batch in loader:                                # the exact next sample
        train.step += 1
        loss = ...
        if res is None or res.should_log(train.step):   # no step logged twice
            mlflow.log_metric("loss", loss, step=train.step)
        if train.step % 500 == 0:
            dcp.async_save(state, storage_writer=VolumeWriter(f"{ckpt}/step_{train.step}", step=train.step))

:func:`resume` loads the checkpoint into ``state`` with ``dcp.load`` (model,
optimizer, the data pipeline's position and RNG states, whatever ``state``
holds) and says which step it was. The killed attempt may have logged
metrics past that step before it died; :meth:`Resumed.should_log` is False
for those steps, so the run's metric series goes on at the next step with
nothing logged twice (the replayed steps compute the same values: the
resume is exact).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from torch.distributed.checkpoint.stateful import Stateful

__all__ = ["TrainState", "Resumed", "resume", "RESUME_ENV"]

#: The variable sextant run sets to the checkpoint to resume from.
RESUME_ENV = "SEXTANT_RESUME_FROM"


class TrainState(Stateful):
    """A model, its optimizer and the training step, for the DCP state dict.
    The model and optimizer go through torch's ``get_state_dict`` and
    ``set_state_dict``, so sharded models (FSDP2, DTensor) save and load
    per rank; ``step`` is saved with them."""

    def __init__(self, model: Any, optimizer: Any = None, *, step: int = 0) -> None:
        self.model, self.optimizer, self.step = model, optimizer, step

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

        if self.optimizer is None:
            return {"model": get_model_state_dict(self.model), "step": self.step}
        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd, "step": self.step}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

        if self.optimizer is None:
            set_model_state_dict(self.model, sd["model"])
        else:
            set_state_dict(self.model, self.optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        self.step = int(sd["step"])


@dataclass(frozen=True)
class Resumed:
    """A resume: the checkpoint loaded, its step, and the highest step the
    run's metrics had reached before (None when unknown)."""

    path: str
    step: int | None
    logged_step: int | None

    def should_log(self, step: int) -> bool:
        """Whether a metric at step should be logged: False for the steps the
        killed attempt logged already (they are replayed, not new)."""
        return self.logged_step is None or step > self.logged_step


def _int_env(name: str) -> int | None:
    v = os.environ.get(name, "").strip()
    try:
        return int(v) if v else None
    except ValueError:
        return None


def resume(state: dict[str, Any], path: str | None = None, *, client: Any = None, **reader_args: Any) -> Resumed | None:
    """Loads the checkpoint to resume from into ``state`` and returns what
    it was, or None when there is nothing to resume (``path`` not given and
    ``SEXTANT_RESUME_FROM`` unset: a fresh start).

    ``state`` is the dict you give ``dcp.save``: a :class:`TrainState`, the
    dataset (``VolumeDataset``) or ``PipelineState``, anything Stateful. Call
    it on every rank, after ``init_process_group``. The step is the
    TrainState's in the checkpoint, else ``SEXTANT_RESUME_STEP``, else the
    number ending the path; ``logged_step`` comes from
    ``SEXTANT_RESUME_LOGGED_STEP``, which sextant run sets from the run's
    metrics. ``reader_args`` go to :class:`VolumeReader`.
    """
    import torch.distributed.checkpoint as dcp

    from .checkpoint import VolumeReader, _step_of

    path = path or os.environ.get(RESUME_ENV) or None
    if not path:
        return None
    dcp.load(state, storage_reader=VolumeReader(path, client=client, **reader_args))
    step = next((v.step for v in state.values() if isinstance(v, TrainState)), None)
    if step is None:
        step = _int_env("SEXTANT_RESUME_STEP")
    if step is None:
        step = _step_of(path)
    return Resumed(path=path, step=step, logged_step=_int_env("SEXTANT_RESUME_LOGGED_STEP"))
