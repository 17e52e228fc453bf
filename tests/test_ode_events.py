"""``odeint(..., dense=True)`` and ``odeint(..., event=...)``: the order of
each method's interpolant, dense values against SciPy's dense output, the
report values unchanged, ``evaluate`` eagerly, under ``jit`` and ``vmap``
and differentiated; events located against analytic and SciPy event times,
their gradients against closed forms and central differences, per pixel."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.backends.parity import bit_identical
from isokernel.ode import ODESolution, odeint

GLOBAL = 200.0  # global errors in local tolerances, as tests/test_ode.py
G = 9.81
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")


def oscillator(y, t, w):
    return inp.stack([y[1], -w * w * y[0]])


def lotka_volterra(y, t, a, b, c, d):
    return inp.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


def ball(y, t, g):
    return inp.stack([y[1], -g + 0.0 * y[0]])


def drag(y, t, g, k):
    return inp.stack([y[1], -g - k * y[1] * inp.abs(y[1])])


def ground(y, t, *args):
    return y[0]


def impact(h0, v0, g=G):
    """y = h0 + v0 t - g t^2 / 2 = 0, and dt*/dh0, dt*/dv0, dt*/dg."""
    s = np.sqrt(v0 * v0 + 2.0 * g * h0)
    t = (v0 + s) / g
    return t, 1.0 / s, (1.0 + v0 / s) / g, h0 / (s * g) - t / g


def scipy_integrate():
    return pytest.importorskip("scipy.integrate", reason="SciPy is the reference here: "
                               "pip install scipy")


# --- dense output ---------------------------------------------------------------------------

@pytest.mark.parametrize("method, order", [("dopri5", 4), ("tsit5", 4), ("rosenbrock23", 2),
                                           ("rodas5", 3), ("kvaerno5", 3)])
def test_each_interpolant_has_its_order(method, order):
    """One step of size h (tolerances loose enough to accept it): the
    interpolant's largest error over the step is O(h^(order + 1)) — the
    methods' own dense outputs (4th order for dopri5 and tsit5, 2nd for
    rosenbrock23) and the cubic Hermite of the methods without one."""
    sizes = np.array([0.4, 0.2, 0.1, 0.05])
    errors = []
    for h in sizes:
        sol = odeint(oscillator, np.array([1.0, 0.0]), np.array([0.0, h]), 2.0, method=method,
                     dt0=h, rtol=1e3, atol=1e3, dense=True, max_steps=4)
        assert sol.info["steps"] == 1
        s = np.linspace(0.0, h, 41)
        exact = np.stack([np.cos(2.0 * s), -2.0 * np.sin(2.0 * s)], axis=1)
        errors.append(np.max(np.abs(sol.evaluate(s) - exact)))
    slope = np.polyfit(np.log(sizes), np.log(errors), 1)[0]
    assert abs(slope - (order + 1)) < 0.3, (slope, errors)


@pytest.mark.parametrize("method, rtol", [("dopri5", 1e-8), ("tsit5", 1e-8),
                                          ("rosenbrock23", 1e-4), ("rodas5", 1e-6)])
def test_dense_values_against_scipy_dense_output(method, rtol):
    """At 3001 times on Lotka–Volterra against DOP853's dense output at rtol
    1e-13: within the global bound for the fifth-order explicit pairs, and
    for every method no further off between the steps than at their starts
    (the interpolant adds nothing to the global error)."""
    args, y0, t = (1.5, 1.0, 3.0, 1.0), np.array([10.0, 5.0]), np.array([0.0, 15.0])
    ref = scipy_integrate().solve_ivp(lambda s, y: np.asarray(lotka_volterra(y, s, *args)),
                                      (0.0, 15.0), y0, method="DOP853", rtol=1e-13,
                                      atol=1e-13, dense_output=True)
    solve = ik.jit(lambda y: odeint(lotka_volterra, y, t, *args, method=method, rtol=rtol,
                                    atol=rtol, dense=True, max_steps=1000),
                   strategy="reference")
    sol = solve(y0)
    assert isinstance(sol, ODESolution) and sol.info["success"]

    def error(s):
        want = ref.sol(s).T
        return np.max(np.abs(sol.evaluate(s) - want) / (rtol * np.abs(want) + rtol))
    starts = np.asarray(sol.t_steps)
    starts = starts[np.isfinite(starts)]
    assert starts.size == sol.info["steps"] > 50
    between = error(np.linspace(0.0, 15.0, 3001))
    assert between <= 1.3 * error(starts), (between, error(starts))
    if method in ("dopri5", "tsit5"):
        assert between < GLOBAL


@pytest.mark.parametrize("method, options", [("dopri5", {}), ("rodas5", {}),
                                             ("rk4", {"dt0": 0.05})])
def test_the_report_values_are_those_of_odeint(method, options):
    """dense=True and an event that never fires take the same steps and give
    the same bits at the report times (repeated ones included)."""
    t = np.array([0.0, 0.3, 0.3, 1.0, 2.5])
    y0 = np.array([1.0, 0.0])
    plain, info = odeint(oscillator, y0, t, 2.0, method=method, full_output=True, **options)
    sol = odeint(oscillator, y0, t, 2.0, method=method, dense=True, **options)
    never = odeint(oscillator, y0, t, 2.0, method=method, event=lambda y, s, w: y[0] - 5.0,
                   **options)
    assert bit_identical(sol.ys, plain) and bit_identical(never.ys, plain)
    assert sol.info["steps"] == never.info["steps"] == info["steps"]
    assert not never.event_found and np.isnan(never.t_event) and np.isnan(never.y_event).all()
    assert never.info["success"] and sol.t_end == 2.5
    if method == "rk4":  # the fixed-step methods' Hermite interpolant
        s = np.linspace(0.0, 2.5, 101)
        assert np.max(np.abs(sol.evaluate(s)[:, 0] - np.cos(2.0 * s))) < 1e-5


def test_evaluate_eagerly_under_jit_and_differentiated():
    y0, t = np.array([1.0, 0.0]), np.array([0.0, 5.0])
    s = np.array([0.0, 0.37, 1.3, 2.9, 5.0])

    def at(w, times):
        return odeint(oscillator, y0, t, w, dense=True, max_steps=300).evaluate(times)
    eager = at(2.0, s)
    assert eager.shape == (5, 2) and bit_identical(ik.jit(at)(2.0, s), eager)
    exact = np.stack([np.cos(2.0 * s), -2.0 * np.sin(2.0 * s)], axis=1)
    assert np.max(np.abs(eager - exact)) < 1e-7
    # in time: the interpolant's slope is y' (to its order)
    for time in (0.37, 2.9):
        slope = ik.grad(lambda u: at(2.0, u)[0])(time)
        assert abs(slope + 2.0 * np.sin(2.0 * time)) < 1e-6
    slopes = ik.jit(ik.vmap(ik.grad(lambda u: at(2.0, u)[1])))(s[1:-1])
    assert np.max(np.abs(slopes + 4.0 * np.cos(2.0 * s[1:-1]))) < 1e-6
    # in a parameter, through the recorded steps, against central differences
    def loss(w):
        return inp.sum(at(w, s[1:])[:, 0])
    grad = ik.grad(loss)(2.0)
    central = (loss(2.0 + 1e-6) - loss(2.0 - 1e-6)) / 2e-6
    assert abs(grad - central) < 1e-6 * abs(central)
    assert abs(grad - np.sum(-s[1:] * np.sin(2.0 * s[1:]))) < 1e-6
    # outside [t[0], t_end]: NaN; without dense=True: no interpolant
    assert np.isnan(at(2.0, np.array([-0.1, 5.1]))).all()
    with pytest.raises(ValueError, match=r"keeps no interpolants; call odeint\(..., dense"):
        odeint(oscillator, y0, t, 2.0, event=ground).evaluate(1.0)
    single = odeint(oscillator, y0, np.array([2.0]), 2.0, dense=True)  # no step: y0 at t[0]
    assert bit_identical(single.evaluate(2.0), y0) and np.isnan(single.evaluate(2.1)).all()


def test_evaluate_per_pixel_and_a_pytree_state():
    def pixel(w):
        return odeint(oscillator, inp.stack([1.0 + 0.0 * w, 0.0 * w]), np.array([0.0, 3.0]),
                      w, dense=True, max_steps=200).evaluate(np.array([0.5, 2.0]))
    w = np.array([1.0, 2.0, 3.5, 5.0])
    got = ik.vmap(pixel)(w)
    assert np.max(np.abs(got[..., 0] - np.cos(w[:, None] * np.array([0.5, 2.0])))) < 1e-7

    def fun(y, t):
        return {"x": y["v"][0], "v": inp.stack([-y["x"], -0.1 * y["v"][1]])}
    y0 = {"x": np.float32(1.0), "v": np.array([0.0, 2.0], np.float32)}
    sol = odeint(fun, y0, np.array([0.0, 1.0], np.float32), rtol=1e-5, atol=1e-5, dense=True,
                 max_steps=50)
    out = sol.evaluate(np.array([[0.25, 0.5], [0.75, 1.0]], np.float32))
    assert out["x"].shape == (2, 2) and out["v"].shape == (2, 2, 2)
    assert out["x"].dtype == np.float32 and abs(out["x"][1, 1] - np.cos(1.0)) < 1e-4


# --- events ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method, options", [("dopri5", {}), ("tsit5", {}),
                                             ("rosenbrock23", {}), ("rodas5", {}),
                                             ("kvaerno5", {}), ("rk4", {"dt0": 0.01})])
def test_the_first_impact_of_a_ball(method, options):
    """y'' = -g from h0 with upward speed v0; the event y = 0. Every method's
    interpolant is exact on the quadratic: the time to rounding."""
    t = np.array([0.0, 0.5, 1.0, 2.0, 10.0])
    sol = odeint(ball, np.array([10.0, 2.0]), t, G, method=method, event=ground, **options)
    t_star = impact(10.0, 2.0)[0]
    assert sol.event_found and abs(sol.t_event - t_star) < 1e-9
    assert abs(sol.y_event[0]) < 1e-9 and abs(sol.y_event[1] - (2.0 - G * t_star)) < 1e-9
    assert sol.info["success"] and sol.t_end == sol.t_event
    kept = t <= t_star  # the report times up to the event, NaN after
    assert np.max(np.abs(sol.ys[kept, 0] - (10.0 + 2.0 * t[kept] - G * t[kept] ** 2 / 2))) < 1e-9
    assert np.isnan(sol.ys[~kept]).all()


def test_the_impact_time_gradient_is_the_implicit_function_theorems():
    def t_event(h0, v0, g):
        return odeint(ball, inp.stack([h0, v0]), np.array([0.0, 10.0]), g,
                      event=ground).t_event
    args = (10.0, 2.0, G)
    _, *want = impact(*args)
    grads = ik.grad(t_event, argnums=(0, 1, 2))(*args)
    forward = ik.jacfwd(t_event, argnums=(0, 1, 2))(*args)
    for i, (g, f, w) in enumerate(zip(grads, forward, want)):
        plus, minus = list(args), list(args)
        plus[i] += 1e-6
        minus[i] -= 1e-6
        central = (t_event(*plus) - t_event(*minus)) / 2e-6
        assert abs(g - w) < 1e-6 * abs(w) and abs(g - central) < 1e-6 * abs(w), (i, g, w)
        assert abs(f - g) < 1e-13
    # the state at the event: d y'(t*) / d h0 = -g dt*/dh0
    dv = ik.grad(lambda h: odeint(ball, inp.stack([h, 2.0]), np.array([0.0, 10.0]), G,
                                  event=ground).y_event[1])(10.0)
    assert abs(dv + G * want[0]) < 1e-9


def test_a_ball_with_drag_against_scipy_events():
    """y'' = -g - k y'|y'|: the impact time within 1e-9 of SciPy's (DOP853 at
    rtol 1e-13, its event root-finder), and the gradient in h0, v0 and k at
    rtol 1e-12 within 1e-6 of central differences of SciPy's event time."""
    integrate = scipy_integrate()

    def reference(h0, v0, k):
        def hit(s, y):
            return y[0]
        hit.terminal = True
        sol = integrate.solve_ivp(lambda s, y: [y[1], -G - k * y[1] * abs(y[1])], (0.0, 20.0),
                                  [h0, v0], method="DOP853", rtol=1e-13, atol=1e-13,
                                  events=hit)
        return sol.t_events[0][0]

    def t_event(h0, v0, k, rtol=1e-12):
        return odeint(drag, inp.stack([h0, v0]), np.array([0.0, 20.0]), G, k, rtol=rtol,
                      atol=rtol, event=ground).t_event
    args = (3.0, 8.0, 0.05)
    assert abs(t_event(*args) - reference(*args)) < 1e-9
    grads = ik.grad(t_event, argnums=(0, 1, 2))(*args)
    for i, g in enumerate(grads):
        plus, minus = list(args), list(args)
        plus[i] += 1e-5
        minus[i] -= 1e-5
        central = (reference(*plus) - reference(*minus)) / 2e-5
        assert abs(g - central) < 1e-6 * abs(central), (i, g, central)


