"""SHAPE: for every op, the abstract value of its result.

A rule takes the operands' avals and the op's attributes and returns the
result's aval, or raises ``DTypeError``/``ShapeError`` with the problem and
the fix; the recorder prefixes the op name and the user's source line.
The frontend inserts broadcasts and casts, so elementwise rules see equal
shapes and dtypes.
"""

from __future__ import annotations

import numpy as np

from . import dtypes
from .errors import DTypeError, ShapeError
from .graph import Aval
from .ops import (
    BITWISE,
    COMPARE,
    COMPLEX_OPS,
    FFT_KINDS,
    LOGICAL,
    REGION,
    SCATTER_COMBINE,
    Op,
)

FLOAT_ONLY = frozenset({
    Op.SQRT, Op.CBRT, Op.EXP, Op.EXP2, Op.EXPM1, Op.LOG, Op.LOG2, Op.LOG10, Op.LOG1P,
    Op.SIN, Op.COS, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH, Op.COSH, Op.TANH,
    Op.ASINH, Op.ACOSH, Op.ATANH, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC, Op.DIV,
    Op.ATAN2, Op.LDEXP, Op.LOGB, Op.COPYSIGN,
})
BOOL_ONLY: frozenset[Op] = frozenset()
"""No op takes bools only: ``and``, ``or``, ``xor`` and ``not`` are bitwise on
integers and logical on bools (``LOGICAL``); the frontend's ``logical_*``
functions refuse non-bool operands themselves."""
NOT_FLOAT = BITWISE
"""Bit operations: integers (and bools for ``LOGICAL``), never floats."""

BIT_OPERANDS = ("expects integer{bools} operands (a bit operation), got {dtype}; cast first, "
                "e.g. x.astype(inp.int64)")


COMPLEX_REFUSED = ("is not defined for complex values (NumPy orders and rounds reals only); "
                   "take inp.real, inp.imag or inp.abs first")


def _check_dtype(op: Op, dtype: np.dtype) -> None:
    if dtype in dtypes.COMPLEX:
        if op not in COMPLEX_OPS:
            raise DTypeError(f"{op.value} {COMPLEX_REFUSED}")
        return
    if op in (Op.REAL, Op.IMAG, Op.CONJ):
        raise DTypeError(f"expects a complex operand, got {dtypes.SHORT[dtype]} (the frontend's "
                         f"real, imag and conj take real values as they are)")
    if op is Op.COMPLEX:
        if dtype not in dtypes.FLOATS:
            raise DTypeError(f"expects float parts, got {dtypes.SHORT[dtype]}; cast first, "
                             f"e.g. x.astype(inp.float64)")
        return
    if op in FLOAT_ONLY and dtype not in dtypes.FLOATS:
        raise DTypeError(f"expects float operands, got {dtypes.SHORT[dtype]}; "
                         f"cast first, e.g. x.astype(inp.float64)")
    if op in NOT_FLOAT and (dtype in dtypes.FLOATS or
                            (dtype == dtypes.bool_ and op not in LOGICAL)):
        bools = " or bool" if op in LOGICAL else ""
        raise DTypeError(BIT_OPERANDS.format(bools=bools, dtype=dtypes.SHORT[dtype]))
    takes_bool = op in LOGICAL or op in COMPARE or op is Op.SELECT
    if not takes_bool and dtype == dtypes.bool_:
        raise DTypeError("expects numeric operands, got bool; "
                         "cast first, e.g. mask.astype(inp.float64)")


def _elementwise(op: Op):
    def rule(*avals: Aval) -> Aval:
        first = avals[0]
        for other in avals[1:]:
            if other.shape != first.shape:
                raise ShapeError(f"operand shapes {first.shape} and {other.shape} differ")
            if other.dtype != first.dtype:
                raise DTypeError(f"operand dtypes {first.dtype} and {other.dtype} differ; "
                                 f"cast one with astype")
        _check_dtype(op, first.dtype)
        dtype = dtypes.bool_ if op in COMPARE else first.dtype
        if op in (Op.ABS, Op.REAL, Op.IMAG) and dtype in dtypes.COMPLEX:
            dtype = dtypes.REAL_OF[dtype]
        elif op is Op.COMPLEX:
            dtype = dtypes.COMPLEX_OF[dtype]
        return Aval(first.shape, dtype, all(a.weak for a in avals))
    return rule


