"""Complex operations as formulas on their (real, imaginary) parts.

A complex op's *pair form* computes the parts of its result from the parts
of its operands with real operations only. Two users:

- ``numerics="portable"`` records every complex op that has a pair form as
  that formula (its real transcendentals portable in turn), so a complex
  model computes the same bits on every strategy and device; a complex op
  without one is refused there, naming the op (``lowers``/``lower``);
- the compiling strategies (``native`` and the GPU strategies) run complex
  values as pairs of real arrays: ``transforms.complex_pairs`` rewrites
  their graph with these formulas before planning, so the C and CUDA
  emitters only ever see real values.

The formulas, and how each compares with NumPy's complex loops (the
reference), which this module restates where it can (docs/complex.md has
the measured bounds):

- ``+ - neg conj real imag complex == != where astype``: exact, NumPy's bits;
- ``*``: ``(ar·br − ai·bi, ar·bi + ai·br)`` with each product rounded.
  NumPy's bits where its loop is the plain formula (complex64 here); where
  NumPy's loop contracts into FMA (complex128 on x86-64 with FMA), each part
  is within one rounding of ``eps·(|ar·br| + |ai·bi|)`` of it;
- ``/``: NumPy's own algorithm (Smith's, with its division by zero), written
  branch-free: NumPy's bits; the branch not taken computes on harmless
  operands, so no floating-point flag NumPy would not raise;
- ``abs``: ``big·√(1 + (small/big)²)`` (the frontend's ``hypot``): within
  2 ulp of NumPy's;
- ``sqrt``: the principal root by Kahan's cancellation-free form with C99's
  signed zeros and infinite imaginary parts; ``exp``: ``eᵃ(cos b, sin b)``
  with an exact zero imaginary part kept. Bounded in ulps of each part's
  magnitude on finite operands up to about 10^307 (exp: real part below the
  overflow of ``exp``), measured in docs/complex.md.

The other complex ops NumPy defines (log, powers, the trigonometric and
hyperbolic functions) have no pair form here: the compiling strategies run
them by the reference's NumPy rules, and portable numerics refuses them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir import DTypeError, Op, dtypes
from ..ir.source import user_where
from . import portable
from .tracer import Tracer, as_tracer, bind


def _real(op: Op, x):
    """A real transcendental: portable's decomposition under that mode."""
    return portable.lower(op, x) if portable.lowers(op, x) else bind(op, x)


def _full(value, like):
    scalar = np.asarray(value, dtype=like.dtype)
    if isinstance(like, Tracer):
        const = as_tracer(scalar, like.builder)
        return bind(Op.BROADCAST, const, shape=like.shape, dims=()) if like.shape else const
    return np.broadcast_to(scalar, np.shape(like)) if np.shape(like) else scalar


def _sel(cond, a, b):
    like = b if isinstance(a, (int, float)) else a
    a = _full(a, like) if isinstance(a, (int, float)) else a
    b = _full(b, like) if isinstance(b, (int, float)) else b
    return bind(Op.SELECT, cond, a, b)


def _abs(x):
    return bind(Op.ABS, x)


def _sqrt(x):
    return bind(Op.SQRT, x)


def hypot(re, im):
    """|re + i·im|: the larger magnitude times √(1 + ratio²), infinite when
    either part is (C99), the frontend's ``hypot`` formula."""
    ax, ay = _abs(re), _abs(im)
    big, small = bind(Op.MAX, ax, ay), bind(Op.MIN, ax, ay)
    ratio = small / _sel(big == 0.0, 1.0, big)
    h = big * _sqrt(ratio * ratio + 1.0)
    return _sel((ax == np.inf) | (ay == np.inf), np.inf, h)


def _positive_zero(x) -> bool:
    """Whether ``x`` is a recorded constant +0 (a real value made complex:
    a cast, a weak scalar, ``complex(x, 0)``), broadcast or not."""
    if not isinstance(x, Tracer):
        return False
    node = x.node
    if node.op is Op.BROADCAST:
        node = node.inputs[0]
    if node.op is not Op.CONST:
        return False
    value = np.asarray(node.attrs["value"].value)
    return bool(np.all(value == 0) and not np.any(np.signbit(value)))


def mul(ar, ai, br, bi):
    """``(ar·br − ai·bi, ar·bi + ai·br)``; a factor whose imaginary part is
    the constant +0 (a real value made complex) scales each part, C99's
    real × complex: NumPy's formula differs from it only in the sign of a
    zero part and where a part is infinite (its 0·inf is NaN)."""
    if _positive_zero(bi):
        return ar * br, ai * br
    if _positive_zero(ai):
        return ar * br, ar * bi
    return ar * br - ai * bi, ar * bi + ai * br


def div(ar, ai, br, bi):
    """NumPy's complex division (Smith's algorithm; a zero divisor divides
    each part by |br|), branch-free with one branch's work: the divisor's
    larger part is ``p``, the other ``q``, the numerator's parts ``(x, y)``
    in the same roles, so NumPy's two branches are one formula up to the
    order of a commutative operation (the same bits). Where the divisor is
    zero the formula computes on 1 and 0 (no flag NumPy would not raise)."""
    abs_r, abs_i = _abs(br), _abs(bi)
    first = abs_r >= abs_i  # false when a part is NaN: NumPy's second branch
    zero = first & (abs_r == 0.0)
    p = _sel(zero, 1.0, _sel(first, br, bi))
    q = _sel(zero, 0.0, _sel(first, bi, br))
    x = _sel(zero, 0.0, _sel(first, ar, ai))
    y = _sel(zero, 0.0, _sel(first, ai, ar))
    rat = q / p
    scl = 1.0 / (p + q * rat)
    m = x * rat
    re = (x + y * rat) * scl
    im = _sel(first, y - m, m - y) * scl
    d0 = _sel(zero, abs_r, 1.0)  # a zero divisor: each part over |br| (= +0)
    return (_sel(zero, _sel(zero, ar, 0.0) / d0, re), _sel(zero, _sel(zero, ai, 0.0) / d0, im))