def test_events_per_pixel_each_its_own():
    """Under vmap every pixel stops at its own event (its own steps), with the
    unmapped solve's bits; one pixel's event never fires."""
    def pixel(h0, v0):
        sol = odeint(drag, inp.stack([h0, v0]), np.array([0.0, 0.5, 3.0]), G, 0.1,
                     event=ground)
        return sol.t_event, sol.ys, sol.info["steps"], sol.event_found
    h0 = np.array([1.0, 5.0, 20.0, 12.0, 60.0])
    v0 = np.array([0.0, 4.0, -2.0, 3.0, 3.0])
    t_ev, ys, steps, found = ik.vmap(pixel)(h0, v0)
    assert steps.min() < steps.max() and found[:-1].all() and not found[-1]
    one = ik.jit(pixel, strategy="reference")
    for i in range(5):
        got = one(h0[i], v0[i])
        assert bit_identical(got[0], t_ev[i]) and bit_identical(got[1], ys[i])
    assert np.isnan(t_ev[-1]) and np.isfinite(ys[-1]).all()  # 60 m: still falling at t = 3
    assert np.isnan(ys[0, 1:]).all()  # 1 m: down before t = 0.5
    grads = ik.vmap(ik.grad(lambda a, b: pixel(a, b)[0]))(h0[:2], v0[:2])
    assert np.all(grads > 0)


