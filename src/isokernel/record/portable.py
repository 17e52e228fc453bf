"""Portable numerics: every transcendental as one branchless decomposition.

Under ``numerics="portable"`` the frontend records each transcendental (exp,
log, sin, pow ...) as the function of this module for its dtype instead of
one primitive. A decomposition uses only IEEE basic operations (+ - × ÷
sqrt), rint/floor, comparisons and selects, and exact exponent and sign
manipulation (``ldexp``, ``logb``, ``copysign``). Every one of those is
correctly rounded or exact on every IEEE machine, and no ``a*b + c`` is ever
contracted, so every strategy on every device that runs the recorded graph
computes the same bits.

The algorithms are the classical ones (Cody-Waite argument reduction, Tang's
rational exp kernel, the atanh form of log, double-word corrections where a
final rounding must see an exact residual), written without branches: both
sides of every case are computed and a select picks per element. Float32
and float64 have their own coefficients (fitted by
``benchmarks/portable_coefficients.py``) and compute in their own format.
The measured accuracy and the domains are in docs/numerics.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

from ..ir import Op, dtypes
from .tracer import Tracer, as_tracer, bind

_F = TypeVar("_F", bound=Callable[..., Any])

MODES = ("native", "portable")
_MODE: ContextVar[str | None] = ContextVar("isokernel_numerics", default=None)
_ATTR = "__isokernel_numerics__"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"numerics {mode!r} is not one of {MODES}: 'native' uses each "
                         f"platform's math library, 'portable' the shared decompositions")
    return mode


def explicit() -> str | None:
    """The numerics an enclosing ``numerics(...)`` or ``jit`` chose, if any."""
    return _MODE.get()


def default_of(fun) -> str | None:
    """The per-model default a ``@numerics(...)`` decorator gave ``fun``."""
    return getattr(fun, _ATTR, None)


class numerics:  # noqa: N801 - used like a function: ``with numerics("portable")``
    """Choose the numerics of transcendentals.

    As a context manager it applies to everything inside. As a decorator it
    sets a model's *default*: the model computes in that mode unless an
    enclosing ``numerics(...)`` or ``jit(..., numerics=...)`` chose one, so
    ``jit`` can always override it and a decorated helper called inside
    another model follows that model.
    """

    def __init__(self, mode: str) -> None:
        self.mode = check_mode(mode)
        self._tokens: list = []

    def __enter__(self) -> numerics:
        self._tokens.append(_MODE.set(self.mode))
        return self

    def __exit__(self, *exc: object) -> None:
        _MODE.reset(self._tokens.pop())

    def __call__(self, fun: _F) -> _F:
        mode = self.mode

        @functools.wraps(fun)
        def model(*args, **kwargs):
            if _MODE.get() is not None:
                return fun(*args, **kwargs)
            token = _MODE.set(mode)
            try:
                return fun(*args, **kwargs)
            finally:
                _MODE.reset(token)
        setattr(model, _ATTR, mode)
        return model


# ---------------------------------------------------------------- constants

def _h(text: str) -> float:
    return float.fromhex(text)


def _parts(*texts: str) -> tuple[float, ...]:
    return tuple(_h(t) for t in texts)


def _veltkamp(value: float, dtype, factor: float) -> tuple[float, float]:
    """A constant split into two halves whose products with other halves
    are exact (computed once, in the target format)."""
    t = dtype.type(value) * dtype.type(factor)
    hi = t - (t - dtype.type(value))
    return float(hi), float(dtype.type(value) - hi)


class _F64:
    """float64: constants as the hex of the value (split into parts where
    products with them must be exact); polynomials from the fitter."""

    SPLIT = 134217729.0  # 2^27 + 1: Veltkamp splits a double into 26 + 27 bits
    INVLN2 = _h("0x1.71547652b82fep+0")
    LN2 = _parts("0x1.62e42ff000000p-1", "-0x1.718432a1b0e26p-35", "-0x1.9ff0342542fc3p-90")
    LN2_FULL = _parts("0x1.62e42fefa39efp-1", "0x1.abc9e3b39803fp-56")
    IVLN2 = _parts("0x1.7154764000000p+0", "0x1.2b82fe1777d10p-28")
    IVLN10 = _parts("0x1.bcb7b14000000p-2", "0x1.26e50e32a6ab7p-30")
    LOG10_2 = _parts("0x1.3441350a00000p-2", "-0x1.0c0219dc1da99p-39")
    TWO_OVER_PI = _h("0x1.45f306dc9c883p-1")
    PIO2_REDUCE = _parts("0x1.921fb54000000p+0", "0x1.10b4610000000p-30",
                         "0x1.a626330000000p-58", "0x1.45c06e0000000p-86",
                         "0x1.cd129024e088ap-115")
    PIO2 = _parts("0x1.921fb54442d18p+0", "0x1.1a62633145c07p-54")
    PI = _parts("0x1.921fb54442d18p+1", "0x1.1a62633145c07p-53")
    PIO4 = _parts("0x1.921fb54442d18p-1", "0x1.1a62633145c07p-55")
    ATAN_HALF = _parts("0x1.dac670561bb4fp-2", "0x1.a2b7f222f65e2p-56")
    ATAN_3HALF = _parts("0x1.f730bd281f69bp-1", "0x1.007887af0cbbdp-56")
    TWO_THIRDS = _parts("0x1.5555555555555p-1", "0x1.5555555555555p-55")
    SQRT2 = _h("0x1.6a09e667f3bcdp+0")
    # ranges: exp arguments clamped beyond over/underflow, trig reduction
    # exact for |x| < 2^26, big-argument thresholds of asinh/acosh
    EXP_RANGE = (-746.0, 710.0)
    EXP2_RANGE = (-1080.0, 1030.0)
    EXPM1_RANGE = (-45.0, 710.0)
    SINH_CLAMP = 711.0
    TANH_CLAMP = 22.0
    TRIG_MAX = 2.0 ** 26
    BIG = 2.0 ** 28
    TINY_RATIO = 2.0 ** -960
    POW_YMAX = 2.0 ** 990
    CBRT_HALLEY = 2
    # polynomials, lowest degree first (benchmarks/portable_coefficients.py)
    EXP = (0.16666666666666555, -0.002777777777669582, 6.613756249878549e-05,
           -1.6533836825513348e-06, 4.136033320675349e-08)
    LOG = (0.6666666666666734, 0.3999999999941695, 0.28571428741927496, 0.22222198616948294,
           0.18183562196547948, 0.15314101886292866, 0.14795463730943603)
    LOG_TAIL = (0.3999999999999998, 0.28571428571443835, 0.22222222217791746,
                0.1818181884370747, 0.15384558449178715, 0.13336263693048733,
                0.11675796921792547, 0.11981621599884622)
    SIN = (-0.16666666666666666, 0.008333333333333042, -0.00019841269840962473,
           2.7557319073985226e-06, -2.505207092365944e-08, 1.6054311695255427e-10,
           -7.389471318150229e-13)
    COS = (0.041666666666666595, -0.0013888888888873338, 2.480158728899748e-05,
           -2.755731421529921e-07, 2.087570511502742e-09, -1.1358732779049811e-11)
    ATAN = (-0.33333333333333315, 0.19999999999993207, -0.14285714284852963,
            0.11111111056497464, -0.09090907061360534, 0.07692259572885066,
            -0.06665902695811489, 0.05874017513361553, -0.05200085364551862,
            0.04432938677468334, -0.031914859058560376, 0.013691064080520818)
    ASIN = (0.1666666666666666, 0.07500000000002384, 0.04464285713982736,
            0.030381944637734484, 0.022372151813351834, 0.017352941045984813,
            0.013961932533246717, 0.011585402808524572, 0.009485902333844264,
            0.010000584526478043, 0.0007116395261714763, 0.024764371550213098,
            -0.026072455446926428, 0.03360097709659342)
    SINH = (0.16666666666666666, 0.008333333333333573, 0.0001984126984106116,
            2.755731931009095e-06, 2.505208940941051e-08, 1.6061340450737292e-10,
            7.503102258537363e-13, 6.4821580694830886e-15)
    TANH = (-0.33333333333333315, 0.1333333333332996, -0.053968253966149446,
            0.02186948847069903, -0.008863234338748919, 0.003592114222365274,
            -0.0014557272092507799, 0.0005894566162709452, -0.00023702398177308595,
            9.157830020665582e-05, -3.020586627324604e-05, 6.050150094405186e-06)
    CBRT = (0.6272946990432707, 0.4491937866316002, -0.0837751094108245, 0.00958382486812923,
            -0.0004321012016959056)


class _F32:
    """float32: the same algorithms with float32 constants and shorter
    polynomials; every constant is exactly representable in float32."""

    SPLIT = 4097.0  # 2^12 + 1: splits a float into 12 + 12 bits
    INVLN2 = _h("0x1.7154760000000p+0")
    LN2 = _parts("0x1.62e4000000000p-1", "0x1.7f7d1c0000000p-20", "0x1.ef357a0000000p-45")
    LN2_FULL = _parts("0x1.62e4300000000p-1", "-0x1.05c6100000000p-29")
    IVLN2 = _parts("0x1.7160000000000p+0", "-0x1.7135a80000000p-13")
    IVLN10 = _parts("0x1.bcc0000000000p-2", "-0x1.09d5b20000000p-15")
    LOG10_2 = _parts("0x1.3442000000000p-2", "-0x1.95ec100000000p-19")
    TWO_OVER_PI = _h("0x1.45f3060000000p-1")
    PIO2_REDUCE = _parts("0x1.9200000000000p+0", "0x1.fb40000000000p-12",
                         "0x1.4440000000000p-24", "0x1.68c0000000000p-39",
                         "0x1.1a62640000000p-54")
    PIO2 = _parts("0x1.921fb60000000p+0", "-0x1.777a5c0000000p-25")
    PI = _parts("0x1.921fb60000000p+1", "-0x1.777a5c0000000p-24")
    PIO4 = _parts("0x1.921fb60000000p-1", "-0x1.777a5c0000000p-26")
    ATAN_HALF = _parts("0x1.dac6700000000p-2", "0x1.586ed40000000p-28")
    ATAN_3HALF = _parts("0x1.f730be0000000p-1", "-0x1.afc12c0000000p-26")
    TWO_THIRDS = _parts("0x1.5555560000000p-1", "-0x1.5555560000000p-26")
    SQRT2 = _h("0x1.6a09e60000000p+0")
    EXP_RANGE = (-104.0, 89.0)
    EXP2_RANGE = (-152.0, 130.0)
    EXPM1_RANGE = (-18.0, 89.0)
    SINH_CLAMP = 90.0
    TANH_CLAMP = 10.0
    TRIG_MAX = 2.0 ** 13
    BIG = 2.0 ** 12
    TINY_RATIO = 2.0 ** -100
    POW_YMAX = 2.0 ** 100
    CBRT_HALLEY = 1
    EXP = (0.166666179895401, -0.00276601011864841)
    LOG = (0.6666677594184875, 0.3997758626937866, 0.29870694875717163)
    LOG_TAIL = (0.3999999761581421, 0.28571972250938416, 0.22179731726646423,
                0.19556288421154022)
    SIN = (-0.1666666716337204, 0.008333379402756691, -0.00019853064441122115,
           2.8325100629444933e-06)
    COS = (0.04166664555668831, -0.0013887309469282627, 2.4432327336398885e-05)
    ATAN = (-0.3333333134651184, 0.19999803602695465, -0.1427922248840332,
            0.11011345684528351, -0.08296656608581543, 0.04386579990386963)
    ASIN = (0.16666659712791443, 0.07500521838665009, 0.04451338201761246,
            0.03183884546160698, 0.014316899701952934, 0.03769191354513168)
    SINH = (0.1666666716337204, 0.00833331048488617, 0.00019842895562760532,
            2.7822131869470468e-06)
    TANH = (-0.3333333134651184, 0.13333220779895782, -0.05394817888736725,
            0.021706894040107727, -0.008190013468265533, 0.002152683911845088)
    CBRT = (0.6272947192192078, 0.4491937458515167, -0.08377508819103241,
            0.009583820588886738, -0.00043210090370848775)


def _finish_constants() -> None:
    for spec, dtype in ((_F64, dtypes.float64), (_F32, dtypes.float32)):
        spec.DTYPE = dtype
        spec.LN2_FULL_SPLIT = _veltkamp(spec.LN2_FULL[0], dtype, spec.SPLIT)
        spec.TWO_THIRDS_SPLIT = _veltkamp(spec.TWO_THIRDS[0], dtype, spec.SPLIT)


_finish_constants()
_SPECS = {dtypes.float64: _F64, dtypes.float32: _F32}


def _spec(x):
    return _SPECS[np.dtype(x.dtype)]


# ------------------------------------------------------------ value helpers
# Decompositions work on prepared operands (one float dtype, one shape):
# tracers while recording, NumPy values eagerly. Python operators on them
# record (or compute) exactly one basic op each; Python floats become
# constants of the operand's dtype, rounded once at record time.

def _is_number(v) -> bool:
    """A Python number (NumPy scalars, which eager 0-d arithmetic returns,
    are values)."""
    return isinstance(v, (int, float)) and not isinstance(v, np.generic)


def _full(value: float, like):
    """``value`` as a constant of ``like``'s dtype and shape."""
    scalar = np.asarray(value, dtype=like.dtype)
    shape = tuple(np.shape(like)) if not isinstance(like, Tracer) else like.shape
    if isinstance(like, Tracer):
        const = as_tracer(scalar, like.builder)
        return bind(Op.BROADCAST, const, shape=shape, dims=()) if shape else const
    return np.broadcast_to(scalar, shape) if shape else scalar