def _select(pred: Aval, x: Aval, y: Aval) -> Aval:
    if pred.dtype != dtypes.bool_:
        raise DTypeError(f"condition must be bool, got {dtypes.SHORT[pred.dtype]}; "
                         f"compare first, e.g. where(x != 0, ...)")
    if not pred.shape == x.shape == y.shape:
        raise ShapeError(f"shapes {pred.shape}, {x.shape}, {y.shape} differ")
    if x.dtype != y.dtype:
        raise DTypeError(f"branch dtypes {x.dtype} and {y.dtype} differ; cast one with astype")
    return Aval(x.shape, x.dtype, x.weak and y.weak)


def _cast(x: Aval, *, dtype) -> Aval:
    dtype = dtypes.canonical(dtype)
    if x.dtype in dtypes.COMPLEX and dtype not in dtypes.COMPLEX:
        raise DTypeError(f"a cast of {dtypes.SHORT[x.dtype]} to {dtypes.SHORT[dtype]} would drop "
                         f"the imaginary part; take inp.real (or inp.abs) first")
    return Aval(x.shape, dtype)


def _reduce(op: Op):
    def rule(x: Aval, *, axes) -> Aval:
        _check_axes(axes, x.ndim)
        if x.dtype == dtypes.bool_:
            raise DTypeError("cannot reduce bool values; cast first, e.g. mask.astype(inp.int64)")
        if op in (Op.REDUCE_MAX, Op.REDUCE_MIN) and x.dtype in dtypes.COMPLEX:
            raise DTypeError(f"{op.value} {COMPLEX_REFUSED}")
        if op in (Op.REDUCE_MAX, Op.REDUCE_MIN) and any(x.shape[a] == 0 for a in axes):
            raise ShapeError("zero-size reduction axis has no identity; "
                             "reduce a non-empty axis or use sum")
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return Aval(shape, x.dtype, x.weak)
    return rule


def _check_axes(axes, ndim: int) -> None:
    if len(set(axes)) != len(axes) or any(not 0 <= a < ndim for a in axes):
        raise ShapeError(f"axes {axes} are not distinct axes of a rank-{ndim} value")


def _reshape(x: Aval, *, shape) -> Aval:
    if int(np.prod(shape, dtype=np.int64)) != x.size or any(d < 0 for d in shape):
        raise ShapeError(f"cannot reshape {x.shape} ({x.size} elements) into {shape}")
    return Aval(tuple(shape), x.dtype, x.weak)


def _broadcast(x: Aval, *, shape, dims) -> Aval:
    if len(dims) != x.ndim or any(not 0 <= d < len(shape) for d in dims):
        raise ShapeError(f"cannot place a rank-{x.ndim} value at axes {dims} of {shape}")
    if list(dims) != sorted(set(dims)):
        raise ShapeError(f"broadcast axes {dims} must be increasing")
    for size, d in zip(x.shape, dims):
        if size not in (1, shape[d]):
            raise ShapeError(f"cannot broadcast {x.shape} to {shape}")
    return Aval(tuple(shape), x.dtype, x.weak)


def _transpose(x: Aval, *, perm) -> Aval:
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"{perm} is not a permutation of the {x.ndim} axes of {x.shape}")
    return Aval(tuple(x.shape[p] for p in perm), x.dtype, x.weak)


