"""Stage 3's κ and Stage 4's mv through layered uniform tables, written in
the frontend with the table lookup passed in.

``lookup(x, layer)`` is the table's reference semantics (clamp, floor,
linear interpolation at abscissa ``x`` in integer ``layer``):
``inp.Table.lookup`` of the table extension, which evaluates eagerly on
NumPy values and records a ``table_lookup`` node under ``jit`` — the same
bits either way (:func:`mironov_lookups`).
Layers are clay bins 0, step, 2·step, …; a pixel blends its two
neighbouring layers linearly in clay. Abscissas are measured from the
pixel's own Mironov kink (see ``tables``): ξ = ε' − ε'(mvt; clay) for the
inverse table, ζ = mv − mvt(clay) for the forward ε'' table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ... import numpy as inp
from . import tables as T
from .dielectric import MV_MAX, MironovCoefficients, eps_re_at_transition
from .tables import CLAY_STEP


@dataclass(frozen=True)
class TableLookups:
    """The two lookups the retrieval needs and the layer layout."""

    mv_of_xi: Callable  # Stage-4 inverse table: mv at ξ = ε' − ε'(mvt)
    eps_im_of_zeta: Callable  # forward table: ε'' at ζ = mv − mvt
    layers: int
    clay_step: float = CLAY_STEP


def _blend(lookup, x, clay, t: TableLookups):
    u = inp.clip(clay / t.clay_step, 0.0, t.layers - 1.0)
    low = inp.minimum(inp.floor(u), t.layers - 2.0)
    w = u - low
    layer = inp.astype(low, inp.int32)
    return (1.0 - w) * lookup(x, layer) + w * lookup(x, layer + 1)


def table_mv(eps_re, clay, m: MironovCoefficients, t: TableLookups):
    """mv(ε') from the inverse table (not yet clamped to porosity)."""
    return _blend(t.mv_of_xi, eps_re - eps_re_at_transition(m), clay, t)


def table_kappa(eps_re, clay, m: MironovCoefficients, t: TableLookups):
    """κ(ε') = ε''(mv(ε')), mv clamped to [0, MV_MAX]: two lookups."""
    mv = inp.clip(table_mv(eps_re, clay, m, t), 0.0, MV_MAX)
    return _blend(t.eps_im_of_zeta, mv - m.mvt, clay, t)


@dataclass(frozen=True)
class MironovTables:
    """The retrieval's tables: the lookups to pass to ``retrieve``, the two
    ``inp.Table`` objects, and the Stage-4 inverse table's error budget."""

    lookups: TableLookups
    inverse: object  # inp.Table: mv(ξ), Table.inverse with a node on the kink
    eps_im: object  # inp.Table: ε''(ζ), the direct model at uniform ζ
    inverse_error: float  # Table.inverse's max error vs the sampled inverse, m³/m³


@functools.lru_cache(maxsize=8)
def mironov_lookups(step: float = CLAY_STEP, nodes: int | None = None) -> MironovTables:
    """κ and Stage 4 through the table extension: clay bins 0, step, …, 0.6,
    ``nodes`` nodes (default ``tables.NODES``). Built once per (step,
    nodes) and shared, so ``jit(retrieve, static_argnames="lookups")`` sees
    one static value."""
    clay = T.clay_bins(step)
    nodes = nodes or T.NODES
    _, eps_im = T.mironov_table_values(clay, nodes)
    inverse = T.stage4_inverse(clay, nodes)
    eps_im_table = eps_im.table(T.EPS_IM_NAME)
    lookups = TableLookups(inverse.table.lookup, eps_im_table.lookup, len(clay),
                           float(clay[1] - clay[0]))
    return MironovTables(lookups, inverse.table, eps_im_table, inverse.max_error)
