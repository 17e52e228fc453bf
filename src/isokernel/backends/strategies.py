"""Strategies: one ``StrategySpec`` each, the registry of them, and the
choice ``auto`` makes.

A spec is everything isokernel knows about a strategy: its name, device and
written contract, its priority for ``auto``, its memory model (what
``deploy`` sizes with), its profile (the capsules it accepts), the options
it takes, how it prepares the graph it runs (``prepare``: only a strategy with
kernels for fused forms fuses), how it plans that graph (``planner``: the
capsule of every node, made once and reported as made) and its compiler
(plan -> ``Executable``). The built-in strategies
register their specs when ``isokernel.backends`` is imported (``cpu/`` and
``cuda/``); a strategy defined elsewhere registers its own with
``register_strategy`` and is then chosen, reported and listed like them.
Nothing else keeps a list of strategy names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import BackendUnavailableError, Graph
from .devices import DEVICE_KINDS, Device, unavailable_reason
from .executable import Executable
from .planning import Plan, Profile, plan_ops

MEMORY_KINDS = ("eager", "tiled", "fused", "arena")
TRAFFIC_KINDS = ("eager", "fused")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class MemoryModel:
    """How a strategy uses memory and moves bytes, which ``deploy`` sizes it by.

    ``kind``: ``eager`` (the tape-order peak of live buffers, each freed
    after its last use), ``tiled`` (a staged run: whole ops eager, regions in
    tiles, plus per worker the scratch of one tile of ``tile_rows(row_bytes,
    workers)`` rows), ``fused`` (a staged run whose regions keep their
    intermediates in registers) or ``arena`` (the eager peak in an arena,
    plus the outputs copied out of it); ``deploy.shape`` computes each.
    ``traffic``:
    ``eager`` (every intermediate goes through memory) or ``fused`` (inputs
    and outputs only). ``marshal``: the strategy makes one contiguous copy
    of each pixel input. ``arena_when(graph)``: where it holds, the strategy
    runs ``graph`` (at default options) as one program over an arena, and the
    ``arena`` kind applies instead of ``kind`` (``native``'s whole programs)."""

    kind: str
    traffic: str
    marshal: bool = False
    tile_rows: Callable[[int, int], int] | None = field(default=None, compare=False)
    arena_when: Callable[[Graph], bool] | None = field(default=None, compare=False)

    def kind_for(self, graph: Graph) -> str:
        """The kind that applies to ``graph``."""
        return "arena" if self.arena_when is not None and self.arena_when(graph) else self.kind


def same_graph(graph: Graph) -> Graph:
    """The default ``prepare``: the strategy runs the graph as recorded."""
    return graph


@dataclass(frozen=True)
class StrategySpec:
    """One strategy. ``compiler(plan, **options)`` returns an ``Executable``;
    ``options`` names the keyword options it accepts. ``auto_priority``:
    ``auto`` takes the available strategy of the inputs' device with the
    highest priority (None: ``auto`` never takes it).

    ``jit`` lowers a recording through three calls, each made once:
    ``prepare(graph)`` (the graph the strategy runs; the identity unless the
    strategy rewrites it, as ``cuda-fused`` fuses), ``plan(graph, options)``
    (``planner(graph, profile, options)``: an accepted capsule for every node,
    or ``PlanningError``; a strategy that splits the graph binds capsules per
    node and may carry its split in the plan) and ``build(plan, options)``.
    The executable runs, and the report shows, that one plan."""

    name: str
    device: str
    contract: str
    profile: Profile
    memory: MemoryModel
    compiler: Callable[..., Executable] = field(compare=False)
    auto_priority: int | None = None
    options: frozenset[str] = frozenset()
    prepare: Callable[[Graph], Graph] = field(default=same_graph, compare=False)
    planner: Callable[[Graph, Profile, dict], Plan] = field(default=plan_ops, compare=False)

    def unavailable_reason(self) -> str | None:
        return unavailable_reason(Device(self.device)) or self.profile.unavailable_reason()

    def plan(self, graph: Graph, options: dict) -> Plan:
        """The plan this strategy runs ``graph`` (already ``prepare``d) by."""
        self._check_options(options)
        return self.planner(graph, self.profile, options)

    def build(self, plan: Plan, options: dict) -> Executable:
        self._check_options(options)
        return self.compiler(plan, **options)

    def _check_options(self, options: dict) -> None:
        unknown = set(options) - self.options
        if unknown:
            accepted = ", ".join(sorted(self.options)) or "none"
            raise TypeError(f"strategy '{self.name}' does not take option(s) "
                            f"{', '.join(sorted(unknown))}; it accepts: {accepted}")


_STRATEGIES: dict[str, StrategySpec] = {}


def register_strategy(spec: StrategySpec, replace: bool = False) -> StrategySpec:
    """Add ``spec`` to the strategies ``jit``, ``auto``, reports and
    ``isokernel devices`` know. A name already registered is refused unless
    ``replace=True``; a malformed spec is refused naming each problem."""
    if not isinstance(spec, StrategySpec):
        raise TypeError(f"register_strategy takes an isokernel.StrategySpec, got "
                        f"{type(spec).__name__}")
    if spec.name in _STRATEGIES and not replace:
        raise ValueError(f"strategy '{spec.name}' is already registered; pick another name, "
                         f"or pass replace=True to replace it")
    problems = _spec_problems(spec) + _priority_problems(spec)
    if problems:
        raise ValueError(f"strategy '{spec.name}' cannot be registered: "
                         f"{'; '.join(problems)}")
    _STRATEGIES[spec.name] = spec
    return spec


def unregister_strategy(name: str) -> StrategySpec:
    """Remove a registered strategy; returns its spec."""
    get_strategy(name)  # raises naming the registered ones
    return _STRATEGIES.pop(name)


def _spec_problems(spec: StrategySpec) -> list[str]:
    checks = [
        (isinstance(spec.name, str) and bool(_NAME.match(spec.name)) and spec.name != "auto",
         "the name must be lower-case letters, digits, '-', '_' or '.', and not 'auto'"),
        (spec.device in DEVICE_KINDS, f"device {spec.device!r} is not one of "
                                      f"{', '.join(DEVICE_KINDS)}"),
        (isinstance(spec.contract, str) and bool(spec.contract.strip()),
         "the contract must be a sentence stating the bits against the reference"),
        (isinstance(spec.profile, Profile), "profile must be an isokernel.Profile"),
        (not isinstance(spec.profile, Profile) or spec.profile.device == spec.device,
         f"its profile is for another device than {spec.device!r}"),
        (callable(spec.compiler), "compiler must be callable as compiler(plan, **options)"),
        (callable(spec.prepare), "prepare must be callable as prepare(graph) -> graph"),
        (callable(spec.planner),
         "planner must be callable as planner(graph, profile, options) -> plan"),
        (isinstance(spec.options, frozenset) and all(isinstance(o, str) for o in spec.options),
         "options must be a frozenset of option names"),
    ]
    return [text for ok, text in checks if not ok] + _memory_problems(spec.memory)


def _memory_problems(model) -> list[str]:
    if not isinstance(model, MemoryModel):
        return ["memory must be an isokernel.MemoryModel"]
    checks = [
        (model.kind in MEMORY_KINDS, f"memory kind {model.kind!r} is not one of "
                                     f"{', '.join(MEMORY_KINDS)}"),
        (model.traffic in TRAFFIC_KINDS, f"memory traffic {model.traffic!r} is not one of "
                                         f"{', '.join(TRAFFIC_KINDS)}"),
        (model.kind != "tiled" or callable(model.tile_rows),
         "a tiled memory model needs tile_rows(row_bytes, workers)"),
    ]
    return [text for ok, text in checks if not ok]


def _priority_problems(spec: StrategySpec) -> list[str]:
    """``auto``'s order must be total: no two strategies of a device share a
    priority."""
    priority = spec.auto_priority
    if priority is None:
        return []
    if not isinstance(priority, int) or isinstance(priority, bool):
        return [f"auto_priority must be an integer or None, got {priority!r}"]
    ties = [s.name for s in _STRATEGIES.values() if s.name != spec.name
            and s.device == spec.device and s.auto_priority == priority]
    return [f"auto_priority {priority} is taken by '{n}' on {spec.device}; pick another "
            f"value" for n in ties]


def get_strategy(name: str) -> StrategySpec:
    if name not in _STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; use one of "
                         f"{', '.join(['auto', *_STRATEGIES])}")
    return _STRATEGIES[name]


