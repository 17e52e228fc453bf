"""``odeint(..., dense=True)`` and ``odeint(..., event=...)``: the solve as
one ``while_loop`` over the steps that also records each accepted step's
interpolant, and the ``ODESolution`` it returns (``docs/solvers.md``,
"Dense output and events").

Every step's interpolant is a polynomial in theta = (s - t) / h,
``P(theta) = sum_p c_p theta^p``, c_0 the step's start: for dopri5, tsit5
and rosenbrock23 the method's own dense output (``tableaux``: c_p = h
sum_j dense[j][p] k_j); for the methods without one (rodas5, kvaerno5 and
the fixed-step methods) the cubic Hermite interpolant of the step's ends
and their slopes. With ``dense=True`` each accepted step writes its start,
size and coefficients into row ``steps`` of buffers of ``max_steps`` rows
(a select on the row index, as the report values: row-local under
``vmap``), which ``ODESolution.evaluate`` reads.

The steps are those of ``odeint`` without these options (the same step
function, the same stepping to the report times), and the values at the
report times the same bits.
"""

from __future__ import annotations

import numpy as np

from .. import numpy as inp
from ..control import while_loop
from ..ir.pytree import register_pytree_node, tree_unflatten
from ..transforms import stop_gradient
from ..typing import Array, ArrayLike, PyTree
from .events import locate, refine, sign_change
from .solvers import Solver, combine


class Layout:
    """The state's structure: the pytree of ``y0``, its leaves' shapes and
    the common dtype; the flat state is the leaves raveled and joined."""

    def __init__(self, tree, shapes: tuple, dtype) -> None:
        self.tree, self.shapes, self.dtype = tree, tuple(map(tuple, shapes)), np.dtype(dtype)

    def key(self) -> tuple:
        return self.tree, self.shapes, self.dtype.str

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def unravel(self, flat, leading: tuple = ()) -> list:
        out, start = [], 0
        for shape in self.shapes:
            size = int(np.prod(shape, dtype=np.int64))
            out.append(inp.reshape(flat[..., start:start + size], leading + shape))
            start += size
        return out

    def tree_of(self, flat, leading: tuple = ()):
        return tree_unflatten(self.tree, self.unravel(flat, leading))


class ODESolution:
    """What ``odeint`` returns with ``dense=True`` or ``event=``.

    - ``ys``: the states at the report times (as ``odeint`` returns them; NaN
      after an event, and where ``max_steps`` ran out).
    - ``info``: ``steps``, ``rejected`` and ``success`` (t[-1] reached or an
      event found), as ``full_output``.
    - ``t_event``, ``y_event``, ``event_found``: the event's time and state
      (NaN where none was found in [t[0], t[-1]]); None without ``event``.
    - ``t_end``: the end of the solution: the event time, else t[-1] (or the
      last step's end where ``max_steps`` ran out).
    - ``evaluate(s)``: the state at any time(s) ``s`` in [t[0], t_end] from
      the interpolant of the step holding it (``dense=True``).

    A pytree: it passes out of ``jit`` and ``vmap``, and ``evaluate`` works
    eagerly, under ``jit`` and ``vmap`` and differentiates in ``s`` and in
    what the solve depends on."""

    def __init__(self, ys, info, t_event, y_event, event_found, t_end, dense, layout):
        self.ys, self.info, self.t_end = ys, info, t_end
        self.t_event, self.y_event, self.event_found = t_event, y_event, event_found
        self.dense = dense  # (t0, y0 flat, count, starts, sizes, coefficients) or None
        self.layout = layout

    @property
    def t_steps(self) -> Array | None:
        """The start times of the recorded steps (``max_steps`` entries, inf
        after the last) (``dense=True``)."""
        return None if self.dense is None else self.dense[3]

    def __repr__(self) -> str:
        parts = [f"t_end={self.t_end!r}", f"info={self.info!r}"]
        if self.event_found is not None:
            parts += [f"event_found={self.event_found!r}", f"t_event={self.t_event!r}"]
        parts.append(f"dense={self.dense is not None}")
        return f"ODESolution({', '.join(parts)})"

    def evaluate(self, s: ArrayLike) -> PyTree:
        """The state at time(s) ``s`` (any shape): ``y0``'s structure with
        ``s``'s shape leading every leaf; NaN outside [t[0], t_end]."""
        if self.dense is None:
            raise ValueError("ODESolution.evaluate: this solution keeps no interpolants; "
                             "call odeint(..., dense=True)")
        t0, y0, count, starts, sizes, coefficients = self.dense
        s = inp.asarray(s).astype(self.layout.dtype)
        shape = tuple(s.shape)
        flat = inp.reshape(s, (-1,))
        last = inp.maximum(count - 1, 0)
        index = inp.minimum(inp.maximum(inp.searchsorted(starts, flat, side="right") - 1, 0),
                            last)
        start, size = inp.take(starts, index), inp.take(sizes, index)
        coef = inp.take(coefficients, index, axis=0)  # (m, degree + 1, n)
        theta = inp.where(count > 0, (flat - start) / size, 0.0)[:, None]  # no step: y0
        y = horner([coef[:, p] for p in range(coef.shape[1])], theta)
        y = inp.where((count == 0) & (flat == t0)[:, None], y0, y)
        inside = ((flat >= t0) & (flat <= self.t_end))[:, None]
        y = inp.where(inside, y, inp.nan)
        return self.layout.tree_of(y, shape)


