"""``isokernel.ode.odeint``: its tables, values against analytic solutions
and SciPy, derivatives against finite differences and JAX, ``vmap`` lane by
lane, ``jit`` on every CPU strategy, the stiff problems, and its errors.

Accuracy bound. ``rtol``/``atol`` bound the *local* error of each step; the
global error of a solve accumulates them. The value tests require
``|y - y_ref| <= GLOBAL * (rtol |y_ref| + atol)`` at every report time, with
``GLOBAL = 200``: SciPy's own Dormand–Prince (``RK45``) at the same tolerances
is 51–55 local tolerances off on the Lotka–Volterra problem below, dopri5 and
tsit5 here 42–75, rosenbrock23 (second order: its global error grows like
tol^(2/3)) 43 on Robertson and 136 on Van der Pol. The references: analytic
solutions, and SciPy ``solve_ivp`` (Radau or DOP853 at rtol 1e-10 or
tighter).
"""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends.parity import bit_identical
from isokernel.ode import TABLES, odeint

GLOBAL = 200.0
COMPILED = "native" if codegen.unavailable_reason() is None else "reference"
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")


def within(ys, ref, rtol, atol) -> float:
    """The largest error in local tolerances."""
    return float(np.max(np.abs(ys - ref) / (rtol * np.abs(ref) + atol)))


# --- the problems ---------------------------------------------------------------------------

def decay(y, t, k):
    return -k * y


def oscillator(y, t, w):
    return inp.stack([y[1], -w * w * y[0]])


def damped(y, t, k, c):
    return inp.stack([y[1], -k * y[0] - c * y[1]])


def lotka_volterra(y, t, a, b, c, d):
    return inp.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


def driven(y, t, a, b):
    """Lotka–Volterra-like with a time-dependent term (for gradients in t)."""
    return inp.stack([a * y[0] - b * y[0] * y[1],
                      -y[1] + 0.5 * y[0] * y[1] + 0.1 * inp.sin(t)])


def robertson(y, t):
    y1, y2, y3 = y[0], y[1], y[2]
    return inp.stack([-0.04 * y1 + 1e4 * y2 * y3,
                      0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2,
                      3e7 * y2 * y2])


def van_der_pol(y, t, mu):
    return inp.stack([y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]])


def scipy_integrate():
    return pytest.importorskip("scipy.integrate", reason="SciPy is the reference here: "
                               "pip install scipy")


def scipy_reference(fun, y0, t, *args, method="Radau", tol=1e-10, atol=None):
    sol = scipy_integrate().solve_ivp(lambda s, y: np.asarray(fun(y, s, *args)),
                                    (t[0], t[-1]), y0, method=method, rtol=tol,
                                    atol=tol if atol is None else atol, t_eval=t)
    assert sol.success, sol.message
    return sol.y.T


# --- the tables -----------------------------------------------------------------------------

def _matrix(table):
    a = np.zeros((table.stages, table.stages))
    for i, row in enumerate(table.a):
        a[i, :len(row)] = row
    return a


@pytest.mark.parametrize("name", ["euler", "heun", "rk4", "dopri5", "tsit5"])
def test_explicit_tables_meet_their_order_conditions(name):
    table = TABLES[name]
    a, b, c = _matrix(table), np.array(table.b), np.array(table.c)
    conditions = [b.sum() - 1, b @ c - 1 / 2, b @ c**2 - 1 / 3, b @ a @ c - 1 / 6,
                  b @ c**3 - 1 / 4, b @ (c * (a @ c)) - 1 / 8, b @ a @ c**2 - 1 / 12,
                  b @ a @ a @ c - 1 / 24]
    counts = {1: 1, 2: 2, 3: 4, 4: 8}
    met = conditions[:counts[min(table.order, 4)]]
    assert np.max(np.abs(a.sum(axis=1) - c)) < 1e-15
    assert np.max(np.abs(met)) < 1e-15
    if table.order < 4:  # and not of a higher order than it says
        assert np.max(np.abs(conditions[:counts[table.order + 1]])) > 1e-3


