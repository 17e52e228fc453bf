"""Data-dependent indexing in NumPy's and JAX's names, on the two primitives
``gather`` and ``scatter`` (``ops.INDEXING``).

- ``x[idx]`` with integer arrays (NumPy's advanced indexing, mixed with
  integers and slices; ``None`` and boolean masks are refused: a mask's
  result has a data-dependent shape, use ``inp.where``);
- ``take``, ``take_along_axis``;
- ``x.at[key].set/add/multiply/mul/min/max/get`` (JAX's API; ``inp.at(x)``
  for a NumPy array), ``segment_sum/max/min``, ``bincount(length=)``,
  ``dynamic_slice``, ``dynamic_update_slice``.

Out-of-bounds indices follow JAX's modes, since a compiled program cannot
raise NumPy's ``IndexError`` for a value it computes: ``clip`` (to the
nearest row), ``fill`` (a gather gives ``fill_value`` there), ``drop`` (a
scatter ignores that update), ``wrap`` (modulo the size) and
``promise_in_bounds`` (the caller vouches: a gather clamps, with no
derivative there; an update drops). A negative index in [-n, 0) counts
from the end, as NumPy's. The defaults are JAX's: ``x[idx]`` and
``.at[].get()`` promise, ``take`` and ``take_along_axis`` fill, updates
drop.

Every function works on the row-major flat positions of the elements it
selects (``positions``): a constant where the key is static, a few integer
ops where it is traced, and then one ``gather`` or ``scatter`` over the
flattened array (a row gather where only axis 0 is indexed by one array).
Repeated indices in an update apply in the key's row-major order: ``set``
keeps the last, ``add`` sums in that order, the same bits on every strategy.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir import Op, TracerError
from ..ir import dtypes as _dt
from ..ir.source import user_where
from ..typing import Array, ArrayLike
from . import frontend as F
from .tracer import Tracer, bind

MODES = ("clip", "fill", "drop", "wrap", "promise_in_bounds")


def operand(x, name: str):
    """An array operand: a traced value as it is, anything else as NumPy."""
    if isinstance(x, Tracer):
        return x
    return np.asarray(x, dtype=F.dtype_of(x, name)[0])


def _axis(axis, rank: int, name: str) -> int:
    a = operator.index(axis)
    if not -rank <= a < rank:
        raise ValueError(f"{name} at {user_where()}: axis {a} is out of bounds for rank {rank}")
    return a % rank


def is_array_key(k) -> bool:
    """Whether an index is an integer array (a traced value or a NumPy array
    or list), as opposed to a static integer, slice, None or ellipsis."""
    if isinstance(k, Tracer):
        return True
    if isinstance(k, (list, np.ndarray)):
        return True
    return False


def _check_mode(mode, name: str):
    if mode not in MODES:
        raise ValueError(f"{name} at {user_where()}: mode={mode!r}; use one of {MODES}")


def _index_array(k, name: str):
    if isinstance(k, Tracer):
        if k.dtype == _dt.bool_:
            raise TracerError(f"{name} at {user_where()}: a boolean mask selects a number of "
                              f"elements known only at run time; use inp.where(mask, x, 0) "
                              f"or inp.nonzero(mask, size=...) instead")
        if k.dtype not in _dt.INTS:
            raise TypeError(f"{name} at {user_where()}: indices must be integers, got "
                            f"{k.dtype}; cast them with astype(inp.int64)")
        return k
    a = np.asarray(k)
    if a.dtype == np.bool_:
        raise TracerError(f"{name} at {user_where()}: boolean mask indexing is not supported "
                          f"under a recording (its result's shape depends on the data); use "
                          f"inp.where")
    if a.size == 0:
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} at {user_where()}: indices must be integers, got {a.dtype}")
    return a.astype(np.int64)


def normalize(idx, n: int, mode: str):
    """(indices in [0, n), valid): negative indices counted from the end, the
    rest by ``mode``; ``valid`` (bool, or None for every index) says which
    were in range for ``fill``/``drop``."""
    if mode == "wrap":
        return F.remainder(idx, max(n, 1)), None
    idx = F.where(F.less(idx, 0), F.add(idx, n), idx)
    if mode == "clip":
        return F.clip(idx, 0, max(n - 1, 0)), None
    valid = F.logical_and(F.greater_equal(idx, 0), F.less(idx, n))
    if mode == "promise_in_bounds":
        return F.clip(idx, 0, max(n - 1, 0)), valid
    return F.where(valid, idx, 0), valid


def _expand(key: tuple, rank: int, name: str) -> list:
    """``key`` with its ellipsis (or the missing trailing axes) as full
    slices (compared by identity: a key may hold arrays)."""
    dots = [i for i, k in enumerate(key) if k is Ellipsis]
    used = len(key) - len(dots)
    if used > rank:
        raise IndexError(f"too many indices ({used}) for a rank-{rank} value at {user_where()}")
    if len(dots) > 1:
        raise IndexError(f"{name} at {user_where()}: an index can only have one ellipsis")
    fill = [slice(None)] * (rank - used)
    if dots:
        return [*key[:dots[0]], *fill, *key[dots[0] + 1:]]
    return [*key, *fill]


def _strides(shape) -> list[int]:
    """Row-major element strides (each axis: the product of the later sizes)."""
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def positions(shape: tuple, key, mode: str, name: str):
    """(positions, valid, out_shape): the row-major flat positions in an
    array of ``shape`` of the elements ``x[key]`` selects (int64, of the
    result's shape), and where the key's arrays were in range (None where
    all are or ``mode`` clipped them). NumPy's rules: the broadcast shape of
    the integer arrays (and integers, when arrays are present) goes where
    the first of them is when they are adjacent, else first."""
    key = key if isinstance(key, tuple) else (key,)
    if builtins.any(k is None for k in key):
        raise TracerError(f"{name} at {user_where()}: None (a new axis) together with array "
                          f"indices is not supported; index first, then inp.expand_dims")
    arrays = builtins.any(is_array_key(k) for k in key)
    key = _expand(key, len(shape), name)
    strides = _strides(shape)
    advanced = [a for a, k in enumerate(key) if is_array_key(k)
                or (arrays and isinstance(k, (int, np.integer)))]
    adv = {a: _index_array(key[a], name) for a in advanced}
    adv_shape = np.broadcast_shapes(*(F.shape(v) for v in adv.values())) if adv else ()
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    # the result's axes: (kind, axis) for each slice, one group for the arrays
    layout = []
    for a, k in enumerate(key):
        if a in adv:
            if a == advanced[0] and adjacent:
                layout.append(("adv", None))
        elif isinstance(k, slice):
            layout.append(("slice", a))
    if advanced and not adjacent:
        layout.insert(0, ("adv", None))
    out_shape = []
    for kind, a in layout:
        out_shape += list(adv_shape) if kind == "adv" else [len(range(*key[a].indices(shape[a])))]
    out_shape = tuple(out_shape)
    total, valid, static = 0, None, 0
    for a, k in enumerate(key):
        if a in adv:
            continue
        if isinstance(k, slice):
            axis = layout.index(("slice", a))
            before = builtins.sum(len(adv_shape) if kind == "adv" else 1
                                  for kind, _ in layout[:axis])
            values = np.arange(*k.indices(shape[a]), dtype=np.int64) * strides[a]
            view = [1] * len(out_shape)
            view[before] = values.size
            total = F.add(total, values.reshape(view)) if values.size else total
        else:
            i = operator.index(k)
            if not -shape[a] <= i < shape[a]:
                raise IndexError(f"index {i} is out of bounds for axis {a} with size "
                                 f"{shape[a]} at {user_where()}")
            static += (i % shape[a]) * strides[a]
    if adv:
        at = next(i for i, (kind, _) in enumerate(layout) if kind == "adv")
        before = builtins.sum(1 for kind, _ in layout[:at])
        after = len(out_shape) - before - len(adv_shape)
        for a, idx in adv.items():
            safe, ok = normalize(idx, shape[a], mode)
            term = F.multiply(F.broadcast_to(safe, adv_shape), strides[a])
            total = F.add(total, F.reshape(term, (1,) * before + adv_shape + (1,) * after))
            if ok is not None:
                ok = F.reshape(F.broadcast_to(ok, adv_shape),
                               (1,) * before + adv_shape + (1,) * after)
                valid = ok if valid is None else F.logical_and(valid, ok)
    total = F.broadcast_to(F.astype(F.add(total, static), F.int64), out_shape)
    if valid is not None:
        valid = F.broadcast_to(valid, out_shape)
    return total, valid, out_shape


def _default_fill(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).min


def _rows(key, rank: int) -> bool:
    """Whether ``key`` is one integer array on axis 0 (then full slices):
    a gather of whole rows."""
    key = key if isinstance(key, tuple) else (key,)
    if rank == 0 or not key or not is_array_key(key[0]):
        return False
    return builtins.all((isinstance(k, slice) and k == slice(None)) or k is Ellipsis
                        for k in key[1:])


def gather(x, key, mode: str = "clip", fill_value=None, name: str = "indexing"):
    """``x[key]`` with the out-of-bounds ``mode``."""
    _check_mode(mode, name)
    x = operand(x, name)
    shape = F.shape(x)
    if _rows(key, len(shape)):
        idx = _index_array(key[0] if isinstance(key, tuple) else key, name)
        safe, valid = normalize(idx, shape[0], mode)
        out = bind(Op.GATHER, x, safe)
        if valid is not None:
            mask = F.reshape(valid, F.shape(valid) + (1,) * (len(shape) - 1))
            out = _outside(mask, out, mode, fill_value, x)
        return out
    where, valid, out_shape = positions(shape, key, mode, name)
    if math.prod(shape) == 0:
        return F.zeros(out_shape, F.dtype_of(x, name)[0])
    out = bind(Op.GATHER, F.ravel(x), where)
    if valid is not None:
        out = _outside(valid, out, mode, fill_value, x)
    return out


def _outside(valid, out, mode: str, fill_value, x):
    """What an out-of-range index gives: ``fill_value`` (``fill``), or the
    clamped row with no derivative (``promise_in_bounds``: JAX's values and
    gradients, which drop what is out of range)."""
    if mode == "promise_in_bounds":
        return F.where(valid, out, bind(Op.STOP_GRADIENT, out))
    return F.where(valid, out, _fill(fill_value, x))


def _fill(fill_value, x):
    dtype = F.dtype_of(x, "indexing")[0]
    return np.asarray(_default_fill(dtype) if fill_value is None else fill_value, dtype)


def scatter(x, key, values, combine: str, mode: str = "drop", name: str = "update"):
    """``x`` with ``values`` combined into ``x[key]`` (JAX's ``.at[key]``)."""
    _check_mode(mode, name)
    if mode in ("fill", "promise_in_bounds"):
        mode = "drop"  # JAX: these updates drop what is out of range
    x = operand(x, name)
    shape = F.shape(x)
    dtype = F.dtype_of(x, name)[0]
    where, valid, out_shape = positions(shape, key, mode, name)
    values = F.broadcast_to(F.astype(operand(values, name), dtype), out_shape)
    flat = F.ravel(x)
    size = math.prod(shape)
    if valid is not None:  # out-of-range updates go to one extra element, then are cut off
        flat = F.pad(flat, (0, 1))
        where = F.where(valid, where, size)
    out = bind(Op.SCATTER, flat, where, values, combine=combine)
    if valid is not None:
        out = F.getitem(out, slice(0, size))
    return F.reshape(out, shape)


class _IndexUpdateRef:
    """``x.at[key]``: JAX's functional updates."""

    __slots__ = ("x", "key")

    def __init__(self, x: ArrayLike, key: Any) -> None:
        self.x, self.key = x, key

    def get(self, mode: str | None = None, fill_value: ArrayLike = None) -> Array:
        return gather(self.x, self.key, mode or "promise_in_bounds", fill_value, "at[].get")

    def set(self, values: ArrayLike, mode: str | None = None) -> Array:
        return scatter(self.x, self.key, values, "set", mode or "drop", "at[].set")

    def add(self, values: ArrayLike, mode: str | None = None) -> Array:
        return scatter(self.x, self.key, values, "add", mode or "drop", "at[].add")

    def multiply(self, values: ArrayLike, mode: str | None = None) -> Array:
        return scatter(self.x, self.key, values, "mul", mode or "drop", "at[].multiply")

    mul = multiply

    def min(self, values: ArrayLike, mode: str | None = None) -> Array:
        return scatter(self.x, self.key, values, "min", mode or "drop", "at[].min")

    def max(self, values: ArrayLike, mode: str | None = None) -> Array:
        return scatter(self.x, self.key, values, "max", mode or "drop", "at[].max")


class at:  # noqa: N801  (JAX's lower-case property name)
    """``inp.at(x)[key].set(v)`` (a NumPy array has no ``.at``); a traced
    value has it as a property, as a JAX array does: ``x.at[key].add(v)``."""

    __slots__ = ("x",)

    def __init__(self, x: ArrayLike) -> None:
        self.x = x

    def __getitem__(self, key: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.x, key)


Tracer.at = property(at)


# --- NumPy's and JAX's functions ----------------------------------------------------------

def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, mode: str | None = None,
         fill_value: ArrayLike = None) -> Array:
    """NumPy ``take`` with JAX's modes (default ``fill``: NaN, the most
    negative integer or True for an index out of range)."""
    x = operand(a, "take")
    if axis is None:
        x, axis = F.ravel(x), 0
    rank = len(F.shape(x))
    axis = _axis(axis, rank, "take")
    key = (slice(None),) * axis + (indices,)
    return gather(x, key, mode or "fill", fill_value, "take")


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None, mode: str | None = None,
                    fill_value: ArrayLike = None) -> Array:
    """NumPy ``take_along_axis`` (``indices`` of ``arr``'s rank, broadcast
    with it along the other axes) with JAX's modes (default ``fill``)."""
    x = operand(arr, "take_along_axis")
    idx = _index_array(indices, "take_along_axis")
    if axis is None:
        x, axis = F.ravel(x), 0
    shape, ishape = F.shape(x), F.shape(idx)
    if len(ishape) != len(shape):
        raise ValueError(f"take_along_axis at {user_where()}: indices of rank {len(ishape)} "
                         f"for an array of rank {len(shape)}; they need the same rank")
    axis = _axis(axis, len(shape), "take_along_axis")
    others = [shape[d] if d != axis else 1 for d in range(len(shape))]
    iothers = [ishape[d] if d != axis else 1 for d in range(len(shape))]
    common = list(np.broadcast_shapes(tuple(others), tuple(iothers)))
    common[axis] = ishape[axis]
    key = []
    for d in range(len(shape)):
        if d == axis:
            key.append(F.broadcast_to(idx, tuple(common)))
        else:
            view = [1] * len(shape)
            view[d] = common[d]
            key.append(np.arange(common[d], dtype=np.int64).reshape(view))
    if builtins.any(common[d] != shape[d] for d in range(len(shape)) if d != axis):
        x = F.broadcast_to(x, tuple(common[d] if d != axis else shape[d]
                                    for d in range(len(shape))))
    return gather(x, tuple(key), mode or "fill", fill_value, "take_along_axis")


