"""Deployment sizing: the model's memory shape and arithmetic intensity per
strategy, computed from its graph and the strategy's memory model; the
platform's budget, asked with its provenance (``platform``); and the solver
that combines them, announcing each decision on one line. Importing this
package installs its block planner, report lines, measured probe and CPU
budget into ``jit`` (``import isokernel`` does so)."""

from ..backends import hooks as _hooks
from .budget import HostBudget, gpu_free_memory, host_budget
from .cost import COST, KNEES, Intensity, Knee, flops, intensity, roofline_knee
from .plan import (
    ADMISSION_FLOOR,
    BUDGET_FRACTION,
    BudgetError,
    admission,
    block_decision,
    plan_block,
    probe,
    probe_of,
    report_lines,
    sizing,
)
from .platform import Figure, cpu_budget, memory_budget
from .probe import Probe, measure_device, measure_host
from .shape import MemoryShape, memory_shape
from .solver import Decision, block_concurrency, largest_block, shard_tasks

_hooks.install_block_planner(plan_block)
_hooks.install_report_lines(report_lines)
_hooks.install_measure_probe(probe)
_hooks.install_admission(admission)
_hooks.install_cpu_budget(cpu_budget)

__all__ = [
    "ADMISSION_FLOOR", "BUDGET_FRACTION", "COST", "KNEES", "BudgetError", "Decision", "Figure",
    "HostBudget", "Intensity", "Knee", "MemoryShape", "Probe", "admission",
    "block_concurrency", "block_decision", "cpu_budget", "flops", "gpu_free_memory",
    "host_budget", "intensity", "largest_block", "measure_device", "measure_host",
    "memory_budget", "memory_shape", "plan_block", "probe", "probe_of", "report_lines",
    "roofline_knee", "shard_tasks", "sizing",
]