@pytest.mark.parametrize("name", ["dopri5", "tsit5"])
def test_the_embedded_solutions_are_of_order_four(name):
    """b_hat = b - b_err meets every condition up to order 4 and the
    order-5 weight condition fails: the error estimate is O(h^5)."""
    table = TABLES[name]
    a, c = _matrix(table), np.array(table.c)
    b_hat = np.array(table.b) - np.array(table.b_err)
    conditions = [b_hat.sum() - 1, b_hat @ c - 1 / 2, b_hat @ c**2 - 1 / 3,
                  b_hat @ a @ c - 1 / 6, b_hat @ c**3 - 1 / 4, b_hat @ (c * (a @ c)) - 1 / 8,
                  b_hat @ a @ c**2 - 1 / 12, b_hat @ a @ a @ c - 1 / 24]
    assert np.max(np.abs(conditions)) < 1e-14
    assert abs(b_hat @ c**4 - 1 / 5) > 1e-5


def test_the_controller_root_is_close_to_the_power():
    from isokernel.ode.odeint import MAX_FACTOR, MIN_FACTOR, SAFETY, _root
    for n in (3, 5):  # the error orders 2 and 4, over the ratios the controller clips to
        x = np.geomspace((SAFETY / MAX_FACTOR) ** n, (SAFETY / MIN_FACTOR) ** n, 1001)
        assert np.max(np.abs(_root(x, n) / x ** (1.0 / n) - 1.0)) < 7e-4


@pytest.mark.parametrize("name", ["dopri5", "tsit5", "rosenbrock23"])
def test_dense_output_ends_at_the_step(name):
    """w_j(1) = b_j for the explicit pairs; the Rosenbrock extension is
    y + h k2 at theta = 1, its step."""
    table = TABLES[name]
    at_one = np.array(table.dense).sum(axis=1)
    want = np.array(table.b) if name != "rosenbrock23" else np.array([0.0, 1.0])
    assert np.max(np.abs(at_one - want)) < 2e-14
    if name == "rosenbrock23":
        return
    assert np.max(np.abs(np.array(table.b_err))) > 1e-3  # an embedded pair
    assert abs(sum(table.b_err)) < 1e-15
    a, c = _matrix(table), np.array(table.c)
    for theta in (0.3, 0.7):  # a fourth-order interpolant: the conditions in theta
        w = np.array([np.polynomial.polynomial.polyval(theta, row) for row in table.dense])
        conditions = [w.sum() - theta, w @ c - theta**2 / 2, w @ c**2 - theta**3 / 3,
                      w @ a @ c - theta**3 / 6, w @ c**3 - theta**4 / 4,
                      w @ (c * (a @ c)) - theta**4 / 8, w @ a @ c**2 - theta**4 / 12,
                      w @ a @ a @ c - theta**4 / 24]
        assert np.max(np.abs(conditions)) < 1e-14


# --- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["dopri5", "tsit5"])
def test_decay_and_oscillator_against_their_solutions(method):
    t = np.linspace(0.0, 10.0, 41)  # many report times inside steps: the dense output
    ys = odeint(decay, np.array([1.0, -3.0]), t, 0.5, method=method)
    assert within(ys, np.exp(-0.5 * t)[:, None] * np.array([1.0, -3.0]),
                  1.4e-8, 1.4e-8) < GLOBAL
    ys = odeint(oscillator, np.array([1.0, 0.0]), t, 2.0, method=method)
    exact = np.stack([np.cos(2.0 * t), -2.0 * np.sin(2.0 * t)], axis=1)
    assert within(ys, exact, 1.4e-8, 1.4e-8) < GLOBAL
    assert ys.shape == (41, 2) and np.array_equal(ys[0], [1.0, 0.0])


