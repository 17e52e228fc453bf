"""erf and lgamma as JAX computes them on the CPU, so ``truncated_normal``
and ``poisson`` follow ``jax.random``'s arithmetic. XLA keeps ``erf`` as one
op: in float32 its CPU code is Eigen's rational approximation evaluated with
fused multiply-adds (emulated here in float64 and rounded once, bit
for bit on 6 * 10^5 arguments), in float64 a call of libm's ``erf`` (``math.erf`` for known
arguments; Cephes's approximation, StableHLO's decomposition of
``chlo.erf``, within 2 ulp of it for traced ones). ``lgamma`` is
StableHLO's decomposition of ``chlo.lgamma``: Lanczos's approximation with
g = 7 and 9 terms. Written with isokernel.numpy: they record and run on
every strategy like any model."""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp
from ..record import Tracer

_ERF64_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
            7.00332514112805075473E3, 5.55923013010394962768E4)
_ERF64_U = (1.00000000000000000000E0, 3.35617141647503099647E1, 5.21357949780152679795E2,
            4.59432382970980127987E3, 2.26290000613890934246E4, 4.92673942608635921086E4)
_ERFC64_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
             4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
             9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_ERFC64_Q = (1.00000000000000000000E0, 1.32281951154744992508E1, 8.67072140885989742329E1,
             3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
             2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2)
_ERFC64_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
             6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_ERFC64_S = (1.00000000000000000000E0, 2.26052863220117276590E0, 9.39603524938001434673E0,
             1.20489539808096656605E1, 1.70814450747565897222E1, 9.60896809063285878198E0,
             3.36907645100081516050E0)
_MAXLOG64 = 7.09782712893383996843E2

# XLA's CPU erf for float32 (xla/codegen/intrinsic/erf.cc, Eigen's rational
# interpolant): odd numerator, even denominator, each a chain of fused multiply-adds.
_ERF32_P = (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861,
            0.18520832239976145, 1.128379143519084)
_ERF32_Q = (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885,
            0.014070470171167667, 0.11098505178285362, 0.49746925110067538, 1.0)
_ERF32_ONE = 3.832506856900711  # erf rounds to 1 in float32 from here on

_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _c(value, dtype):
    return np.asarray(value, dtype=dtype)


def _poly(x, coefficients):
    """``((c0 x + c1) x + c2) ...``: the decomposition's Horner order."""
    p = _c(coefficients[0], x.dtype)
    for c in coefficients[1:]:
        p = p * x + _c(c, x.dtype)
    return p


def _erfc64_above_one(x):
    """erfc(x) for |x| >= 1 (Cephes)."""
    f = np.float64
    z = -(x * x)
    exp_z = inp.exp(z)
    ax = inp.abs(x)
    below_8 = exp_z * _poly(ax, _ERFC64_P) / _poly(ax, _ERFC64_Q)
    beyond_8 = exp_z * _poly(ax, _ERFC64_R) / _poly(ax, _ERFC64_S)
    erfc = inp.where(ax < f(8.0), below_8, beyond_8)
    erfc = inp.where(z < f(-_MAXLOG64), f(0.0), erfc)
    return inp.where(x < f(0.0), f(2.0) - erfc, erfc)


def _erf64(x):
    f = np.float64
    x = inp.clip(x, f(-40.0), f(40.0))  # erfc is 0 beyond 27; no inf * 0 at infinities
    square = x * x
    below_one = x * _poly(square, _ERF64_T) / _poly(square, _ERF64_U)
    return inp.where(inp.abs(x) < f(1.0), below_one, f(1.0) - _erfc64_above_one(x))


def fma32_twice(a, b, c):
    """``a * b + c`` for float32 operands with the product exact in float64:
    the sum rounded to float64, then to float32. Those two roundings are the
    FMA's one except where the float64 sum lies exactly on a float32 midpoint
    (25 significant bits, not 24) while the exact sum does not: see ``fma32``."""
    wide = inp.astype(a, inp.float64) * inp.astype(b, inp.float64) + inp.astype(c, inp.float64)
    return inp.astype(wide, inp.float32)


def fma32(a, b, c):
    """``a * b + c`` for float32 operands rounded once, as an FMA rounds it.
    The product is exact in float64 and the float64 sum ``s`` is exact up to
    its TwoSum error ``e``; rounding ``s`` to float32 is then the FMA's result
    unless ``s`` lies exactly on a float32 midpoint (25 significant bits, not
    24) while ``e`` is not 0: there ``s`` is first moved 2**-40 of itself
    towards ``e``, onto the side of the midpoint where the exact sum lies."""
    a64, b64, c64 = (inp.astype(v, inp.float64) for v in (a, b, c))
    product = a64 * b64
    s = product + c64
    back = s - product
    error = (product - (s - back)) + (c64 - back)
    split = s * _c(2.0**28 + 1, np.float64)  # Veltkamp: s rounded to 25 bits
    midpoint = ((split - (split - s)) == s) & (inp.astype(inp.astype(s, inp.float32),
                                                           inp.float64) != s)
    nudge = inp.copysign(inp.abs(s) * _c(2.0**-40, np.float64), error)
    return inp.astype(inp.where(midpoint & (error != 0), s + nudge, s), inp.float32)


def _erf32(x):
    f = np.float32
    x_inside = inp.clip(x, f(-4.0), f(4.0))  # the same values, no inf / inf beyond
    square = x_inside * x_inside
    p = fma32(square, _c(_ERF32_P[0], f), _c(_ERF32_P[1], f))
    for c in _ERF32_P[2:]:
        p = fma32(square, p, _c(c, f))
    q = fma32(square, _c(_ERF32_Q[0], f), _c(_ERF32_Q[1], f))
    for c in _ERF32_Q[2:]:
        q = fma32(square, q, _c(c, f))
    return inp.where(inp.abs(x) >= f(_ERF32_ONE), inp.copysign(f(1.0), x), x_inside * p / q)


def erf(x):
    """The error function of a float32 or float64 array. float32: XLA's CPU
    approximation, bit for bit; float64: libm's ``erf`` (XLA's CPU calls it)
    for a NumPy array, Cephes's approximation (within 2 ulp of it) for a
    traced one."""
    if x.dtype == np.float32:
        return _erf32(x)
    if not isinstance(x, Tracer):
        return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))
    return _erf64(x)


def lgamma_from_half(x):
    """log|Gamma(x)| for x >= 0.5 (float32 or float64), XLA's Lanczos
    approximation without its reflection for x < 0.5:
    ``(log 2 + log pi) / 2 + (z + 1/2 - t / log t) log t + log a(z)``, with
    ``z = x - 1``, ``t = z + 7.5`` and ``log t = log 7.5 + log1p(z / 7.5)``."""
    dtype = x.dtype
    z = x - _c(1.0, dtype)
    a = _c(_LANCZOS_BASE, dtype)
    for i, coefficient in enumerate(_LANCZOS):
        a = a + _c(coefficient, dtype) / (z + _c(i + 1, dtype))
    shift = _c(_LANCZOS_G + 0.5, dtype)
    t = shift + z
    log_t = _c(math.log(_LANCZOS_G + 0.5), dtype) + inp.log1p(z / shift)
    r = (z + _c(0.5, dtype) - t / log_t) * log_t
    return _c((math.log(2) + math.log(math.pi)) / 2, dtype) + r + inp.log(a)
