"""Registering a region primitive's IR rules.

A region primitive (``ops.REGION``: a node carrying sub-graphs, possibly
with several results) keeps every rule it has in one module of
``transforms`` (see ``transforms.regions``), which registers its SHAPE and
EVAL rules here, into the tables every layer reads, when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable

from .eval import EVAL
from .ops import REGION, Op
from .shapes import SHAPE


def register_region(op: Op, *, shape: Callable, eval: Callable) -> None:  # noqa: A002
    """Install ``op``'s SHAPE and EVAL rules; each op registers once."""
    if op not in REGION:
        raise ValueError(f"{op.value} is not a region primitive (ops.REGION)")
    if op in SHAPE or op in EVAL:
        raise ValueError(f"{op.value} is registered already")
    SHAPE[op] = shape
    EVAL[op] = eval