@pytest.mark.parametrize("method, order", [("euler", 1), ("heun", 2), ("rk4", 4)])
def test_fixed_step_methods_converge_at_their_order(method, order):
    t = np.array([0.0, 0.35, 1.0])  # not multiples of dt0: the last steps are shortened
    errors = []
    for dt0 in (0.1, 0.05, 0.025):
        ys = odeint(oscillator, np.array([1.0, 0.0]), t, 2.0, method=method, dt0=dt0)
        errors.append(np.max(np.abs(ys[-1] - [np.cos(2.0), -2.0 * np.sin(2.0)])))
    slope = np.polyfit(np.log([0.1, 0.05, 0.025]), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.25, (slope, errors)


@pytest.mark.parametrize("method, rtol", [("dopri5", 1.4e-8), ("tsit5", 1e-6)])
def test_lotka_volterra_against_scipy(method, rtol):
    t = np.linspace(0.0, 15.0, 31)
    args, y0 = (1.5, 1.0, 3.0, 1.0), np.array([10.0, 5.0])
    ref = scipy_reference(lotka_volterra, y0, t, *args, method="DOP853", tol=1e-13)
    solve = ik.jit(lambda y: odeint(lotka_volterra, y, t, *args, method=method, rtol=rtol,
                                    atol=rtol, full_output=True), strategy="reference")
    ys, info = solve(y0)  # jit: the eager bits (below), in less time
    assert within(ys, ref, rtol, rtol) < GLOBAL
    assert info["success"] and info["steps"] > 50


def test_a_pytree_state_keeps_its_structure_and_float32():
    def fun(y, t):
        return {"x": y["v"][0], "v": inp.stack([-y["x"], -0.1 * y["v"][1]])}
    y0 = {"x": np.float32(1.0), "v": np.array([0.0, 2.0], np.float32)}
    t = np.array([0.0, 0.5, 1.0], np.float32)
    ys = odeint(fun, y0, t, rtol=1e-5, atol=1e-5)
    assert set(ys) == {"x", "v"} and ys["x"].shape == (3,) and ys["v"].shape == (3, 2)
    assert ys["x"].dtype == np.float32 and ys["v"].dtype == np.float32
    assert abs(ys["x"][-1] - np.cos(1.0)) < 1e-3
    assert abs(ys["v"][-1, 1] - 2.0 * np.exp(-0.1)) < 1e-3


def test_one_report_time_is_the_initial_value():
    ys, info = odeint(decay, np.array([2.0]), np.array([3.0]), 1.0, full_output=True)
    assert np.array_equal(ys, [[2.0]]) and info["steps"] == 0 and info["success"]


# --- derivatives ----------------------------------------------------------------------------

T_GRAD = np.array([0.0, 0.5, 1.7, 3.0])
Y_GRAD = np.array([1.0, 0.5])


def _loss(y0, t, a, b, method="dopri5", rtol=1.4e-8):
    return inp.sum(odeint(driven, y0, t, a, b, method=method, rtol=rtol, atol=rtol) ** 2)


def _central(f, args, i, h=1e-6):
    """Central differences of f in argument i (a scalar or a vector)."""
    base = [np.asarray(a, np.float64) for a in args]
    out = []
    for j in range(base[i].size):
        step = np.zeros(base[i].size)
        step[j] = h
        plus, minus = list(base), list(base)
        plus[i] = base[i] + step.reshape(base[i].shape)
        minus[i] = base[i] - step.reshape(base[i].shape)
        out.append((f(*plus) - f(*minus)) / (2 * h))
    return np.array(out).reshape(base[i].shape)


@pytest.mark.parametrize("method", ["dopri5", "tsit5"])
def test_reverse_mode_matches_central_differences(method):
    """The gradient with respect to y0, t and both parameters, through the
    scan of report times and the checkpointed reverse pass of each while."""
    args = (Y_GRAD, T_GRAD, 1.1, 0.4)
    loss = ik.jit(lambda *a: _loss(*a, method=method), strategy="reference")
    grads = ik.grad(lambda *a: _loss(*a, method=method), argnums=(0, 1, 2, 3))(*args)
    for i, g in enumerate(grads):
        fd = _central(loss, args, i)
        assert np.max(np.abs(g - fd)) < 1e-6 * np.max(np.abs(fd)), (i, g, fd)


def test_forward_mode_equals_reverse_mode():
    args = (Y_GRAD, T_GRAD, 1.1, 0.4)
    rev = ik.grad(_loss, argnums=(0, 1, 2, 3))(*args)
    fwd = ik.jacfwd(_loss, argnums=(0, 1, 2, 3))(*args)
    for r, f in zip(rev, fwd):
        assert np.max(np.abs(r - f)) < 1e-12 * np.max(np.abs(r))


def test_gradients_match_jax_odeint():
    jax = pytest.importorskip("jax", reason="JAX is not installed: pip install jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jax_odeint

    def jax_driven(y, t, a, b):
        return jnp.stack([a * y[0] - b * y[0] * y[1],
                          -y[1] + 0.5 * y[0] * y[1] + 0.1 * jnp.sin(t)])

    def jax_loss(y0, t, a, b):
        return jnp.sum(jax_odeint(jax_driven, y0, t, a, b, rtol=1e-10, atol=1e-10) ** 2)
    args = (Y_GRAD, T_GRAD, 1.1, 0.4)
    want = jax.grad(jax_loss, argnums=(0, 1, 2, 3))(*args)
    got = ik.grad(lambda *a: _loss(*a, rtol=1e-10), argnums=(0, 1, 2, 3))(*args)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert np.max(np.abs(g - w)) < 1e-6 * np.max(np.abs(w)), (g, w)


# --- vmap and jit ---------------------------------------------------------------------------

T_PIX = np.array([0.0, 1.0, 2.5])


def _pixel(x0, k, c):
    ys, info = odeint(damped, inp.stack([x0, inp.zeros_like(x0)]), T_PIX, k, c,
                      full_output=True)
    return ys, info["steps"]


def _pixels(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1.0, 1.0, n), rng.uniform(1.0, 40.0, n), rng.uniform(0.0, 2.0, n))


def test_vmap_gives_each_element_its_unmapped_bits():
    x0, k, c = _pixels(1000)
    ys, steps = ik.vmap(_pixel)(x0, k, c)
    assert ys.shape == (1000, 3, 2) and steps.min() < steps.max()  # each its own steps
    one = ik.jit(_pixel, strategy="reference")  # the eager bits (next test)
    picks = {int(np.argmin(steps)), int(np.argmax(steps)), *range(0, 1000, 100)}
    for i in sorted(picks):
        y_i, n_i = one(x0[i], k[i], c[i])
        assert bit_identical(y_i, ys[i]) and n_i == steps[i], i


def test_report_times_mapped_per_element():
    times = np.array([[0.0, 1.0, 2.0], [0.5, 1.0, 3.0], [0.0, 0.1, 0.2]])
    ys = ik.vmap(lambda t: odeint(decay, np.array([1.0]), t, 1.0))(times)
    assert within(ys[..., 0], np.exp(-(times - times[:, :1])), 1.4e-8, 1.4e-8) < GLOBAL
    assert bit_identical(odeint(decay, np.array([1.0]), times[1], 1.0), ys[1])


@needs_cc
def test_jit_on_every_cpu_strategy_gives_the_eager_bits():
    args = _pixels(200, seed=1)
    fn = ik.vmap(_pixel)
    eager = fn(*args)
    tiled = {"workers": 2, "tile_rows": 50}  # tiles end inside the batch: lanes split
    for strategy, options in (("reference", {}), ("threads", tiled)):
        got = ik.jit(fn, strategy=strategy, **options)(*args)
        assert all(bit_identical(g, w) for g, w in zip(got, eager)), strategy
    with ik.numerics("portable"):
        want = ik.jit(fn, strategy="reference")(*args)
        compiled = ik.jit(fn, strategy="native", workers=2).lower(*args).compile()
        got = compiled(*args)
    assert all(bit_identical(g, w) for g, w in zip(got, want))
    native = ik.jit(fn, strategy="native", workers=2)(*args)  # libm: the same steps here
    assert np.max(np.abs(native[0] - eager[0])) < 1e-12
    report = str(compiled.report())
    assert "row-independent along axis 0 (200 rows): 1 region(s)" in report
    scan_line = next(x for x in report.splitlines() if x.strip().startswith("scan: "))
    assert "generated C (a C for loop" in scan_line  # the scan, and the while in it, in C
    source = compiled.source()
    assert "scan @" in source and "while (" in source


# --- stiff problems -------------------------------------------------------------------------

def _pixels_of(fun, y0, t, *args, **options):
    """The solve as a per-pixel loop over four identical pixels, compiled where
    a C compiler is. (One row is no pixel axis, and a pixel count equal to
    the state size or the number of report times is taken for one of those
    axes: the loop would run whole, by the reference rules.)"""
    def one(y):
        return odeint(fun, y, t, *args, full_output=True, **options)
    fn = ik.jit(ik.vmap(one), strategy=COMPILED)
    ys, info = fn(np.stack([y0] * 4))
    return ys[0], {key: value[0] for key, value in info.items()}


ROBERTSON_T = np.array([0.0, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4, 1e5])
ROBERTSON_Y0 = np.array([1.0, 0.0, 0.0])
VDP_T = np.linspace(0.0, 3000.0, 7)
VDP_Y0 = np.array([2.0, 0.0])


def _robertson_np(t, y):
    return [-0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2, 3e7 * y[1] ** 2]


def _vdp_np(t, y, mu=1000.0):
    return [y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]]