def segment_sum(data: ArrayLike, segment_ids: ArrayLike, num_segments: int) -> Array:
    """JAX's ``segment_sum``: row ``i`` of the result sums the rows of
    ``data`` whose id is ``i``, in their order; ids out of range are dropped."""
    return _segment(data, segment_ids, num_segments, "add", 0, "segment_sum")


def segment_max(data: ArrayLike, segment_ids: ArrayLike, num_segments: int) -> Array:
    """JAX's ``segment_max`` (an empty segment: the dtype's lowest value)."""
    return _segment(data, segment_ids, num_segments, "max", "lowest", "segment_max")


def segment_min(data: ArrayLike, segment_ids: ArrayLike, num_segments: int) -> Array:
    """JAX's ``segment_min`` (an empty segment: the dtype's highest value)."""
    return _segment(data, segment_ids, num_segments, "min", "highest", "segment_min")


def _segment(data, ids, num_segments, combine, start, name):
    x = operand(data, name)
    dtype = F.dtype_of(x, name)[0]
    shape = F.shape(x)
    if start == "lowest":
        start = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    elif start == "highest":
        start = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    out = F.full((int(num_segments),) + tuple(shape[1:]), start, dtype)
    ids = _index_array(ids, name)
    ids = F.where(F.less(ids, 0), int(num_segments), ids)  # JAX's: a negative id is dropped
    return scatter(out, (ids,), x, combine, "drop", name)


