"""Tables: piecewise-linear look-up into named, layered, uniform tables.

A look-up into tabulated data is a data-dependent gather, which the
branch-free vocabulary deliberately cannot compose; so it is declared, as one
op (``table_lookup``) whose reference meaning is one small function (clamp,
floor, linear interpolation: ``isokernel.ir.eval.table_lookup``). The table's
name and values ride in the node, so CSE never merges fetches from different
tables. Mode ``exact`` (two point reads and an explicit, never contracted
lerp) is the reference on every strategy; mode ``hardware`` (GPU texture
filtering, a low-precision blend weight) is declared for the GPU strategies
and refused everywhere else.

``Table.inverse`` resamples the inverse of a monotone table given over a
non-uniform abscissa onto a uniform grid, and reports the approximation it
introduced.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..ir import BackendUnavailableError, Graph, Literal, Op
from ..ir import dtypes as _dt
from ..ir.eval import HARDWARE_TABLE, table_lookup
from ..ir.shapes import TABLE_MODES
from ..ir.source import user_where
from ..typing import Array, ArrayLike, DTypeLike
from . import frontend as F
from .tracer import bind


class Table:
    """Values on the uniform abscissa ``x0 + i * dx`` (i = 0 .. n-1), one row
    per layer (a 1-D ``values`` is one layer).

    ``table.lookup(x, layer)`` interpolates linearly between the two nodes
    around ``x`` in that layer; beyond the first or last node it returns that
    node's value (clamped, like a texture). ``name`` identifies the table in
    graphs and reports; by default it is derived from the contents.
    """

    def __init__(self, values: ArrayLike, x0: float, dx: float, name: str | None = None,
                 mode: str = "exact") -> None:
        array = np.array(values, dtype=np.result_type(np.asarray(values).dtype, np.float32))
        if array.dtype not in _dt.FLOATS:
            array = array.astype(np.float64)
        array = array.reshape(1, -1) if array.ndim == 1 else array
        _check_table(array, x0, dx, mode, name)
        self.values = Literal(array)
        self.x0, self.dx, self.mode = float(x0), float(dx), mode
        self.name = name if name is not None else _digest_name(array, x0, dx)

    @property
    def layers(self) -> int:
        return self.values.value.shape[0]

    @property
    def nodes(self) -> int:
        return self.values.value.shape[1]

    def __repr__(self) -> str:
        return (f"Table({self.name!r}, {self.layers} layer(s) x {self.nodes} nodes, "
                f"x0={self.x0!r}, dx={self.dx!r}, mode={self.mode!r})")

    def attrs(self, mode: str | None = None) -> dict:
        """The node attributes of a look-up into this table."""
        return {"name": self.name, "values": self.values, "x0": self.x0, "step": self.dx,
                "mode": self.mode if mode is None else mode}

    def lookup(self, x: ArrayLike, layer: ArrayLike = 0, mode: str | None = None) -> Array:
        """Piecewise-linear interpolation at ``x`` in ``layer`` (an int or an
        array of layer indices, broadcast against ``x``), in x's float dtype."""
        if mode is not None and mode not in TABLE_MODES:
            raise ValueError(f"table '{self.name}' lookup at {user_where()}: mode {mode!r} "
                             f"is not one of {TABLE_MODES}")
        if isinstance(layer, (int, np.integer)) and not 0 <= layer < self.layers:
            raise IndexError(f"table '{self.name}' lookup at {user_where()}: layer {layer} "
                             f"is outside 0..{self.layers - 1}")
        x, layer = _operands(x, layer)
        return bind(Op.TABLE_LOOKUP, x, layer, **self.attrs(mode))

    def derivative(self, dtype: DTypeLike) -> Table:
        """The slopes (v[i+1] - v[i]) / dx of the interpolant in ``dtype``,
        as a table over node *indices* (x0 = 0, dx = 1): looked up at an
        integral index it returns that segment's slope exactly."""
        return Table(_slopes(self.values.value, self.dx, dtype), 0.0, 1.0,
                     name=f"{self.name}'", mode=self.mode)

    @classmethod
    def inverse(cls, x: ArrayLike, y: ArrayLike, n: int, kinks: Sequence[float] = (),
                name: str | None = None) -> InverseTable:
        """The inverse x(y) of the monotone table y(x) given at the
        (non-uniform) abscissas ``x``, resampled onto a uniform grid of at
        most ``n`` nodes spanning y's range (with several kinks, of about
        ``n``), with a node on every value in ``kinks`` (the grid is shifted,
        and its spacing adjusted, to place them). A layer whose samples span
        less than the grid continues its end segments linearly to the grid's
        end nodes, so the interpolant is also right between a layer's last
        sample and the next node. Returns
        the table and the largest difference between its interpolant and the
        exact piecewise-linear inverse, over each layer's own range."""
        xs, ys = _monotone_pairs(x, y)
        lo, hi = float(min(r.min() for r in ys)), float(max(r.max() for r in ys))
        y0, dy, count = _grid(lo, hi, n, sorted(set(float(k) for k in kinks)))
        grid = y0 + dy * np.arange(count)
        values = np.stack([_continued(grid, yr, xr) for xr, yr in zip(xs, ys)])
        table = cls(values, y0, dy, name=name)
        return InverseTable(table, _max_inverse_error(table, xs, ys, grid))


