"""``odeint``: JAX's call form, built from ``isokernel.numpy`` and the
control-flow primitives only, so that it runs eagerly, records into one loop
inside ``jit``, differentiates (both modes, through the loops) and maps
(each element of a ``vmap`` with its own steps) with no op of its own.

The loop: a ``scan`` over the report times ``t[1:]`` whose step is a
``while_loop`` that steps until the solution has passed that time, then
reads the solution there from the last step's dense output (the explicit
adaptive methods and rosenbrock23), or lands on it (fixed steps, and the
stiff methods kvaerno5 and rodas5, whose step there is shortened to end on
it). ``docs/solvers.md`` states the
semantics, the step control and the derivatives.
"""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np

from .. import numpy as inp
from ..control import scan, while_loop
from ..ir.pytree import tree_flatten, tree_unflatten
from ..ir.source import user_where
from ..record import current_builder, overlay
from ..typing import Array, ArrayLike, PyTree
from .events import EVENT_RTOL, check_event, flat_event
from .solution import Layout, fixed_start, fixed_stepper, integrate
from .solvers import Solver, solver_for
from .tableaux import TABLES

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
MAX_STEPS = 10_000
ROOT_BITS = 12
FIXED_NEEDS_DT0 = ("takes fixed steps and needs their size: give dt0=..., e.g. "
                   "dt0=(t[-1] - t[0]) / 1000, or choose an adaptive method (dopri5, tsit5, "
                   "rosenbrock23, kvaerno5, rodas5)")
NOT_REACHED = ("odeint at {where}: max_steps={max_steps} steps were taken before t={t_end} "
               "was reached; the values from there on are NaN. Raise max_steps, loosen "
               "rtol/atol, or for a stiff problem use method='rodas5', 'kvaerno5' or "
               "'rosenbrock23'")


@overload
def odeint(func: Callable[..., Any], y0: PyTree, t: ArrayLike, *args: Any, method: str = "dopri5",
           rtol: ArrayLike = 1.4e-8, atol: ArrayLike = 1.4e-8, max_steps: int = MAX_STEPS,
           dt0: ArrayLike = None, full_output: Literal[False] = False, dense: bool = False,
           event: Callable[..., Any] | None = None, event_rtol: float = EVENT_RTOL) -> Any: ...


@overload
def odeint(func: Callable[..., Any], y0: PyTree, t: ArrayLike, *args: Any, method: str = "dopri5",
           rtol: ArrayLike = 1.4e-8, atol: ArrayLike = 1.4e-8, max_steps: int = MAX_STEPS,
           dt0: ArrayLike = None, full_output: Literal[True], dense: bool = False,
           event: Callable[..., Any] | None = None,
           event_rtol: float = EVENT_RTOL) -> tuple[Any, dict[str, Array]]: ...


