"""EVAL: the NumPy meaning of every op — the executable specification.

The eager frontend, constant folding and the reference strategy all call
these rules and nothing else, so eager code, recorded graphs and the oracle
cannot disagree. A rule takes NumPy arrays (or NumPy scalars) and the op's
attributes and returns a value of exactly the dtype ``SHAPE`` gives.
"""

from __future__ import annotations

import numpy as np

from .errors import BackendUnavailableError
from .ops import Op


def _broadcast(x, *, shape, dims):
    expanded = [1] * len(shape)
    for size, d in zip(np.shape(x), dims):
        expanded[d] = size
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _slice(x, *, start, limit, stride):
    return x[tuple(slice(b, e, s) for b, e, s in zip(start, limit, stride))]


def _pad(x, value, *, lo, hi, interior):
    n = np.shape(x)
    shape = tuple(a + b + d + max(d - 1, 0) * i for a, b, d, i in zip(lo, hi, n, interior))
    out = np.full(shape, value, dtype=np.result_type(x))
    spots = tuple(slice(a, a + (d - 1) * (i + 1) + 1, i + 1) for a, d, i in zip(lo, n, interior))
    out[spots] = x
    return out


def _dot_general(a, b, *, contract, batch):
    (ca, cb), (ba, bb) = contract, batch
    fa = [i for i in range(a.ndim) if i not in ca and i not in ba]
    fb = [i for i in range(b.ndim) if i not in cb and i not in bb]
    batch_shape = [a.shape[i] for i in ba]
    k = int(np.prod([a.shape[i] for i in ca], dtype=np.int64))
    m = int(np.prod([a.shape[i] for i in fa], dtype=np.int64))
    n = int(np.prod([b.shape[i] for i in fb], dtype=np.int64))
    nb = int(np.prod(batch_shape, dtype=np.int64))
    lhs = np.transpose(a, (*ba, *fa, *ca)).reshape(nb, m, k)
    rhs = np.transpose(b, (*bb, *cb, *fb)).reshape(nb, k, n)
    out = np.matmul(lhs[0], rhs[0])[None] if nb == 1 else np.matmul(lhs, rhs)
    shape = batch_shape + [a.shape[i] for i in fa] + [b.shape[i] for i in fb]
    return out.reshape(shape)


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


def run_graph(graph, args) -> list:
    """Evaluate a graph (a region node's body) by these rules. A node with
    several results holds their list; its ``get`` nodes pick from it."""
    env = dict(zip(graph.inputs, args))
    for node in graph.nodes:
        if node not in env:
            env[node] = EVAL[node.op](*(env[x] for x in node.inputs), **node.attrs)
    return [env[x] for x in graph.outputs]


EVAL = {
    Op.CONST: lambda *, value: value.value,
    Op.NEG: np.negative,
    Op.ABS: np.absolute,
    Op.SIGN: np.sign,
    Op.NOT: np.logical_not,
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
    Op.AND: np.logical_and,
    Op.OR: np.logical_or,
    Op.SELECT: np.where,
    Op.REDUCE_SUM: _reduce(np.sum),
    Op.REDUCE_PROD: _reduce(np.prod),
    Op.REDUCE_MAX: _reduce_extreme(np.max),
    Op.REDUCE_MIN: _reduce_extreme(np.min),
    Op.RESHAPE: lambda x, *, shape: np.reshape(x, shape),
    Op.BROADCAST: _broadcast,
    Op.TRANSPOSE: lambda x, *, perm: np.transpose(x, perm),
    Op.SLICE: _slice,
    Op.PAD: _pad,
    Op.REV: lambda x, *, axes: np.flip(x, axes),
    Op.CONCATENATE: lambda *xs, axis: np.concatenate(xs, axis=axis),
    Op.DOT_GENERAL: _dot_general,
    Op.STOP_GRADIENT: lambda x: x,
    Op.LDEXP: _ldexp,
    Op.LOGB: _logb,
    Op.COPYSIGN: np.copysign,
    Op.TABLE_LOOKUP: table_lookup,
    Op.GET: lambda results, *, index: results[index],
}
"""Region primitives (``ops.REGION``) add their rules here when their module
registers them (``register_region``)."""
# INPUT has no meaning of its own: its value is supplied by the caller.
NO_EVAL = frozenset({Op.INPUT})