def bincount(x: ArrayLike, weights: ArrayLike = None, minlength: int = 0, *,
             length: int | None = None) -> Array:
    """NumPy ``bincount`` with JAX's ``length=`` (the result's static
    size, needed under a recording): values outside [0, length) are
    dropped."""
    idx = _index_array(x, "bincount")
    if length is None:
        if isinstance(idx, Tracer):
            raise TracerError(f"bincount at {user_where()}: give length= (the number of "
                              f"bins) under a recording")
        length = builtins.max(int(idx.max()) + 1 if idx.size else 0, minlength)
    length = builtins.max(int(length), int(minlength))
    if weights is None:
        ones = F.ones(F.shape(idx), F.int64)
        return _bins(idx, ones, length, F.int64)
    w = operand(weights, "bincount")
    dtype = np.result_type(F.dtype_of(w, "bincount")[0], np.float64) \
        if F.dtype_of(w, "bincount")[0].kind != "f" else F.dtype_of(w, "bincount")[0]
    return _bins(idx, F.astype(w, dtype), length, dtype)


def _bins(idx, weights, length, dtype):
    idx = F.maximum(idx, 0)  # JAX's: a negative value counts in bin 0 (NumPy raises)
    return scatter(F.zeros((length,), dtype), (idx,), weights, "add", "drop", "bincount")