def _flatten(sol: ODESolution):
    children = (sol.ys, sol.info, sol.t_event, sol.y_event, sol.event_found, sol.t_end,
                sol.dense)
    return children, sol.layout


def _unflatten(layout, children):
    return ODESolution(*children, layout)


register_pytree_node(ODESolution, _flatten, _unflatten)


# --- interpolants -----------------------------------------------------------------------------

def horner(coefficients: list, theta):
    """sum_p coefficients[p] theta^p."""
    value = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        value = value * theta + c
    return value


def degree_of(solver: Solver) -> int:
    return 3 if solver.table.dense is None else len(solver.table.dense[0]) - 1


def method_polynomial(solver: Solver, y, h, stages) -> tuple:
    """The coefficients of a step's own dense output: y, then h sum_j
    dense[j][p] k_j for p >= 1."""
    rows = solver.table.dense
    zero = inp.zeros_like(y)
    return (y,) + tuple(combine(zero, h, [row[p] for row in rows], stages)
                        for p in range(1, len(rows[0])))


def hermite_polynomial(y0, f0, y1, f1, h) -> tuple:
    """The cubic Hermite interpolant of (y0, f0) and (y1, f1) over a step h."""
    dy, hf0, hf1 = y1 - y0, h * f0, h * f1
    return y0, hf0, 3.0 * dy - 2.0 * hf0 - hf1, hf0 + hf1 - 2.0 * dy


# --- the loop ---------------------------------------------------------------------------------

def fixed_start(t0, y0, f0, dt0) -> tuple:
    """The carry of ``odeint``'s adaptive loop for a fixed-step method."""
    dt0 = inp.asarray(dt0).astype(y0.dtype) + inp.zeros_like(t0)
    return (t0, y0, f0, 0, 0, dt0, t0, inp.zeros_like(t0), y0, ())


def fixed_stepper(solver: Solver, fun, dt0):
    """One step of dt0, shortened to land on ``target`` (``odeint``'s fixed
    steps), on the carry of ``fixed_start``."""
    def step(c, target):
        t, y, f, steps, rejected, h = c[:6]
        last = target - t <= dt0
        size = inp.where(last, target - t, dt0)
        new = solver.step(fun, t, y, f, size)
        return (inp.where(last, target, t + size), new.y, new.f, steps + 1, rejected, h, t,
                size, y, ())
    return step


