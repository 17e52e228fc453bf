"""erfinv as XLA computes it (the CHLO decomposition of ``chlo.erf_inv``,
Giles's approximations: "Approximating the erfinv function", GPU Computing
Gems, 2011), op by op, so ``normal`` follows ``jax.random.normal``'s
arithmetic. In float32 it is XLA's CPU code bit for bit, read from the
optimized LLVM IR and machine code of jaxlib 0.10.2: XLA's own log1p (a
rational approximation near 0, else Cephes's logf on the exponent and
mantissa of 1 + x) and every Horner step a fused multiply-add, as LLVM
contracts them. In float64 XLA calls libm's log and fuses in float64;
this is Giles's polynomial in the platform's arithmetic, a few eps away.
Written with isokernel.numpy: it records, differentiates and runs on
every strategy like any model."""

from __future__ import annotations

import numpy as np

from .. import numpy as inp
from ..typing import Array, ArrayLike
from ._special import fma32, fma32_twice

_F32_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
              0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_F32_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
              0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

_F64_BELOW_6_25 = (
    -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
    0.24015818242558961693, 1.6536545626831027356)
_F64_BELOW_16 = (
    2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
    1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
    2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
    6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
    0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
    -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
    3.0838856104922207635)
_F64_ABOVE_16 = (
    -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
    -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
    2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
    -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
    7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
    1.0103004648645343977, 4.8499064014085844221)


def _c(value, dtype):
    return np.asarray(value, dtype=dtype)


def _edges(x, result):
    """erfinv(±1) = ±inf, where the polynomial is indeterminate."""
    return inp.where(inp.abs(x) == 1, x * _c(np.inf, x.dtype), result)


# XLA's CPU log1p for float32: a rational approximation where |x| < sqrt(2) - 1,
# else log(1 + x) by Cephes's logf polynomial on the exponent and mantissa of 1 + x.
_LOG1P32_RATIO = 0.4142135679721832
_LOG1P32_P = (4.527000055531971e-05, 0.4985410273075104, 6.578732490539551, 29.91191864013672,
              60.949668884277344, 57.11296463012695, 20.039552688598633)
_LOG1P32_Q = (1.0, 15.062909126281738, 83.04756927490234, 221.7624053955078, 309.0987243652344,
              216.42788696289062, 60.11865997314453)
_LOG32_P = ((0.07037683576345444, -0.11514610052108765, 0.11676998436450958),
            (-0.12420140951871872, 0.14249323308467865, -0.16668057441711426),
            (0.2000071406364441, -0.24999994039535522, 0.3333333134651184))
_LOG32_LN2 = (0.693359375, -0.00021219444170128554)  # ln 2 in two parts
_SQRT_HALF32 = 0.7071067690849304


def _frexp32(t):
    """``(m, e)`` with ``t = m * 2**e`` and m in [0.5, 1) for float32 t in
    [2**-31, 1]: a branchless binary search on the exponent, exact."""
    f = np.float32
    one = t >= f(1.0)
    m = inp.where(one, t * f(0.5), t)
    e = inp.where(one, f(1.0), f(0.0))
    for bits in (16, 8, 4, 2, 1):
        low = m < f(2.0**-bits)
        m = inp.where(low, m * f(2.0**bits), m)
        e = inp.where(low, e - f(bits), e)
    return m, e


def _log32(t, fma):
    """XLA's CPU log of float32 t in (0, 1] (its fused multiply-adds exact)."""
    f = np.float32
    m, e = _frexp32(inp.maximum(t, f(np.finfo(np.float32).tiny)))
    below = m < f(_SQRT_HALF32)
    r = (m - f(1.0)) + inp.where(below, m, f(0.0))
    e = e - inp.where(below, f(1.0), f(0.0))
    r2 = r * r
    r3 = r2 * r
    p1, p2, p3 = (fma(fma(r, _c(a, f), _c(b, f)), r, _c(c, f)) for a, b, c in _LOG32_P)
    q = fma(fma(p1, r3, p2), r3, p3)
    y = fma(q, r3, e * f(_LOG32_LN2[1]))
    # r - r2 / 2 and e * ln2's high part are exact products: contracted or not, one rounding
    result = e * f(_LOG32_LN2[0]) + ((r - r2 * f(0.5)) + y)
    return inp.where(t == f(0.0), f(-np.inf), inp.where(t < f(0.0), f(np.nan), result))