def odeint(func: Callable[..., Any], y0: PyTree, t: ArrayLike, *args: Any, method: str = "dopri5",
           rtol: ArrayLike = 1.4e-8, atol: ArrayLike = 1.4e-8, max_steps: int = MAX_STEPS,
           dt0: ArrayLike = None, full_output: bool = False, dense: bool = False,
           event: Callable[..., Any] | None = None, event_rtol: float = EVENT_RTOL) -> Any:
    """Solve dy/dt = func(y, t, *args) from y(t[0]) = y0 and return y at every
    time of ``t`` (a leading axis of len(t) on every leaf of ``y0``).

    ``t``: finite, non-decreasing report times, ``t[0]`` the start. ``method``: euler,
    heun, rk4 (fixed steps of ``dt0``), dopri5, tsit5 (adaptive, explicit),
    rosenbrock23, rodas5 (adaptive, linearly implicit) and kvaerno5 (adaptive,
    implicit) for stiff problems; rodas5 and kvaerno5 end a step on each
    report time. ``rtol``,
    ``atol`` (>= 0): the local error test of the adaptive methods. ``max_steps``: the
    most steps (accepted and rejected) of the whole solve; the times not
    reached within them get NaN. ``full_output=True`` returns ``(ys, info)``,
    info a dict with ``steps`` (accepted), ``rejected`` and ``success``.

    ``dense=True`` or ``event=fn`` return an ``ODESolution`` (``solution``)
    instead of the array: ``.ys`` the values above, ``.evaluate(s)`` the
    state at any time from the steps' interpolants (``dense=True``; at most
    ``max_steps`` steps are recorded), and with ``event(y, t, *args)`` (a
    scalar) the integration stops at its first sign change, ``.t_event``
    and ``.y_event`` located to ``event_rtol`` relative (``events``).

    ``t``, ``rtol`` and ``atol`` known while recording are checked at once;
    traced ones (arguments of ``jit``, mapped by ``vmap``) that are invalid
    give ``success`` False, no step, and NaN in every row after the first."""
    found = overlay.find((y0, t), {})
    if found is not None:  # quantities (isokernel.units): checked there, solved on magnitudes
        if dense or event is not None:
            raise ValueError(f"odeint at {user_where()}: dense=True and event= take bare "
                             f"values, not quantities (isokernel.units); pass the magnitudes")
        options = {"method": method, "rtol": rtol, "atol": atol, "max_steps": max_steps,
                   "dt0": dt0, "full_output": full_output}
        return found.__isokernel_function__("odeint", odeint, (func, y0, t, *args), options)
    where = user_where()
    solver = _solver(method, dt0, where)
    _check_options(t, max_steps, dt0, where)
    _check_tolerances(rtol, atol, where)
    valid = _traced_validity(t, rtol, atol)
    leaves, tree = tree_flatten(y0)
    dtype = np.result_type(*[inp.asarray(x).dtype for x in leaves], np.float32)
    y_flat = _ravel(leaves, dtype)
    fun = _flat_fun(func, args, leaves, tree, dtype)
    t = inp.asarray(t).astype(dtype)
    if dense or event is not None:
        if event is not None:
            check_event(event, event_rtol, where)
        layout = Layout(tree, [_shape(x) for x in leaves], dtype)
        g = None if event is None else flat_event(event, args, layout)
        sol = _solve_recorded(solver, fun, y_flat, t, rtol, atol, max_steps, dt0, valid,
                              layout, bool(dense), g, event_rtol)
        _warn_if_short(sol.info, max_steps, t, where)
        return (sol, sol.info) if full_output else sol
    ys, info = _solve(solver, fun, y_flat, t, rtol, atol, max_steps, dt0, valid)
    _warn_if_short(info, max_steps, t, where)
    out = tree_unflatten(tree, _unravel(ys, leaves, leading=(t.shape[0],)))
    return (out, info) if full_output else out


# --- input ------------------------------------------------------------------------------------

def _solver(method, dt0, where: str) -> Solver:
    if method not in TABLES:
        raise ValueError(f"odeint at {where}: unknown method {method!r}; choose one of "
                         f"{', '.join(TABLES)}")
    solver = solver_for(TABLES[method])
    if not solver.adaptive and dt0 is None:
        raise ValueError(f"odeint at {where}: method={method!r} {FIXED_NEEDS_DT0}")
    return solver


def _check_options(t, max_steps, dt0, where: str) -> None:
    if not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"odeint at {where}: max_steps={max_steps!r}; give a positive "
                         f"number of steps")
    if dt0 is not None and _concrete(dt0) and not np.all(np.asarray(dt0) > 0):
        raise ValueError(f"odeint at {where}: dt0={dt0!r}; give a positive step size")
    shape = tuple(inp.asarray(t).shape)
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"odeint at {where}: t has shape {shape}; give a 1-D array of "
                         f"report times starting with the initial time")
    if _concrete(t):  # traced times (under grad or vmap in t) are the caller's to order
        _check_order(np.asarray(t), where)


def _check_order(times: np.ndarray, where: str) -> None:
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"odeint at {where}: t is not finite (t[{i}] = {float(times[i])!r}); "
                         f"give finite report times, t[0] the initial time")
    bad = np.flatnonzero(np.diff(times) < 0)
    if bad.size:
        i = int(bad[0])
        later, earlier = float(times[i + 1]), float(times[i])
        raise ValueError(f"odeint at {where}: t is not increasing (t[{i + 1}] = {later!r} < "
                         f"t[{i}] = {earlier!r}); give the report times in increasing order "
                         f"(np.sort), t[0] the initial time")


