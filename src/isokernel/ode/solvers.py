"""One step of each method, read from its table (``tableaux``).

A solver works on the state flattened to one vector ``y`` (``odeint`` does
the flattening) and a right-hand side ``fun(y, t)``. ``step`` takes one step
of size ``h`` from ``(t, y)``, where ``f = fun(y, t)`` is carried from the
previous step for the methods that have it (FSAL), and returns a ``Step``:
the new state, its derivative when the method provides it, the error
estimate (None for a fixed-step method) and the stage values its dense
output combines. The implicit ESDIRK step also reads the tolerances
``(rtol, atol)``: its Newton iterations stop on them.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from .. import numpy as inp
from ..control import while_loop
from ..transforms import jacfwd, jvp, stop_gradient
from .dense import lu_factor, lu_solve
from .tableaux import ButcherTableau, ESDIRKTableau, RodasTableau, RosenbrockTableau

# The simplified Newton iteration of an implicit stage (Hairer & Wanner, Solving
# ODEs II, §IV.8, as OrdinaryDiffEq.jl runs it): at most NEWTON_MAX iterations;
# converged when an increment is below NEWTON_FIRST (in the error norm) or,
# from the second on, when rate / (1 - rate) * increment < NEWTON_KAPPA;
# diverged when the rate exceeds NEWTON_DIVERGE or an increment is not finite.
NEWTON_MAX, NEWTON_FIRST, NEWTON_KAPPA, NEWTON_DIVERGE = 10, 1e-5, 1e-2, 2.0


@dataclass(frozen=True)
class Step:
    y: object
    f: object  # the slope at (t + h, y): fun there, or a stiffly accurate method's last stage
    # slope (kvaerno5), for a method that has it; else the f it was given
    error: object  # the local error estimate (a vector like y), None for fixed steps
    stages: tuple  # the k_j of the dense output
    failed: object = None  # an implicit step whose iteration failed: rejected whatever its error


def combine(y, h, weights, ks):
    """``y + h * sum_j weights[j] * ks[j]``, skipping zero weights; ``y`` alone
    when every weight is zero."""
    terms = [w * k for w, k in zip(weights, ks) if not _is_zero(w)]
    if not terms:
        return y
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return y + h * total


def _is_zero(w) -> bool:
    return isinstance(w, float) and w == 0.0


class Solver(abc.ABC):
    """A method of ``odeint``: its table and its step."""

    table: ButcherTableau | ESDIRKTableau | RodasTableau | RosenbrockTableau

    @property
    @abc.abstractmethod
    def adaptive(self) -> bool: ...

    @property
    def uses_f(self) -> bool:
        """Whether ``step`` reads the carried ``fun(y, t)``."""
        return True

    @property
    def lands(self) -> bool:
        """Whether the step that would pass a report time is shortened to end
        on it (the value there is the step's end), rather than the value read
        from a dense output."""
        return False

    @abc.abstractmethod
    def step(self, fun, t, y, f, h, tol=None) -> Step:
        """``tol``: ``(rtol, atol)``, read by the methods that iterate."""

    def interpolate(self, y, h, stages, theta):
        """The dense output at ``t + theta h`` of a step of size ``h`` from ``y``."""
        return combine(y, h, _horner_weights(self.table.dense, theta), stages)


def _horner_weights(rows, theta) -> list:
    """Each row's polynomial at ``theta`` by Horner's rule; 0.0 for a zero row."""
    weights = []
    for row in rows:
        if not any(row):
            weights.append(0.0)
            continue
        w = row[-1]
        for coef in reversed(row[:-1]):
            w = w * theta + coef
        weights.append(w)
    return weights


class ExplicitRK(Solver):
    """The generic explicit Runge–Kutta step: any ``ButcherTableau``."""

    def __init__(self, table: ButcherTableau):
        self.table = table

    @property
    def adaptive(self) -> bool:
        return self.table.adaptive

    @property
    def uses_f(self) -> bool:
        return self.table.fsal

    def step(self, fun, t, y, f, h, tol=None) -> Step:
        tab = self.table
        ks = [f if tab.fsal else fun(y, t)]
        for c, row in zip(tab.c[1:], tab.a[1:]):
            ks.append(fun(combine(y, h, row, ks), t + c * h))
        y_new = combine(y, h, tab.b, ks)
        f_new = ks[-1] if tab.fsal else f
        error = None if tab.b_err is None else combine(inp.zeros_like(y), h, tab.b_err, ks)
        return Step(y_new, f_new, error, tuple(ks))


def _lu_solver(jac, hg, n: int):
    """``rhs -> (I - hg J)^-1 rhs`` from one factorization (``dense``)."""
    w = [[(1.0 if i == j else 0.0) - hg * jac[i, j] for j in range(n)] for i in range(n)]
    lu = lu_factor(w)
    return lambda rhs: inp.stack(lu_solve(lu, [rhs[i] for i in range(n)]))


class Rosenbrock23(Solver):
    """ode23s's step (Shampine & Reichelt 1997): W = I - h d J with J by
    ``jacfwd`` and df/dt by a JVP in t, factored once per step by Gaussian
    elimination with partial pivoting (``dense``) and solved three times."""

    def __init__(self, table: RosenbrockTableau):
        self.table = table

    @property
    def adaptive(self) -> bool:
        return True

    def step(self, fun, t, y, f, h, tol=None) -> Step:
        d, n = self.table.gamma, y.shape[-1]
        jac = jacfwd(lambda v: fun(v, t))(y)
        dfdt = jvp(lambda s: fun(y, s), (t,), (inp.ones_like(t),))[1]
        hd = h * d
        solve = _lu_solver(jac, hd, n)
        k1 = solve(f + hd * dfdt)
        f1 = fun(y + 0.5 * h * k1, t + 0.5 * h)
        k2 = solve(f1 - k1) + k1
        y_new = y + h * k2
        f2 = fun(y_new, t + h)
        k3 = solve(f2 - self.table.e32 * (k2 - f1) - 2.0 * (k1 - f) + hd * dfdt)
        error = (h / 6.0) * (k1 - 2.0 * k2 + k3)
        return Step(y_new, f2, error, (k1, k2))


class _Landing(Solver):
    """An adaptive step of order 5 given by its table, ending exactly on the
    report times (no interpolant of matching order): ``ESDIRK`` and ``Rodas``."""

    def __init__(self, table):
        self.table = table

    @property
    def adaptive(self) -> bool:
        return True

    @property
    def lands(self) -> bool:
        return True


class ESDIRK(_Landing):
    """The generic ESDIRK step: any ``ESDIRKTableau``. J = df/dy by ``jacfwd``
    at the step's start, W = I - h gamma J factored once (``dense``, as
    ``rosenbrock23``) and shared by the simplified Newton iterations of every
    implicit stage, each a ``while_loop`` started from the table's predictor.
    A stage whose iteration fails fails the step (``Step.failed``): it is
    rejected and the controller cuts h. The error estimate is
    W^-1 sum_j b_err_j z_j (Shampine's filter: on stiff components the raw
    difference overstates the error)."""

    def step(self, fun, t, y, f, h, tol=None) -> Step:
        if tol is None:
            raise ValueError(f"{self.table.name}: its Newton iterations stop on the "
                             f"tolerances; give tol=(rtol, atol)")
        tab, n = self.table, y.shape[-1]
        rtol, atol = tol
        scale = atol + rtol * inp.abs(y)
        solve = _lu_solver(jacfwd(lambda v: fun(v, t))(y), h * tab.gamma, n)
        zs, failed = [h * f], inp.zeros_like(h) > 1.0
        for c, row, guess in zip(tab.c[1:], tab.a[1:], tab.predictor[1:]):
            z, failed = _newton(fun, t + c * h, h, tab.gamma, combine(y, 1.0, row, zs),
                                combine(inp.zeros_like(y), 1.0, guess, zs), solve, scale,
                                failed)
            zs.append(z)
        y_new = combine(y, 1.0, tab.b, zs)
        f_new = zs[-1] / h if tab.stiffly_accurate else fun(y_new, t + h)
        error = solve(combine(inp.zeros_like(y), 1.0, tab.b_err, zs))
        # finite and not 0 (the norm's square root): a failed step's cotangents stay 0
        error = inp.where(failed, 1.0, error)
        return Step(y_new, f_new, error, (), failed)


def _newton(fun, t_i, h, gamma, base, z0, solve, scale, failed):
    """Solve z = h fun(base + gamma z, t_i) by simplified Newton from z0, W^-1
    by ``solve``; returns z and whether this or an earlier stage (``failed``)
    failed. After a failed stage no iteration runs (z0 is returned): the step
    is rejected, and a diverging iteration fed on would overflow. An
    increment that is not finite or diverges is not taken, and the sizes
    that steer the iteration carry no derivative: every value of a failed
    step stays finite, so its (zero) cotangents in reverse mode stay zero."""
    def rms(v):
        return inp.sqrt(inp.mean(inp.square(v / scale)))

    def more(c):
        return ~c[3] & ~c[4] & (c[2] < NEWTON_MAX)

    def iterate(c):
        z, previous, count, _, _ = c
        dz = solve(h * fun(base + gamma * z, t_i) - z)
        size = rms(stop_gradient(dz))
        later = count > 0
        rate = size / inp.where(later, previous, 1.0)
        done = (size < NEWTON_FIRST) | (later & (rate < 1.0)
                                          & (rate * size < NEWTON_KAPPA * (1.0 - rate)))
        diverged = ~inp.isfinite(size) | (later & (rate > NEWTON_DIVERGE))
        return inp.where(diverged, z, z + dz), size, count + 1, done, diverged
    start = (z0, inp.ones_like(h), 0, inp.zeros_like(h) > 1.0, failed)
    z, _, _, done, _ = while_loop(more, iterate, start)
    return z, ~done


class Rodas(_Landing):
    """The generic step of a ``RodasTableau``: J by ``jacfwd`` and df/dt by a
    JVP in t at the step's start, W = I - h gamma J factored once
    (``dense``, as ``rosenbrock23``) and solved once per stage; no iteration.
    The carried f is f(y, t), and the step ends with f(y_new, t + h)."""

    def step(self, fun, t, y, f, h, tol=None) -> Step:
        tab, n = self.table, y.shape[-1]
        jac = jacfwd(lambda v: fun(v, t))(y)
        dfdt = jvp(lambda s: fun(y, s), (t,), (inp.ones_like(t),))[1]
        hg = h * tab.gamma
        solve = _lu_solver(jac, hg, n)
        ks = []
        for i, (c, a, cs, d) in enumerate(zip(tab.c, tab.a, tab.C, tab.d)):
            f_i = f if i == 0 else fun(combine(y, 1.0, a, ks), t + c * h)
            rhs = combine(f_i, 1.0 / h, cs, ks)
            if d != 0.0:
                rhs = rhs + (h * d) * dfdt
            ks.append(hg * solve(rhs))
        y_new = combine(y, 1.0, tab.b, ks)
        error = combine(inp.zeros_like(y), 1.0, tab.b_err, ks)
        return Step(y_new, fun(y_new, t + h), error, ())


def solver_for(table) -> Solver:
    if isinstance(table, RosenbrockTableau):
        return Rosenbrock23(table)
    if isinstance(table, RodasTableau):
        return Rodas(table)
    if isinstance(table, ESDIRKTableau):
        return ESDIRK(table)
    return ExplicitRK(table)