def _vdp_jac(t, y, mu=1000.0):
    return [[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0, mu * (1.0 - y[0] ** 2)]]


def test_robertson_kinetics_by_rosenbrock23():
    """Radau at rtol 1e-10 is the reference."""
    ref = scipy_integrate().solve_ivp(_robertson_np, (0.0, 1e5), ROBERTSON_Y0, method="Radau",
                                    rtol=1e-10, atol=1e-14, t_eval=ROBERTSON_T).y.T
    ys, info = _pixels_of(robertson, ROBERTSON_Y0, ROBERTSON_T, method="rosenbrock23",
                          rtol=1e-6, atol=1e-10)
    assert info["success"] and within(ys, ref, 1e-6, 1e-10) < GLOBAL
    assert info["steps"] + info["rejected"] < 1000
    assert abs(ys[-1].sum() - 1.0) < 1e-12  # mass conserved: the method is linear in y


def test_van_der_pol_mu_1000_by_rosenbrock23():
    """LSODA at rtol 1e-10 with the exact Jacobian is the reference (it agrees
    with Radau at rtol 1e-10 within 2.1e-8 here, in 1% of the time)."""
    ref = scipy_integrate().solve_ivp(_vdp_np, (0.0, 3000.0), VDP_Y0, method="LSODA",
                                    rtol=1e-10, atol=1e-12, jac=_vdp_jac, t_eval=VDP_T).y.T
    ys, info = _pixels_of(van_der_pol, VDP_Y0, VDP_T, 1000.0, method="rosenbrock23",
                          rtol=1e-6, atol=1e-6)
    assert info["success"] and within(ys, ref, 1e-6, 1e-6) < GLOBAL
    assert info["steps"] + info["rejected"] < 5000


