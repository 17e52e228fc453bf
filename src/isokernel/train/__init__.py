"""``isokernel.train``: the compiled training step (``Trainer``) and
checkpoints of pytrees of arrays (``save`` / ``load``)."""

from .saving import CheckpointError, load, save
from .trainer import Trainer

__all__ = ["CheckpointError", "Trainer", "load", "save"]