def _val(v, like):
    return _full(v, like) if _is_number(v) else v


def _sel(cond, a, b, like=None):
    """``a`` where ``cond`` else ``b``; either may be a Python number (both,
    when ``like`` gives the dtype and shape)."""
    like = like if like is not None else (b if _is_number(a) else a)
    return bind(Op.SELECT, cond, _val(a, like), _val(b, like))


def _rint(x):
    return bind(Op.ROUND, x)


def _floor(x):
    return bind(Op.FLOOR, x)


def _sqrt(x):
    return bind(Op.SQRT, x)


def _ldexp(x, n):
    return bind(Op.LDEXP, _val(x, n), _val(n, x))


def _logb(x):
    return bind(Op.LOGB, x)


def _copysign(magnitude, sign):
    return bind(Op.COPYSIGN, _val(magnitude, sign), sign)


def _clamp(x, lo: float, hi: float):
    """``x`` limited to [lo, hi]; NaN stays NaN."""
    return _sel(x > hi, hi, _sel(x < lo, lo, x))


def _keep_zero(x, r):
    """``x`` itself where it is ±0 (the sign of zero survives)."""
    return _sel(x == 0.0, x, r)


def _poly(z, coeffs):
    """c0 + z (c1 + z (c2 + ...)), Horner: two roundings per degree."""
    if len(coeffs) == 1:
        return _full(coeffs[0], z)
    acc = z * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]):
        acc = acc * z + c
    return acc


