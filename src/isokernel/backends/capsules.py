"""Capsules: the audit record of one op × provider, and the registry of them.

A capsule says who computes an op (provider), where (device), how far it is
trusted, who owns its derivative, and under which numerical policy. Planning
only accepts a graph whose every node has an accepted capsule, and the report
of a compiled function lists the capsules that ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Op

TRUST_LEVELS = ("reference", "checked", "trusted")
"""``reference``: the oracle itself. ``checked``: tested against the reference
under a written contract (bit-identical or a measured ulp bound). ``trusted``:
an external library whose arithmetic isokernel does not check."""


@dataclass(frozen=True)
class NumericalPolicy:
    rounding: str = "nearest-even"
    subnormals: str = "preserved"
    contraction: str = "off"
    reduction_order: str = "n/a"
    math_library: str = "IEEE basic operation"

    def __str__(self) -> str:
        return (f"round={self.rounding}, subnormal={self.subnormals}, "
                f"fma={self.contraction}, reduce={self.reduction_order}, "
                f"mathlib={self.math_library}")


@dataclass(frozen=True)
class Capsule:
    name: str
    op: Op
    provider: str
    device: str
    trust: str
    vjp_mode: str
    numerical_policy: NumericalPolicy

    def __post_init__(self):
        if self.trust not in TRUST_LEVELS:
            raise ValueError(f"capsule {self.name}: trust {self.trust!r} is not one of "
                             f"{TRUST_LEVELS}")

    def describe(self) -> str:
        return (f"{self.op.value}: {self.name}\n"
                f"  provider={self.provider} device={self.device} trust={self.trust} "
                f"vjp={self.vjp_mode}\n"
                f"  numeric=[{self.numerical_policy}]")


_REGISTRY: dict[tuple[Op, str], Capsule] = {}


def register(capsule: Capsule) -> Capsule:
    """Add a capsule; a provider registers one capsule per op."""
    key = (capsule.op, capsule.provider)
    if key in _REGISTRY and _REGISTRY[key] != capsule:
        raise ValueError(f"provider {capsule.provider} already has a capsule for "
                         f"{capsule.op.value}")
    _REGISTRY[key] = capsule
    return capsule


def lookup(op: Op, provider: str) -> Capsule | None:
    return _REGISTRY.get((op, provider))


def registered() -> list[Capsule]:
    return list(_REGISTRY.values())
