"""Tabulated Mironov relations, computed host-side with NumPy: the values a
layered uniform-abscissa table (``inp.Table``) is built from, and the error
budget of Stage 4's inverse table.

Both tables have one layer per clay bin and an abscissa measured *from the
Mironov kink* of the pixel's own clay, so that every layer has a node
exactly at its kink and a blend of two adjacent layers keeps the kinks
aligned:

- forward, uniform in ζ = mv − mvt(clay): ε'(mv) and ε''(mv)
  (:func:`mironov_table_values`); κ(ε') for Stage 3 is ε'' at the mv that
  the inverse table gives;
- inverse, uniform in ξ = ε' − ε'(mvt; clay): mv(ε') (:func:`stage4_table`).

ε'(mv) is increasing, so mv(ε') exists, but its natural abscissa is
non-uniform and table hardware interpolates only uniform coordinates. The
inverse is therefore resampled once, host-side, by the table extension's
``Table.inverse``: the forward relation is sampled finely with a node
exactly at mvt (:func:`forward_samples`), and ``Table.inverse`` swaps the
axes and resamples onto a uniform ξ grid with a node on the kink ξ = 0,
reporting the approximation error it introduced.
The samples extend past [0, MV_MAX] (the formulas continue smoothly there)
so every layer is sampled over its own range mv ∈ [0, MV_MAX] and beyond;
farther out a layer continues its end segments linearly. Stage 4 clamps mv
to [0, porosity] after the lookup.

Why the shift: with a plain ε' abscissa the kink (the slope of mv(ε')
changes by up to 60 % at mvt for clay-rich soils) falls between nodes and
costs up to 1.6e-4 m³/m³ at 1024 nodes, first order in the node spacing.
With the node at the kink the error is second order (:func:`inverse_table_error`
measures it against the exact closed-form inverse
``dielectric.mv_from_eps_re``).

Lookups here are the table extension's reference meaning
(``isokernel.ir.eval.table_lookup``: clamp, floor, and the lerp
(1 − f)·v[i] + f·v[i+1]), so host-side error measurements see the bits the
retrieval computes under ``jit`` on every strategy (:func:`lookup`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ir import Literal
from ...ir.eval import table_lookup
from ...numpy import Table
from .dielectric import FREQ_HZ, MV_MAX, mironov, mironov_coefficients, mv_from_eps_re

NODES = 1024
FINE = 20_001  # forward samples per layer before resampling (plus the kink)
SAMPLE_RANGE = (-0.03, MV_MAX + 0.03)  # mv span of the forward samples, m³/m³
CLAY_STEP = 0.02
STAGE4_NAME = "mironov_mv_of_xi"
EPS_IM_NAME = "mironov_eps_im_of_zeta"


def clay_bins(step: float = CLAY_STEP, high: float = 0.6) -> np.ndarray:
    """Clay fractions of the table layers: 0, step, …, high."""
    return np.round(np.arange(0.0, high + step / 2, step), 10)


@dataclass(frozen=True)
class UniformTable:
    """Layers × nodes ``values`` over the abscissa x0 + i·dx, i = 0 … nodes−1."""

    values: np.ndarray
    x0: float
    dx: float

    def table(self, name: str) -> Table:
        """The table extension's ``inp.Table`` over these values."""
        return Table(self.values, self.x0, self.dx, name=name)


def lookup(table: UniformTable, x, layer) -> np.ndarray:
    """The table's reference look-up at ``x`` (float64 unless already a
    float array) in ``layer``s: clamp, floor, the lerp (1 − f)·a + f·b."""
    x = np.asarray(x)
    x = x if x.dtype in (np.float32, np.float64) else x.astype(np.float64)
    layer = np.broadcast_to(np.asarray(layer), x.shape).astype(x.dtype)
    return table_lookup(x, layer, name="host", values=Literal(table.values), x0=table.x0,
                        step=table.dx, mode="exact")


def kinks(clay, freq_hz: float = FREQ_HZ) -> tuple[np.ndarray, np.ndarray]:
    """(mvt, ε'(mvt)) of each clay fraction."""
    clay = np.asarray(clay, np.float64)
    mvt = np.asarray(mironov_coefficients(clay, freq_hz).mvt)
    return mvt, _parts(mironov(mvt, clay, freq_hz))[0]


def _parts(eps) -> tuple[np.ndarray, np.ndarray]:
    """(ε', ε'') of a complex permittivity, as contiguous real arrays."""
    eps = np.asarray(eps)
    return np.ascontiguousarray(eps.real), np.ascontiguousarray(eps.imag)


def grid_with_node_at_zero(lo: float, hi: float, nodes: int) -> tuple[float, float]:
    """(x0, dx) of a uniform grid of ``nodes`` nodes covering [lo, hi] (lo < 0
    < hi) with one node exactly at 0."""
    below = max(1, math.ceil((nodes - 1) * -lo / (hi - lo)))
    dx = max(-lo / below, hi / (nodes - 1 - below))
    return -below * dx, dx