# ------------------------------------------------------- double-word tools

def _two_sum(a, b):
    """s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    """s + e == a + b exactly when |a| >= |b| (Dekker)."""
    s = a + b
    return s, b - (s - a)


def _split(a, k):
    """hi + lo == a with hi holding the upper half of the bits (Veltkamp)."""
    t = a * k.SPLIT
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a, b, k):
    """p + e == a * b exactly, without FMA (Dekker)."""
    p = a * b
    ah, al = _split(a, k)
    bh, bl = _split(b, k)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_prod_const(a, b: tuple[float, float], k):
    """``_two_prod`` with a constant whose split ``b`` is known."""
    bh, bl = b
    p = a * (bh + bl)
    ah, al = _split(a, k)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


# ------------------------------------------------------------ exp family

def _exp_reduce(x, k):
    """(n, hi, lo) with x = n ln2 + (hi - lo): n = rint(x / ln2), hi exact
    (Cody-Waite: n * LN2[0] is exact and cancels exactly against x)."""
    n = _rint(x * k.INVLN2)
    return n, x - n * k.LN2[0], n * k.LN2[1]


def _exp_kernel(hi, lo, k):
    """exp(hi - lo) - 1 as an unevaluated sum (hi, rest), by Tang's rational
    form exp(r) = 1 + r + r c / (2 - c), c = r - r² P(r²), |r| <= ln2/2."""
    r = hi - lo
    t = r * r
    c = r - t * _poly(t, k.EXP)
    return hi, (r * c) / (2.0 - c) - lo


def exp(x):
    k = _spec(x)
    n, hi, lo = _exp_reduce(_clamp(x, *k.EXP_RANGE), k)
    s_hi, s_lo = _exp_kernel(hi, lo, k)
    return _ldexp(1.0 + (s_hi + s_lo), n)


def exp2(x):
    k = _spec(x)
    xc = _clamp(x, *k.EXP2_RANGE)
    n = _rint(xc)
    f = xc - n
    p, pe = _two_prod_const(f, k.LN2_FULL_SPLIT, k)
    s_hi, s_lo = _exp_kernel(p, -(pe + f * k.LN2_FULL[1]), k)
    return _ldexp(1.0 + (s_hi + s_lo), n)


def expm1(x):
    """2^n (exp(r) - 2^-n) with the leading sum (1 - 2^-n) + hi exact."""
    k = _spec(x)
    n, hi, lo = _exp_reduce(_clamp(x, *k.EXPM1_RANGE), k)
    s_hi, s_lo = _exp_kernel(hi, lo, k)
    a = 1.0 - _ldexp(1.0, -n)
    t, e = _two_sum(a, s_hi)
    return _keep_zero(x, _ldexp(t + (e + s_lo), n))


def _exp_dd(x, k):
    """exp(x) = 2^n (y + yl) for clamped x: the kernel's 1 + s as a
    normalized double word (|yl| <= ulp(y) / 2)."""
    n, hi, lo = _exp_reduce(x, k)
    s_hi, s_lo = _exp_kernel(hi, lo, k)
    y, e = _two_sum(_full(1.0, x), s_hi)
    return (n, *_fast_two_sum(y, e + s_lo))


# ------------------------------------------------------------ log family

def _log_reduce(x, k):
    """(e, f) with x = 2^e (1 + f), 1 + f in [√½, √2), f exact; x finite > 0."""
    e = _logb(x)
    m = _ldexp(x, -e)
    big = m > k.SQRT2
    return _sel(big, e + 1.0, e), _sel(big, m * 0.5, m) - 1.0


def _log_terms(f, k):
    """(hfsq, s (hfsq + R)) with log(1 + f) = f - (hfsq - s (hfsq + R)),
    s = f / (2 + f), 2 atanh(s) = 2s + s R(s²)."""
    s = f / (2.0 + f)
    z = s * s
    hfsq = 0.5 * f * f
    return hfsq, s * (hfsq + z * _poly(z, k.LOG))


def _log_from(e, f, corr, k):
    """e ln2 + log(1 + f) + corr, f in [√½ - 1, √2 - 1] exact, corr small."""
    hfsq, t = _log_terms(f, k)
    lo = e * k.LN2[1] if corr is None else e * k.LN2[1] + corr
    return e * k.LN2[0] + (f - (hfsq - (t + lo)))


def _log_core(x, k):
    return _log_from(*_log_reduce(x, k), None, k)


def _log1p_parts(vh, vl, k):
    """(e, f, corr) for log(1 + vh + vl), vh > -1: while 1 + vh lies in
    [√½, √2) f is vh itself (no rounding of 1 + vh, so no cancellation
    between f and the correction near 0); elsewhere 1 + vh is reduced and
    its exact rounding error joins the correction."""
    one = _full(1.0, vh)
    u, err = _two_sum(one, vh)
    e, f = _log_reduce(u, k)
    near = (vh > k.SQRT2 * 0.5 - 1.0) & (vh < k.SQRT2 - 1.0)
    far_corr = err / u if vl is None else (err + vl) / u
    corr = _sel(near, 0.0, far_corr) if vl is None else _sel(near, vl / (one + vh), far_corr)
    return _sel(near, 0.0, e), _sel(near, vh, f), corr


def _log_domain(x):
    """x where log is finite-valued, 1 elsewhere (specials are selected after)."""
    return _sel((x > 0.0) & (x < np.inf), x, 1.0)


def _log_specials(x, r):
    r = _sel(x == 0.0, -np.inf, _sel(x == np.inf, np.inf, r))
    return _sel(x >= 0.0, r, np.nan)


def log(x):
    return _log_specials(x, _log_core(_log_domain(x), _spec(x)))


def _log_split(x, k):
    """(e, hi, lo) with log(1 + f) = hi + lo, hi holding half the bits so
    products with the upper half of a constant are exact."""
    e, f = _log_reduce(x, k)
    hfsq, t = _log_terms(f, k)
    hi, _ = _split(f - hfsq, k)
    return e, hi, ((f - hi) - hfsq) + t


def log2(x):
    k = _spec(x)
    e, hi, lo = _log_split(_log_domain(x), k)
    val_hi = hi * k.IVLN2[0]
    val_lo = (lo + hi) * k.IVLN2[1] + lo * k.IVLN2[0]
    w = e + val_hi
    val_lo = val_lo + ((e - w) + val_hi)
    return _log_specials(x, val_lo + w)


def log10(x):
    k = _spec(x)
    e, hi, lo = _log_split(_log_domain(x), k)
    val_hi = hi * k.IVLN10[0]
    y2 = e * k.LOG10_2[0]
    val_lo = e * k.LOG10_2[1] + (lo + hi) * k.IVLN10[1] + lo * k.IVLN10[0]
    w = y2 + val_hi
    val_lo = val_lo + ((y2 - w) + val_hi)
    return _log_specials(x, val_lo + w)


def log1p(x):
    k = _spec(x)
    xs = _sel((x > -1.0) & (x < np.inf), x, 0.0)
    r = _log_from(*_log1p_parts(xs, None, k), k)
    r = _sel(x == -1.0, -np.inf, _sel(x == np.inf, np.inf, r))
    return _keep_zero(x, _sel(x >= -1.0, r, np.nan))


# ------------------------------------------------------------ trigonometric

def _reduce_pio2(x, k):
    """(n, hi, lo) with x = n π/2 + (hi + lo), |hi| <~ π/4, for |x| <
    TRIG_MAX: a Cody-Waite reduction by π/2 in five parts, each product
    n·part exact, every subtraction captured exactly by a two-sum."""
    n = _rint(x * k.TWO_OVER_PI)
    parts = k.PIO2_REDUCE
    hi = x - n * parts[0]
    hi, lo = _two_sum(hi, n * -parts[1])
    for part in parts[2:-1]:
        hi, e = _two_sum(hi, n * -part)
        lo = lo + e
    return (n, *_fast_two_sum(hi, lo - n * parts[-1]))


def _sin_kernel(h, lo, k):
    """sin(h + lo) for |h| <~ π/4 as (h, rest): h + S1 h³ + h⁵ S(h²) + lo cos h."""
    z = h * h
    v = z * h
    r = _poly(z, k.SIN[1:])
    return h, -(((z * (0.5 * lo - v * r)) - lo) - v * k.SIN[0])


def _cos_kernel(h, lo, k):
    """cos(h + lo) as (w, rest): w = 1 - h²/2 rounded, its rounding error
    recovered exactly, plus h⁴ C(h²) - h lo."""
    z = h * h
    r = z * _poly(z, k.COS)
    hz = 0.5 * z
    w = 1.0 - hz
    return w, ((1.0 - w) - hz) + (z * r - h * lo)


def _trig(x):
    """(constants, quadrant 0-3, sin kernel, cos kernel) of the reduced x."""
    k = _spec(x)
    xs = _sel(abs(x) < k.TRIG_MAX, x, 0.0)
    n, h, lo = _reduce_pio2(xs, k)
    q = n - 4.0 * _floor(n * 0.25)
    return k, q, _sin_kernel(h, lo, k), _cos_kernel(h, lo, k)


def _in_trig_domain(x, r):
    """NaN outside |x| < TRIG_MAX: beyond it the reduction by π/2 is no
    longer exact, and an answer with no accuracy bound is not given."""
    return _sel(abs(x) < _spec(x).TRIG_MAX, r, np.nan)


def sin(x):
    _, q, (sh, sl), (ch, cl) = _trig(x)
    s, c = sh + sl, ch + cl
    base = _sel((q == 1.0) | (q == 3.0), c, s)
    r = _sel(q >= 2.0, -base, base)
    return _keep_zero(x, _in_trig_domain(x, r))


def cos(x):
    _, q, (sh, sl), (ch, cl) = _trig(x)
    s, c = sh + sl, ch + cl
    base = _sel((q == 1.0) | (q == 3.0), s, c)
    r = _sel((q == 1.0) | (q == 2.0), -base, base)
    return _in_trig_domain(x, r)


def _div_dd(nh, nl, dh, dl, k):
    """(nh + nl) / (dh + dl) with the quotient's residual computed exactly."""
    t = nh / dh
    p, pe = _two_prod(t, dh, k)
    return t + (((nh - p) - pe) + (nl - t * dl)) / dh


