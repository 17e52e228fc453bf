"""Profiles and planning: which capsules a target accepts, and the plan that
binds one accepted capsule to every op of a graph — or a refusal naming the
ops that have none. There is no fallback to another provider or device."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir import Graph, Op, PlanningError, subgraphs
from ..ir.ops import LEAF as LEAF_OPS
from .capsules import Capsule, lookup


@dataclass(frozen=True)
class Profile:
    """A target: device, providers in order of preference, the trust levels
    its assurance gate accepts, and a probe returning None when the target
    can run here or the reason it cannot."""

    name: str
    device: str
    providers: tuple[str, ...]
    accepted_trust: frozenset[str]
    probe: Callable[[], str | None] = field(default=lambda: None, compare=False)

    def unavailable_reason(self) -> str | None:
        return self.probe()


@dataclass(frozen=True)
class Plan:
    graph: Graph
    profile: Profile
    capsules: dict[Op, Capsule]

    def capsule_counts(self) -> list[tuple[Capsule, int]]:
        """Every capsule the plan binds, with how many nodes use it."""
        counts = Counter(n.op for n in self.graph.nodes if n.op not in LEAF_OPS)
        return [(self.capsules[op], k) for op, k in counts.items()]


def plan(graph: Graph, profile: Profile) -> Plan:
    """Bind an accepted capsule to every op of ``graph``, and of every body
    its region nodes carry, or raise ``PlanningError`` naming each op without
    one (inside a body: the op, the carrier and the body)."""
    chosen: dict[Op, Capsule] = {}
    missing: dict[Op, str] = {}
    for node, context in _every_node(graph, ""):
        if node.op in LEAF_OPS or node.op in chosen or node.op in missing:
            continue
        capsule = _accepted(node.op, profile)
        if capsule is None:
            missing[node.op] = ", ".join(p for p in (node.where, context) if p)
        else:
            chosen[node.op] = capsule
    if missing:
        ops = ", ".join(f"{op.value}{' (' + w + ')' if w else ''}" for op, w in missing.items())
        raise PlanningError(
            f"profile '{profile.name}' ({profile.device}) has no accepted capsule for: {ops}. "
            f"Nothing was run; choose a strategy whose profile covers these ops, "
            f"e.g. strategy='reference'")
    return Plan(graph, profile, chosen)


def plan_ops(graph: Graph, profile: Profile, options: dict | None = None) -> Plan:
    """The default planner of a ``StrategySpec``: ``plan``, one capsule per op
    (a strategy's options do not change it)."""
    return plan(graph, profile)


def _every_node(graph: Graph, context: str):
    """Each node with where it sits: '' at the top, else 'in body NAME of
    OP at LINE' (nested bodies chain)."""
    for node in graph.nodes:
        yield node, context
        for name, sub in subgraphs(node):
            inner = f"in body {name!r} of {node.op.value}" + (f" at {node.where}"
                                                             if node.where else "")
            yield from _every_node(sub.graph, f"{inner}{'; ' + context if context else ''}")


def _accepted(op: Op, profile: Profile) -> Capsule | None:
    for provider in profile.providers:
        capsule = lookup(op, provider)
        if capsule is not None and capsule.trust in profile.accepted_trust:
            return capsule
    return None


@dataclass(frozen=True)
class NodePlan(Plan):
    """A plan that binds capsules per node: the same op may run inside a
    fused region under one strategy's capsule and whole under another's
    (the reference's, or the eager GPU kernel's). The report counts these."""

    by_node: dict = field(default_factory=dict)

    def capsule_counts(self) -> list[tuple[Capsule, int]]:
        return list(Counter(self.by_node.values()).items())
