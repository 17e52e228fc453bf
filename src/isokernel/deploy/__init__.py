"""Deployment sizing: the model's memory shape and arithmetic intensity per
strategy, computed from its graph and the strategy's memory model; the
platform's budget, asked with its provenance (``platform``); and the solver
that combines them, announcing each decision on one line. ``isokernel.pipeline``
(``jit``) calls its block planner, admission check, report lines and measured
probe directly. The platform's figures live in ``backends.platform``, where
the CPU strategies' worker pool reads the CPU budget."""

from ..backends.platform import Figure, cpu_budget, memory_budget
from .budget import HostBudget, gpu_free_memory, host_budget
from .cost import COST, KNEES, Intensity, Knee, flops, intensity, roofline_knee
from .decisions import (
    ADMISSION_FLOOR,
    BUDGET_FRACTION,
    BlockChoice,
    BudgetError,
    admission,
    block_decision,
    plan_block,
    probe,
    probe_of,
    report_lines,
    sizing,
)
from .probe import Probe, measure_device, measure_host
from .shape import MemoryShape, memory_shape
from .solver import Decision, block_concurrency, largest_block, shard_tasks

__all__ = [
    "ADMISSION_FLOOR", "BUDGET_FRACTION", "BlockChoice", "COST", "KNEES", "BudgetError",
    "Decision", "Figure",
    "HostBudget", "Intensity", "Knee", "MemoryShape", "Probe", "admission",
    "block_concurrency", "block_decision", "cpu_budget", "flops", "gpu_free_memory",
    "host_budget", "intensity", "largest_block", "measure_device", "measure_host",
    "memory_budget", "memory_shape", "plan_block", "probe", "probe_of", "report_lines",
    "roofline_knee", "shard_tasks", "sizing",
]