def tan(x):
    """sin/cos in even quadrants, -cos/sin in odd ones, as one corrected
    double-word division."""
    k, q, (sh, sl), (ch, cl) = _trig(x)
    sh, sl = _fast_two_sum(sh, sl)
    ch, cl = _fast_two_sum(ch, cl)
    odd = (q == 1.0) | (q == 3.0)
    r = _div_dd(_sel(odd, -ch, sh), _sel(odd, -cl, sl), _sel(odd, sh, ch), _sel(odd, sl, cl), k)
    return _keep_zero(x, _in_trig_domain(x, r))


# ------------------------------------------------------ inverse trigonometric

def _atan_core(a, k, extra=None):
    """atan(a) for a >= 0 (inf included) as (hi, rest): a constant atan(c)
    from {0, atan ½, π/4, atan 3/2, π/2} plus atan((a - c) / (1 + c a));
    ``extra`` (small) joins the rest before its last rounding."""
    b1, b2, b3, big = a >= 0.4375, a >= 0.6875, a >= 1.1875, a > 2.4375
    c = _sel(b3, 1.5, _sel(b2, 1.0, _sel(b1, 0.5, 0.0, a)))
    hi = _sel(big, k.PIO2[0], _sel(b3, k.ATAN_3HALF[0], _sel(b2, k.PIO4[0], _sel(
        b1, k.ATAN_HALF[0], 0.0, a))))
    lo = _sel(big, k.PIO2[1], _sel(b3, k.ATAN_3HALF[1], _sel(b2, k.PIO4[1], _sel(
        b1, k.ATAN_HALF[1], 0.0, a))))
    near = _sel(big, 1.0, a)
    t = _sel(big, -1.0, near - c) / _sel(big, a, 1.0 + c * near)
    z = t * t
    small = t * (z * _poly(z, k.ATAN)) + (lo if extra is None else lo + extra)
    return hi, t + small


