"""The coefficients of every ODE method, as data: one table per method.

An explicit Runge–Kutta method is a ``ButcherTableau`` (nodes ``c``, the
strictly lower triangular matrix ``a``, weights ``b``, the error weights
``b_err = b - b_hat`` of its embedded pair, and its dense output); the one
generic explicit step (``solvers.ExplicitRK``) reads any of them. The
Rosenbrock method is a ``RosenbrockTableau``.

Dense output is the same form for every adaptive method: on a step from
``t`` of size ``h`` with stages ``k_j``,
``y(t + theta h) = y + h * sum_j w_j(theta) k_j``, where ``w_j`` is a
polynomial in ``theta`` whose coefficients (lowest power first) are row
``j`` of ``dense``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method (final: one instance per method)."""

    name: str
    c: tuple[float, ...]
    a: tuple[tuple[float, ...], ...]  # row i holds a[i][0..i-1]
    b: tuple[float, ...]
    order: int
    source: str
    b_err: tuple[float, ...] | None = None  # None: a fixed-step method
    error_order: int = 0  # the order of the embedded solution the error estimates
    fsal: bool = False  # the last stage is f(t + h, y_new): the next step's first
    dense: tuple[tuple[float, ...], ...] | None = None

    @property
    def stages(self) -> int:
        return len(self.c)

    @property
    def adaptive(self) -> bool:
        return self.b_err is not None


@dataclass(frozen=True)
class RosenbrockTableau:
    """A linearly implicit (Rosenbrock–W) method in the form of ode23s."""

    name: str
    gamma: float  # d = 1 / (2 + sqrt 2): W = I - h d J
    e32: float  # 6 + sqrt 2
    order: int
    error_order: int
    source: str
    dense: tuple[tuple[float, ...], ...]


def _dense_rows(polys) -> tuple[tuple[float, ...], ...]:
    """Polynomials (numpy.polynomial, lowest power first) as rows of floats,
    every row padded to the same degree."""
    degree = max(len(p.coef) for p in polys)
    return tuple(tuple(np.pad(p.coef, (0, degree - len(p.coef))).tolist()) for p in polys)


# --- fixed-step methods --------------------------------------------------------------------

EULER = ButcherTableau(
    name="euler", c=(0.0,), a=((),), b=(1.0,), order=1,
    source="Euler's method (Hairer, Nørsett, Wanner, Solving ODEs I, §II.1)")

HEUN = ButcherTableau(
    name="heun", c=(0.0, 1.0), a=((), (1.0,)), b=(0.5, 0.5), order=2,
    source="Heun's method, the explicit trapezoidal rule (Hairer, Nørsett, Wanner, §II.1)")

RK4 = ButcherTableau(
    name="rk4", c=(0.0, 0.5, 0.5, 1.0), a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    b=(1 / 6, 1 / 3, 1 / 3, 1 / 6), order=4,
    source="the classical Runge–Kutta method (Kutta 1901)")

# --- Dormand–Prince 5(4) -------------------------------------------------------------------

_DOPRI_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DOPRI_B_HAT = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100,
                1 / 40)
# y(t + h/2) = y + h * sum_j MID_j k_j, fourth order (Shampine 1986, "Some practical
# Runge-Kutta formulas", Math. Comp. 46; the values torchdiffeq and JAX use)
_DOPRI_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2,
              -2691868925 / 45128329728 / 2, 187940372067 / 1594534317056 / 2,
              -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _dopri_dense():
    """The quartic through y0, y(h/2), y1 with slopes f0 = k1 and f1 = k7,
    written as weights of the stages: with y1 = y0 + h B.k and
    y(h/2) = y0 + h M.k, the quartic a th^4 + b th^3 + c th^2 + d th + y0 has
    a = h(-2 e1 + 2 e7 - 8 B + 16 M).k, b = h(5 e1 - 3 e7 + 14 B - 32 M).k,
    c = h(-4 e1 + e7 - 5 B + 16 M).k, d = h e1.k."""
    e1, e7 = np.eye(7)[0], np.eye(7)[6]
    big_b, mid = np.array(_DOPRI_B), np.array(_DOPRI_MID)
    quartic = -2 * e1 + 2 * e7 - 8 * big_b + 16 * mid
    cubic = 5 * e1 - 3 * e7 + 14 * big_b - 32 * mid
    square = -4 * e1 + e7 - 5 * big_b + 16 * mid
    rows = np.stack([np.zeros(7), e1, square, cubic, quartic], axis=1)
    return tuple(tuple(r.tolist()) for r in rows)


