"""The coefficients of every ODE method, as data: one table per method.

An explicit Runge–Kutta method is a ``ButcherTableau`` (nodes ``c``, the
strictly lower triangular matrix ``a``, weights ``b``, the error weights
``b_err = b - b_hat`` of its embedded pair, and its dense output); the one
generic explicit step (``solvers.ExplicitRK``) reads any of them. An
ESDIRK method (explicit first stage, singly diagonally implicit) is an
``ESDIRKTableau``, read by the one implicit step ``solvers.ESDIRK``. The
ode23s method is a ``RosenbrockTableau``; a Rosenbrock method in Hairer and
Wanner's transformed form (RODAS) is a ``RodasTableau``, read by
``solvers.Rodas``.

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


@dataclass(frozen=True)
class ESDIRKTableau:
    """An ESDIRK method: stage 1 is explicit (``f`` at the step's start), every
    later stage i solves ``Y_i = y + sum_{j<i} a[i][j] z_j + gamma z_i`` for
    ``z_i = h f(t + c_i h, Y_i)``, one system ``I - h gamma J`` for them all.
    ``predictor[i]`` gives the start of stage i's Newton iteration as weights
    of the earlier ``z_j`` (a row summing to 1)."""

    name: str
    c: tuple[float, ...]
    a: tuple[tuple[float, ...], ...]  # row i holds a[i][0..i-1], below the diagonal
    gamma: float
    b: tuple[float, ...]
    b_err: tuple[float, ...]  # b - b_hat
    predictor: tuple[tuple[float, ...], ...]  # row i: weights of z_0..z_{i-1}
    order: int
    error_order: int
    source: str
    dense = None  # no dense output: the steps land on the report times (``odeint``)

    @property
    def stages(self) -> int:
        return len(self.c)

    @property
    def stiffly_accurate(self) -> bool:
        """b is the last stage's row: y_new is that stage's Y, and z_last / h
        its derivative."""
        return tuple(self.a[-1]) + (self.gamma,) == tuple(self.b)


@dataclass(frozen=True)
class RodasTableau:
    """A Rosenbrock method in the transformed form of Hairer & Wanner's RODAS
    (Solving ODEs II, §IV.7): with W = I - h gamma J, stage i solves
    ``W k_i / (h gamma) = f(t + c_i h, y + sum_{j<i} a[i][j] k_j)
    + h d_i df/dt + sum_{j<i} C[i][j] k_j / h``; y_new = y + sum_i b_i k_i,
    the error estimate sum_i b_err_i k_i."""

    name: str
    c: tuple[float, ...]
    a: tuple[tuple[float, ...], ...]  # row i holds a[i][0..i-1]
    C: tuple[tuple[float, ...], ...]  # row i holds C[i][0..i-1]
    gamma: float
    d: tuple[float, ...]
    b: tuple[float, ...]
    b_err: tuple[float, ...]
    order: int
    error_order: int
    source: str
    dense = None  # no dense output: the steps land on the report times (``odeint``)

    @property
    def stages(self) -> int:
        return len(self.c)


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

# --- Kværnø 5(4) ---------------------------------------------------------------------------

_KV_GAMMA = 0.26
_KV_A = ((),
         (_KV_GAMMA,),
         (0.13, 0.84033320996790809),
         (0.22371961478320505, 0.47675532319799699, -0.06470895363112615),
         (0.16648564323248321, 0.10450018841591720, 0.03631482272098715,
          -0.13090704451073998),
         (0.13855640231268224, 0.0, -0.04245337201752043, 0.02446657898003141,
          0.61943039072480676),
         (0.13659751177640291, 0.0, -0.05496908796538376, -0.04118626728321046,
          0.62993304899016403, 0.06962479448202728))
_KV_B = _KV_A[6] + (_KV_GAMMA,)
_KV_B_HAT = _KV_A[5] + (_KV_GAMMA, 0.0)  # the sixth stage: stiffly accurate, order 4

KVAERNO5 = ESDIRKTableau(
    name="kvaerno5",
    c=(0.0,) + tuple(sum(row) + _KV_GAMMA for row in _KV_A[1:]),
    a=_KV_A, gamma=_KV_GAMMA, b=_KV_B,
    b_err=tuple(b - bh for b, bh in zip(_KV_B, _KV_B_HAT)),
    # Newton's starting values (OrdinaryDiffEq.jl's, as diffrax takes them, with z_2 = z_1)
    predictor=((),
               (1.0,),
               (-1.366025403784441, 2.3660254037844357),
               (-0.19650552613122207, 0.8113579546496623, 0.38514757148155954),
               (0.10375304369958693, 0.937994698066431, -0.04174774176601781, 0.0),
               (-0.17281112873898072, 0.6235784481025847, 0.5492326806363959, 0.0, 0.0),
               _KV_A[5] + (_KV_GAMMA,)),
    order=5, error_order=4,
    source="Kværnø 2004, 'Singly diagonally implicit Runge-Kutta methods with an explicit "
           "first stage', BIT 44: ESDIRK 5(4), 7 stages, L-stable, stiffly accurate "
           "(coefficients as diffrax and OrdinaryDiffEq.jl give them)")

# --- Rodas 5(4) ----------------------------------------------------------------------------

_RODAS5_ROW6 = (-14.09640773051259, 6.925207756232704, -41.47510893210728, 2.343771018586405,
                24.13215229196062)

RODAS5 = RodasTableau(
    name="rodas5",
    c=(0.0, 0.38, 0.3878509998321533, 0.483971893787384, 0.457047700881958, 1.0, 1.0, 1.0),
    a=((),
       (2.0,),
       (3.040894194418781, 1.041747909077569),
       (2.576417536461461, 1.62208306077664, -0.9089668560264532),
       (2.760842080225597, 1.446624659844071, -0.3036980084553738, 0.2877498600325443),
       _RODAS5_ROW6,
       _RODAS5_ROW6 + (1.0,),
       _RODAS5_ROW6 + (1.0, 1.0)),
    C=((),
       (-10.31323885133993,),
       (-21.04823117650003, -7.234992135176716),
       (32.22751541853323, -4.943732386540191, 19.44922031041879),
       (-20.69865579590063, -8.816374604402768, 1.260436877740897, -0.7495647613787146),
       (-46.22004352711257, -17.49534862857472, -289.6389582892057, 93.60855400400906,
        318.3822534212147),
       (34.20013733472935, -14.1553540271769, 57.823356409884, 25.83362985412365,
        1.408950972071624, -6.551835421242162),
       (42.57076742291101, -13.80770672017997, 93.98938432427124, 18.77919633714503,
        -31.5835918722337, -6.685968952921985, -5.810979938412932)),
    gamma=0.19,
    d=(0.19, -0.1823079225333714636, -0.319231832186874912, 0.3449828624725343,
       -0.377417564392089818, 0.0, 0.0, 0.0),
    b=_RODAS5_ROW6 + (1.0, 1.0, 1.0),  # stiffly accurate: the last stage's value, plus k_8
    b_err=(0.0,) * 7 + (1.0,),  # k_8: the difference from the order-4 stage value
    order=5, error_order=4,
    source="Di Marzo 1993, 'RODAS5(4) - Méthodes de Rosenbrock d'ordre 5(4) adaptées aux "
           "problèmes différentiels-algébriques': 8 stages, "
           "stiffly accurate, L-stable; in Hairer & Wanner's transformed form, with the "
           "coefficients OrdinaryDiffEq.jl gives (its Rodas5)")

TABLES = {t.name: t for t in (EULER, HEUN, RK4, DOPRI5, TSIT5, ROSENBROCK23, KVAERNO5, RODAS5)}
