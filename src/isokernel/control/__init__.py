"""Structured control flow with JAX's call forms: ``cond``, ``switch``,
``fori_loop``, ``scan``, ``while_loop`` and ``checkpoint`` (``remat``).

Each is a region primitive whose module holds all of its rules (SHAPE, EVAL,
JVP, the partial-evaluation split or the transpose of reverse mode, BATCH,
cost) and registers them (``transforms.regions``). Outside a recording they
run eagerly with the NumPy meaning; inside one they record one node whatever
the trip count. ``docs/control_flow.md`` states the semantics, the derivative
rules and the memory of each mode."""

from .checkpoint import checkpoint, remat
from .cond import cond, switch
from .report import report_lines
from .scan import fori_loop, scan
from .while_loop import while_loop

__all__ = ["checkpoint", "cond", "fori_loop", "remat", "report_lines", "scan", "switch",
           "while_loop"]
