"""Sorting and what builds on it, in NumPy's and JAX's names, on the one
``sort`` primitive (``ops.SORTING``: stable, NaN last, the first key
primary) and the indexing primitives.

- ``sort``, ``argsort`` (stable), ``lexsort``, ``isokernel.ops.top_k``;
- ``median``, ``quantile``/``percentile`` (NumPy's methods ``linear``,
  ``lower``, ``higher``, ``nearest``, ``midpoint``, with NumPy's own
  interpolation formula, so the same bits), ``nanmedian``,
  ``nanquantile``/``nanpercentile``;
- ``searchsorted``, ``digitize``, ``unique(size=, fill_value=)``.

Derivatives move each tangent by the sort's permutation (so a quantile's
gradient goes to the order statistics it interpolates, as JAX's); ``vmap``
sorts along the shifted axis.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..ir import Op, TracerError
from ..ir import dtypes as _dt
from ..ir.source import user_where
from ..typing import Array, ArrayLike
from . import frontend as F
from .indexing import operand as _operand
from .indexing import take_along_axis
from .tracer import Tracer, bind


def _axis(axis, rank: int, name: str) -> int:
    a = operator.index(axis)
    if not -rank <= a < rank:
        raise ValueError(f"{name} at {user_where()}: axis {a} is out of bounds for rank {rank}")
    return a % rank


def _flat(a, axis, name: str):
    x = _operand(a, name)
    if axis is None:
        return F.ravel(x), 0
    return x, _axis(axis, len(F.shape(x)), name)


def _iota(shape, axis: int):
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return F.broadcast_to(np.arange(shape[axis], dtype=np.int64).reshape(view), shape)


def _sort(xs, axis: int, num_keys: int):
    out = bind(Op.SORT, *xs, axis=axis, num_keys=num_keys)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def sort(a: ArrayLike, axis: int | None = -1, kind: str | None = None, order: Any = None, *,
         stable: bool = True) -> Array:
    """NumPy ``sort`` (stable whatever ``kind``; NaN last)."""
    if order is not None:
        raise ValueError(f"sort at {user_where()}: order= (structured arrays) is not supported")
    x, axis = _flat(a, axis, "sort")
    if F.shape(x)[axis] < 2:
        return x
    return _sort([x], axis, 1)[0]


def argsort(a: ArrayLike, axis: int | None = -1, kind: str | None = None, order: Any = None, *,
            stable: bool = True) -> Array:
    """NumPy ``argsort``, stable (ties keep their order), int64."""
    x, axis = _flat(a, axis, "argsort")
    return _sort([x, _iota(F.shape(x), axis)], axis, 1)[1]


def lexsort(keys: ArrayLike, axis: int = -1) -> Array:
    """NumPy ``lexsort``: the last key primary."""
    keys = [_operand(k, "lexsort") for k in keys]
    if not keys:
        raise ValueError(f"lexsort at {user_where()}: needs at least one key")
    shape = np.broadcast_shapes(*(F.shape(k) for k in keys))
    keys = [F.broadcast_to(k, shape) for k in keys]
    axis = _axis(axis, len(shape), "lexsort")
    return _sort([*keys[::-1], _iota(shape, axis)], axis, len(keys))[-1]


def top_k(operand: ArrayLike, k: int) -> tuple[Array, Array]:
    """JAX's ``lax.top_k``: the ``k`` largest along the last axis, largest
    first, ties by position (values, int32 indices... as int64 here)."""
    x = _operand(operand, "top_k")
    shape = F.shape(x)
    axis = len(shape) - 1
    n = shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"top_k at {user_where()}: k={k} for a last axis of {n}")
    dtype = F.dtype_of(x, "top_k")[0]
    if dtype in _dt.FLOATS:  # larger first, NaN (JAX: the largest) first
        key = F.where(F.isnan(x), -np.inf, F.negative(x))
        nan_last = F.logical_not(F.isnan(x))
        values, index = _sort([nan_last, key, x, _iota(shape, axis)], axis, 2)[2:]
    else:
        key = F.invert(x) if dtype != _dt.bool_ else F.logical_not(x)
        values, index = _sort([key, x, _iota(shape, axis)], axis, 1)[1:]
    head = (slice(None),) * axis + (slice(0, k),)
    return F.getitem(values, head), F.getitem(index, head)


# --- order statistics ---------------------------------------------------------------------

METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _hundredths(q):
    return F.divide(q, 100.0) if isinstance(q, Tracer) else np.asarray(q) / 100


def quantile(a: ArrayLike, q: ArrayLike, axis: int | None = None, out: Any = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
             interpolation: str | None = None) -> Array:
    """NumPy ``quantile`` (its formula and rounding for each method; NaN if
    the slice holds one)."""
    return _quantile(a, q, axis, interpolation or method, keepdims, "quantile", False)


def percentile(a: ArrayLike, q: ArrayLike, axis: int | None = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
               interpolation: str | None = None) -> Array:
    """NumPy ``percentile``: ``quantile`` of ``q / 100``."""
    return _quantile(a, _hundredths(q), axis, interpolation or method, keepdims, "percentile",
                     False)


def median(a: ArrayLike, axis: int | None = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """NumPy ``median``."""
    return _quantile(a, 0.5, axis, "linear", keepdims, "median", False, median=True)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | None = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                interpolation: str | None = None) -> Array:
    """NumPy ``nanquantile``: NaNs left out (a slice of NaNs only: NaN)."""
    return _quantile(a, q, axis, interpolation or method, keepdims, "nanquantile", True)


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | None = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                  interpolation: str | None = None) -> Array:
    return _quantile(a, _hundredths(q), axis, interpolation or method, keepdims,
                     "nanpercentile", True)


def nanmedian(a: ArrayLike, axis: int | None = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Array:
    return _quantile(a, 0.5, axis, "linear", keepdims, "nanmedian", True, median=True)


def _quantile(a, q, axis, method, keepdims, name, skip_nan, median=False):
    if method not in METHODS:
        raise ValueError(f"{name} at {user_where()}: method={method!r}; one of {METHODS}")
    x = _operand(a, name)
    dtype = F.dtype_of(x, name)[0]
    if dtype not in _dt.FLOATS:
        x, dtype = F.astype(x, F.float64), np.dtype(np.float64)
    rank = len(F.shape(x))
    if axis is None:
        x, axes = F.ravel(x), None
        axis = 0
    else:
        axes = axis
        axis = _axis(axis, rank, name)
    n = F.shape(x)[axis]
    if n == 0:
        raise ValueError(f"{name} at {user_where()}: an empty slice has no {name}")
    s = F.moveaxis(sort(x, axis), axis, -1)  # (..., n), NaN last
    qs = q if isinstance(q, Tracer) else np.asarray(q, dtype)
    scalar_q = F.shape(qs) == ()
    qs = F.reshape(F.astype(qs, dtype), (-1,))  # (Q,)
    nan = F.isnan(s)
    if skip_nan:
        count = F.sum(F.logical_not(nan), axis=-1, keepdims=True)  # (..., 1)
    else:
        count = np.int64(n)
    shape = F.shape(s)
    lead, q_count = shape[:-1], F.shape(qs)[0]

    def at(index):
        index = F.broadcast_to(index, lead + (q_count,))
        return take_along_axis(s, index, -1, mode="clip")
    last = F.subtract(count, 1)  # an integer
    lastf = F.astype(last, dtype)
    upper = F.astype(F.maximum(last, 0), F.int64)
    v = F.multiply(lastf, qs)  # NumPy's virtual index (n - 1) * q, (..., Q) or (Q,)
    if method in ("lower", "higher", "nearest"):
        whole = {"lower": F.floor, "higher": F.ceil, "nearest": F.around}[method](v)
        result = at(F.minimum(F.astype(whole, F.int64), upper))
    elif median:  # NumPy's median: the middle value, or the mean of the middle two
        count_i = F.astype(count, F.int64)
        low, high = at(F.floor_divide(F.subtract(count_i, 1), 2)), at(F.floor_divide(count_i, 2))
        odd = F.broadcast_to(F.equal(F.remainder(count_i, 2), 1), F.shape(low))
        result = F.where(odd, low, F.divide(F.add(low, high), 2.0))
    else:  # linear and midpoint: NumPy's _get_indexes, _get_gamma and _lerp
        virtual = v if method == "linear" else F.multiply(0.5, F.add(F.floor(v), F.ceil(v)))
        above = F.greater_equal(virtual, lastf)
        below = F.less(virtual, 0.0)
        floor = F.floor(virtual)
        previous = F.where(above, -1.0, F.where(below, 0.0, floor))  # as NumPy: -1 is last
        gamma = F.subtract(virtual, previous)
        if method == "midpoint":
            gamma = F.where(F.equal(floor, virtual), 0.0, 0.5)
        prev_i = F.where(above, upper, F.where(below, 0, F.astype(floor, F.int64)))
        next_i = F.where(above, upper, F.where(below, 0, F.add(F.astype(floor, F.int64), 1)))
        below_v, above_v = at(prev_i), at(next_i)
        result = _lerp(below_v, above_v, F.broadcast_to(F.astype(gamma, dtype),
                                                        F.shape(below_v)))
    if skip_nan:
        empty = F.equal(count, 0)
        result = F.where(empty, np.nan, result)
    else:
        any_nan = F.any(nan, axis=-1, keepdims=True)
        result = F.where(any_nan, np.nan, result)
    result = F.moveaxis(result, -1, 0)  # (Q, ...)
    if keepdims:
        kept = [1 if (axes is None or d == axis) else F.shape(a)[d]
                for d in range(len(F.shape(_operand(a, name))))]
        result = F.reshape(result, (q_count, *kept))
    if scalar_q:
        result = F.reshape(result, F.shape(result)[1:])
    return result


def _lerp(a, b, t):
    """NumPy's ``_lerp``: ``a + (b - a) * t``, and ``b - (b - a) * (1 - t)``
    where ``t >= 0.5`` (its monotone form)."""
    diff = F.subtract(b, a)
    low = F.add(a, F.multiply(diff, t))
    high = F.subtract(b, F.multiply(diff, F.subtract(1.0, t)))
    return F.where(F.greater_equal(t, 0.5), high, low)


# --- searching ----------------------------------------------------------------------------

def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike = None, *,
                 method: str | None = None) -> Array:
    """NumPy ``searchsorted`` of a sorted 1-D ``a`` (NaN last): where each
    ``v`` would go to keep ``a`` sorted. One sort of ``a`` and ``v``
    together, ties ordered by ``side``, then each ``v``'s place minus the
    ``v``s before it."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted at {user_where()}: side={side!r}; 'left' or 'right'")
    base = _operand(a, "searchsorted")
    if sorter is not None:
        base = F.take(base, sorter)
    if len(F.shape(base)) != 1:
        raise ValueError(f"searchsorted at {user_where()}: a must be 1-D")
    values = _operand(v, "searchsorted")
    dtype = np.result_type(F.dtype_of(base, "searchsorted")[0],
                           F.dtype_of(values, "searchsorted")[0])
    n, vshape = F.shape(base)[0], F.shape(values)
    flat = F.ravel(F.astype(values, dtype))
    m = F.shape(flat)[0]
    keys = F.concatenate([F.astype(base, dtype), flat])
    first_v = 0 if side == "left" else 1  # which side of an equal a each v goes
    tie = F.concatenate([np.full(n, 1 - first_v, np.int64), np.full(m, first_v, np.int64)])
    order = _sort([keys, tie, np.arange(n + m, dtype=np.int64)], 0, 2)[2]
    is_v = F.greater_equal(order, n)
    before = F.subtract(F.cumsum(F.astype(is_v, F.int64)), F.astype(is_v, F.int64))
    place = F.subtract(np.arange(n + m, dtype=np.int64), before)  # a's before each position
    target = F.where(is_v, F.subtract(order, n), m)
    out = F.zeros((m + 1,), F.int64)
    out = bind(Op.SCATTER, out, target, place, combine="set")
    return F.reshape(F.getitem(out, slice(0, m)), vshape)


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False) -> Array:
    """NumPy ``digitize`` for monotone ``bins`` (increasing or decreasing)."""
    b = _operand(bins, "digitize")
    if isinstance(b, Tracer):
        raise TracerError(f"digitize at {user_where()}: bins must be known when recording "
                          f"(their direction decides the search); pass a NumPy array")
    increasing = b.size < 2 or bool(np.all(np.diff(b) >= 0))
    side = "left" if right else "right"
    if increasing:
        return searchsorted(b, x, side=side)
    return F.subtract(b.size, searchsorted(b[::-1], x, side=side))


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: ArrayLike = None) -> Any:
    """NumPy ``unique`` (sorted, NaNs as one) with JAX's ``size=``: the first
    ``size`` unique values, the rest ``fill_value`` (default: the smallest
    value, as JAX's). Without ``size`` the array must be known."""
    if return_index or return_inverse or return_counts or axis is not None:
        raise ValueError(f"unique at {user_where()}: return_index/inverse/counts and axis= "
                         f"are not supported yet; only the values")
    x = _operand(ar, "unique")
    if size is None:
        if isinstance(x, Tracer):
            raise TracerError(f"unique at {user_where()}: the number of unique values is known "
                              f"only at run time; give size= (and fill_value=), as in JAX")
        return np.unique(x, equal_nan=equal_nan)
    s = sort(F.ravel(x), 0)
    n = F.shape(s)[0]
    if n == 0:
        return F.full((size,), 0 if fill_value is None else fill_value, F.dtype_of(x,
                                                                             "unique")[0])
    prev = F.getitem(s, slice(0, n - 1))
    nxt = F.getitem(s, slice(1, n))
    differs = F.not_equal(nxt, prev)
    if equal_nan and F.dtype_of(x, "unique")[0] in _dt.FLOATS:
        differs = F.logical_and(differs, F.logical_not(F.logical_and(F.isnan(nxt),
                                                                    F.isnan(prev))))
    first = F.concatenate([np.ones(1, bool), differs])
    slot = F.subtract(F.cumsum(F.astype(first, F.int64)), 1)
    slot = F.where(F.logical_and(first, F.less(slot, size)), slot, size)
    fill = F.min(s) if fill_value is None else fill_value
    dtype = F.dtype_of(x, "unique")[0]
    out = F.broadcast_to(F.astype(_operand(fill, "unique") if not isinstance(fill, Tracer)
                                  else fill, dtype), (size + 1,))
    out = bind(Op.SCATTER, F.add(out, F.zeros((size + 1,), dtype)), slot, s, combine="set")
    return F.getitem(out, slice(0, size))


__all__ = ["argsort", "digitize", "lexsort", "median", "nanmedian", "nanpercentile",
           "nanquantile", "percentile", "quantile", "searchsorted", "sort", "top_k", "unique"]
