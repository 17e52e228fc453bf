"""``root(fun, x0, *args, method="newton", tol=None, maxiter=50)``: a root
of ``fun(x, *args) = 0`` by Newton's method, with the derivative of the root
with respect to ``args`` by the implicit function theorem.

The iteration is one ``while_loop``: the Jacobian by ``jacfwd``, the step by
a dense solve with partial pivoting (``dense.solve``), until
``max|fun(x, *args)| <= tol`` or ``maxiter`` steps. Under ``vmap`` each
element stops on its own residual.

*Derivatives.* At a root ``F(x*, p) = 0``, so ``dx* = -J_x^-1 (J_p dp)``,
with ``J_x`` and ``J_p`` the Jacobians of ``F`` at ``(x*, p)``: the
``custom_jvp`` rule solves that system with the same dense solve, whose ops
are linear in the right-hand side, so reverse mode transposes it (one solve
with ``J_x^T``) and forward mode evaluates it; neither differentiates the
iterations. The root does not depend on ``x0`` (zero derivative). The
primal inside the rule is again an implicit root (three levels deep), so
second and third derivatives are implicit too. Values ``fun`` closes over
(traced ones included) are parameters like ``args``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import numpy as inp
from ..control import while_loop
from ..ir import ShapeError
from ..ir.pytree import tree_flatten
from ..ir.source import user_where
from ..record import current_builder, replay, trace_flat
from ..record.tracer import aval_of_example
from ..transforms import custom_jvp, jacfwd, jvp
from ..typing import Array, ArrayLike
from . import dense

DEPTH = 3
"""Levels of implicit rules (see ``linalg.krylov.DEPTH``)."""
TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}
"""The default residual tolerance, by the dtype of ``x0``."""


@dataclass(frozen=True)
class RootResults:
    """``x`` the root found; ``success`` whether ``max|fun(x)| <= tol``;
    ``nit`` the Newton steps taken. A pytree (a dataclass), so it passes
    through ``jit``, ``vmap`` and the derivatives."""

    x: Array
    success: Array
    nit: Array


def root(fun: Callable[..., Any], x0: ArrayLike, *args: Any, method: str = "newton",
         tol: ArrayLike = None, maxiter: int = 50) -> RootResults:
    """A root of ``fun(x, *args)`` (same shape as ``x``) from ``x0``."""
    where = user_where()
    if method != "newton":
        raise ValueError(f"root at {where}: method={method!r} is not known; use "
                         f"method='newton'")
    x0 = inp.asarray(x0)
    aval = aval_of_example(x0)
    tol = TOL.get(np.dtype(aval.dtype), 1e-10) if tol is None else tol
    residual, params = _closure_converted(fun, x0, args, where)
    solve = _implicit(residual, tol, int(maxiter), DEPTH)
    return RootResults(*solve(x0, params))


def _closure_converted(fun, x0, args, where: str):
    """``residual(x, params)`` and ``params``: ``args`` and, inside a
    recording, the traced values ``fun`` closes over."""
    if current_builder() is None:
        return (lambda x, p: fun(x, *p[0])), (args, ())
    graph, out_tree, caps = trace_flat(fun, (x0, *args), name="fun")
    got, want = graph.outputs[0].aval.strong(), aval_of_example(x0).strong()
    if out_tree.num_leaves != 1 or got != want:
        raise ShapeError(f"root at {where}: fun(x, *args) returns {out_tree} ({got}); it "
                         f"must return one array of the shape and dtype of x0 ({want})")

    def residual(x, p):
        return replay(graph, x, *tree_flatten(p[0])[0], *p[1])[0]
    return residual, (args, tuple(caps))


def _newton(residual, tol, maxiter: int):
    """The bare iteration: ``(x0, params) -> (x, success, nit)``."""
    def run(x0, params):
        f0 = residual(x0, params)

        def more(s):
            _, fx, k = s
            return (inp.max(inp.abs(fx)) > tol) & (k < maxiter)

        def step(s):
            x, fx, k = s
            x = x - _newton_step(residual, x, fx, params)
            return x, residual(x, params), k + 1
        x, fx, k = while_loop(more, step, (x0, f0, 0))
        return x, inp.max(inp.abs(fx)) <= tol, k
    run.__name__ = run.__qualname__ = "root"
    return run


def _newton_step(residual, x, fx, params):
    """``J^-1 f(x)``, J the Jacobian at ``x`` flattened to (n, n)."""
    n = int(np.prod(x.shape))
    jac = jacfwd(lambda v: residual(v, params))(x)
    step = dense.solve(inp.reshape(jac, (n, n)), inp.reshape(fx, (n,)))
    return inp.reshape(step, x.shape)


def _implicit(residual, tol, maxiter: int, depth: int):
    """The iteration as a ``custom_jvp`` whose rule is the implicit
    function theorem (its primal a root of ``depth - 1`` levels)."""
    run = _newton(residual, tol, maxiter)
    if depth == 0:
        return run
    solve = custom_jvp(run)
    inner = _implicit(residual, tol, maxiter, depth - 1)

    @solve.defjvp
    def _rule(primals, tangents):
        (x0, params), (_, dparams) = primals, tangents
        x, success, nit = inner(x0, params)
        n = int(np.prod(x.shape))
        jac = jacfwd(lambda v: residual(v, params))(x)
        moved = jvp(lambda p: residual(x, p), (params,), (dparams,))[1]
        dx = dense.solve(inp.reshape(jac, (n, n)), inp.reshape(-moved, (n,)))
        return (x, success, nit), (inp.reshape(dx, x.shape), inp.zeros_like(success),
                                   inp.zeros_like(nit))
    return solve