class InverseTable(NamedTuple):
    table: Table
    max_error: float  # in x's units, over y's range (every layer)


def _check_table(array, x0, dx, mode, name) -> None:
    label = f"table {name!r}" if name else "table"
    if array.ndim != 2 or array.shape[1] < 2:
        raise ValueError(f"{label}: values must be 1-D or (layers, nodes) with at least two "
                         f"nodes, got shape {array.shape}")
    if not (math.isfinite(x0) and math.isfinite(dx) and dx > 0):
        raise ValueError(f"{label}: x0 must be finite and dx positive, got x0={x0}, dx={dx}")
    if mode not in TABLE_MODES:
        raise ValueError(f"{label}: mode {mode!r} is not one of {TABLE_MODES}")


def _digest_name(array, x0, dx) -> str:
    digest = hashlib.sha1(array.tobytes() + repr((array.shape, x0, dx)).encode())
    return f"table-{digest.hexdigest()[:10]}"


def _operands(x, layer):
    """x in its float dtype and the layer index converted to that dtype
    (an explicit cast: layer indices are small integers, exact in it),
    broadcast together."""
    dtype = _dt.float_of(F.dtype_of(x, "table lookup")[0])
    x = F.astype(x, dtype)
    layer = F.astype(layer, dtype)
    (x, layer), _ = F.unify("table lookup", (x, layer), dtype)
    return x, layer


def _slopes(values: np.ndarray, dx: float, dtype) -> np.ndarray:
    """Per-segment slopes of the interpolant of the dtype-rounded values,
    padded with the last one so the slope table has the same node count."""
    v = values.astype(dtype).astype(np.float64)
    slopes = np.diff(v, axis=1) / dx
    return np.concatenate([slopes, slopes[:, -1:]], axis=1)


# ----------------------------------------------------------- the derivative

def lookup_slope(x, layer, *, name, values, x0, step, mode):
    """The derivative in x of a look-up with these attributes: the slope of
    the segment the reference interpolates on (i = min(floor(u), n-2)) where
    0 <= u <= n-1, 0 where the abscissa is clamped (outside the table), NaN
    at NaN. Built from graph ops, so it records inside a trace."""
    table = Table(values.value, x0, step, name=name, mode=mode)
    dtype = np.dtype(x.dtype)
    u = F.divide(F.subtract(x, x0), step)
    outside = F.logical_or(F.less(u, 0.0), F.greater(u, table.nodes - 1.0))
    index = F.minimum(F.floor(F.minimum(F.maximum(u, 0.0), table.nodes - 1.0)),
                      table.nodes - 2.0)
    slope = table.derivative(dtype).lookup(index, layer)
    return F.where(outside, 0.0, slope)


def lookup_jvp(t, x, layer, *, out=None, **attrs):
    """The JVP partial of ``table_lookup`` in its abscissa: slope(x) · t.
    Shaped for a JVP table of one partial per operand, ``partial(t,
    *operands, out=..., **attrs)``: the row is ``(lookup_jvp, None)``, the
    layer (an index, piecewise constant) having no derivative. Linear in
    ``t``, so reverse mode transposes it as a multiplication."""
    return F.multiply(lookup_slope(x, layer, **attrs), t)


# ------------------------------------------------------------ the inverse

