"""EVAL: the NumPy meaning of every op — the executable specification.

The eager frontend, constant folding and the reference strategy all call
these rules and nothing else, so eager code, recorded graphs and the oracle
cannot disagree. A rule takes NumPy arrays (or NumPy scalars) and the op's
attributes and returns a value of exactly the dtype ``SHAPE`` gives.

A rule that a device runs too (layout ops, the matrix product, control flow)
is written once against an array namespace, ``rule(xp, *operands, **attrs)``
(``ArrayNamespace``: the NumPy functions it calls, and ``run_graph`` for a
region's bodies), and kept in ``EVAL_XP``. ``EVAL`` holds it bound to
``NUMPY`` once, at import, so the reference's call is one call as before; the
GPU strategies bind their own namespace (``backends.cuda.namespace``: CuPy
arrays from isokernel's allocator, bodies run by the device's rules).
"""

from __future__ import annotations

import functools
import types
from typing import Protocol

import numpy as np

from .errors import BackendUnavailableError
from .ops import Op


class ArrayNamespace(Protocol):
    """What a rule of ``EVAL_XP`` calls: NumPy's functions of these names
    and signatures, results allocated by the namespace, and the evaluation
    of a closed sub-graph (a region's body) in it."""

    def empty(self, shape, dtype): ...
    def zeros(self, shape, dtype): ...
    def full(self, shape, fill_value, dtype): ...
    def copy(self, x): ...
    def reshape(self, x, shape): ...
    def broadcast_to(self, x, shape): ...
    def transpose(self, x, axes): ...
    def flip(self, x, axis): ...
    def concatenate(self, arrays, axis): ...
    def matmul(self, a, b): ...
    def where(self, condition, x, y): ...
    def add(self, x, y): ...
    def any(self, x): ...
    def ndim(self, x) -> int: ...
    def shape(self, x) -> tuple: ...
    def result_type(self, x): ...
    def run_graph(self, graph, args) -> list: ...


def _broadcast(xp, x, *, shape, dims):
    expanded = [1] * len(shape)
    for size, d in zip(xp.shape(x), dims):
        expanded[d] = size
    return xp.broadcast_to(xp.reshape(x, expanded), shape)


def _slice(xp, x, *, start, limit, stride):
    return x[tuple(slice(b, e, s) for b, e, s in zip(start, limit, stride))]


def _pad(xp, x, value, *, lo, hi, interior):
    n = xp.shape(x)
    shape = tuple(a + b + d + max(d - 1, 0) * i for a, b, d, i in zip(lo, hi, n, interior))
    out = xp.full(shape, value, dtype=xp.result_type(x))
    spots = tuple(slice(a, a + (d - 1) * (i + 1) + 1, i + 1) for a, d, i in zip(lo, n, interior))
    out[spots] = x
    return out


def _dot_general(xp, a, b, *, contracting, batch):
    (ca, cb), (ba, bb) = contracting, batch
    fa = [i for i in range(a.ndim) if i not in ca and i not in ba]
    fb = [i for i in range(b.ndim) if i not in cb and i not in bb]
    batch_shape = [a.shape[i] for i in ba]
    k = int(np.prod([a.shape[i] for i in ca], dtype=np.int64))
    m = int(np.prod([a.shape[i] for i in fa], dtype=np.int64))
    n = int(np.prod([b.shape[i] for i in fb], dtype=np.int64))
    nb = int(np.prod(batch_shape, dtype=np.int64))
    lhs = xp.reshape(xp.transpose(a, (*ba, *fa, *ca)), (nb, m, k))
    rhs = xp.reshape(xp.transpose(b, (*bb, *cb, *fb)), (nb, k, n))
    out = xp.matmul(lhs[0], rhs[0])[None] if nb == 1 else xp.matmul(lhs, rhs)
    shape = batch_shape + [a.shape[i] for i in fa] + [b.shape[i] for i in fb]
    return out.reshape(shape)  # a fresh product: contiguous, a view in every namespace


def _reduce(fn):
    return lambda x, *, axes: fn(x, axis=axes, dtype=x.dtype)


def _reduce_extreme(fn):
    return lambda x, *, axes: fn(x, axis=axes)


# ldexp exponents beyond this act as it: every finite result has flushed to 0
# or overflowed by then in both float formats.
LDEXP_CLAMP = 4096


