"""erfinv as XLA computes it (the CHLO decomposition of ``chlo.erf_inv``,
Giles's approximations: "Approximating the erfinv function", GPU Computing
Gems, 2011), op by op, so ``normal`` follows ``jax.random.normal``'s
arithmetic. Written with isokernel.numpy: it records, differentiates and
runs on every strategy like any model."""

from __future__ import annotations

import numpy as np

from .. import numpy as inp
from ..typing import Array, ArrayLike

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


def _erfinv32(x):
    f = np.float32
    w = -inp.log1p(x * -x)
    small = w < f(5.0)
    w = inp.where(small, w - f(2.5), inp.sqrt(w) - f(3.0))
    p = inp.where(small, _c(_F32_SMALL[0], f), _c(_F32_LARGE[0], f))
    for a, b in zip(_F32_SMALL[1:], _F32_LARGE[1:]):
        p = inp.where(small, _c(a, f), _c(b, f)) + p * w
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
    as XLA computes it (to the last bit where the logarithm agrees)."""
    return _erfinv32(x) if x.dtype == np.float32 else _erfinv64(x)