def integrate(solver: Solver, fun, step, start: tuple, t, max_steps: int, layout: Layout, *,
              dense: bool, event=None, event_rtol: float = 1e-12) -> ODESolution:
    """The solve from ``start`` (``odeint``'s carry: t, y, f, steps,
    rejected, h, and the last accepted step's start, size, state and stages)
    by ``step(carry, target)``, over the report times ``t`` (NaN where the
    traced input is invalid)."""
    t0, t_end, count = t[0], t[-1], t.shape[0]
    y0, n = start[1], start[1].shape[0]
    hermite = solver.table.dense is None
    carried = solver.adaptive and solver.uses_f  # f at the step's end is carried
    lands = solver.lands or not solver.adaptive
    times = t[:, None]
    rows = np.arange(count)[:, None]
    ys = inp.where((rows == 0) | (times <= t0), inp.expand_dims(y0, 0), inp.nan)
    slope = (start[2] if carried else fun(y0, t0)) if hermite else y0
    g0 = event(y0, t0) if event is not None else inp.zeros_like(t0)
    degree = degree_of(solver)
    poly = tuple(inp.zeros_like(y0) for _ in range(degree + 1))
    if dense:
        slots = np.arange(max_steps)
        # starts, sizes, then one buffer per coefficient and component: each of
        # max_steps values per element of a vmap, so that a per-pixel loop
        # keeps them in C up to the emitter's row size (docs/solvers.md)
        lane = inp.zeros_like(y0[0])
        buffers = (lane + np.full(max_steps, np.inf, layout.dtype),
                   lane + np.ones(max_steps, layout.dtype),
                   *[lane + np.zeros(max_steps, layout.dtype)
                     for _ in range((degree + 1) * n)])
    else:
        buffers = ()
    crossed = inp.zeros_like(t0) > 1.0

    def more(c):
        core, crossed = c[0], c[4]
        return (core[0] < t_end) & (core[3] + core[4] < max_steps) & ~crossed

    def body(c):
        core, slope, g_start, g, crossed, poly, ys, buffers = c
        t_now, y = core[0], core[1]
        target = inp.min(inp.where(t > t_now, t, inp.inf)) if lands else None
        new = step(core, target)
        ok = new[3] > core[3]
        t_new, y_new, size = new[0], new[1], new[7]

        def keep(a, b):
            return inp.where(ok, a, b)
        if hermite:
            slope_new = new[2] if carried else fun(y_new, t_new)
            step_poly = hermite_polynomial(y, slope, y_new, slope_new, size)
            slope = keep(slope_new, slope)
        else:
            step_poly = method_polynomial(solver, new[8], size, new[9])
        poly = tuple(keep(a, b) for a, b in zip(step_poly, poly))
        if event is not None:
            g_new = event(y_new, t_new)
            crossed = ok & sign_change(g, g_new)
            g_start, g = keep(g, g_start), keep(g_new, g)
        write = (times > t_now) & (times <= t_new) & ok & ~crossed
        if lands:
            values = inp.expand_dims(y_new, 0)
        else:
            theta = (times - new[6]) / inp.where(size > 0, size, 1.0)  # 0 before a step
            values = solver.interpolate(new[8], size, new[9], theta)
        ys = inp.where(write, values, ys)
        if dense:
            at = (slots == core[3]) & ok
            values = [t_now, size] + [c[i] for c in step_poly for i in range(n)]
            buffers = tuple(inp.where(at, v, b) for v, b in zip(values, buffers))
        return new, slope, g_start, g, crossed, poly, ys, buffers

    carry = (start, slope, g0, g0, crossed, poly, ys, buffers)
    core, _, g_start, g_end, crossed, poly, ys, buffers = while_loop(more, body, carry)
    t_reached, steps, rejected, t_prev, h = core[0], core[3], core[4], core[6], core[7]
    reached = t_reached >= t_end
    t_event = y_event = found = None
    t_stop = inp.minimum(t_reached, t_end)
    if event is not None:
        def value(theta):
            return horner(list(poly), theta)
        frozen = [stop_gradient(p) for p in poly]
        t_fixed, h_fixed = stop_gradient(t_prev), stop_gradient(h)
        span = inp.maximum(inp.abs(t_fixed), inp.abs(t_fixed + h_fixed))
        rtol_t = max(float(event_rtol), 4.0 * float(np.finfo(layout.dtype).eps))
        theta = locate(lambda th: event(horner(frozen, th), t_fixed + th * h_fixed),
                       stop_gradient(g_start), stop_gradient(g_end),
                       rtol_t * span / inp.where(h_fixed > 0, h_fixed, 1.0), crossed)
        t_star = refine(event, value, t_prev, inp.where(h > 0, h, 1.0), theta)
        found = crossed & (t_star <= t_end)
        theta_star = (t_star - t_prev) / inp.where(h > 0, h, 1.0)
        t_event = inp.where(found, t_star, inp.nan)
        y_event = layout.tree_of(inp.where(found, value(theta_star), inp.nan))
        # the report times inside the event's step, up to the event
        write = crossed & (times > t_prev) & (times <= t_star)
        values = value((times - t_prev) / inp.where(h > 0, h, 1.0))
        if lands:
            values = inp.where(times == t_reached, inp.expand_dims(core[1], 0), values)
        ys = inp.where(write, values, ys)
        t_stop = inp.where(found, t_star, t_stop)
        reached = reached | found
    info = {"steps": steps, "rejected": rejected, "success": reached}
    record = None
    if dense:
        columns = [inp.stack(buffers[2 + p * n:2 + (p + 1) * n], axis=-1)
                   for p in range(degree + 1)]
        record = (t0, y0, steps, buffers[0], buffers[1], inp.stack(columns, axis=-2))
    return ODESolution(layout.tree_of(ys, (count,)), info, t_event, y_event, found, t_stop,
                       record, layout)