def _ldexp(x, n):
    """``x · 2^n`` for an integral float ``n`` of x's dtype: IEEE scaleB, one
    correctly rounded result (exact unless it under- or overflows). A
    fractional ``n`` truncates toward zero, ``|n|`` beyond 4096 acts as 4096,
    NaN ``n`` gives NaN."""
    x, n = np.asarray(x), np.asarray(n)
    nan = np.isnan(n)
    k = np.clip(np.where(nan, 0, n), -LDEXP_CLAMP, LDEXP_CLAMP).astype(np.int32)
    out = np.ldexp(x, k)
    return np.where(nan, x.dtype.type(np.nan), out) if nan.any() else out


def _logb(x):
    """IEEE logB as a float of x's dtype: ``floor(log2|x|)`` exactly, for
    subnormals too; -inf at ±0, +inf at ±inf, NaN at NaN."""
    x = np.asarray(x)
    _, e = np.frexp(x)
    out = (e - 1).astype(x.dtype)
    out = np.where(x == 0, x.dtype.type(-np.inf), out)
    return np.where(np.isinf(x), x.dtype.type(np.inf), np.where(np.isnan(x), x, out))


HARDWARE_TABLE = ("table '{name}': mode 'hardware' is GPU texture filtering (a low-precision "
                  "blend weight, tolerance-bounded) and runs only on GPU strategies; eager "
                  "evaluation and CPU strategies compute mode 'exact'. Nothing was run: build "
                  "the lookup with mode='exact', or run on a cuda strategy")


def table_lookup(x, layer, *, name, values, x0, step, mode):
    """The reference meaning of a table look-up (mode ``exact``), in x's
    dtype: ``u = (x - x0) / step`` clamped to [0, n-1]; ``i = min(floor(u),
    n-2)``; ``f = u - i`` (exact); the layer index is ``trunc(layer)``
    clamped to [0, L-1]; the result is ``(1 - f)·v[l, i] + f·v[l, i+1]``,
    four roundings and never contracted, so node values come back exactly.
    NaN abscissa or layer gives NaN."""
    if mode != "exact":
        raise BackendUnavailableError(HARDWARE_TABLE.format(name=name))
    x, layer = np.asarray(x), np.asarray(layer)
    dtype = x.dtype.type
    table = values.value.astype(x.dtype)
    n_layers, n = table.shape
    u = (x - dtype(x0)) / dtype(step)
    u = np.minimum(np.maximum(u, dtype(0)), dtype(n - 1))
    i = np.minimum(np.floor(u), dtype(n - 2))
    f = u - i
    bad = np.isnan(u) | np.isnan(layer)
    ii = np.where(bad, 0, i).astype(np.intp)
    li = np.clip(np.trunc(np.where(bad, 0, layer)), 0, n_layers - 1).astype(np.intp)
    out = (dtype(1) - f) * table[li, ii] + f * table[li, ii + 1]
    return np.where(bad, dtype(np.nan), out)


def _interchange(x, rows, start: int) -> None:
    """Swap row ``start`` of each matrix of ``x`` with row ``rows[i]``, in place."""
    which = np.arange(x.shape[0])
    kept = x[which, start].copy()
    x[which, start] = x[which, rows]
    x[which, rows] = kept


def _gather_rows(x, order):
    return np.take_along_axis(x, order.reshape(order.shape + (1,) * (x.ndim - 2)), axis=1)


def _getf2(lu):
    """Unblocked getrf on a panel (count, m, n), in place: the interchanges
    and the permutation of the m rows they make."""
    count, m, n = lu.shape
    pivots = np.zeros((count, min(m, n)), np.int32)
    order = np.tile(np.arange(m, dtype=np.int32), (count, 1))
    one = lu.dtype.type(1)
    for k in range(min(m, n)):
        pivots[:, k] = k + np.argmax(np.abs(lu[:, k:, k]), axis=1)
        _interchange(lu, pivots[:, k], k)
        _interchange(order, pivots[:, k], k)
        pivot = lu[:, k, k]
        lu[:, k + 1:, k] *= (one / np.where(pivot != 0, pivot, one))[:, None]
        lu[:, k + 1:, k + 1:] -= lu[:, k + 1:, k, None] * lu[:, k, None, k + 1:]
    return pivots, order


