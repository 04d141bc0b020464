"""Sextant's Python package: PyTorch Distributed Checkpoint storage and
datasets on Sextant volumes (sextant.checkpoint, sextant.data), resuming a
job where it stopped (sextant.resume), per-rank training progress
(sextant.progress, with callbacks in sextant.lightning and
sextant.transformers), and a Files API client (sextant.client).

The client and sextant.progress need only the standard library; sextant.checkpoint,
sextant.data and sextant.resume import torch.
"""

from . import progress
from .client import Client, SextantError
from .progress import Progress

__all__ = ["Client", "Progress", "SextantError", "progress", "__version__"]

__version__ = "0.1.0"
