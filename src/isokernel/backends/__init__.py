"""Execution: capsules, profiles and planning, the strategies, and ``jit``."""

from . import registry as _registry  # noqa: F401  (registers the strategies)
from .capsules import Capsule, NumericalPolicy, register, registered
from .devices import Device, parse_device, unavailable_reason
from .jit import Compiled, Jitted, Lowered, RetraceWarning, jit
from .liveness import Liveness, static_liveness
from .planning import Plan, Profile, plan
from .report import Report
from .strategies import STRATEGY_NAMES, Strategy, all_strategies, choose, get_strategy

__all__ = [
    "STRATEGY_NAMES", "Capsule", "Compiled", "Device", "Jitted", "Liveness", "Lowered",
    "NumericalPolicy", "Plan", "Profile", "Report", "RetraceWarning", "Strategy",
    "all_strategies", "choose", "get_strategy", "jit", "parse_device", "plan", "register",
    "registered", "static_liveness", "unavailable_reason",
]
