"""Deprecated: the platform's CPU and memory figures moved to
``isokernel.backends.platform`` (where the CPU strategies' worker pool reads
them); ``isokernel.deploy`` still exports ``Figure``, ``cpu_budget`` and
``memory_budget``. This module re-exports them for one release and warns on
import."""

import warnings

from ..backends.platform import Figure, cpu_budget, memory_budget

__all__ = ["Figure", "cpu_budget", "memory_budget"]

warnings.warn("isokernel.deploy.platform moved to isokernel.backends.platform (or use "
              "isokernel.deploy.cpu_budget / memory_budget); isokernel.deploy.platform will be "
              "removed in the next release", DeprecationWarning, stacklevel=2)
