"""What a strategy's compiler returns: the ``Executable`` protocol, the one
interface ``jit`` and ``deploy`` call, and ``ExecutableBase``, which gives
every member beyond running a declared default.

A strategy defined outside isokernel satisfies the protocol either way: by
subclassing ``ExecutableBase`` and defining ``call_flat``, or by any class
with these members (``isinstance(x, Executable)`` checks them at run time).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .liveness import Liveness
from .planning import Plan


@runtime_checkable
class Executable(Protocol):
    """A graph compiled by one strategy for one input signature.

    ``plan``: the plan that runs (a strategy that splits the graph binds
    capsules per node: its own ``NodePlan``). ``static_liveness`` and
    ``measured_liveness``: the live-buffer peak by one walk over the graph
    and as the last ``measure`` saw it (None where the strategy does not
    track buffers). ``forms_run``: how the strategy runs fused forms, for
    the report (None: no statement)."""

    plan: Plan
    static_liveness: Liveness | None
    measured_liveness: Liveness | None
    forms_run: str | None

    def call_flat(self, arrays: Sequence) -> tuple:
        """The outputs for these inputs, in the graph's order."""
        ...

    def measure(self, arrays: Sequence) -> tuple:
        """``call_flat`` once, recording what the strategy can measure."""
        ...

    def source(self) -> str:
        """The code the strategy generated for the graph."""
        ...

    def report_lines(self) -> list[tuple[str, str]]:
        """``(key, text)`` lines the strategy adds to ``compiled.report()``."""
        ...


class ExecutableBase(ABC):
    """The declared defaults of ``Executable``: no liveness, no statement on
    fused forms, no generated source, no report lines, and ``measure`` as a
    plain call. A subclass sets ``plan`` (``super().__init__(plan)``) and
    defines ``call_flat``; ``executable(*arrays)`` calls it."""

    static_liveness: Liveness | None = None
    measured_liveness: Liveness | None = None
    forms_run: str | None = None

    def __init__(self, plan: Plan):
        self.plan = plan

    @abstractmethod
    def call_flat(self, arrays: Sequence) -> tuple:
        """The outputs for these inputs, in the graph's order."""

    def __call__(self, *arrays) -> tuple:
        return self.call_flat(arrays)

    def measure(self, arrays: Sequence) -> tuple:
        """Runs once; strategies that track live buffers measure here."""
        return self.call_flat(arrays)

    def source(self) -> str:
        return f"# {type(self).__name__} generates no source\n"

    def report_lines(self) -> list[tuple[str, str]]:
        return []
