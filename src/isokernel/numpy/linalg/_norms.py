"""``norm`` and ``matrix_power``: NumPy's meanings, composed (the matrix
2-norm and nuclear norm from the singular values)."""

from __future__ import annotations

import operator

import numpy as np

from ...ir import ShapeError
from ...ir.source import user_where
from ...record import frontend as F
from ...typing import Array, ArrayLike, Axis
from ._dense import as_float, as_square, inv
from ._spectral import svd


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(operator.index(a) % ndim for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"norm at {user_where()}: duplicate axes {axis}")
    return out


def _vector_norm(x, order, axis: int):
    a = F.abs(x)
    if order is None or order == 2:
        return F.sqrt(F.sum(x * x, axis=axis))
    if order == np.inf:
        return F.max(a, axis=axis)
    if order == -np.inf:
        return F.min(a, axis=axis)
    if order == 0:
        return F.sum(F.astype(F.not_equal(x, 0), x.dtype), axis=axis)
    if order == 1:
        return F.sum(a, axis=axis)
    if isinstance(order, str):
        raise ValueError(f"norm at {user_where()}: ord {order!r} is a matrix norm; vectors take "
                         f"None, inf, -inf, 0 or a number")
    return F.power(F.sum(F.power(a, float(order)), axis=axis), 1.0 / order)


def _singular_values(x, rows: int, cols: int):
    moved = F.transpose(x, [i for i in range(x.ndim) if i not in (rows, cols)] + [rows, cols])
    return svd(moved, compute_uv=False)


def _matrix_norm(x, order, rows: int, cols: int):
    """NumPy's matrix norms over axes (rows, cols), reduced in its orderer."""
    if order in (None, "fro"):
        return F.sqrt(F.sum(x * x, axis=(rows, cols)))
    if order in (2, -2, "nuc"):
        s = _singular_values(x, rows, cols)
        return F.sum(s, axis=-1) if order == "nuc" else (F.max if order == 2 else F.min)(s, axis=-1)
    if order in (1, -1):
        summed = F.sum(F.abs(x), axis=rows)
        return (F.max if order == 1 else F.min)(summed, axis=cols - (cols > rows))
    if order in (np.inf, -np.inf):
        summed = F.sum(F.abs(x), axis=cols)
        return (F.max if order > 0 else F.min)(summed, axis=rows - (rows > cols))
    raise ValueError(f"norm at {user_where()}: ord {order!r} is not a matrix norm; use None, "
                     f"'fro', 'nuc', 1, -1, 2, -2, inf or -inf")


def norm(x: ArrayLike, ord: float | str | None = None,  # noqa: A002 - NumPy's name
         axis: Axis = None, keepdims: bool = False) -> Array:
    """NumPy's ``linalg.norm``: the 2-norm of everything by default, vector
    norms over one axis, matrix norms over two."""
    x = as_float(x, "norm", "x")
    if axis is None and ord is None:
        out = F.sqrt(F.sum(x * x))
        return F.reshape(out, (1,) * x.ndim) if keepdims else out
    axes = _axes(axis, x.ndim)
    if len(axes) == 1:
        out = _vector_norm(x, ord, axes[0])
    elif len(axes) == 2:
        out = _matrix_norm(x, ord, *axes)
    else:
        raise ShapeError(f"norm at {user_where()}: ord {ord!r} needs one or two axes, got "
                         f"{len(axes)}; pass axis=")
    if keepdims:
        out = F.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def matrix_power(a: ArrayLike, n: int) -> Array:
    """NumPy's ``linalg.matrix_power``: repeated squaring by matrix products,
    in NumPy's order (``inv`` first for negative ``n``)."""
    a = as_square(a, "matrix_power")
    n = operator.index(n)
    if n == 0:
        return F.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    if n <= 3:
        out = a
        for _ in range(n - 1):
            out = F.matmul(out, a)
        return out
    z = result = None
    while n > 0:
        z = a if z is None else F.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else F.matmul(result, z)
    return result
