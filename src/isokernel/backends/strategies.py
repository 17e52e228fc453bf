"""The execution strategies by name, each with its written contract, and the
choice ``auto`` makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import BackendUnavailableError
from .devices import Device, unavailable_reason
from .planning import Plan, Profile

STRATEGY_NAMES = ("reference", "threads", "native", "cuda-eager", "cuda-fused",
                  "cuda-megakernel")

# ``auto`` takes the first available strategy of the inputs' device, fastest first.
AUTO_ORDER = {
    "cpu": ("native", "threads", "reference"),
    "cuda": ("cuda-megakernel", "cuda-fused", "cuda-eager"),
}


@dataclass(frozen=True)
class Strategy:
    """``compile(plan, **options)`` returns an executable; ``None`` marks a
    strategy this version does not implement yet."""

    name: str
    device: str
    contract: str
    profile: Profile | None
    compile: Callable | None = field(default=None, compare=False)
    options: frozenset[str] = frozenset()

    def unavailable_reason(self) -> str | None:
        reason = unavailable_reason(Device(self.device))
        if reason is None and self.compile is None:
            reason = "not implemented in this version of isokernel"
        if reason is None:
            reason = self.profile.unavailable_reason()
        return reason

    def build(self, plan: Plan, options: dict):
        unknown = set(options) - self.options
        if unknown:
            accepted = ", ".join(sorted(self.options)) or "none"
            raise TypeError(f"strategy '{self.name}' does not take option(s) "
                            f"{', '.join(sorted(unknown))}; it accepts: {accepted}")
        return self.compile(plan, **options)


_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    if strategy.name not in STRATEGY_NAMES:
        raise ValueError(f"strategy name {strategy.name!r} is not one of {STRATEGY_NAMES}")
    _STRATEGIES[strategy.name] = strategy
    return strategy


def get_strategy(name: str) -> Strategy:
    if name not in _STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; use one of "
                         f"{', '.join(('auto',) + STRATEGY_NAMES)}")
    return _STRATEGIES[name]


def all_strategies() -> list[Strategy]:
    return [_STRATEGIES[n] for n in STRATEGY_NAMES if n in _STRATEGIES]


def passed_over(chosen: Strategy, device: Device) -> list[tuple[str, str]]:
    """The strategies ``auto`` tried before ``chosen`` on ``device``, each
    with the reason it could not run there."""
    skipped = []
    for candidate in AUTO_ORDER.get(device.kind, ()):
        if candidate == chosen.name:
            break
        strategy = _STRATEGIES.get(candidate)
        reason = "not registered" if strategy is None else strategy.unavailable_reason()
        skipped.append((candidate, reason or "unavailable when this function was compiled"))
    return skipped


def choose(name: str, device: Device) -> Strategy:
    """The strategy to run for a request, or ``BackendUnavailableError``
    saying why nothing can run — never a strategy of another device."""
    if name != "auto":
        strategy = get_strategy(name)
        if strategy.device != device.kind:
            raise BackendUnavailableError(
                f"strategy '{name}' runs on {strategy.device}, but the request is for "
                f"device '{device}'; pick a {device.kind} strategy or move the inputs")
        reason = strategy.unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"strategy '{name}' is unavailable: {reason}. "
                                          f"Nothing was run.")
        return strategy
    reasons = []
    for candidate in AUTO_ORDER.get(device.kind, ()):
        strategy = _STRATEGIES.get(candidate)
        reason = "not registered" if strategy is None else strategy.unavailable_reason()
        if reason is None:
            return strategy
        reasons.append(f"{candidate}: {reason}")
    device_reason = unavailable_reason(device)
    detail = device_reason or "; ".join(reasons)
    raise BackendUnavailableError(f"no strategy can run on device '{device}': {detail}. "
                                  f"Nothing was run on another device.")