def mironov_table_values(clay, nodes: int = NODES, freq_hz: float = FREQ_HZ
                         ) -> tuple[UniformTable, UniformTable]:
    """(ε', ε'') of the direct Mironov model at ``nodes`` uniform nodes in
    ζ = mv − mvt covering mv ∈ [0, MV_MAX] in every layer, node at ζ = 0."""
    clay = np.asarray(clay, np.float64)
    mvt, _ = kinks(clay, freq_hz)
    x0, dx = grid_with_node_at_zero(-float(mvt.max()), MV_MAX - float(mvt.min()), nodes)
    mv = mvt[:, None] + (x0 + dx * np.arange(nodes))
    eps_re, eps_im = _parts(mironov(mv, clay[:, None] + np.zeros_like(mv), freq_hz))
    return UniformTable(eps_re, x0, dx), UniformTable(eps_im, x0, dx)


def forward_samples(clay, fine: int = FINE, span: tuple[float, float] = SAMPLE_RANGE,
                    freq_hz: float = FREQ_HZ) -> tuple[np.ndarray, np.ndarray]:
    """Non-uniform samples (mv, ε'(mv)) per clay layer: ``fine`` uniform
    nodes in mv over ``span`` plus one exactly at the layer's mvt."""
    clay = np.asarray(clay, np.float64)
    mvt, _ = kinks(clay, freq_hz)
    grid = np.broadcast_to(np.linspace(*span, fine), (clay.size, fine))
    mv = np.sort(np.concatenate([grid, mvt[:, None]], axis=1), axis=1)
    return mv, _parts(mironov(mv, clay[:, None] + np.zeros_like(mv), freq_hz))[0]


def stage4_inverse(clay, nodes: int = NODES, freq_hz: float = FREQ_HZ):
    """The Stage-4 inverse table mv(ξ), ξ = ε' − ε'(mvt; clay), one layer per
    clay in ``clay``: ``Table.inverse`` of the forward samples with a node on
    the kink ξ = 0 and at most ``nodes`` nodes. Returns the table extension's
    ``InverseTable`` (the table, and the max error it introduced against the
    piecewise-linear inverse of the samples)."""
    mv, eps_re = forward_samples(clay, freq_hz=freq_hz)
    _, eps_t = kinks(clay, freq_hz)
    return Table.inverse(mv, eps_re - eps_t[:, None], nodes, kinks=(0.0,), name=STAGE4_NAME)


def stage4_table(clay, nodes: int = NODES, freq_hz: float = FREQ_HZ) -> UniformTable:
    """The values and abscissa of :func:`stage4_inverse`'s table."""
    table = stage4_inverse(clay, nodes, freq_hz).table
    return UniformTable(table.values.value, table.x0, table.dx)


def _truth(clay_values, samples: int, freq_hz: float):
    """Dense (mv, ε', ε'_kink) over [0, MV_MAX] for each clay value."""
    mv = np.linspace(0.0, MV_MAX, samples)
    c = np.asarray(clay_values, np.float64)[:, None] + np.zeros_like(mv)
    eps_re, _ = _parts(mironov(np.broadcast_to(mv, c.shape).copy(), c, freq_hz))
    _, eps_t = kinks(c, freq_hz)
    return c, eps_re, eps_t


def _exact_inverse(eps_re, clay, freq_hz: float):
    return mv_from_eps_re(eps_re, mironov_coefficients(clay, freq_hz), MV_MAX)


def inverse_table_error(clay, nodes: int = NODES, samples: int = 4001,
                        freq_hz: float = FREQ_HZ) -> float:
    """Max |lookup − exact| in m³/m³ of the Stage-4 inverse table over
    mv ∈ [0, MV_MAX], at the layers' own clay values."""
    table = stage4_table(clay, nodes, freq_hz)
    c, eps_re, eps_t = _truth(clay, samples, freq_hz)
    layer = np.broadcast_to(np.arange(c.shape[0])[:, None], c.shape)
    got = lookup(table, eps_re - eps_t, layer)
    return float(np.max(np.abs(got - _exact_inverse(eps_re, c, freq_hz))))


def clay_blend_error(clay, nodes: int = NODES, samples: int = 2001,
                     freq_hz: float = FREQ_HZ) -> float:
    """Max error in m³/m³ at clay values halfway between layers when the two
    adjacent layers' lookups (at the pixel's own ξ) are averaged: the
    between-bin error of a linear blend in clay, table error included."""
    clay = np.asarray(clay, np.float64)
    table = stage4_table(clay, nodes, freq_hz)
    c, eps_re, eps_t = _truth(0.5 * (clay[:-1] + clay[1:]), samples, freq_hz)
    layer = np.broadcast_to(np.arange(c.shape[0])[:, None], c.shape)
    xi = eps_re - eps_t
    got = 0.5 * (lookup(table, xi, layer) + lookup(table, xi, layer + 1))
    return float(np.max(np.abs(got - _exact_inverse(eps_re, c, freq_hz))))