@needs_cc
@pytest.mark.parametrize("problem", ["robertson", "van_der_pol"])
def test_an_explicit_method_needs_far_more_steps_on_stiff_problems(problem):
    """dopri5 at the same tolerances, with ten times the steps rosenbrock23
    took, does not reach the end (its rejected steps overflow: quiet here)."""
    fun, y0, t, args, atol = {"robertson": (robertson, ROBERTSON_Y0, ROBERTSON_T, (), 1e-10),
                              "van_der_pol": (van_der_pol, VDP_Y0, VDP_T, (1000.0,), 1e-6)}[
        problem]
    _, info = _pixels_of(fun, y0, t, *args, method="rosenbrock23", rtol=1e-6, atol=atol)
    budget = 10 * int(info["steps"] + info["rejected"])
    with np.errstate(all="ignore"):
        ys, e_info = _pixels_of(fun, y0, t, *args, rtol=1e-6, atol=atol, max_steps=budget)
    assert not e_info["success"] and np.isnan(ys[-1]).all()
    assert e_info["steps"] + e_info["rejected"] == budget
    print(f"{problem}: rosenbrock23 {info['steps']} steps ({info['rejected']} rejected); "
          f"dopri5 not at t={t[-1]:g} after {budget}")


def test_rosenbrock23_eagerly_on_a_stiff_linear_problem():
    """y' = -1e6 (y - cos t): after a transient of 1e-6 the solution follows
    cos t. An explicit method, stable only for steps below about 3.3e-6 here,
    needs 3e5 steps on [0, 1]; rosenbrock23 (L-stable) a few hundred."""
    t, lam = np.array([0.0, 0.5, 1.0]), 1e6
    ys, info = odeint(lambda y, s: -lam * (y - inp.cos(s)), np.array([0.0]), t,
                      method="rosenbrock23", rtol=1e-5, atol=1e-8, full_output=True)
    exact = (lam**2 * np.cos(t) + lam * np.sin(t) - lam**2 * np.exp(-lam * t)) / (lam**2 + 1)
    assert within(ys[:, 0], exact, 1e-5, 1e-8) < GLOBAL
    assert info["success"] and info["steps"] + info["rejected"] < 500


