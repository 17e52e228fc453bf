"""Execution: the strategy interface (``StrategySpec``, ``Executable``) and
its registry, capsules, profiles and planning, and the platform's CPU and
memory figures. ``jit`` sits above, in ``isokernel.pipeline``. The core modules
here import no strategy; ``cpu/`` and ``cuda/`` hold the built-in strategies,
which register their specs when this package is imported."""

from . import cpu, cuda  # noqa: F401  (registers the built-in strategies)
from .capsules import Capsule, NumericalPolicy, register, registered
from .devices import Device, parse_device, unavailable_reason
from .executable import Executable, ExecutableBase
from .liveness import Liveness, static_liveness
from .planning import NodePlan, Plan, Profile, plan
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
    "Capsule", "Device", "Executable", "ExecutableBase", "Liveness", "MemoryModel", "NodePlan",
    "NumericalPolicy", "Plan", "Profile", "StrategySpec", "all_strategies", "choose",
    "get_strategy", "parse_device", "plan", "register", "register_strategy", "registered",
    "static_liveness", "unavailable_reason", "unregister_strategy",
]