def sqrt(re, im):
    """The principal square root: t = √((|re| + |z|)/2); re ≥ 0 gives
    (t, im/2t), re < 0 gives (|im|/2t, t with im's sign); z = ±0 gives
    (+0, im); an infinite imaginary part gives (+inf, im) (C99)."""
    t = _sqrt((_abs(re) + hypot(re, im)) * 0.5)
    zero = t == 0.0
    twice = _sel(zero, 1.0, t) * 2.0
    right = re >= 0.0
    out_re = _sel(right, t, _abs(im) / twice)
    out_im = _sel(right, im / twice, bind(Op.COPYSIGN, t, im))
    infinite = _abs(im) == np.inf
    out_re = _sel(infinite, np.inf, _sel(zero, 0.0, out_re))
    out_im = _sel(infinite | zero, im, out_im)
    return out_re, out_im


def exp(re, im):
    """eᵃ(cos b, sin b), an exact zero imaginary part kept (so a real
    argument stays real even where eᵃ overflows)."""
    e = _real(Op.EXP, re)
    return e * _real(Op.COS, im), _sel(im == 0.0, im, e * _real(Op.SIN, im))


UNARY: dict[Op, Callable] = {
    Op.NEG: lambda re, im: (-re, -im),
    Op.CONJ: lambda re, im: (re, -im),
    Op.SQRT: sqrt,
    Op.EXP: exp,
}
"""Complex -> complex: ``rule(re, im) -> (re, im)``."""

BINARY: dict[Op, Callable] = {
    Op.ADD: lambda ar, ai, br, bi: (ar + br, ai + bi),
    Op.SUB: lambda ar, ai, br, bi: (ar - br, ai - bi),
    Op.MUL: mul,
    Op.DIV: div,
}
"""Complex, complex -> complex."""

PAIR_OPS = frozenset({*UNARY, *BINARY, Op.REAL, Op.IMAG, Op.ABS, Op.EQ, Op.NE, Op.SELECT,
                      Op.CAST, Op.COMPLEX})
"""Every op with a pair form when a complex value is involved."""


def apply(op: Op, operands: list, attrs: dict) -> object:
    """``op`` on ``operands`` (complex ones as (re, im) tuples, real ones as
    values): a (re, im) tuple for a complex result, a value otherwise."""
    if op in UNARY:
        return UNARY[op](*operands[0])
    if op in BINARY:
        return BINARY[op](*operands[0], *operands[1])
    if op is Op.REAL:
        return operands[0][0]
    if op is Op.IMAG:
        return operands[0][1]
    if op is Op.ABS:
        return hypot(*operands[0])
    if op is Op.COMPLEX:
        return operands[0], operands[1]
    if op in (Op.EQ, Op.NE):
        (ar, ai), (br, bi) = operands
        return (ar == br) & (ai == bi) if op is Op.EQ else (ar != br) | (ai != bi)
    if op is Op.SELECT:
        cond, (ar, ai), (br, bi) = operands
        return bind(Op.SELECT, cond, ar, br), bind(Op.SELECT, cond, ai, bi)
    if op is Op.CAST:
        return _cast(operands[0], np.dtype(attrs["dtype"]))
    raise AssertionError(f"{op.value} has no pair form")


def _cast(x, dtype):
    if isinstance(x, tuple):  # complex -> complex (a real target takes the real part)
        re, im = x
        if dtype in dtypes.COMPLEX:
            part = dtypes.REAL_OF[dtype]
            return bind(Op.CAST, re, dtype=part), bind(Op.CAST, im, dtype=part)
        return bind(Op.CAST, re, dtype=dtype)
    part = dtypes.REAL_OF[dtype]  # real -> complex: the value and +0
    re = bind(Op.CAST, x, dtype=part) if np.dtype(x.dtype) != part else x
    return re, _full(0.0, re)


# --- portable numerics ---------------------------------------------------------------------

EXACT = frozenset({Op.NEG, Op.ADD, Op.SUB, Op.CONJ, Op.REAL, Op.IMAG, Op.COMPLEX, Op.EQ,
                   Op.NE, Op.SELECT, Op.CAST})
"""Complex ops every implementation computes exactly (one IEEE operation
per part, or none): portable numerics records them as they are."""


def lowers(op: Op, *operands) -> bool:
    """Whether portable numerics records ``op`` on these prepared operands as
    its pair form: a complex op that is not exact everywhere (a product, a
    quotient, a modulus, a transcendental)."""
    return (op not in EXACT and portable.explicit() == "portable"
            and any(np.dtype(x.dtype) in dtypes.COMPLEX for x in operands))


def lower(op: Op, *operands):
    """The pair form of ``op`` under portable numerics, or a refusal naming
    the op and the fix for a complex op without one."""
    if op not in PAIR_OPS:
        raise DTypeError(
            f"{op.value} at {user_where()}: complex {op.value} has no portable form under "
            f"numerics='portable'; compute it from inp.real(z) and inp.imag(z) with real "
            f"functions, or use numerics='native' (NumPy's complex {op.value})")
    parts = [(bind(Op.REAL, x), bind(Op.IMAG, x)) if np.dtype(x.dtype) in dtypes.COMPLEX else x
             for x in operands]
    result = apply(op, parts, {})
    return bind(Op.COMPLEX, *result) if isinstance(result, tuple) else result
