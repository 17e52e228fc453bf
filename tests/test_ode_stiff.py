"""The fifth-order stiff methods of ``isokernel.ode.odeint``: ``kvaerno5``
(ESDIRK, Newton iterations) and ``rodas5`` (Rosenbrock). Their tables by
their order conditions and stability functions, their order by fixed steps,
Van der Pol (mu = 1000) and Robertson's kinetics at rtol 1e-8 against SciPy's
Radau at rtol 1e-12, gradients against central differences, and ``jit`` and
``vmap`` per pixel.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends.parity import bit_identical
from isokernel.control import fori_loop
from isokernel.ode import TABLES, odeint
from isokernel.ode.solvers import solver_for

STIFF = ["kvaerno5", "rodas5"]


# --- the tables -----------------------------------------------------------------------------

def _canonical(tree) -> tuple:
    return tuple(sorted(_canonical(sub) for sub in tree))


def _grown(tree):
    """Every tree made from ``tree`` by one more leaf."""
    yield _canonical(tree + ((),))
    for i, sub in enumerate(tree):
        for bigger in _grown(sub):
            yield _canonical(tree[:i] + (bigger,) + tree[i + 1:])


@functools.cache
def _trees(order: int) -> tuple:
    """The rooted trees with ``order`` vertices, each a sorted tuple of its
    subtrees."""
    if order == 1:
        return ((),)
    return tuple(sorted({t for smaller in _trees(order - 1) for t in _grown(smaller)}))


def _size(tree) -> int:
    return 1 + sum(_size(sub) for sub in tree)


def _density(tree) -> int:
    """gamma(t): the tree's order times its subtrees' densities."""
    out = _size(tree)
    for sub in tree:
        out *= _density(sub)
    return out


def _lower(rows, size: int) -> np.ndarray:
    m = np.zeros((size, size))
    for i, row in enumerate(rows):
        m[i, :len(row)] = row
    return m


def _esdirk_matrices(table):
    s = table.stages
    a = _lower(table.a, s) + np.diag([0.0] + [table.gamma] * (s - 1))
    return a, np.array(table.b), np.array(table.b) - np.array(table.b_err)


def _rodas_matrices(table):
    """The standard form (Hairer & Wanner IV.7): Gamma = (I / gamma - C)^-1,
    alpha = A Gamma, b = m Gamma; beta = alpha + Gamma."""
    s = table.stages
    gam = np.linalg.inv(np.eye(s) / table.gamma - _lower(table.C, s))
    alpha = _lower(table.a, s) @ gam
    b = np.array(table.b) @ gam
    b_hat = (np.array(table.b) - np.array(table.b_err)) @ gam
    return alpha, alpha + gam, b, b_hat


def _weights(tree, single, multiple) -> np.ndarray:
    """The elementary weight of ``tree`` per stage: a vertex with one child
    reads ``single``, one with more ``multiple`` (the same matrix for a
    Runge–Kutta method; beta and alpha for a Rosenbrock method)."""
    if not tree:
        return np.ones(single.shape[0])
    if len(tree) == 1:
        return single @ _weights(tree[0], single, multiple)
    out = np.ones(single.shape[0])
    for sub in tree:
        out = out * (multiple @ _weights(sub, single, multiple))
    return out


def _order_defects(b, single, multiple, order: int) -> list[float]:
    return [abs(b @ _weights(t, single, multiple) - 1.0 / _density(t)) for t in _trees(order)]


def test_the_trees_are_the_rooted_trees():
    assert [len(_trees(n)) for n in range(1, 7)] == [1, 1, 2, 4, 9, 20]


@pytest.mark.parametrize("name", STIFF)
def test_the_stiff_tables_meet_their_order_conditions(name):
    """b: every condition up to order 5 (17 trees), not all of order 6; the
    embedded solution: up to order 4, not all of order 5."""
    table = TABLES[name]
    if name == "kvaerno5":
        a, b, b_hat = _esdirk_matrices(table)
        single = multiple = a
        assert np.max(np.abs(a.sum(axis=1) - table.c)) < 1e-15
        assert table.stiffly_accurate
        assert all(abs(sum(row) - 1.0) < 1e-14 for row in table.predictor[1:])
    else:
        multiple, single, b, b_hat = _rodas_matrices(table)
        assert np.max(np.abs(multiple.sum(axis=1) - table.c)) < 1e-12
    tol = 1e-15 if name == "kvaerno5" else 1e-13  # RODAS5's coefficients carry 16 digits
    for order in range(1, 6):
        assert max(_order_defects(b, single, multiple, order)) < tol, order
    assert max(_order_defects(b, single, multiple, 6)) > 1e-3
    for order in range(1, 5):
        assert max(_order_defects(b_hat, single, multiple, order)) < tol, order
    assert max(_order_defects(b_hat, single, multiple, 5)) > 1e-4


@pytest.mark.parametrize("name", STIFF)
def test_the_stiff_methods_are_l_stable(name):
    """R(z) = 1 + z b^T (I - z A)^-1 1 (A = beta for Rosenbrock): |R| <= 1
    on the imaginary axis and R -> 0 at -infinity."""
    table = TABLES[name]
    if name == "kvaerno5":
        a, b, _ = _esdirk_matrices(table)
    else:
        _, a, b, _ = _rodas_matrices(table)
    ones = np.ones(table.stages)

    def r(z):
        return 1.0 + z * b @ np.linalg.solve(np.eye(table.stages) - z * a, ones)
    assert max(abs(r(1j * y)) for y in np.geomspace(1e-3, 1e6, 400)) <= 1.0 + 1e-12
    assert max(abs(r(x)) for x in -np.geomspace(1e-3, 1e6, 400)) <= 1.0 + 1e-12
    assert abs(r(-1e9)) < 1e-6


# --- order ------------------------------------------------------------------------------------

def driven(y, t, a, b):
    """Lotka–Volterra-like with a time-dependent term (for the nodes c_i and
    the df/dt terms)."""
    return inp.stack([a * y[0] - b * y[0] * y[1],
                      -y[1] + 0.5 * y[0] * y[1] + 0.1 * inp.sin(t)])


@pytest.mark.parametrize("name", STIFF)
def test_fixed_steps_converge_at_order_five(name):
    """n steps of size 1/n of the method's step on a smooth non-stiff
    problem (odeint's adaptive methods take no fixed steps: the solver is
    stepped directly, its Newton iterations at rtol 1e-12)."""
    solver = solver_for(TABLES[name])

    def fun(y, t):
        return driven(y, t, 1.1, 0.4)

    def fixed(y0, n):
        h = 1.0 / n

        def body(i, c):
            t, y, f = c
            new = solver.step(fun, t, y, f, h, (1e-12, 1e-12))
            return t + h, new.y, new.f
        return fori_loop(0, n, body, (0.0, y0, fun(y0, 0.0)))[1]
    y0 = np.array([1.0, 0.5])
    ref = _scipy().solve_ivp(lambda t, y: np.asarray(fun(y, t)), (0.0, 1.0), y0,
                             method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    counts = (4, 8, 16, 32)
    errors = [np.max(np.abs(ik.jit(functools.partial(fixed, n=n), strategy="reference")(y0)
                            - ref)) for n in counts]
    slope = -np.polyfit(np.log(counts), np.log(errors), 1)[0]
    assert abs(slope - 5.0) < 0.3, (slope, errors)


# --- stiff problems against Radau ---------------------------------------------------------------

def _scipy():
    return pytest.importorskip("scipy.integrate", reason="SciPy is the reference here: "
                               "pip install scipy")


def van_der_pol(y, t, mu):
    return inp.stack([y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]])


def robertson(y, t, k1=0.04, k2=3e7, k3=1e4):
    return inp.stack([-k1 * y[0] + k3 * y[1] * y[2],
                      k1 * y[0] - k3 * y[1] * y[2] - k2 * y[1] ** 2,
                      k2 * y[1] ** 2])


VDP_T = np.linspace(0.0, 3000.0, 7)
VDP_Y0 = np.array([2.0, 0.0])
ROBERTSON_T = np.array([0.0, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4, 1e5])
ROBERTSON_Y0 = np.array([1.0, 0.0, 0.0])


@functools.cache
def _radau(problem: str) -> np.ndarray:
    """SciPy's Radau at rtol 1e-12, atol 1e-14 with the exact Jacobian (4 s for
    Van der Pol), at the report times."""
    if problem == "van_der_pol":
        mu = 1000.0
        fun = lambda t, y: [y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]]  # noqa: E731
        jac = lambda t, y: [[0.0, 1.0], [-2 * mu * y[0] * y[1] - 1, mu * (1 - y[0] ** 2)]]  # noqa: E731,E501
        t, y0 = VDP_T, VDP_Y0
    else:
        fun = lambda t, y: [-0.04 * y[0] + 1e4 * y[1] * y[2],  # noqa: E731
                            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2]
        jac = lambda t, y: [[-0.04, 1e4 * y[2], 1e4 * y[1]],  # noqa: E731
                            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                            [0.0, 6e7 * y[1], 0.0]]
        t, y0 = ROBERTSON_T, ROBERTSON_Y0
    sol = _scipy().solve_ivp(fun, (t[0], t[-1]), y0, method="Radau", rtol=1e-12, atol=1e-14,
                             jac=jac, t_eval=t)
    assert sol.success, sol.message
    return sol.y.T


def _per_pixel(fun, y0, t, *args, **options):
    """The solve as a per-pixel loop over four identical pixels under ``jit``'s
    default strategy (one row is no pixel axis; see tests/test_ode.py)."""
    def one(y):
        return odeint(fun, y, t, *args, full_output=True, **options)
    ys, info = ik.jit(ik.vmap(one))(np.stack([y0] * 4))
    assert all(bit_identical(ys[i], ys[0]) for i in range(1, 4))
    return ys[0], {key: value[0] for key, value in info.items()}


PROBLEMS = {"van_der_pol": (van_der_pol, VDP_Y0, VDP_T, (1000.0,)),
            "robertson": (robertson, ROBERTSON_Y0, ROBERTSON_T, ())}


@pytest.mark.parametrize("problem", ["van_der_pol", "robertson"])
@pytest.mark.parametrize("method", STIFF)
def test_stiff_problems_at_rtol_1e8_against_radau(method, problem):
    """Within the default step budget (max_steps = 10 000), every report time
    within 1e-5 relative of Radau at rtol 1e-12 (measured: 1e-6 and below)."""
    fun, y0, t, args = PROBLEMS[problem]
    ys, info = _per_pixel(fun, y0, t, *args, method=method, rtol=1e-8, atol=1e-10)
    ref = _radau(problem)
    assert info["success"], info
    nonzero = ref != 0.0
    assert np.array_equal(ys[~nonzero], ref[~nonzero])  # y0's zeros at t[0]
    relative = np.abs(ys[nonzero] - ref[nonzero]) / np.abs(ref[nonzero])
    assert np.max(relative) < 1e-5, (np.max(relative), info)
    if problem == "robertson":
        assert abs(ys[-1].sum() - 1.0) < 1e-12  # mass: both methods are linear in y
    print(f"{method} {problem}: {info['steps']} steps ({info['rejected']} rejected), "
          f"largest relative error {np.max(relative):.2g}")


def test_rosenbrock23_does_not_reach_the_end_of_van_der_pol_at_rtol_1e8():
    """The case for the fifth-order methods: the default step budget is not
    enough for the second-order method at these tolerances."""
    fun, y0, t, args = PROBLEMS["van_der_pol"]
    ys, info = _per_pixel(fun, y0, t, *args, method="rosenbrock23", rtol=1e-8, atol=1e-10)
    assert not info["success"] and np.isnan(ys[-1]).all()


# --- landing on the report times, eagerly ---------------------------------------------------

@pytest.mark.parametrize("method", STIFF)
def test_a_stiff_linear_problem_eagerly_with_repeated_report_times(method):
    """y' = -1e6 (y - cos t), eagerly: the steps end on every report time
    (repeated ones give the same row) and the values follow the solution."""
    t, lam = np.array([0.0, 0.0, 0.25, 0.25, 1.0]), 1e6
    ys, info = odeint(lambda y, s: -lam * (y - inp.cos(s)), np.array([0.0]), t,
                      method=method, rtol=1e-6, atol=1e-9, full_output=True)
    exact = (lam**2 * np.cos(t) + lam * np.sin(t) - lam**2 * np.exp(-lam * t)) / (lam**2 + 1)
    assert ys[0, 0] == ys[1, 0] == 0.0 and ys[2, 0] == ys[3, 0]
    assert np.max(np.abs(ys[:, 0] - exact)) < 1e-4
    assert info["success"] and info["steps"] + info["rejected"] < 200


# --- derivatives ----------------------------------------------------------------------------

GRAD_T = np.array([0.0, 0.4, 4.0])
GRAD_WEIGHTS = np.array([1.0, 1e4, 1.0])


def _robertson_loss(t, k1, method):
    ys = odeint(robertson, ROBERTSON_Y0, t, k1, method=method, rtol=1e-6, atol=1e-10)
    return inp.sum(ys * GRAD_WEIGHTS)


def _central(f, args, i, h=1e-6):
    """Central differences of f in argument i (a scalar or a vector), the
    step relative to each entry (at least h)."""
    base = [np.asarray(a, np.float64) for a in args]
    out = []
    for j in range(base[i].size):
        step = np.zeros(base[i].size)
        step[j] = h * max(1.0, abs(base[i].ravel()[j]))
        plus, minus = list(base), list(base)
        plus[i] = base[i] + step.reshape(base[i].shape)
        minus[i] = base[i] - step.reshape(base[i].shape)
        out.append((f(*plus) - f(*minus)) / (2 * step[j]))
    return np.array(out).reshape(base[i].shape)


@pytest.mark.parametrize("method", STIFF)
def test_gradients_of_a_stiff_solve_match_central_differences(method):
    """Robertson's kinetics on [0, 4] (stiff: steps far beyond an explicit
    method's stability), the loss a weighted sum over the report times: the
    gradient (reverse mode, through the loops as they ran, rejected steps and
    failed Newton iterations included) with respect to the report times and
    the rate k1, within 1e-6 relative of central differences (of the solve
    compiled)."""
    args = (GRAD_T, 0.04)
    loss = functools.partial(_robertson_loss, method=method)
    grads = ik.jit(ik.grad(loss, argnums=(0, 1)), strategy="reference")(*args)
    value = ik.jit(loss)
    for i, g in enumerate(grads):
        fd = _central(value, args, i)
        assert np.max(np.abs(g - fd)) <= 1e-6 * np.max(np.abs(fd)), (i, g, fd)


# --- vmap and jit ---------------------------------------------------------------------------

PIXEL_T = np.array([0.0, 1.0, 10.0, 40.0])


def _pixel(k1, x0, method):
    y0 = inp.stack([x0, 0.0 * x0, 1.0 - x0])
    ys, info = odeint(robertson, y0, PIXEL_T, k1, method=method, rtol=1e-7, atol=1e-11,
                      full_output=True)
    return ys, info["steps"] + info["rejected"]


@pytest.mark.parametrize("method", STIFF)
def test_per_pixel_each_its_own_steps_and_the_unmapped_values(method):
    """Robertson with a rate and an initial state per pixel: under ``vmap``
    each pixel takes its own steps, and ``jit`` with the default strategy (a
    per-pixel loop) and the reference strategy give each pixel the steps and
    the values (the bits, by the reference) of its unmapped solve."""
    rng = np.random.default_rng(0)
    k1, x0 = rng.uniform(0.01, 0.2, 16), rng.uniform(0.5, 1.0, 16)
    fn = ik.vmap(functools.partial(_pixel, method=method))
    ys, steps = ik.jit(fn)(k1, x0)
    ref_ys, ref_steps = ik.jit(fn, strategy="reference")(k1, x0)
    assert ys.shape == (16, 4, 3) and steps.min() < steps.max()
    assert np.array_equal(steps, ref_steps)
    assert np.max(np.abs(ys - ref_ys)) <= 1e-10 * np.max(np.abs(ref_ys))
    one = ik.jit(functools.partial(_pixel, method=method), strategy="reference")
    for i in sorted({int(np.argmin(steps)), int(np.argmax(steps)), 7}):
        y_i, n_i = one(k1[i], x0[i])
        assert bit_identical(y_i, ref_ys[i]) and n_i == ref_steps[i], i
