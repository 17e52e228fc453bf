"""The sizing solver: combine a memory shape with the platform budget.

Two shapes, because the two knobs constrain differently:

- **task sharding** — shards split one resident tile (the pixels of one call,
  with their inputs and outputs), so the tile's bytes do not depend on the
  shard count; only a per-shard fixed cost (scratch) scales with it:
  ``shards = min(CPUs, ⌊(memory − resident) / per_shard⌋)``. When the
  resident tile alone exceeds the budget no shard count fits, and the solver
  says so — shrink the tile — instead of clamping to a plausible answer.
- **block concurrency** — a fixed block size; how many blocks at once:
  ``blocks = min(workers, ⌊(memory − resident) / per_block⌋)``.

``largest_block`` answers the inverse question jit's ``block="auto"`` asks:
the most pixel rows per block that fit. An explicit operator override wins
verbatim in every shape (the line still shows what the budget alone gives).
Every decision is one line — every term with its source — logged on the
``isokernel.deploy`` logger, so an out-of-memory kill or an idle machine is
diagnosable from the log alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..backends.liveness import format_bytes
from ..backends.platform import Figure
from .shape import MemoryShape

LOG = logging.getLogger("isokernel.deploy")


@dataclass(frozen=True)
class Decision:
    """``value`` is the answer (None: nothing fits); ``status`` is ``fits``,
    ``override`` or ``nothing fits``; ``remedy`` says what to change."""

    kind: str
    value: int | None
    status: str
    line: str
    remedy: str = ""

    def __str__(self) -> str:
        return self.line


def _term(name: str, figure: Figure, as_bytes: bool = True) -> str:
    value = format_bytes(figure.value) if as_bytes else str(figure.value)
    return f"{name} {value} [{figure.source}]"


def _decide(kind: str, found: int | None, formula: str, override: int | None,
            remedy: str = "") -> Decision:
    if override is not None:
        budget = "nothing fits: " if found is None else f"{found} = "
        line = (f"{kind}: {override} (operator override, wins verbatim; the budget alone "
                f"gives {budget}{formula})")
        decision = Decision(kind, override, "override", line, remedy)
    elif found is None:
        decision = Decision(kind, None, "nothing fits", f"{kind}: nothing fits: {formula}; "
                                                        f"{remedy}", remedy)
    else:
        decision = Decision(kind, found, "fits", f"{kind}: {found} = {formula}")
    LOG.info(decision.line)
    return decision


def shard_tasks(resident: Figure, per_shard: Figure, memory: Figure, cpus: Figure,
                override: int | None = None) -> Decision:
    """Shards of one resident tile that run at once."""
    terms = (f"min({_term('CPUs', cpus, False)}, ⌊({_term('memory', memory)} − "
             f"{_term('resident', resident)}) / {_term('per-shard', per_shard)}⌋)")
    headroom = memory.value - resident.value
    if headroom < 0:
        return _decide("task sharding", None, terms, override,
                       f"the resident tile alone exceeds the memory budget by "
                       f"{format_bytes(-headroom)}: shrink the tile (fewer pixels per call); "
                       f"no shard count can fit it")
    fit = cpus.value if per_shard.value <= 0 else min(cpus.value, headroom // per_shard.value)
    if fit < 1:
        return _decide("task sharding", None, terms, override,
                       f"one shard's own {format_bytes(per_shard.value)} exceeds the "
                       f"{format_bytes(headroom)} left beside the resident tile: shrink the "
                       f"tile or the per-shard scratch")
    return _decide("task sharding", fit, terms, override)


def block_concurrency(per_block: Figure, resident: Figure, memory: Figure, workers: Figure,
                      override: int | None = None) -> Decision:
    """Blocks of a fixed size that run at once."""
    terms = (f"min({_term('workers', workers, False)}, ⌊({_term('memory', memory)} − "
             f"{_term('resident', resident)}) / {_term('per-block', per_block)}⌋)")
    headroom = memory.value - resident.value
    fit = workers.value if per_block.value <= 0 else min(workers.value,
                                                         max(headroom, 0) // per_block.value)
    if fit < 1:
        return _decide("block concurrency", None, terms, override,
                       f"one block needs {format_bytes(per_block.value)} but "
                       f"{format_bytes(max(headroom, 0))} is left: lower the block size")
    return _decide("block concurrency", fit, terms, override)


def largest_block(shape: MemoryShape, memory: Figure, resident: Figure,
                  override: int | None = None) -> Decision:
    """The most pixel rows per block: ⌊(memory − resident − fixed) / per_element⌋,
    capped at the call's own pixel count (then one block is the whole call)."""
    fixed = Figure(shape.fixed, f"fixed term of {shape.strategy}")
    terms = (f"⌊({_term('memory', memory)} − {_term('resident', resident)} − "
             f"{_term('fixed', fixed)}) / per-row {shape.per_element} B "
             f"[{shape.strategy}: {shape.basis}]⌋")
    room = memory.value - resident.value - shape.fixed
    whole = shape.pixels or 0
    # when nothing scales with P, the whole call fits or nothing does
    rows = max(room, -1) // shape.per_element if shape.per_element > 0 else whole
    if room < 0 or (rows < 1 and shape.per_element > 0):
        return _decide("largest block", None, terms, override,
                       "not even one pixel row fits: free memory, or lower the resident "
                       "term (fewer pixels per call)")
    if rows >= whole:
        return _decide("largest block", whole, f"all {whole} rows, the whole call "
                                               f"({terms} ≥ {whole})", override)
    return _decide("largest block", rows, terms, override)