def arctan(x):
    hi, rest = _atan_core(abs(x), _spec(x))
    return _copysign(hi + rest, x)


def arctan2(y, x):
    """θ = atan(min/max) in [0, π/4] (the quotient's rounding error added
    back to first order), then K ± θ for K in {0, π/2, π} by the octant,
    the sum taken with an exact two-sum, and y's sign copied."""
    k = _spec(x)
    ax, ay = abs(x), abs(y)
    swap = ay > ax
    num, den = _sel(swap, ax, ay), _sel(swap, ay, ax)
    both_inf = (ax == np.inf) & (ay == np.inf)
    flat = both_inf | (den == 0.0)
    num = _sel(both_inf, 1.0, _sel(den == 0.0, 0.0, num))
    den = _sel(flat, 1.0, den)
    ratio = num / den
    usable = (ratio > k.TINY_RATIO) & (den < np.inf)
    residual = _sel(usable, _quotient_residual(num, _sel(usable, den, 1.0), ratio, k), 0.0)
    th, tl = _atan_core(ratio, k, residual)
    xneg = _copysign(1.0, x) < 0.0
    flip = swap != xneg
    kh = _sel(swap, k.PIO2[0], _sel(xneg, k.PI[0], 0.0, x))
    kl = _sel(swap, k.PIO2[1], _sel(xneg, k.PI[1], 0.0, x))
    s, e = _two_sum(kh, _sel(flip, -th, th))
    r = _copysign(s + (e + (kl + _sel(flip, -tl, tl))), y)
    return _sel((x != x) | (y != y), np.nan, r)