def all_strategies() -> list[StrategySpec]:
    """Every registered strategy, by device (cpu first), then from the lowest
    ``auto`` priority to the highest (those ``auto`` never takes last)."""
    return sorted(_STRATEGIES.values(), key=_listing_order)


def _listing_order(spec: StrategySpec) -> tuple:
    never = spec.auto_priority is None
    return DEVICE_KINDS.index(spec.device), never, spec.auto_priority or 0, spec.name


def auto_order(kind: str) -> list[StrategySpec]:
    """The strategies ``auto`` tries on a device kind, highest priority first."""
    found = [s for s in _STRATEGIES.values()
             if s.device == kind and s.auto_priority is not None]
    return sorted(found, key=lambda s: -s.auto_priority)


def passed_over(chosen: StrategySpec, device: Device) -> list[tuple[str, str]]:
    """The strategies ``auto`` tried before ``chosen`` on ``device``, each
    with the reason it could not run there."""
    skipped = []
    for candidate in auto_order(device.kind):
        if candidate.name == chosen.name:
            break
        reason = candidate.unavailable_reason()
        skipped.append((candidate.name, reason or "unavailable when this function was compiled"))
    return skipped


def choose(name: str, device: Device) -> StrategySpec:
    """The strategy to run for a request, or ``BackendUnavailableError``
    saying why nothing can run — never a strategy of another device."""
    if name != "auto":
        return _requested(get_strategy(name), device)
    reasons = []
    for candidate in auto_order(device.kind):
        reason = candidate.unavailable_reason()
        if reason is None:
            return candidate
        reasons.append(f"{candidate.name}: {reason}")
    detail = unavailable_reason(device) or "; ".join(reasons) or "no strategy is registered"
    raise BackendUnavailableError(f"no strategy can run on device '{device}': {detail}. "
                                  f"Nothing was run on another device.")


def _requested(strategy: StrategySpec, device: Device) -> StrategySpec:
    if strategy.device != device.kind:
        raise BackendUnavailableError(
            f"strategy '{strategy.name}' runs on {strategy.device}, but the request is for "
            f"device '{device}'; pick a {device.kind} strategy or move the inputs")
    reason = strategy.unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(f"strategy '{strategy.name}' is unavailable: {reason}. "
                                      f"Nothing was run.")
    return strategy