def _getrf(lu):
    """getrf by halves as LAPACK's dgetrf2, in place on (count, m, n): the
    left half's factors, its interchanges applied to the right half, a unit
    triangular solve and a matrix product for the trailing block, then the
    trailing block's factors, its interchanges applied to the left half.
    Returns the interchanges and the permutation of the rows."""
    m, n = lu.shape[1:]
    if min(m, n) <= 16:
        return _getf2(lu)
    h = min(m, n) // 2
    left = lu[:, :, :h]
    first, order = _getrf(left)
    right = _gather_rows(lu[:, :, h:], order)
    right[:, :h] = _trsm(np.tril(left[:, :h], -1) + np.eye(h, dtype=lu.dtype), right[:, :h],
                         True)
    right[:, h:] -= left[:, h:] @ right[:, :h]
    second, trailing = _getrf(right[:, h:])
    lu[:, h:, :h] = _gather_rows(left[:, h:], trailing)
    lu[:, :, h:] = right
    order[:, h:] = _gather_rows(order[:, h:], trailing)
    return np.concatenate([first, second + h], axis=1), order


def _lu(a):
    """getrf's meaning, batched: partial pivoting on the first row of largest
    magnitude, the column below scaled by the pivot's reciprocal (a zero
    pivot leaves its column unscaled: LAPACK goes on and reports it, and the
    factors hold the singularity), by halves as dgetrf2. Returns the packed
    factors (L below the unit diagonal, U on and above it), the row
    interchanges (row k swapped with row ``pivots[k]``, 0-based) and the
    permutation they make (``a[perm] = L U``)."""
    a = np.asarray(a)
    n = a.shape[-1]
    lu = np.array(a.reshape(-1, n, n), copy=True)
    pivots, perm = _getrf(lu)
    shape = a.shape[:-1]
    return [lu.reshape(a.shape), pivots.reshape(shape), perm.reshape(shape)]


def _substitute(a, b, lower: bool):
    """Row-by-row substitution for a small triangular ``a``."""
    n = a.shape[-1]
    x = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)
    for i in range(n) if lower else range(n - 1, -1, -1):
        done = slice(0, i) if lower else slice(i + 1, n)
        rest = np.matmul(a[..., i:i + 1, done], x[..., done, :])[..., 0, :]
        x[..., i, :] = (b[..., i, :] - rest) / a[..., i, i, None]
    return x


def _trsm(a, b, lower: bool):
    """``a \\ b`` for a triangular ``a`` by halves (matrix products for the
    off-diagonal block), substitution below 16 rows."""
    n = a.shape[-1]
    if n <= 16:
        return _substitute(a, b, lower)
    h = n // 2
    if lower:
        top = _trsm(a[..., :h, :h], b[..., :h, :], True)
        bottom = _trsm(a[..., h:, h:], b[..., h:, :] - a[..., h:, :h] @ top, True)
    else:
        bottom = _trsm(a[..., h:, h:], b[..., h:, :], False)
        top = _trsm(a[..., :h, :h], b[..., :h, :] - a[..., :h, h:] @ bottom, False)
    return np.concatenate([top, bottom], axis=-2)


def _triangular_solve(a, b, *, lower, transpose_a, unit_diagonal):
    """trsm's meaning (left side): ``op(a) x = b``, op the transpose when
    ``transpose_a``, reading only the named triangle of ``a`` (and not its
    diagonal when ``unit_diagonal``)."""
    a, b = np.asarray(a), np.asarray(b)
    if transpose_a:
        a, lower = np.swapaxes(a, -1, -2), not lower
    a = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        a[..., np.arange(n), np.arange(n)] = 1
    return _trsm(a, b, lower)


def _cholesky(a):
    """potrf's meaning ('L'): the lower factor, from a's lower triangle; a
    matrix that is not positive definite gets a factor of NaN (LAPACK
    reports it; a compiled kernel cannot raise)."""
    a = np.asarray(a)
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        n = a.shape[-1]
        flat = a.reshape(-1, n, n)
        out = np.full_like(flat, np.nan)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                continue
        return out.reshape(a.shape)


def _eigh(a, *, lower):
    """syevd's meaning: eigenvalues ascending and eigenvectors (columns),
    from a's lower (upper) triangle (NumPy's ``eigh``, ``UPLO``)."""
    w, v = np.linalg.eigh(np.asarray(a), UPLO="L" if lower else "U")
    return [w, v]


def _svd(a, *, full_matrices):
    """gesdd's meaning: u, the singular values descending, vh."""
    u, s, vh = np.linalg.svd(np.asarray(a), full_matrices=full_matrices)
    return [u, s, vh]


