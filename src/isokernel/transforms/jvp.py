"""Forward mode: the JVP rule of every differentiable op, and ``jvp_graph``.

A rule is either a tuple with one *partial* per operand,
``partial(t, *operands, out=..., **attrs) -> contribution of t`` (``None``
where the op does not depend smoothly on that operand), or a *joint* rule
``rule(operands, tangents, **attrs) -> (out, tangent)`` for ops whose
tangent is one op of all tangents (select, pad, concatenate) or that carry
their own derivative (custom calls). Tangents that are zero are symbolic
(``None``): a partial is only called for a non-zero tangent, so no zero
array is ever carried through the graph. Rules build graph nodes with
``bind`` and the frontend, never numbers, and every tangent they write is
linear in the tangents given to them (``transpose`` relies on it).

Conventions (docs/autodiff.md): abs'(0) = 0; max/min ties split the
tangent evenly; sqrt'(0) = +inf; ldexp(x, n) is x·2^n (n an integer, zero
tangent), logb is piecewise constant, copysign(x, y) flips x's tangent
where the signs differ (y's tangent is zero); a table look-up's derivative
is the slope of its piecewise-linear interpolant (``record.tables``); a
fused form is differentiated as its body; select routes tangents with
select, so the unselected branch contributes exactly zero; integer and bool values have
zero tangents; float32 values have float32 tangents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir import DifferentiationError, Graph, Op, dtypes
from ..ir.source import pinned_where, user_where
from ..record import bind
from ..record import frontend as F
from ..record.tables import lookup_jvp
from .graphs import const, is_float, prune, reaching, replay_node, retrace, scalar, zeros


def _linear(op: Op):
    """The tangent of an op linear in its one operand is the op itself."""
    return (lambda t, *_, out, **attrs: bind(op, t, **attrs),)


def _cast(t, x, *, out, dtype):
    if not is_float(out.aval):
        return None
    return t if t.dtype == dtype else bind(Op.CAST, t, dtype=dtype)


def _pick(t, x, y, wins, tie):
    """``t`` where ``wins``, half of it where ``tie``, else exactly zero."""
    return F.where(wins, t, F.where(tie, t * 0.5, scalar(0, t)))


def _chooser(t, x, *, out, axes):
    """max/min over axes: ties share the tangent evenly."""
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    mask = F.equal(x, bind(Op.BROADCAST, out, shape=x.shape, dims=kept))
    count = bind(Op.REDUCE_SUM, F.astype(mask, x.dtype), axes=axes)
    return bind(Op.REDUCE_SUM, F.where(mask, t, scalar(0, t)), axes=axes) / count


def _exclusive_products(a):
    """Along the last axis: the product of the elements before each one (a
    log-depth scan of pads and slices, exact at zeros)."""
    k = a.shape[-1]
    width = [(0, 0)] * (a.ndim - 1)
    shifted = F.pad(a, width + [(1, 0)], constant_values=1)[..., :k]
    step = 1
    while step < k:
        shifted = shifted * F.pad(shifted, width + [(step, 0)], constant_values=1)[..., :k]
        step *= 2
    return shifted


def _prod(t, x, *, out, axes):
    """d prod = sum(t * product of the others), exact when some x are 0."""
    kept = [i for i in range(x.ndim) if i not in axes]
    perm = kept + list(axes)
    moved = F.transpose(x, perm)
    flat = F.reshape(moved, tuple(moved.shape[:len(kept)]) + (-1,))
    before = _exclusive_products(flat)
    after = F.flip(_exclusive_products(F.flip(flat, -1)), -1)
    others = F.reshape(before * after, moved.shape)
    inverse = [perm.index(i) for i in range(x.ndim)]
    return bind(Op.REDUCE_SUM, t * F.transpose(others, inverse), axes=axes)


def _abs(t, x, *, out):
    """``t * sign(x)``; for a complex ``x``, ``real(conj(x) t) / |x|`` (0 at 0,
    as JAX's)."""
    if x.dtype not in dtypes.COMPLEX:
        return t * F.sign(x)
    zero = F.zeros((), out.dtype)
    at_zero = F.equal(out, zero)
    ratio = bind(Op.REAL, bind(Op.CONJ, x) * t) / F.where(at_zero, F.ones((), out.dtype), out)
    return F.where(at_zero, zero, ratio)


def _pow_base(t, x, y, *, out):
    """``t * y * x**(y-1)``, 0 where ``x == y == 0`` (not ``0 * inf``). Only
    that corner is masked: masking all of ``y == 0`` would also zero the
    derivative of this factor in ``y`` there, ``1/x`` (JAX issue 12033)."""
    corner = F.logical_and(F.equal(y, 0), F.equal(x, 0))
    return t * (y * F.where(corner, scalar(0, x), F.power(x, y - 1.0)))


def _pow_exponent(t, x, y, *, out):
    return t * (out * F.log(F.where(F.equal(x, 0), scalar(1, x), x)))


def _atan2(sign):
    def partial(t, a, b, *, out):
        denom = a * a + b * b
        return t * ((b if sign > 0 else -a) / denom)
    return partial


def _copysign(t, x, y, *, out):
    """|x| with y's sign: the tangent of x, flipped where the signs differ."""
    one = F.ones_like(x)
    return t * (bind(Op.COPYSIGN, one, x) * bind(Op.COPYSIGN, one, y))


def _get(operands, tangents, *, index):
    """One result of a node with several: its primal and its tangent."""
    tangent = tangents[0]
    return operands[0][index], None if tangent is None else tangent[index]


def _select(operands, tangents):
    pred, x, y = operands
    _, tx, ty = tangents
    tx = zeros(x.aval) if tx is None else tx
    ty = zeros(y.aval) if ty is None else ty
    return bind(Op.SELECT, pred, x, y), bind(Op.SELECT, pred, tx, ty)


def all_or_zeros(operands, tangents):
    return [zeros(x.aval) if t is None else t for x, t in zip(operands, tangents)]


def _pad(operands, tangents, **attrs):
    return bind(Op.PAD, *operands, **attrs), bind(Op.PAD, *all_or_zeros(operands, tangents),
                                                  **attrs)


def _concatenate(operands, tangents, *, axis):
    out = bind(Op.CONCATENATE, *operands, axis=axis)
    return out, bind(Op.CONCATENATE, *all_or_zeros(operands, tangents), axis=axis)


def _dot(t_first: bool):
    def partial(t, a, b, *, out, **attrs):
        return bind(Op.DOT_GENERAL, t, b, **attrs) if t_first else \
            bind(Op.DOT_GENERAL, a, t, **attrs)
    return partial


def _triangle(x, lower: bool, offset: int = 0):
    """``x`` with zeros off its lower (upper) triangle; ``offset`` shifts
    the diagonal that is kept (-1: strictly lower, 1: strictly upper)."""
    n = x.shape[-1]
    ones = np.ones((n, n), bool)
    keep = np.tril(ones, offset) if lower else np.triu(ones, offset)
    return F.where(keep, x, scalar(0, x))


def _solve_tri(a, b, lower: bool, transpose_a: bool = False, unit: bool = False):
    return bind(Op.TRIANGULAR_SOLVE, a, b, lower=lower, transpose_a=transpose_a,
                unit_diagonal=unit)


def _swap(x):
    return F.swapaxes(x, -1, -2)


def _trsolve_a(t, a, b, *, out, lower, transpose_a, unit_diagonal):
    """d x = -op(a)⁻¹ op(d a) x, d a restricted to the triangle read."""
    da = _triangle(t, lower, (-1 if lower else 1) if unit_diagonal else 0)
    da = _swap(da) if transpose_a else da
    return -_solve_tri(a, F.matmul(da, out), lower, transpose_a, unit_diagonal)


def _trsolve_b(t, a, b, *, out, **attrs):
    return bind(Op.TRIANGULAR_SOLVE, a, t, **attrs)


def _cholesky(t, a, *, out):
    """d L = L Φ(L⁻¹ d A L⁻ᵀ), Φ the lower triangle with half its diagonal;
    d A is the symmetric matrix of the lower triangle read (NumPy's meaning:
    the upper triangle is never read, so it has no derivative)."""
    sym = _triangle(t, True) + _swap(_triangle(t, True, -1))
    left = _solve_tri(out, sym, lower=True)
    inner = _swap(_solve_tri(out, _swap(left), lower=True))
    phi = _triangle(inner, True, -1) + (_triangle(inner, True) - _triangle(inner, True, -1)) * 0.5
    return F.matmul(out, phi)


def _lu(operands, tangents):
    """P d A = d L U + L d U, so with M = L⁻¹ (P d A) U⁻¹: d L = L tril(M, -1),
    d U = triu(M) U, packed as the factors are (JAX's rule). The interchanges
    and the permutation are piecewise constant."""
    (a,), (t,) = operands, tangents
    lu, pivots, perm = bind(Op.LU, a)
    n = a.shape[-1]
    rows = F.equal(F.reshape(perm, (*perm.shape, 1)), np.arange(n, dtype=np.int32))
    pt = F.matmul(F.astype(rows, a.dtype), t)
    left = _solve_tri(lu, pt, lower=True, unit=True)
    m = _swap(_solve_tri(lu, _swap(left), lower=False, transpose_a=True))
    unit_lower = _triangle(lu, True, -1) + np.eye(n, dtype=a.dtype)
    dl = F.matmul(unit_lower, _triangle(m, True, -1))
    du = F.matmul(_triangle(m, False), _triangle(lu, False))
    return (lu, pivots, perm), (dl + du, None, None)


def _diagonal(x):
    n = x.shape[-1]
    return F.reshape(x, (*x.shape[:-2], n * n))[..., ::n + 1]


def _inverse_gaps(gaps, values):
    """1 / gaps, with 0 on the diagonal and where a gap is within rounding of
    zero (n · eps · max|values|: a repeated eigenvalue, which the
    factorization returns only to rounding; docs/solvers.md says what the
    derivative then is)."""
    n = gaps.shape[-1]
    scale = F.max(F.abs(values), axis=-1, keepdims=True)
    tol = F.expand_dims(scale * (n * float(np.finfo(gaps.dtype).eps)), -1)
    zero = F.less_equal(F.abs(gaps), tol)
    return F.where(zero, scalar(0, gaps), 1.0 / F.where(zero, scalar(1, gaps), gaps))


QR_JVP = ("qr at {where}: the derivative is defined for mode='reduced' with m >= n (or a "
          "square matrix): the extra columns of a complete Q, and Q of a wide matrix, are "
          "not unique. Differentiate qr(a) of a tall or square a, or qr(a.T) of a wide one")
SVD_JVP = ("svd at {where}: the derivative of full_matrices=True is defined for square "
           "matrices only (the extra singular vectors are not unique); pass "
           "full_matrices=False")


def _qr(operands, tangents, *, mode):
    """JAX's rule: with C = Qᵀ d A R⁻¹ and Ω = tril(C, -1) - tril(C, -1)ᵀ,
    d Q = Q (Ω - C) + d A R⁻¹ and d R = (C - Ω) R."""
    (a,), (t,) = operands, tangents
    q, r = bind(Op.QR, a, mode=mode)
    m, n = a.shape[-2:]
    if m < n or (mode == "complete" and m != n):
        raise DifferentiationError(QR_JVP.format(where=user_where()))
    dx_rinv = _swap(_solve_tri(r, _swap(t), lower=False, transpose_a=True))
    c = F.matmul(_swap(q), dx_rinv)
    low = _triangle(c, True, -1)
    omega = low - _swap(low)
    return (q, r), (F.matmul(q, omega - c) + dx_rinv, F.matmul(c - omega, r))


def _eigh(operands, tangents, *, lower):
    """d w = diag(Vᵀ d A V), d V = V (F ∘ Vᵀ d A V) with F_ij = 1/(w_j - w_i)
    off the diagonal (0 where two eigenvalues are equal); d A is the
    symmetric matrix of the triangle read."""
    (a,), (t,) = operands, tangents
    w, v = bind(Op.EIGH, a, lower=lower)
    strict = -1 if lower else 1
    sym = _triangle(t, lower) + _swap(_triangle(t, lower, strict))
    inner = F.matmul(_swap(v), F.matmul(sym, v))
    gaps = w[..., None, :] - w[..., :, None]
    return (w, v), (_diagonal(inner), F.matmul(v, _inverse_gaps(gaps, w) * inner))


def _svd(operands, tangents, *, full_matrices):
    """JAX's rule: with d S = Uᵀ d A V, d s = diag(d S); d U and d V from
    F_ij = 1/(s_j² - s_i²) (0 where equal), plus the parts outside the span
    of U (tall) or V (wide), which divide by s."""
    (a,), (t,) = operands, tangents
    u, s, vh = bind(Op.SVD, a, full_matrices=full_matrices)
    m, n = a.shape[-2:]
    if full_matrices and m != n:
        raise DifferentiationError(SVD_JVP.format(where=user_where()))
    v = _swap(vh)
    ds = F.matmul(_swap(u), F.matmul(t, v))
    row, col = s[..., None, :], s[..., :, None]
    f = _inverse_gaps((row + col) * (row - col), s * s)
    dss, sds = ds * row, col * ds
    du = F.matmul(u, f * (dss + _swap(dss)))
    dv = F.matmul(v, f * (sds + _swap(sds)))
    if m > n:
        dav = F.matmul(t, v)
        du = du + (dav - F.matmul(u, F.matmul(_swap(u), dav))) / row
    if n > m:
        dau = F.matmul(_swap(t), u)
        dv = dv + (dau - F.matmul(v, F.matmul(vh, dau))) / row
    return (u, s, vh), (du, _diagonal(ds), _swap(dv))


LN2, LN10 = math.log(2.0), math.log(10.0)

JVP = {
    Op.NEG: (lambda t, x, *, out: -t,),
    Op.ABS: (_abs,),
    Op.REAL: _linear(Op.REAL),
    Op.IMAG: _linear(Op.IMAG),
    Op.CONJ: _linear(Op.CONJ),
    Op.COMPLEX: (lambda t, re, im, *, out: bind(Op.COMPLEX, t, F.zeros_like(t)),
                 lambda t, re, im, *, out: bind(Op.COMPLEX, F.zeros_like(t), t)),
    Op.SQRT: (lambda t, x, *, out: t * (0.5 / out),),
    Op.CBRT: (lambda t, x, *, out: t * ((1.0 / 3.0) / (out * out)),),
    Op.EXP: (lambda t, x, *, out: t * out,),
    Op.EXP2: (lambda t, x, *, out: t * (out * LN2),),
    Op.EXPM1: (lambda t, x, *, out: t * (out + 1.0),),
    Op.LOG: (lambda t, x, *, out: t / x,),
    Op.LOG2: (lambda t, x, *, out: t / (x * LN2),),
    Op.LOG10: (lambda t, x, *, out: t / (x * LN10),),
    Op.LOG1P: (lambda t, x, *, out: t / (x + 1.0),),
    Op.SIN: (lambda t, x, *, out: t * F.cos(x),),
    Op.COS: (lambda t, x, *, out: t * -F.sin(x),),
    Op.TAN: (lambda t, x, *, out: t * (out * out + 1.0),),
    Op.ASIN: (lambda t, x, *, out: t / F.sqrt(1.0 - x * x),),
    Op.ACOS: (lambda t, x, *, out: t / -F.sqrt(1.0 - x * x),),
    Op.ATAN: (lambda t, x, *, out: t / (x * x + 1.0),),
    Op.SINH: (lambda t, x, *, out: t * F.cosh(x),),
    Op.COSH: (lambda t, x, *, out: t * F.sinh(x),),
    Op.TANH: (lambda t, x, *, out: t * (1.0 - out * out),),
    Op.ASINH: (lambda t, x, *, out: t / F.sqrt(x * x + 1.0),),
    Op.ACOSH: (lambda t, x, *, out: t / (F.sqrt(x - 1.0) * F.sqrt(x + 1.0)),),
    Op.ATANH: (lambda t, x, *, out: t / (1.0 - x * x),),
    Op.CAST: (_cast,),
    Op.ADD: (lambda t, x, y, *, out: t, lambda t, x, y, *, out: t),
    Op.SUB: (lambda t, x, y, *, out: t, lambda t, x, y, *, out: -t),
    Op.MUL: (lambda t, x, y, *, out: t * y, lambda t, x, y, *, out: x * t),
    Op.DIV: (lambda t, x, y, *, out: t / y, lambda t, x, y, *, out: t * (-out / y)),
    Op.POW: (_pow_base, _pow_exponent),
    Op.MAX: (lambda t, x, y, *, out: _pick(t, x, y, x > y, F.equal(x, y)),
             lambda t, x, y, *, out: _pick(t, y, x, y > x, F.equal(x, y))),
    Op.MIN: (lambda t, x, y, *, out: _pick(t, x, y, x < y, F.equal(x, y)),
             lambda t, x, y, *, out: _pick(t, y, x, y < x, F.equal(x, y))),
    Op.ATAN2: (_atan2(+1), _atan2(-1)),
    Op.REM: (lambda t, x, y, *, out: t,
             lambda t, x, y, *, out: t * -bind(Op.FLOORDIV, x, y)),
    Op.SELECT: _select,
    Op.REDUCE_SUM: _linear(Op.REDUCE_SUM),
    Op.REDUCE_PROD: (_prod,),
    Op.REDUCE_MAX: (_chooser,),
    Op.REDUCE_MIN: (_chooser,),
    Op.RESHAPE: _linear(Op.RESHAPE),
    Op.BROADCAST: _linear(Op.BROADCAST),
    Op.TRANSPOSE: _linear(Op.TRANSPOSE),
    Op.SLICE: _linear(Op.SLICE),
    Op.PAD: _pad,
    Op.REV: _linear(Op.REV),
    Op.CONCATENATE: _concatenate,
    Op.DOT_GENERAL: (_dot(True), _dot(False)),
    Op.LDEXP: (lambda t, x, n, *, out: bind(Op.LDEXP, t, n), None),
    Op.COPYSIGN: (_copysign, None),
    Op.TABLE_LOOKUP: (lookup_jvp, None),
    Op.LU: _lu,
    Op.TRIANGULAR_SOLVE: (_trsolve_a, _trsolve_b),
    Op.CHOLESKY: (_cholesky,),
    Op.QR: _qr,
    Op.EIGH: _eigh,
    Op.SVD: _svd,
    Op.GET: _get,
}
"""Region primitives (``ops.REGION``) add theirs when they register
(``regions.register``)."""

# Piecewise-constant ops, bool/integer-valued ops and the stop-gradient
# marker: their tangent is zero wherever it is defined (a symbolic zero).
ZERO_TANGENT = frozenset({
    Op.SIGN, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC, Op.FLOORDIV, Op.STOP_GRADIENT,
    Op.NOT, Op.AND, Op.OR, Op.XOR, Op.SHIFT_LEFT, Op.SHIFT_RIGHT, Op.EQ, Op.NE, Op.LT, Op.LE,
    Op.GT, Op.GE, Op.LOGB,
})
# Leaves have no rule.
NO_JVP = frozenset({Op.INPUT, Op.CONST})


def jvp_node(node, operands: list, tangents: list):
    """(primal, tangent) of one node; the tangent is ``None`` when zero (for
    a node with several results: tuples, with ``None`` for zero tangents)."""
    rule = JVP.get(node.op)
    if rule is None:
        raise DifferentiationError(f"{node.op.value} at {node.where or '?'} has no "
                                   f"forward-mode rule")
    with pinned_where(node.where):
        if not isinstance(rule, tuple):
            return rule(operands, tangents, **node.attrs)
        out = replay_node(node, operands)
        total = None
        for partial, t in zip(rule, tangents):
            if t is None or partial is None:
                continue
            part = partial(t, *operands, out=out, **node.attrs)
            if part is not None:
                total = part if total is None else total + part
        return out, total


def _has_tangent(node, tangents: list) -> bool:
    return (any(map(is_float, node.avals)) and node.op not in ZERO_TANGENT
            and any(t is not None for t in tangents))


def tangent_inputs(graph: Graph, diff: Sequence[bool] | None) -> list[int]:
    """Indices of the inputs that get a tangent: the differentiated float
    inputs (integer and bool inputs have zero tangents)."""
    diff = [True] * len(graph.inputs) if diff is None else list(diff)
    return [i for i, (x, d) in enumerate(zip(graph.inputs, diff)) if d and is_float(x.aval)]


def jvp_graph(graph: Graph, diff: Sequence[bool] | None = None,
              wrt: Sequence[int] | None = None) -> Graph:
    """The forward-mode graph of ``graph``.

    Inputs: the graph's inputs, then one tangent per differentiated float
    input (``diff`` marks which; default all). Outputs: the graph's outputs,
    then the tangent of each output in ``wrt`` (default all). Nodes that
    reach none of those outputs get no tangent (pruned before the walk).
    """
    graph = prune(graph)
    wrt = list(range(len(graph.outputs))) if wrt is None else list(wrt)
    needed = reaching([graph.outputs[i] for i in wrt])
    which = tangent_inputs(graph, diff)
    n = len(graph.inputs)

    def body(*args):
        env = dict(zip(graph.inputs, args[:n]))
        tan = {graph.inputs[i]: t for i, t in zip(which, args[n:])}
        for node in graph.nodes:
            if node in env:
                continue
            if node.op is Op.CONST:
                env[node] = const(node)
                continue
            operands = [env[x] for x in node.inputs]
            tangents = [tan.get(x) for x in node.inputs]
            if node in needed and _has_tangent(node, tangents):
                env[node], tan[node] = jvp_node(node, operands, tangents)
            else:
                env[node] = replay_node(node, operands)
        outs = [env[x] for x in graph.outputs]
        touts = [_tangent_out(tan.get(graph.outputs[i]), graph.outputs[i]) for i in wrt]
        return outs + touts

    avals = [x.aval for x in graph.inputs] + [graph.inputs[i].aval.strong() for i in which]
    names = list(graph.input_names) + [f"d{graph.input_names[i]}" for i in which]
    return retrace(avals, body, names, f"jvp_{graph.name}")


def _tangent_out(t, node):
    """An output's tangent; a zero one (integer outputs, or outputs that do
    not depend on the differentiated inputs) is materialized only here."""
    return zeros(node.aval.strong()) if t is None else t
