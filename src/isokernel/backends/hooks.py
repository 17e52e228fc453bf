"""Extension points that layers above ``backends`` fill in.

``jit`` lives here but sizing lives in ``isokernel.deploy``, which sits above
it and may not be imported from it. So ``deploy`` installs its functions at
import time (``import isokernel`` does that), and ``jit`` calls whatever is
installed:

- a *block planner* ``fn(compiled, requested) -> BlockChoice`` answers
  ``jit(..., block="auto")`` (and records an explicit ``block=<rows>``);
- *report lines* ``fn(compiled) -> [(key, text)]`` extend ``compiled.report()``;
- *measure probes* ``fn(compiled, arrays)`` run beside ``compiled.measure()``;
- an *admission check* ``fn(compiled) -> check | None`` gives, for a compiled
  function whose calls run whole, a check each call runs before any work
  (raising when the call cannot fit the memory budget), or None when its calls
  are too small to need one;
- a *CPU budget* ``fn() -> CpuCount`` gives the CPUs this process may use and
  the source of the figure (``deploy.platform.cpu_budget``: the scheduler
  affinity intersected with the cgroup quota); the CPU strategies size their
  worker pools by it. Without one, ``cpu_budget()`` counts the scheduler
  affinity alone and says so in its source.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class BlockChoice:
    """Pixel rows per block (None: run the call whole) and the decision as
    one line with its terms and their sources."""

    block: int | None
    line: str


NO_PLANNER = ("jit(block='auto') needs a block planner and none is installed; import "
              "isokernel.deploy (plain `import isokernel` does), or pass an explicit "
              "block=<pixel rows>")

_PLANNER: list[Callable | None] = [None]
_REPORT_LINES: list[Callable] = []
_PROBES: list[Callable] = []
_ADMISSION: list[Callable | None] = [None]
_CPU_BUDGET: list[Callable | None] = [None]


class CpuCount(Protocol):
    """A CPU count and where it came from (``deploy.platform.Figure`` is one)."""

    value: int
    source: str


@dataclass(frozen=True)
class AffinityCount:
    """The fallback CPU count: the scheduler affinity alone."""

    value: int
    source: str


NO_CPU_BUDGET = ("no CPU budget installed (import isokernel.deploy for the cgroup quota; "
                 "plain `import isokernel` does)")


def install_block_planner(fn: Callable | None) -> Callable | None:
    """Install ``fn`` as the block planner; returns the one it replaces."""
    previous, _PLANNER[0] = _PLANNER[0], fn
    return previous


def install_report_lines(fn: Callable) -> None:
    if fn not in _REPORT_LINES:
        _REPORT_LINES.append(fn)


def install_measure_probe(fn: Callable) -> None:
    if fn not in _PROBES:
        _PROBES.append(fn)


def install_admission(fn: Callable | None) -> Callable | None:
    """Install ``fn`` as the admission check; returns the one it replaces."""
    previous, _ADMISSION[0] = _ADMISSION[0], fn
    return previous


def install_cpu_budget(fn: Callable | None) -> Callable | None:
    """Install ``fn`` as the CPU budget; returns the one it replaces."""
    previous, _CPU_BUDGET[0] = _CPU_BUDGET[0], fn
    return previous


def cpu_budget() -> CpuCount:
    """The CPUs this process may use, with the figure's source: the installed
    budget's, else the scheduler affinity count (the source says which)."""
    fn = _CPU_BUDGET[0]
    if fn is not None:
        return fn()
    if hasattr(os, "sched_getaffinity"):  # Linux; elsewhere the host's count
        return AffinityCount(len(os.sched_getaffinity(0)),
                             f"scheduler affinity (sched_getaffinity); {NO_CPU_BUDGET}")
    return AffinityCount(os.cpu_count() or 1, f"os.cpu_count(); {NO_CPU_BUDGET}")


def admission(compiled) -> Callable[[], None] | None:
    """The check each whole call of ``compiled`` runs first, or None."""
    fn = _ADMISSION[0]
    return None if fn is None else fn(compiled)


def check_block(block) -> None:
    """``block`` is None, ``"auto"`` (with a planner installed) or a positive
    number of pixel rows."""
    if block is None:
        return
    if block == "auto":
        if _PLANNER[0] is None:
            raise RuntimeError(NO_PLANNER)
        return
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ValueError(f"block must be None, 'auto' or a positive number of pixel rows, "
                         f"got {block!r}")


def choose_block(compiled, requested) -> BlockChoice | None:
    """The block decision for ``compiled``; an explicit number wins verbatim."""
    if requested is None:
        return None
    check_block(requested)
    planner = _PLANNER[0]
    if planner is None:
        return BlockChoice(requested, f"block {requested} pixel rows (operator override)")
    return planner(compiled, requested)


def report_lines(compiled) -> list[tuple[str, str]]:
    return [line for fn in _REPORT_LINES for line in fn(compiled)]


def run_probes(compiled, arrays) -> None:
    for fn in _PROBES:
        fn(compiled, arrays)