def _check_tolerances(rtol, atol, where: str) -> None:
    for option, value in (("rtol", rtol), ("atol", atol)):
        if _concrete(value) and not np.all(np.asarray(value) >= 0):
            raise ValueError(f"odeint at {where}: {option}={value!r}; give a tolerance >= 0 "
                             f"(a step is accepted when its error is within atol + rtol * |y|)")


def _traced_validity(t, rtol, atol):
    """Whether the traced ones of ``t``, ``rtol``, ``atol`` are valid (t
    finite and non-decreasing, the tolerances >= 0), as a traced bool; None
    when all are numbers, checked already."""
    checks = []
    if not _concrete(t):
        t = inp.asarray(t)
        checks.append(inp.all(inp.isfinite(t)))
        if t.shape[0] > 1:
            checks.append(inp.all(t[1:] >= t[:-1]))
    checks += [inp.all(inp.asarray(tol) >= 0) for tol in (rtol, atol) if not _concrete(tol)]
    return functools.reduce(operator.and_, checks) if checks else None


def _concrete(x) -> bool:
    return isinstance(x, (int, float, np.ndarray, np.generic, list, tuple))


def _ravel(leaves: list, dtype):
    parts = [inp.reshape(inp.asarray(x).astype(dtype), (-1,)) for x in leaves]
    return parts[0] if len(parts) == 1 else inp.concatenate(parts)


def _shape(x) -> tuple:
    return tuple(inp.asarray(x).shape)


def _unravel(flat, leaves: list, leading: tuple = ()) -> list:
    out, start = [], 0
    for leaf in leaves:
        shape = _shape(leaf)
        size = int(np.prod(shape, dtype=np.int64))
        out.append(inp.reshape(flat[..., start:start + size], leading + shape))
        start += size
    return out


def _flat_fun(func, args: tuple, leaves: list, tree, dtype):
    """``func`` on the flat state: ``fun(y, t)`` -> the flat derivative."""
    def fun(y, t):
        dy = func(tree_unflatten(tree, _unravel(y, leaves)), t, *args)
        dy_leaves, dy_tree = tree_flatten(dy)
        if dy_tree != tree:
            raise ValueError(f"odeint at {user_where()}: func returned {dy_tree} where y0 is "
                             f"{tree}; return dy/dt with the structure of y0")
        for i, (d, leaf) in enumerate(zip(dy_leaves, leaves)):
            if _shape(d) != _shape(leaf):
                raise ValueError(f"odeint at {user_where()}: func returned shape {_shape(d)} "
                                 f"for leaf {i} of y0, of shape {_shape(leaf)}; return dy/dt "
                                 f"with the shapes of y0")
        return _ravel(dy_leaves, dtype)
    return fun


def _warn_if_short(info: dict, max_steps: int, t, where: str) -> None:
    """Outside a recording, a solve that ran out of steps says so at once."""
    if current_builder() is not None or np.all(np.asarray(info["success"])):
        return
    t_end = np.asarray(t)[-1]
    warnings.warn(NOT_REACHED.format(where=where, max_steps=max_steps, t_end=t_end),
                  RuntimeWarning, stacklevel=3)


# --- the loops ------------------------------------------------------------------------------

def _solve(solver: Solver, fun, y0, t, rtol, atol, max_steps, dt0, valid=None):
    """ys (len(t) x n) and the info dict. Where ``valid`` (the traced input
    checked) is False, the report times are NaN: no interval takes a step
    or is reached, and success is False."""
    t0, count = t[0], t.shape[0]
    targets = t if valid is None else inp.where(valid, t, inp.nan)
    f0 = fun(y0, t0) if solver.uses_f or solver.adaptive else y0
    if solver.adaptive:
        h0 = _initial_step(solver, fun, t0, y0, f0, rtol, atol) if dt0 is None else dt0
        carry = _adaptive_start(solver, t0, y0, f0, h0)
        interval = _adaptive_interval(solver, fun, rtol, atol, max_steps)
    else:
        carry = (t0, y0, f0, 0, 0)
        interval = _fixed_interval(solver, fun, dt0, max_steps)
    if count == 1:
        return inp.expand_dims(y0, 0), _info(carry, t0, targets[0])
    (carry, ys), _ = scan(_reporting(interval, count), (carry, _report_buffer(y0, count)),
                          (targets[1:], np.arange(1, count)))
    return ys, _info(carry, carry[0], targets[-1])