def _log1p32(x, fma):
    """XLA's CPU log1p of float32 x <= 0 (``1 - x**2`` in erfinv)."""
    f = np.float32
    x2 = x * x
    p = _c(_LOG1P32_P[0], f)
    for c in _LOG1P32_P[1:]:
        p = fma(p, x, _c(c, f))
    q = x + _c(_LOG1P32_Q[1], f)  # 1 * x + c: one rounding
    for c in _LOG1P32_Q[2:]:
        q = fma(q, x, _c(c, f))
    small = x + ((x * x2) * (p / q) - x2 * f(0.5))
    return inp.where(inp.abs(x) < f(_LOG1P32_RATIO), small, _log32(x + f(1.0), fma))


def _erfinv32(x, fma=fma32):
    """XLA's CPU code for float32 erf_inv: every Horner step a fused
    multiply-add (LLVM contracts them), and its own log1p."""
    f = np.float32
    log = _log1p32(x * -x, fma)
    small = log > f(-5.0)
    w = inp.where(small, f(-2.5) - log, inp.sqrt(-log) - f(3.0))
    p = fma(inp.where(small, _c(_F32_SMALL[0], f), _c(_F32_LARGE[0], f)), w,
              inp.where(small, _c(_F32_SMALL[1], f), _c(_F32_LARGE[1], f)))
    for a, b in zip(_F32_SMALL[2:], _F32_LARGE[2:]):
        p = fma(w, p, inp.where(small, _c(a, f), _c(b, f)))
    return _edges(x, p * x)


def _coefficient64(i, below_6_25, below_16):
    c = _c(_F64_BELOW_6_25[i], np.float64)
    if i < 19:
        c = inp.where(below_6_25, c, _c(_F64_BELOW_16[i], np.float64))
    if i < 17:
        c = inp.where(below_16, c, _c(_F64_ABOVE_16[i], np.float64))
    return c


def _erfinv64(x):
    w = -inp.log1p(x * -x)
    below_6_25, below_16 = w < 6.25, w < 16.0
    centre = inp.where(below_16, _c(3.25, np.float64), _c(5.0, np.float64))
    w = inp.where(below_6_25, w - 3.125, inp.sqrt(w) - centre)
    p = _coefficient64(0, below_6_25, below_16)
    for i in range(1, 23):
        step = _coefficient64(i, below_6_25, below_16) + p * w
        if i < 17:
            p = step
        else:
            p = inp.where(below_16 if i < 19 else below_6_25, step, p)
    return _edges(x, p * x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse error function of a float32 or float64 array, computed
    as XLA's CPU code computes it: in float32 bit for bit (its log1p and
    fused multiply-adds included); in float64 Giles's polynomial in the
    platform's arithmetic (a few eps from XLA's)."""
    return _erfinv32(x) if x.dtype == np.float32 else _erfinv64(x)


def erfinv_of_uniform(x: ArrayLike) -> Array:
    """``erfinv`` of ``normal``'s uniform draws in (-1, 1): the same bits.
    In float32 each fused multiply-add is the cheaper float64 sum rounded to
    float32: for every one of the 2**23 values these draws take, no sum falls
    on a float32 midpoint where one rounding and two differ
    (``tests/test_random.py`` runs both over all of them)."""
    return _erfinv32(x, fma32_twice) if x.dtype == np.float32 else _erfinv64(x)
