"""Sextant's Python package: PyTorch Distributed Checkpoint storage and
datasets on Sextant volumes (sextant.checkpoint, sextant.data), resuming a
job where it stopped (sextant.resume), and a Files API client
(sextant.client).

The client needs only the standard library; sextant.checkpoint,
sextant.data and sextant.resume import torch.
"""

from .client import Client, SextantError

__all__ = ["Client", "SextantError", "__version__"]

__version__ = "0.1.0"