# --- errors ---------------------------------------------------------------------------------

def test_errors_name_the_problem_and_the_fix():
    y0, t = np.array([1.0]), np.array([0.0, 1.0])
    with pytest.raises(ValueError, match="unknown method 'rk45'; choose one of euler"):
        odeint(decay, y0, t, 1.0, method="rk45")
    with pytest.raises(ValueError, match="method='rk4' takes fixed steps .* give dt0="):
        odeint(decay, y0, t, 1.0, method="rk4")
    with pytest.raises(ValueError, match=r"t is not increasing \(t\[2\] = 0.5 < t\[1\] = 1.0\)"):
        odeint(decay, y0, np.array([0.0, 1.0, 0.5]), 1.0)
    with pytest.raises(ValueError, match=r"t has shape \(2, 2\); give a 1-D array"):
        odeint(decay, y0, np.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="max_steps=0; give a positive"):
        odeint(decay, y0, t, 1.0, max_steps=0)
    with pytest.raises(ValueError, match="return dy/dt with the structure of y0"):
        odeint(lambda y, s: (y, y), y0, t)
    with pytest.raises(ValueError, match=r"func returned shape \(2,\) for leaf 0 of y0, of "
                                         r"shape \(1,\); return dy/dt with the shapes of y0"):
        odeint(lambda y, s: inp.concatenate([y, y]), y0, t)


def test_running_out_of_steps_fills_nan_and_says_so():
    t = np.array([0.0, 0.1, 10.0])
    with pytest.warns(RuntimeWarning, match="max_steps=5 steps were taken before t=10.0"):
        ys, info = odeint(oscillator, np.array([1.0, 0.0]), t, 2.0, max_steps=5,
                          full_output=True)
    assert np.isfinite(ys[1]).all() and np.isnan(ys[2]).all()
    assert not info["success"] and info["steps"] + info["rejected"] == 5
    fn = ik.jit(lambda y: odeint(oscillator, y, t, 2.0, max_steps=5, full_output=True))
    got, got_info = fn(np.array([1.0, 0.0]))  # inside jit: the NaN and the flag
    assert bit_identical(got, ys) and not got_info["success"]