def _quotient_residual(num, den, ratio, k):
    """(num / den - ratio) / (1 + ratio²): the first-order effect on atan of
    the quotient's rounding, from operands scaled near 1 (the split in the
    exact product would overflow on huge ones)."""
    scale = -_logb(den)
    num, den = _ldexp(num, scale), _ldexp(den, scale)
    p, pe = _two_prod(ratio, den, k)
    return (((num - p) - pe) / den) / (1.0 + ratio * ratio)


def _asin_parts(x, k):
    """|x| ≤ ½: s = |x|, z = x²; else z = (1 - |x|)/2, s = √z with s = df + c
    to twice the precision. asin(s) = s + w in both cases."""
    a = abs(x)
    a = _sel(a <= 1.0, a, 0.0)
    small = a <= 0.5
    z = _sel(small, a * a, (1.0 - a) * 0.5)
    s = _sel(small, a, _sqrt(z))
    w = s * (z * _poly(z, k.ASIN))
    df, _ = _split(s, k)
    c = (z - df * df) / _sel(s > 0.0, s + df, 1.0)
    return small, s, w, df, c


def _domain_pm1(x, r):
    return _sel(abs(x) <= 1.0, r, np.nan)


def arcsin(x):
    k = _spec(x)
    small, s, w, df, c = _asin_parts(x, k)
    p, pe = _two_sum(_full(k.PIO2[0], df), df * -2.0)
    big = p + (pe + (k.PIO2[1] - 2.0 * (c + w)))
    return _domain_pm1(x, _copysign(_sel(small, s + w, big), x))


def arccos(x):
    k = _spec(x)
    small, s, w, df, c = _asin_parts(x, k)
    near0 = k.PIO2[0] - (x - (k.PIO2[1] - _copysign(w, x)))
    pos = 2.0 * (df + (w + c))
    p, pe = _two_sum(_full(k.PI[0], df), df * -2.0)
    neg = p + (pe + (k.PI[1] - 2.0 * (c + w)))
    return _domain_pm1(x, _sel(small, near0, _sel(x > 0.0, pos, neg)))


# --------------------------------------------------------------- hyperbolic

def _half_exp_pair(a, k):
    """(e^a / 2 as hi + lo, e^-a / 2) for 0 <= a <= clamp, never overflowing
    before the result does."""
    n, y, yl = _exp_dd(a, k)
    r0 = 1.0 / y
    inv = _ldexp(r0 - r0 * (r0 * yl), -n - 1.0)
    return _ldexp(y, n - 1.0), _ldexp(yl, n - 1.0), inv