@needs_cc
def test_events_compiled_per_pixel():
    def pixel(h0, v0):
        sol = odeint(drag, inp.stack([h0, v0]), np.array([0.0, 0.5, 3.0]), G, 0.1,
                     event=ground)
        return sol.t_event, sol.ys
    rng = np.random.default_rng(0)
    h0, v0 = rng.uniform(1.0, 40.0, 64), rng.uniform(-3.0, 5.0, 64)
    with ik.numerics("portable"):
        want = ik.jit(ik.vmap(pixel), strategy="reference")(h0, v0)
        compiled = ik.jit(ik.vmap(pixel), strategy="native").lower(h0, v0).compile()
        got = compiled(h0, v0)
    assert all(bit_identical(g, w) for g, w in zip(got, want))
    assert "row-independent along axis 0 (64 rows): 1 region(s)" in str(compiled.report())


def test_event_errors_name_the_fix():
    y0, t = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    with pytest.raises(ValueError, match=r"event=3; give a function event\(y, t, \*args\)"):
        odeint(oscillator, y0, t, 2.0, event=3)
    with pytest.raises(ValueError, match="event returned shape \\(2,\\); return a scalar"):
        odeint(oscillator, y0, t, 2.0, event=lambda y, s, w: y)
    with pytest.raises(ValueError, match="event_rtol=0; give a positive tolerance"):
        odeint(oscillator, y0, t, 2.0, event=ground, event_rtol=0)


def test_quantities_are_refused_with_dense_output_and_events():
    pytest.importorskip("pint", reason="isokernel.units needs pint")
    from isokernel.units import Quantity
    y0, t = Quantity(np.array([1.0]), "m"), Quantity(np.array([0.0, 1.0]), "s")
    with pytest.raises(ValueError, match="take bare values, not quantities"):
        odeint(lambda y, s: -y / Quantity(1.0, "s"), y0, t, event=ground)