DOPRI5 = ButcherTableau(
    name="dopri5",
    c=(0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0),
    a=((),
       (1 / 5,),
       (3 / 40, 9 / 40),
       (44 / 45, -56 / 15, 32 / 9),
       (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
       (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
       _DOPRI_B[:6]),
    b=_DOPRI_B, order=5, error_order=4, fsal=True,
    b_err=tuple(b - bh for b, bh in zip(_DOPRI_B, _DOPRI_B_HAT)),
    dense=_dopri_dense(),
    source="Dormand & Prince 1980, 'A family of embedded Runge-Kutta formulae', "
           "J. Comp. Appl. Math. 6; dense output: the quartic through Shampine's (1986) "
           "fourth-order mid-point value")

# --- Tsitouras 5(4) ------------------------------------------------------------------------

_TSIT_B = (0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742,
           -3.290069515436081, 2.324710524099774, 0.0)


def _tsit_dense():
    """Tsitouras's free interpolant, as factored in his paper's Table 1
    (the form OrdinaryDiffEq.jl and diffrax evaluate); row j is w_j(theta)."""
    P = np.polynomial.Polynomial
    th = P([0.0, 1.0])
    polys = [
        -1.0530884977290216 * th * (th - 1.3299890189751412)
        * (th ** 2 - 1.4364028541716351 * th + 0.7139816917074209),
        0.1017 * th ** 2 * (th ** 2 - 2.1966568338249754 * th + 1.2949852507374631),
        2.490627285651252793 * th ** 2 * (th ** 2 - 2.38535645472061657 * th
                                          + 1.57803468208092486),
        -16.54810288924490272 * (th - 1.21712927295533244) * (th - 0.61620406037800089)
        * th ** 2,
        47.37952196281928122 * (th - 1.203071208372362603) * (th - 0.658047292653547382)
        * th ** 2,
        -34.87065786149660974 * (th - 1.2) * (th - 0.666666666666666667) * th ** 2,
        2.5 * (th - 1.0) * (th - 0.6) * th ** 2,
    ]
    return _dense_rows(polys)


TSIT5 = ButcherTableau(
    name="tsit5",
    c=(0.0, 0.161, 0.327, 0.9, 0.9800255409045097, 1.0, 1.0),
    a=((),
       (0.161,),
       (-0.008480655492356989, 0.335480655492357),
       (2.897153057105493, -6.359448489975075, 4.3622954328695815),
       (5.325864828439257, -11.748883564062828, 7.4955393428898365, -0.09249506636175525),
       (5.86145544294642, -12.92096931784711, 8.159367898576159, -0.071584973281401,
        -0.028269050394068383),
       _TSIT_B[:6]),
    b=_TSIT_B, order=5, error_order=4, fsal=True,
    b_err=(-0.00178001105222577714, -0.0008164344596567469, 0.007880878010261995,
           -0.1447110071732629, 0.5823571654525552, -0.45808210592918697,
           0.015151515151515152),
    dense=_tsit_dense(),
    source="Tsitouras 2011, 'Runge-Kutta pairs of order 5(4) satisfying only the first "
           "column simplifying assumption', Comput. Math. Appl. 62; with its free "
           "fourth-order interpolant")

# --- Rosenbrock 2(3) -----------------------------------------------------------------------

_GAMMA = 1.0 / (2.0 + math.sqrt(2.0))


def _rosenbrock_dense():
    """y(t + theta h) = y + h [theta (1 - theta) k1 + theta (theta - 2d) k2] / (1 - 2d)."""
    P = np.polynomial.Polynomial
    th = P([0.0, 1.0])
    scale = 1.0 / (1.0 - 2.0 * _GAMMA)
    return _dense_rows([scale * th * (1.0 - th), scale * th * (th - 2.0 * _GAMMA)])


ROSENBROCK23 = RosenbrockTableau(
    name="rosenbrock23", gamma=_GAMMA, e32=6.0 + math.sqrt(2.0), order=2, error_order=2,
    dense=_rosenbrock_dense(),
    source="Shampine & Reichelt 1997, 'The MATLAB ODE suite', SIAM J. Sci. Comput. 18 "
           "(ode23s): L-stable, second order with a third-order error estimate, and its "
           "continuous extension")

TABLES = {t.name: t for t in (EULER, HEUN, RK4, DOPRI5, TSIT5, ROSENBROCK23)}
