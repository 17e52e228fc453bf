"""Execution: the strategy interface (``StrategySpec``, ``Executable``) and
its registry, capsules, profiles and planning, and ``jit``. The core modules
here import no strategy; ``cpu/`` and ``cuda/`` hold the built-in strategies,
which register their specs when this package is imported."""

from . import cpu, cuda  # noqa: F401  (registers the built-in strategies)
from .capsules import Capsule, NumericalPolicy, register, registered
from .devices import Device, parse_device, unavailable_reason
from .executable import Executable, ExecutableBase
from .jit import Compiled, Jitted, Lowered, RetraceWarning, jit
from .liveness import Liveness, static_liveness
from .planning import NodePlan, Plan, Profile, plan
from .report import Report
from .strategies import (
    MemoryModel,
    StrategySpec,
    all_strategies,
    choose,
    get_strategy,
    register_strategy,
    unregister_strategy,
)

__all__ = [
    "Capsule", "Compiled", "Device", "Executable", "ExecutableBase", "Jitted", "Liveness",
    "Lowered", "MemoryModel", "NodePlan", "NumericalPolicy", "Plan", "Profile", "Report",
    "RetraceWarning", "StrategySpec", "all_strategies", "choose", "get_strategy", "jit",
    "parse_device", "plan", "register", "register_strategy", "registered", "static_liveness",
    "unavailable_reason", "unregister_strategy",
]