def sinh(x):
    """x + x³ P(x²) below 1, (e^a - e^-a) / 2 from a double-word e^a above."""
    k = _spec(x)
    a = abs(x)
    a = _sel(a > k.SINH_CLAMP, k.SINH_CLAMP, a)
    hi, lo, inv = _half_exp_pair(a, k)
    z = a * a
    small = a + a * (z * _poly(z, k.SINH))
    return _copysign(_sel(a < 1.0, small, hi + (lo - inv)), x)


def cosh(x):
    k = _spec(x)
    a = abs(x)
    hi, lo, inv = _half_exp_pair(_sel(a > k.SINH_CLAMP, k.SINH_CLAMP, a), k)
    return hi + (lo + inv)


def tanh(x):
    """x + x³ T(x²) below 0.625, 1 - 2 / (e^2a + 1) above with the
    denominator as a double word."""
    k = _spec(x)
    a = abs(x)
    a = _sel(a > k.TANH_CLAMP, k.TANH_CLAMP, a)
    n, y, yl = _exp_dd(2.0 * a, k)
    dh, de = _two_sum(_ldexp(y, n), _full(1.0, a))
    dl = de + _ldexp(yl, n)
    t = 2.0 / dh
    t = t - t * (dl / dh)
    z = a * a
    small = a + a * (z * _poly(z, k.TANH))
    return _copysign(_sel(a < 0.625, small, 1.0 - t), x)


def _sqrt_dd(d, dl, k):
    """√(d + dl) as a double word (one corrected step from the rounded root)."""
    sh = _sqrt(d)
    q, qe = _two_prod(sh, sh, k)
    return sh, (((d - q) - qe) + dl) / _sel(sh > 0.0, 2.0 * sh, 1.0)


def _select_parts(big, big_parts, parts):
    return tuple(_sel(big, b, p) for b, p in zip(big_parts, parts))


def arcsinh(x):
    """log1p(v) with v = a + (√(a² + 1) - 1) as a double word, so the log
    keeps its accuracy near 0; log(a) + ln2 beyond 2^28 (2^12 in float32)."""
    k = _spec(x)
    a = abs(x)
    a = _sel(a == np.inf, 1.0, a)
    big = a > k.BIG
    an = _sel(big, 1.0, a)
    p, pe = _two_prod(an, an, k)
    d, de = _two_sum(p, _full(1.0, p))
    sh, sl = _sqrt_dd(d, de + pe, k)
    m, me = _two_sum(sh, _full(-1.0, sh))
    vh, ve = _two_sum(an, m)
    e, f = _log_reduce(a, k)
    parts = _select_parts(big, (e + 1.0, f, _full(0.0, f)),
                          _log1p_parts(vh, ve + (me + sl), k))
    r = _log_from(*parts, k)
    return _copysign(_sel(abs(x) == np.inf, np.inf, r), x)


def arccosh(x):
    """log1p(v) with v = (x - 1) + √(x² - 1) as a double word (accurate near
    x = 1); log(x) + ln2 beyond 2^28 (2^12 in float32)."""
    k = _spec(x)
    xs = _sel((x >= 1.0) & (x < np.inf), x, 1.0)
    big = xs > k.BIG
    xn = _sel(big, 1.0, xs)
    p, pe = _two_prod(xn, xn, k)
    d, de = _two_sum(p, _full(-1.0, p))
    sh, sl = _sqrt_dd(d, de + pe, k)
    t, te = _two_sum(xn, _full(-1.0, xn))
    vh, ve = _two_sum(t, sh)
    e, f = _log_reduce(xs, k)
    parts = _select_parts(big, (e + 1.0, f, _full(0.0, f)),
                          _log1p_parts(vh, ve + (te + sl), k))
    r = _log_from(*parts, k)
    return _sel(x >= 1.0, _sel(x == np.inf, np.inf, r), np.nan)


def arctanh(x):
    """½ log1p(2a / (1 - a)) with the quotient as a double word."""
    k = _spec(x)
    a = abs(x)
    a = _sel(a < 1.0, a, 0.0)
    dh, dl = _two_sum(_full(1.0, a), -a)
    two_a = 2.0 * a
    q = two_a / dh
    p, pe = _two_prod(q, dh, k)
    res = (((two_a - p) - pe) - q * dl) / dh
    r = 0.5 * _log_from(*_log1p_parts(q, res, k), k)
    r = _sel(abs(x) == 1.0, np.inf, _sel(abs(x) < 1.0, r, np.nan))
    return _copysign(r, x)


# ------------------------------------------------------------ cbrt and pow

def cbrt(x):
    """m^(1/3) for m = |x| 2^-3q in [1, 8): a polynomial start, Halley steps,
    and one Newton step on the exact residual m - y³; then 2^q."""
    k = _spec(x)
    a = abs(x)
    ok = (a > 0.0) & (a < np.inf)
    a1 = _sel(ok, a, 1.0)
    q = _floor(_logb(a1) / 3.0)
    m = _ldexp(a1, q * -3.0)
    y = _poly(m, k.CBRT)
    for _ in range(k.CBRT_HALLEY):
        y3 = y * y * y
        y = y * ((y3 + 2.0 * m) / (2.0 * y3 + m))
    sq, sqe = _two_prod(y, y, k)
    cu, cue = _two_prod(sq, y, k)
    y = y + (((m - cu) - cue) - sqe * y) / (3.0 * sq)
    return _copysign(_sel(ok, _ldexp(y, q), a), x)