def _solve_recorded(solver: Solver, fun, y0, t, rtol, atol, max_steps, dt0, valid, layout,
                    dense: bool, event, event_rtol):
    """The solve as one loop over the steps (``solution.integrate``): the
    same start and step function as ``_solve``."""
    t0 = t[0]
    targets = t if valid is None else inp.where(valid, t, inp.nan)
    f0 = fun(y0, t0) if solver.uses_f or solver.adaptive else y0
    if solver.adaptive:
        h0 = _initial_step(solver, fun, t0, y0, f0, rtol, atol) if dt0 is None else dt0
        start = _adaptive_start(solver, t0, y0, f0, h0)
        attempt = _attempt(solver, fun, rtol, atol, solver.table.error_order)
        step = attempt if solver.lands else (lambda c, target: attempt(c))
    else:
        start, step = fixed_start(t0, y0, f0, dt0), fixed_stepper(solver, fun, dt0)
    return integrate(solver, fun, step, start, targets, max_steps, layout, dense=dense,
                     event=event, event_rtol=event_rtol)


def _report_buffer(y0, count: int):
    """The values at the report times, filled in as they are reached: y0, then
    NaN (what a time never reached keeps)."""
    first = (np.arange(count) == 0)[:, None]
    return inp.where(first, inp.expand_dims(y0, 0), inp.nan)


def _reporting(interval, count: int):
    """The scan's step: one report interval, its value written into row
    ``index`` of the buffer by a select, so that the loop keeps every value
    in its carry (row-local under vmap: no stacked output)."""
    rows = np.arange(count)[:, None]

    def step(state, x):
        (carry, ys), (target, index) = state, x
        carry, y, reached = interval(carry, target)
        ys = inp.where((rows == index) & reached, inp.expand_dims(y, 0), ys)
        return (carry, ys), None
    return step


def _info(carry, t_reached, t_end) -> dict:
    return {"steps": carry[3], "rejected": carry[4], "success": t_reached >= t_end}


def _fixed_interval(solver: Solver, fun, dt0, max_steps: int):
    """One report interval of a fixed-step method: steps of dt0, the last one
    shortened to land on the report time."""
    def interval(carry, target):
        def more(c):
            return (c[0] < target) & (c[3] < max_steps)

        def advance(c):
            t, y, f, steps, rejected = c
            last = target - t <= dt0
            h = inp.where(last, target - t, dt0)
            new = solver.step(fun, t, y, f, h)
            return inp.where(last, target, t + h), new.y, new.f, steps + 1, rejected
        carry = while_loop(more, advance, carry)
        return carry, carry[1], carry[0] >= target
    return interval


def _adaptive_start(solver: Solver, t0, y0, f0, h0):
    """The carry: (t, y, f, steps, rejected, h, and the last accepted step:
    its start, size, state and stages for the dense output)."""
    h0 = inp.asarray(h0).astype(y0.dtype) + inp.zeros_like(t0)
    stages = tuple(inp.zeros_like(y0) for _ in solver.table.dense or ())
    return (t0, y0, f0, 0, 0, h0, t0, inp.zeros_like(t0), y0, stages)


def _adaptive_interval(solver: Solver, fun, rtol, atol, max_steps: int):
    """One report interval of an adaptive method: step (accepting or
    rejecting) until the solution passes the report time, then read it from
    the last accepted step's dense output; or, for a method that lands, until
    it is at the report time."""
    order = solver.table.error_order
    attempt = _attempt(solver, fun, rtol, atol, order)

    def interval(carry, target):
        def more(c):
            return (c[0] < target) & (c[3] + c[4] < max_steps)
        if solver.lands:
            carry = while_loop(more, lambda c: attempt(c, target), carry)
            return carry, carry[1], carry[0] >= target
        carry = while_loop(more, attempt, carry)
        t, _, _, _, _, _, t_prev, h_prev, y_prev, stages = carry
        theta = (target - t_prev) / inp.where(h_prev > 0, h_prev, 1.0)
        return carry, solver.interpolate(y_prev, h_prev, stages, theta), t >= target
    return interval