def _monotone_pairs(x, y):
    """Per layer: y ascending and x reordered with it; checks monotonicity."""
    x, y = np.atleast_2d(np.asarray(x, np.float64)), np.atleast_2d(np.asarray(y, np.float64))
    if x.shape != y.shape or x.shape[1] < 2:
        raise ValueError(f"Table.inverse: x and y must have one shape with at least two "
                         f"points per layer, got {x.shape} and {y.shape}")
    xs, ys = [], []
    for xr, yr in zip(x, y):
        if not (np.all(np.diff(xr) > 0) and np.all(np.isfinite(yr))):
            raise ValueError("Table.inverse: x must be strictly increasing and y finite")
        step = np.diff(yr)
        if not (np.all(step > 0) or np.all(step < 0)):
            raise ValueError("Table.inverse: y must be strictly monotone in every layer, "
                             "or its inverse is not a function")
        order = np.argsort(yr)
        xs.append(xr[order]), ys.append(yr[order])
    return xs, ys


def _continued(at: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x(at) by linear interpolation in (y, x), continued linearly beyond
    both ends (np.interp would hold the end values, bending the first and
    last grid segments that straddle an end)."""
    out = np.interp(at, y, x)
    below, above = at < y[0], at > y[-1]
    out[below] = x[0] + (at[below] - y[0]) * ((x[1] - x[0]) / (y[1] - y[0]))
    out[above] = x[-1] + (at[above] - y[-1]) * ((x[-1] - x[-2]) / (y[-1] - y[-2]))
    return out


def _grid(lo: float, hi: float, n: int, kinks: list[float]) -> tuple[float, float, int]:
    """(y0, dy, count) of a uniform grid covering [lo, hi] with at most ``n``
    nodes and a node on every kink."""
    if n < 2:
        raise ValueError(f"Table.inverse: n must be at least 2, got {n}")
    if any(not lo <= k <= hi for k in kinks):
        raise ValueError(f"Table.inverse: kinks {kinks} must lie within y's range [{lo}, {hi}]")
    dy = (hi - lo) / (n - 1)
    if len(kinks) > 1:
        dy = _common_spacing(kinks, dy)
    y0, count = _placed(lo, hi, dy, kinks)
    if count > n and len(kinks) == 1 and n > 2:  # the shift onto the kink cost a node
        y0, count = _placed(lo, hi, (hi - lo) / (n - 2), kinks)
        dy = (hi - lo) / (n - 2)
    return y0, dy, max(count, 2)


def _placed(lo: float, hi: float, dy: float, kinks: list[float]) -> tuple[float, int]:
    """(y0, count) of the grid of spacing ``dy`` through the first kink."""
    anchor = kinks[0] if kinks else lo
    y0 = anchor - math.ceil((anchor - lo) / dy - 1e-9) * dy
    return y0, math.ceil((hi - y0) / dy - 1e-9) + 1


def _common_spacing(kinks: list[float], target: float) -> float:
    """The largest spacing <= ``target`` that puts every kink on the grid
    through the first one."""
    span = kinks[-1] - kinks[0]
    first = max(1, math.ceil(span / target - 1e-9))
    for m in range(first, 64 * first + 1):
        dy = span / m
        offsets = [(k - kinks[0]) / dy for k in kinks]
        if all(abs(o - round(o)) < 1e-6 for o in offsets):
            return dy
    raise ValueError(f"Table.inverse: no uniform grid of about the requested spacing has a "
                     f"node on every kink {kinks}; pass the kinks that matter most, or more "
                     f"nodes")


def _max_inverse_error(table: Table, xs, ys, grid) -> float:
    """max |interpolant - exact inverse|: both are piecewise linear, so the
    difference peaks at a breakpoint of one of them."""
    worst = 0.0
    for layer, (xr, yr) in enumerate(zip(xs, ys)):
        at = np.union1d(yr, grid[(grid >= yr[0]) & (grid <= yr[-1])])
        got = table_lookup(at, np.full(at.shape, float(layer)), **table.attrs())
        worst = max(worst, float(np.max(np.abs(got - np.interp(at, yr, xr)))))
    return worst


# ----------------------------------------------------------- mode checks

def refuse_hardware_modes(graph: Graph, device_kind: str) -> None:
    """Raise where a CPU plan would include a hardware-filtered look-up
    (bit-exact strategies cannot run texture filtering)."""
    if device_kind == "cuda":
        return
    for node in graph.nodes:
        if node.op is Op.TABLE_LOOKUP and node.attrs["mode"] != "exact":
            where = f" at {node.where}" if node.where else ""
            raise BackendUnavailableError(
                f"table_lookup{where}: " + HARDWARE_TABLE.format(name=node.attrs["name"]))