def dynamic_slice(x: ArrayLike, start_indices: Any, slice_sizes: Sequence[int]) -> Array:
    """JAX's ``lax.dynamic_slice``: the block of ``slice_sizes`` at
    ``start_indices`` (traced integers), each start clamped so the block
    fits, as JAX clamps."""
    x = operand(x, "dynamic_slice")
    shape = F.shape(x)
    key = _block(shape, start_indices, slice_sizes, "dynamic_slice")
    return gather(x, key, "clip", None, "dynamic_slice")


def dynamic_update_slice(x: ArrayLike, update: ArrayLike, start_indices: Any) -> Array:
    """JAX's ``lax.dynamic_update_slice``: ``update`` written at
    ``start_indices``, each start clamped so the block fits."""
    x = operand(x, "dynamic_update_slice")
    shape = F.shape(x)
    sizes = F.shape(update)
    key = _block(shape, start_indices, sizes, "dynamic_update_slice")
    return scatter(x, key, update, "set", "clip", "dynamic_update_slice")


def _block(shape, starts, sizes, name):
    starts = list(starts)
    if len(starts) != len(shape) or len(sizes) != len(shape):
        raise ValueError(f"{name} at {user_where()}: one start and one size per axis of "
                         f"{shape}")
    key = []
    for d, (n, s, size) in enumerate(zip(shape, starts, sizes)):
        if not 0 <= size <= n:
            raise ValueError(f"{name} at {user_where()}: size {size} on axis {d} of {n}")
        s = F.astype(operand(s, name), F.int64)
        s = F.clip(s, 0, n - size)
        view = [1] * len(shape)
        view[d] = size
        key.append(F.add(F.reshape(s, (1,) * len(shape)),
                         np.arange(size, dtype=np.int64).reshape(view)))
    return tuple(key)