def _log_dd(x, k):
    """log(x) as a double word good to about 2^-66 relative (float32: 2^-36),
    for x finite > 0: 2s + (2/3)s³ in double words plus s⁵ Q(s²)."""
    e, f = _log_reduce(x, k)
    dh, dl = _two_sum(_full(2.0, f), f)
    sh = f / dh
    p, pe = _two_prod(sh, dh, k)
    sl = (((f - p) - pe) - sh * dl) / dh
    zh, zl = _two_prod(sh, sh, k)
    ch, cl = _two_prod(zh, sh, k)
    cl = cl + (zl * sh + 3.0 * (zh * sl))
    th, tl = _two_prod_const(ch, k.TWO_THIRDS_SPLIT, k)
    tl = tl + (ch * k.TWO_THIRDS[1] + cl * k.TWO_THIRDS[0])
    tail = sh * (zh * zh) * _poly(zh, k.LOG_TAIL)
    a, ae = _two_sum(e * k.LN2[0], 2.0 * sh)
    b, be = _two_sum(a, th)
    lo = (ae + be) + (((2.0 * sl + tl) + tail) + (e * k.LN2[1] + e * k.LN2[2]))
    return _fast_two_sum(b, lo)


def power(x, y):
    """|x|^y = exp(y log|x|) with log|x| and the product as double words,
    then C99's special cases and the sign for negative x."""
    k = _spec(x)
    ax = abs(x)
    lh, ll = _log_dd(_sel((ax > 0.0) & (ax < np.inf), ax, 1.0), k)
    ys = _sel(abs(y) < k.POW_YMAX, y, _copysign(k.POW_YMAX, y))
    ph, pe = _two_prod(ys, lh, k)
    pl = pe + ys * ll
    lo_bound, hi_bound = k.EXP_RANGE
    inside = (ph > lo_bound) & (ph < hi_bound)
    n, hi, lo = _exp_reduce(_clamp(ph, lo_bound, hi_bound), k)
    s_hi, s_lo = _exp_kernel(hi, lo - _sel(inside, pl, 0.0), k)
    return _pow_specials(x, y, ax, _ldexp(1.0 + (s_hi + s_lo), n))


def _pow_specials(x, y, ax, mag):
    """C99 Annex F pow: zeros, infinities, integer and odd exponents, NaN."""
    y_int = _rint(y) == y
    y_odd = y_int & (_rint(y * 0.5) != y * 0.5)
    mag = _sel(ax == 0.0, _sel(y < 0.0, np.inf, 0.0, x), mag)
    mag = _sel(ax == np.inf, _sel(y < 0.0, 0.0, np.inf, x), mag)
    grows = (ax > 1.0) == (y > 0.0)
    mag = _sel(abs(y) == np.inf, _sel(ax == 1.0, 1.0, _sel(grows, np.inf, 0.0, x)), mag)
    r = _sel((_copysign(1.0, x) < 0.0) & y_odd, -mag, mag)
    no_real = (x < 0.0) & (ax < np.inf) & ~y_int & (abs(y) < np.inf)
    r = _sel(no_real | (x != x) | (y != y), np.nan, r)
    return _sel((y == 0.0) | (x == 1.0), 1.0, r)


# ---------------------------------------------------------------- the table

LOWERINGS = {
    Op.EXP: exp, Op.EXP2: exp2, Op.EXPM1: expm1,
    Op.LOG: log, Op.LOG2: log2, Op.LOG10: log10, Op.LOG1P: log1p,
    Op.SIN: sin, Op.COS: cos, Op.TAN: tan,
    Op.ASIN: arcsin, Op.ACOS: arccos, Op.ATAN: arctan, Op.ATAN2: arctan2,
    Op.SINH: sinh, Op.COSH: cosh, Op.TANH: tanh,
    Op.ASINH: arcsinh, Op.ACOSH: arccosh, Op.ATANH: arctanh,
    Op.CBRT: cbrt, Op.POW: power,
}

# The ops a decomposition may record: IEEE basic operations, exact rounding
# to integers, comparisons, selects, and exact exponent/sign manipulation.
BASIC_OPS = frozenset({
    Op.CONST, Op.BROADCAST, Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.SQRT, Op.NEG, Op.ABS,
    Op.ROUND, Op.FLOOR, Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.NOT,
    Op.SELECT, Op.LDEXP, Op.LOGB, Op.COPYSIGN,
})


def lowers(op: Op, *operands) -> bool:
    """Whether ``op`` on these prepared operands records a decomposition."""
    return (op in LOWERINGS and _MODE.get() == "portable"
            and np.dtype(operands[0].dtype) in dtypes.FLOATS)


def lower(op: Op, *operands):
    """The portable decomposition of ``op`` on prepared operands (one float
    dtype, one shape): recorded inside a trace, computed eagerly outside."""
    return LOWERINGS[op](*operands)
