"""Events of ``odeint``: a scalar function ``event(y, t, *args)`` whose sign
change stops the integration (``docs/solvers.md``, "Events").

After each accepted step ``odeint`` evaluates the event at the step's end;
a sign change against its value at the step's start (a value that is not 0
to one that is 0 or of the other sign) is an event inside that step. Its
time is then found on the step's interpolant ``P(theta)`` (``solution``):
the Illinois variant of regula falsi (Dowell & Jarratt 1971) on
``phi(theta) = event(P(theta), t + theta h)``, a bracket that shrinks on
both sides, with a bisection wherever the secant point falls outside it,
until the bracket is within ``event_rtol`` relative in t. A last Newton
step from there,

    t* = t_c - G(t_c) / G'(t_c),   G(s) = event(Y(s), s),

with ``t_c`` and ``G'`` held constant (``stop_gradient``), carries the
derivative: at the root G(t_c) = 0, so the derivative of t* is
``-(dG/dp at fixed s) / G'``, the implicit function theorem's
``dt*/dp = -(dg/dp + dg/dy dY/dp) / (dg/dt along Y)``, in both modes,
whatever ran inside the root-finding loop (it carries no derivative).
"""

from __future__ import annotations

import numpy as np

from .. import numpy as inp
from ..control import while_loop
from ..ir.pytree import tree_unflatten
from ..ir.source import user_where
from ..transforms import jvp, stop_gradient

EVENT_RTOL = 1e-12
"""The default tolerance of the event time, relative to |t|."""
EVENT_MAX_ITERATIONS = 200
"""At most this many Illinois iterations (bisection alone needs ~60 in float64)."""


def check_event(event, event_rtol, where: str) -> None:
    if not callable(event):
        raise ValueError(f"odeint at {where}: event={event!r}; give a function "
                         f"event(y, t, *args) returning a scalar whose sign change stops "
                         f"the integration")
    if not isinstance(event_rtol, (int, float, np.floating)) or not event_rtol > 0:
        raise ValueError(f"odeint at {where}: event_rtol={event_rtol!r}; give a positive "
                         f"tolerance for the event time (relative to |t|)")


def flat_event(event, args: tuple, layout):
    """``event`` on the flat state: ``g(y, t)`` -> a scalar of the state's dtype."""
    def g(y, t):
        value = inp.asarray(event(tree_unflatten(layout.tree, layout.unravel(y)), t, *args))
        if tuple(value.shape) != ():
            raise ValueError(f"odeint at {user_where()}: event returned shape "
                             f"{tuple(value.shape)}; return a scalar whose sign change "
                             f"stops the integration")
        return value.astype(layout.dtype)
    return g


def sign_change(before, after):
    """Whether an event lies in a step: ``before`` not 0 and ``after`` 0 or of
    the other sign (False where either is NaN)."""
    return ((before > 0) & (after <= 0)) | ((before < 0) & (after >= 0))


def locate(phi, g_start, g_end, width_tol, active):
    """theta in [0, 1] where ``phi`` (phi(0) = g_start, phi(1) = g_end, of
    opposite signs) changes sign, by Illinois: the bracket [a, b] narrows
    until (b - a) <= width_tol or phi is 0. ``active`` False (no event in
    this lane): no iteration runs."""
    zero = inp.zeros_like(g_start)

    def more(s):
        a, _, b, _, _, _, k, done = s
        return active & ~done & (b - a > width_tol) & (k < EVENT_MAX_ITERATIONS)

    def iterate(s):
        a, fa, b, fb, side, _, k, _ = s
        secant = (a * fb - b * fa) / inp.where(fb != fa, fb - fa, 1.0)
        inside = (secant > a) & (secant < b)
        c = inp.where(inside, secant, 0.5 * (a + b))
        fc = phi(c)
        right = fc * fb > 0  # c replaces b (the root is in [a, c])
        left = ~right & (fc * fa > 0)  # c replaces a
        hit = ~right & ~left  # phi(c) is 0 (or NaN): stop at c
        a_new = inp.where(left, c, a)
        b_new = inp.where(right, c, b)
        fa_new = inp.where(left, fc, inp.where(right & (side < 0), 0.5 * fa, fa))
        fb_new = inp.where(right, fc, inp.where(left & (side > 0), 0.5 * fb, fb))
        side = inp.where(right, -1, inp.where(left, 1, side))
        return a_new, fa_new, b_new, fb_new, side, c, k + 1, hit
    start = (zero, g_start, zero + 1.0, g_end, 0, 0.5 + zero, 0, zero > 1.0)
    a, _, b, _, _, c, k, done = while_loop(more, iterate, start)
    # no iteration (the event at an end of the step): the end where g is 0
    first = inp.where(g_end == 0.0, b, inp.where(g_start == 0.0, a, 0.5 * (a + b)))
    return inp.where(k > 0, c, first)


def refine(g, poly_value, t_prev, h, theta):
    """The event time from ``theta`` (found with no derivative) by one
    Newton step on G(s) = g(Y(s), s), Y the step's interpolant
    ``poly_value(theta)``: its derivative is the implicit function
    theorem's. Kept within the step."""
    def big_g(s):
        return g(poly_value((s - t_prev) / h), s)

    t_c = stop_gradient(t_prev + theta * h)
    slope = stop_gradient(jvp(big_g, (t_c,), (inp.ones_like(t_c),))[1])
    usable = (slope != 0.0) & inp.isfinite(slope)
    step = big_g(t_c) / inp.where(usable, slope, 1.0)
    t_star = t_c - inp.where(usable, step, 0.0)
    return inp.minimum(inp.maximum(t_star, stop_gradient(t_prev)),
                       stop_gradient(t_prev + h))