_FFTS = {"fft": np.fft.fftn, "ifft": np.fft.ifftn, "rfft": np.fft.rfftn,
         "irfft": np.fft.irfftn}
_FFT1 = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}


def _fft(x, *, kind, lengths):
    """NumPy's transform (pocketfft) over the trailing axes, its default
    normalization, in the dtype the shape rule gives (NumPy 2 keeps
    single precision)."""
    x = np.asarray(x)
    if len(lengths) == 1:  # the one-axis function itself (fftn's loop costs a little)
        out = _FFT1[kind](x, n=lengths[0], axis=-1)
    else:
        axes = tuple(range(x.ndim - len(lengths), x.ndim))
        out = _FFTS[kind](x, s=lengths, axes=axes)
    if kind == "rfft":
        dtype = np.result_type(x.dtype, np.complex64)
    elif kind == "irfft":
        dtype = np.float32 if x.dtype == np.complex64 else np.float64
    else:
        dtype = x.dtype
    return out.astype(dtype, copy=False)


def _complex(re, im):
    """The complex value with these parts, exactly (no arithmetic: ``re +
    1j * im`` would turn an infinite part's zero product into NaN)."""
    re, im = np.broadcast_arrays(np.asarray(re), np.asarray(im))
    out = np.empty(re.shape, np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


def _gather(x, idx):
    """``x[idx]`` along axis 0, indices clamped into range."""
    x, idx = np.asarray(x), np.asarray(idx)
    if x.shape[0] == 0:
        return np.zeros(idx.shape + x.shape[1:], x.dtype)
    return np.take(x, idx, axis=0, mode="clip")


_AT = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter(x, idx, u, *, combine):
    """A copy of ``x`` with each row of ``u`` combined into the row its index
    names, in the row-major order of the indices: ``set`` keeps the last
    update of a repeated index, the others apply every update in order
    (``ufunc.at``: unbuffered, sequential)."""
    out = np.array(x, copy=True)
    n = out.shape[0]
    flat = np.asarray(idx).reshape(-1)
    if n == 0 or flat.size == 0:
        return out
    flat = np.clip(flat, 0, n - 1)
    rows = np.asarray(u).reshape((flat.size,) + out.shape[1:])
    if combine == "set":
        _, first_from_end = np.unique(flat[::-1], return_index=True)
        last = flat.size - 1 - first_from_end  # the last update of each index
        out[flat[last]] = rows[last]
    else:
        _AT[combine].at(out, flat, rows)
    return out


def _sort(*xs, axis, num_keys):
    """NumPy's stable sort (``argsort(kind="stable")``, ``lexsort`` for
    several keys, the first primary; NaN last) applied to every operand."""
    xs = [np.asarray(x) for x in xs]
    if num_keys == 1:
        order = np.argsort(xs[0], axis=axis, kind="stable")
    else:
        order = np.lexsort(xs[:num_keys][::-1], axis=axis)
    return [np.take_along_axis(x, order, axis=axis) for x in xs]


EVAL_XP = {
    Op.RESHAPE: lambda xp, x, *, shape: xp.reshape(x, shape),
    Op.BROADCAST: _broadcast,
    Op.TRANSPOSE: lambda xp, x, *, perm: xp.transpose(x, perm),
    Op.SLICE: _slice,
    Op.PAD: _pad,
    Op.REV: lambda xp, x, *, axes: xp.flip(x, axes),
    Op.CONCATENATE: lambda xp, *xs, axis: xp.concatenate(xs, axis=axis),
    Op.DOT_GENERAL: _dot_general,
}
"""The rules written against an array namespace: ``rule(xp, *operands,
**attrs)``. Control-flow primitives add theirs (``namespace_rule``)."""


def run_graph(graph, args) -> list:
    """Evaluate a graph (a region node's body) by these rules. A node with
    several results holds their list; its ``get`` nodes pick from it."""
    env = dict(zip(graph.inputs, args))
    for node in graph.nodes:
        if node not in env:
            env[node] = EVAL[node.op](*(env[x] for x in node.inputs), **node.attrs)
    return [env[x] for x in graph.outputs]


def _reshape(x, shape):
    """``np.reshape``: an array's (or NumPy scalar's) own method, which is what
    ``np.reshape`` calls, without its wrapper's cost (0.5 us a call)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return x.reshape(shape)
    return np.reshape(x, shape)


NUMPY: ArrayNamespace = types.SimpleNamespace(
    empty=np.empty, zeros=np.zeros, full=np.full, copy=np.copy, reshape=_reshape,
    broadcast_to=np.broadcast_to, transpose=np.transpose, flip=np.flip,
    concatenate=np.concatenate, matmul=np.matmul, where=np.where, add=np.add, any=np.any,
    ndim=np.ndim, shape=np.shape, result_type=np.result_type, run_graph=run_graph)
"""The namespace ``EVAL`` binds: NumPy itself, bodies run by ``EVAL``."""


EVAL = {
    Op.CONST: lambda *, value: value.value,
    Op.NEG: np.negative,
    Op.ABS: np.absolute,
    Op.SIGN: np.sign,
    Op.NOT: np.invert,
    Op.FLOOR: np.floor,
    Op.CEIL: np.ceil,
    Op.ROUND: np.rint,
    Op.TRUNC: np.trunc,
    Op.SQRT: np.sqrt,
    Op.CBRT: np.cbrt,
    Op.EXP: np.exp,
    Op.EXP2: np.exp2,
    Op.EXPM1: np.expm1,
    Op.LOG: np.log,
    Op.LOG2: np.log2,
    Op.LOG10: np.log10,
    Op.LOG1P: np.log1p,
    Op.SIN: np.sin,
    Op.COS: np.cos,
    Op.TAN: np.tan,
    Op.ASIN: np.arcsin,
    Op.ACOS: np.arccos,
    Op.ATAN: np.arctan,
    Op.SINH: np.sinh,
    Op.COSH: np.cosh,
    Op.TANH: np.tanh,
    Op.ASINH: np.arcsinh,
    Op.ACOSH: np.arccosh,
    Op.ATANH: np.arctanh,
    Op.CAST: lambda x, *, dtype: np.asarray(x).astype(dtype),
    Op.REAL: np.real,
    Op.IMAG: np.imag,
    Op.CONJ: np.conjugate,
    Op.COMPLEX: _complex,
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.DIV: np.true_divide,
    Op.POW: np.power,
    Op.MAX: np.maximum,
    Op.MIN: np.minimum,
    Op.ATAN2: np.arctan2,
    Op.FLOORDIV: np.floor_divide,
    Op.REM: np.remainder,
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
    Op.AND: np.bitwise_and,
    Op.OR: np.bitwise_or,
    Op.XOR: np.bitwise_xor,
    Op.SHIFT_LEFT: np.left_shift,
    Op.SHIFT_RIGHT: np.right_shift,
    Op.SELECT: np.where,
    Op.REDUCE_SUM: _reduce(np.sum),
    Op.REDUCE_PROD: _reduce(np.prod),
    Op.REDUCE_MAX: _reduce_extreme(np.max),
    Op.REDUCE_MIN: _reduce_extreme(np.min),
    **{op: functools.partial(rule, NUMPY) for op, rule in EVAL_XP.items()},
    Op.STOP_GRADIENT: lambda x: x,
    Op.LDEXP: _ldexp,
    Op.LOGB: _logb,
    Op.COPYSIGN: np.copysign,
    Op.TABLE_LOOKUP: table_lookup,
    Op.LU: _lu,
    Op.TRIANGULAR_SOLVE: _triangular_solve,
    Op.CHOLESKY: _cholesky,
    Op.QR: lambda a, *, mode: list(np.linalg.qr(np.asarray(a), mode=mode)),
    Op.EIGH: _eigh,
    Op.SVD: _svd,
    Op.GET: lambda results, *, index: results[index],
    Op.GATHER: _gather,
    Op.SCATTER: _scatter,
    Op.SORT: _sort,
    Op.FFT: _fft,
}
"""Region primitives (``ops.REGION``) add their rules here when their module
registers them (``register_region``); one whose meaning a device shares
registers ``namespace_rule(op, rule)``."""
# INPUT has no meaning of its own: its value is supplied by the caller.
NO_EVAL = frozenset({Op.INPUT})


def namespace_rule(op: Op, rule):
    """Record ``rule(xp, *operands, **attrs)`` as ``op``'s meaning over an
    array namespace (``EVAL_XP``) and return it bound to ``NUMPY``: the EVAL
    rule a region primitive registers (``register_region``)."""
    EVAL_XP[op] = rule
    return functools.partial(rule, NUMPY)