def _slice(x: Aval, *, start, limit, stride) -> Aval:
    if not len(start) == len(limit) == len(stride) == x.ndim:
        raise ShapeError(f"slice bounds do not match the rank of {x.shape}")
    shape = []
    for b, e, s, n in zip(start, limit, stride, x.shape):
        if s < 1 or not 0 <= b <= e <= n:
            raise ShapeError(f"slice {b}:{e}:{s} is outside an axis of length {n}")
        shape.append(max(0, -(-(e - b) // s)))
    return Aval(tuple(shape), x.dtype, x.weak)


def _pad(x: Aval, value: Aval, *, lo, hi, interior) -> Aval:
    if value.shape != () or value.dtype != x.dtype:
        raise ShapeError("padding value must be a scalar of the operand's dtype")
    if not len(lo) == len(hi) == len(interior) == x.ndim:
        raise ShapeError(f"padding does not match the rank of {x.shape}")
    if any(v < 0 for v in (*lo, *hi, *interior)):
        raise ShapeError("padding amounts must be non-negative")
    shape = tuple(a + b + n + max(n - 1, 0) * i for a, b, n, i in zip(lo, hi, x.shape, interior))
    return Aval(shape, x.dtype, x.weak)


def _rev(x: Aval, *, axes) -> Aval:
    _check_axes(axes, x.ndim)
    return x


def _concatenate(*xs: Aval, axis) -> Aval:
    first = xs[0]
    if not 0 <= axis < first.ndim:
        raise ShapeError(f"axis {axis} is out of range for rank {first.ndim}")
    for x in xs[1:]:
        if x.dtype != first.dtype:
            raise DTypeError(f"operand dtypes {first.dtype} and {x.dtype} differ; "
                             f"cast one with astype")
        same = x.ndim == first.ndim and all(
            a == b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis)
        if not same:
            raise ShapeError(f"shapes {first.shape} and {x.shape} differ off axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return Aval(tuple(shape), first.dtype, all(x.weak for x in xs))


def _dot_general(a: Aval, b: Aval, *, contracting, batch) -> Aval:
    (ca, cb), (ba, bb) = contracting, batch
    if a.dtype != b.dtype:
        raise DTypeError(f"operand dtypes {a.dtype} and {b.dtype} differ; cast one with astype")
    if a.dtype == dtypes.bool_:
        raise DTypeError("cannot multiply bool matrices; cast first")
    _check_axes(tuple(ca) + tuple(ba), a.ndim)
    _check_axes(tuple(cb) + tuple(bb), b.ndim)
    if [a.shape[i] for i in ca] != [b.shape[i] for i in cb]:
        raise ShapeError(f"contracted sizes of {a.shape} and {b.shape} differ")
    if [a.shape[i] for i in ba] != [b.shape[i] for i in bb]:
        raise ShapeError(f"batch sizes of {a.shape} and {b.shape} differ")
    free_a = [d for i, d in enumerate(a.shape) if i not in ca and i not in ba]
    free_b = [d for i, d in enumerate(b.shape) if i not in cb and i not in bb]
    shape = tuple([a.shape[i] for i in ba] + free_a + free_b)
    return Aval(shape, a.dtype, a.weak and b.weak)


def _square(a: Aval) -> int:
    if a.dtype not in dtypes.FLOATS:
        raise DTypeError(f"expects a float matrix, got {dtypes.SHORT[a.dtype]}; "
                         f"cast first, e.g. a.astype(inp.float64)")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"expects square matrices in the last two axes, got {a.shape}; "
                         f"pass an array of shape (..., n, n)")
    return a.shape[-1]


def _lu(a: Aval) -> tuple[Aval, Aval, Aval]:
    _square(a)
    rows = Aval(a.shape[:-1], dtypes.int32)
    return Aval(a.shape, a.dtype), rows, rows


def _triangular_solve(a: Aval, b: Aval, *, lower, transpose_a, unit_diagonal) -> Aval:
    n = _square(a)
    if b.dtype != a.dtype:
        raise DTypeError(f"matrix and right-hand side dtypes {dtypes.SHORT[a.dtype]} and "
                         f"{dtypes.SHORT[b.dtype]} differ; cast one with astype")
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != n:
        raise ShapeError(f"right-hand side {b.shape} does not fit matrices {a.shape}: "
                         f"expected {(*a.shape[:-2], n)} + (k,)")
    return Aval(b.shape, b.dtype)


def _cholesky(a: Aval) -> Aval:
    _square(a)
    return Aval(a.shape, a.dtype)


def _matrix(a: Aval) -> tuple[int, int]:
    if a.dtype not in dtypes.FLOATS:
        raise DTypeError(f"expects a float matrix, got {dtypes.SHORT[a.dtype]}; "
                         f"cast first, e.g. a.astype(inp.float64)")
    if a.ndim < 2:
        raise ShapeError(f"expects matrices in the last two axes, got {a.shape}; "
                         f"pass an array of shape (..., m, n)")
    return a.shape[-2], a.shape[-1]


QR_MODES = ("reduced", "complete")


def _qr(a: Aval, *, mode) -> tuple[Aval, Aval]:
    m, n = _matrix(a)
    if mode not in QR_MODES:
        raise ValueError(f"mode {mode!r} is not one of {QR_MODES}")
    k = min(m, n) if mode == "reduced" else m
    batch = a.shape[:-2]
    return Aval((*batch, m, k), a.dtype), Aval((*batch, k, n), a.dtype)


def _eigh(a: Aval, *, lower) -> tuple[Aval, Aval]:
    _square(a)
    return Aval(a.shape[:-1], a.dtype), Aval(a.shape, a.dtype)


def _svd(a: Aval, *, full_matrices) -> tuple[Aval, Aval, Aval]:
    m, n = _matrix(a)
    k = min(m, n)
    batch = a.shape[:-2]
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    return (Aval((*batch, *u), a.dtype), Aval((*batch, k), a.dtype),
            Aval((*batch, *vh), a.dtype))


TABLE_MODES = ("exact", "hardware")


def _table_lookup(x: Aval, layer: Aval, *, name, values, x0, step, mode) -> Aval:
    if x.dtype not in dtypes.FLOATS or layer.dtype != x.dtype:
        raise DTypeError(f"table '{name}': abscissa and layer must share one float dtype, got "
                         f"{dtypes.SHORT[x.dtype]} and {dtypes.SHORT[layer.dtype]}; "
                         f"cast with astype")
    if layer.shape != x.shape:
        raise ShapeError(f"table '{name}': abscissa {x.shape} and layer {layer.shape} differ")
    table = values.value
    if table.ndim != 2 or table.shape[1] < 2 or table.shape[0] < 1:
        raise ShapeError(f"table '{name}': values must be (layers, nodes) with at least two "
                         f"nodes, got {table.shape}")
    if mode not in TABLE_MODES:
        raise ValueError(f"table '{name}': mode {mode!r} is not one of {TABLE_MODES}")
    if not step > 0:
        raise ValueError(f"table '{name}': node spacing {step!r} must be positive")
    return Aval(x.shape, x.dtype)


def _indices(idx: Aval, x: Aval, op: str) -> None:
    if idx.dtype not in dtypes.INTS:
        raise DTypeError(f"{op} needs integer indices, got {dtypes.SHORT[idx.dtype]}; cast "
                         f"them with astype(inp.int64)")
    if x.ndim == 0:
        raise ShapeError(f"{op} indexes axis 0 of a 0-d value; give an array")


def _gather(x: Aval, idx: Aval) -> Aval:
    _indices(idx, x, "gather")
    return Aval(idx.shape + x.shape[1:], x.dtype, x.weak)


def _scatter(x: Aval, idx: Aval, u: Aval, *, combine) -> Aval:
    _indices(idx, x, "scatter")
    if combine not in SCATTER_COMBINE:
        raise ValueError(f"scatter combine={combine!r}: one of {SCATTER_COMBINE}")
    if u.shape != idx.shape + x.shape[1:]:
        raise ShapeError(f"scatter updates of shape {u.shape} do not fit indices "
                         f"{idx.shape} into {x.shape}: expected {idx.shape + x.shape[1:]}")
    if combine in ("min", "max") and x.dtype in dtypes.COMPLEX:
        raise DTypeError(f"scatter {combine} {COMPLEX_REFUSED}")
    if u.dtype != x.dtype:
        raise DTypeError(f"scatter updates of {dtypes.SHORT[u.dtype]} into "
                         f"{dtypes.SHORT[x.dtype]}; cast the updates with astype")
    return Aval(x.shape, x.dtype, x.weak)


def _sort(*xs: Aval, axis, num_keys) -> tuple[Aval, ...]:
    if not xs or not 1 <= num_keys <= len(xs):
        raise ValueError(f"sort of {len(xs)} operand(s) by {num_keys} key(s)")
    if any(x.dtype in dtypes.COMPLEX for x in xs[:num_keys]):
        raise DTypeError(f"sort {COMPLEX_REFUSED}")
    if any(x.shape != xs[0].shape for x in xs):
        raise ShapeError(f"sort operands have shapes {[x.shape for x in xs]}; they need one "
                         f"shape")
    if not 0 <= axis < max(xs[0].ndim, 1) or xs[0].ndim == 0:
        raise ShapeError(f"sort along axis {axis} of a rank-{xs[0].ndim} value")
    return tuple(Aval(x.shape, x.dtype, x.weak) for x in xs)


def _fft(x: Aval, *, kind, lengths) -> Aval:
    k = len(lengths)
    if kind not in FFT_KINDS:
        raise ValueError(f"fft kind={kind!r}: one of {FFT_KINDS}")
    if not 1 <= k <= x.ndim or any(n < 1 for n in lengths):
        raise ShapeError(f"an fft over {k} trailing axes of lengths {lengths} of a rank-"
                         f"{x.ndim} value")
    lead, trailing = x.shape[:-k], x.shape[-k:]
    if kind == "rfft":
        if x.dtype not in dtypes.FLOATS:
            raise DTypeError(f"rfft of {dtypes.SHORT[x.dtype]}: expects float values")
        expected, dtype = tuple(lengths), dtypes.COMPLEX_OF[x.dtype]
        out = (*lengths[:-1], lengths[-1] // 2 + 1)
    else:
        if x.dtype not in dtypes.COMPLEX:
            raise DTypeError(f"{kind} of {dtypes.SHORT[x.dtype]}: expects complex values")
        if kind == "irfft":
            expected = (*lengths[:-1], lengths[-1] // 2 + 1)
            dtype, out = dtypes.REAL_OF[x.dtype], tuple(lengths)
        else:
            expected, dtype, out = tuple(lengths), x.dtype, tuple(lengths)
    if trailing != expected:
        raise ShapeError(f"{kind} of lengths {lengths} reads trailing axes {expected}, got "
                         f"{trailing}")
    return Aval((*lead, *out), dtype)


SHAPE = {
    Op.CONST: lambda *, value: Aval(value.value.shape, value.value.dtype),
    Op.FFT: _fft,
    Op.SORT: _sort,
    Op.GATHER: _gather,
    Op.SCATTER: _scatter,
    Op.INPUT: lambda *, aval, index: aval,
    Op.SELECT: _select,
    Op.CAST: _cast,
    Op.RESHAPE: _reshape,
    Op.BROADCAST: _broadcast,
    Op.TRANSPOSE: _transpose,
    Op.SLICE: _slice,
    Op.PAD: _pad,
    Op.REV: _rev,
    Op.CONCATENATE: _concatenate,
    Op.DOT_GENERAL: _dot_general,
    Op.TABLE_LOOKUP: _table_lookup,
    Op.LU: _lu,
    Op.TRIANGULAR_SOLVE: _triangular_solve,
    Op.CHOLESKY: _cholesky,
    Op.QR: _qr,
    Op.EIGH: _eigh,
    Op.SVD: _svd,
    Op.GET: lambda results, *, index: results[index],
    **{op: _reduce(op) for op in (Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX,
                                  Op.REDUCE_MIN)},
}
SHAPE.update({op: _elementwise(op) for op in Op if op not in SHAPE and op not in REGION})
"""Region primitives (``ops.REGION``) add their rules when their module
registers them (``register_region``); a SHAPE rule of a node with several
results returns a tuple of avals."""
