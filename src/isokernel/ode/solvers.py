"""One step of each method, read from its table (``tableaux``).

A solver works on the state flattened to one vector ``y`` (``odeint`` does
the flattening) and a right-hand side ``fun(y, t)``. ``step`` takes one step
of size ``h`` from ``(t, y)``, where ``f = fun(y, t)`` is carried from the
previous step for the methods that have it (FSAL), and returns a ``Step``:
the new state, its derivative when the method provides it, the error
estimate (None for a fixed-step method) and the stage values its dense
output combines.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from .. import numpy as inp
from ..transforms import jacfwd, jvp
from .dense import lu_factor, lu_solve
from .tableaux import ButcherTableau, RosenbrockTableau


@dataclass(frozen=True)
class Step:
    y: object
    f: object  # fun(y, t + h) for a method that evaluates it, else the f it was given
    error: object  # the local error estimate (a vector like y), None for fixed steps
    stages: tuple  # the k_j of the dense output


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

    table: ButcherTableau | RosenbrockTableau

    @property
    @abc.abstractmethod
    def adaptive(self) -> bool: ...

    @property
    def uses_f(self) -> bool:
        """Whether ``step`` reads the carried ``fun(y, t)``."""
        return True

    @abc.abstractmethod
    def step(self, fun, t, y, f, h) -> Step: ...

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

    def step(self, fun, t, y, f, h) -> Step:
        tab = self.table
        ks = [f if tab.fsal else fun(y, t)]
        for c, row in zip(tab.c[1:], tab.a[1:]):
            ks.append(fun(combine(y, h, row, ks), t + c * h))
        y_new = combine(y, h, tab.b, ks)
        f_new = ks[-1] if tab.fsal else f
        error = None if tab.b_err is None else combine(inp.zeros_like(y), h, tab.b_err, ks)
        return Step(y_new, f_new, error, tuple(ks))


class Rosenbrock23(Solver):
    """ode23s's step (Shampine & Reichelt 1997): W = I - h d J with J by
    ``jacfwd`` and df/dt by a JVP in t, factored once per step by Gaussian
    elimination with partial pivoting (``dense``) and solved three times."""

    def __init__(self, table: RosenbrockTableau):
        self.table = table

    @property
    def adaptive(self) -> bool:
        return True

    def step(self, fun, t, y, f, h) -> Step:
        d, n = self.table.gamma, y.shape[-1]
        jac = jacfwd(lambda v: fun(v, t))(y)
        dfdt = jvp(lambda s: fun(y, s), (t,), (inp.ones_like(t),))[1]
        hd = h * d
        w = [[(1.0 if i == j else 0.0) - hd * jac[i, j] for j in range(n)] for i in range(n)]
        lu = lu_factor(w)
        solve = lambda rhs: inp.stack(lu_solve(lu, [rhs[i] for i in range(n)]))  # noqa: E731
        k1 = solve(f + hd * dfdt)
        f1 = fun(y + 0.5 * h * k1, t + 0.5 * h)
        k2 = solve(f1 - k1) + k1
        y_new = y + h * k2
        f2 = fun(y_new, t + h)
        k3 = solve(f2 - self.table.e32 * (k2 - f1) - 2.0 * (k1 - f) + hd * dfdt)
        error = (h / 6.0) * (k1 - 2.0 * k2 + k3)
        return Step(y_new, f2, error, (k1, k2))


def solver_for(table) -> Solver:
    if isinstance(table, RosenbrockTableau):
        return Rosenbrock23(table)
    return ExplicitRK(table)