def _attempt(solver: Solver, fun, rtol, atol, order: int):
    """One attempted step. With a ``target`` (a method that lands) a step
    that would pass it is shortened to end on it, and once accepted the next
    step is no shorter than the step the controller had proposed."""
    def attempt(c, target=None):
        t, y, f, steps, rejected, h, t_prev, h_prev, y_prev, stages = c
        if target is None:
            size, t_new = h, t + h
        else:
            last = (target - t <= h) & (t < target)  # (a finished lane of a vmap: no 0 step)
            size = inp.where(last, target - t, h)
            t_new = inp.where(last, target, t + size)
        new = solver.step(fun, t, y, f, size, (rtol, atol))
        ratio = _error_ratio(new.error, y, new.y, rtol, atol)
        if new.failed is not None:  # the largest cut, as for an error that is not a number
            ratio = inp.where(new.failed, inp.inf, ratio)
        ok = ratio <= 1.0
        keep = lambda a, b: inp.where(ok, a, b)  # noqa: E731
        h_next = size * _factor(ratio, ok, order)
        if target is not None:
            h_next = inp.where(last & ok, inp.maximum(h_next, h), h_next)
        return (keep(t_new, t), keep(new.y, y), keep(new.f, f), steps + ok.astype(inp.int64),
                rejected + (~ok).astype(inp.int64), h_next, keep(t, t_prev),
                keep(size, h_prev), keep(y, y_prev),
                tuple(keep(k, s) for k, s in zip(new.stages, stages)))
    return attempt


def _error_ratio(error, y, y_new, rtol, atol):
    """The RMS norm of the error scaled by atol + rtol * max(|y|, |y_new|)."""
    scale = atol + rtol * inp.maximum(inp.abs(y), inp.abs(y_new))
    return inp.sqrt(inp.mean(inp.square(error / scale)))


def _factor(ratio, ok, order: int):
    """The I controller: 0.9 * ratio^(-1/(q+1)), q the order of the error
    estimate, within [0.2, 10]; never above 1 after a rejection; 0.2 after a
    step whose error is not a number."""
    low, high = (SAFETY / MAX_FACTOR) ** (order + 1), (SAFETY / MIN_FACTOR) ** (order + 1)
    grow = SAFETY / _root(inp.clip(ratio, low, high), order + 1)
    factor = inp.clip(grow, MIN_FACTOR, MAX_FACTOR)
    factor = inp.where(ok, factor, inp.minimum(factor, 1.0))
    return inp.where(inp.isnan(ratio), MIN_FACTOR, factor)


def _root(x, n: int, bits: int = ROOT_BITS):
    """x^(1/n) for x in the controller's range, from square roots alone: 1/n in
    binary is the sum of 2^-k over its set bits k, so x^(1/n) is the product of
    x^(2^-k) over them, each the k-th of a chain of square roots. With the
    exponent cut at ``bits`` bits it is off by a factor x^(-d), d < 2^-bits / n:
    with 12 bits below 0.07% over the range ``_factor`` clips the ratio to,
    nothing a step-size controller notices; and it is IEEE basic operations only, so every
    strategy in either numerics takes the same steps (a pow in portable
    numerics costs more than the step of a small system)."""
    result, power = None, x
    for k in range(1, bits + 1):
        power = inp.sqrt(power)
        if (2 ** k // n) % 2 == 1:
            result = power if result is None else result * power
    return result


def _initial_step(solver: Solver, fun, t0, y0, f0, rtol, atol):
    """Hairer, Nørsett & Wanner's starting step (Solving ODEs I, §II.4)."""
    scale = atol + rtol * inp.abs(y0)
    rms = lambda v: inp.sqrt(inp.mean(inp.square(v / scale)))  # noqa: E731
    d0, d1 = rms(y0), rms(f0)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = inp.where(small, 1e-6, 0.01 * d0 / inp.where(small, 1.0, d1))
    f1 = fun(y0 + h0 * f0, t0 + h0)
    d2 = rms(f1 - f0) / h0
    tiny = inp.maximum(d1, d2) <= 1e-15
    order = solver.table.order
    h1 = inp.where(tiny, inp.maximum(1e-6, h0 * 1e-3),
                   inp.power(0.01 / inp.where(tiny, 1.0, inp.maximum(d1, d2)),
                             1.0 / (order + 1)))
    return inp.minimum(100.0 * h0, h1)
