"""Krylov solvers with JAX's call forms: ``cg``, ``bicgstab`` and ``gmres``
(restarted), each ``(A, b, x0=None, *, tol, atol, maxiter, M) -> (x, info)``.

``A`` is a 2-D array or a function ``x -> A x``; ``b`` (and ``x``) an array
or a pytree of arrays; ``M`` a preconditioner function approximating
``A^-1``. Every solver stops when ``||b - A x|| <= max(tol * ||b||, atol)``
(2-norms over all leaves) or after ``maxiter`` steps, and is one
``while_loop`` built from ``isokernel.numpy`` ops: eager outside a
recording, one loop node under ``jit``, lane-wise under ``vmap`` (each
element stops at its own tolerance).

``info`` (SciPy's convention): 0 when the tolerance was met, the number of
steps (> 0) when it was not, negative on illegal input or a breakdown: -1
(and ``x`` NaN) when the residual is not finite or the bound is NaN -- NaN
or inf in ``A``, ``b``, ``x0`` or ``M``, an overflow, or a traced tolerance
below 0 -- and ``bicgstab``'s -10 when rho vanished, -11 when alpha or
omega did. A tolerance below 0 (or NaN) given as a number, and ``maxiter``
below 1, are refused before anything runs.

*Derivatives* come from the implicit function theorem, never from the
iterations: for ``x = A^-1 b`` the tangent is ``dx = A^-1 (db - dA x)``,
one more solve of the same method on the tangent right-hand side (``dA x``
the JVP of the matvec in the parameters ``p`` that ``A`` reads). The solve
is a ``custom_jvp``; the tangent solve is a ``custom_vjp`` (``linear_solve``)
whose transpose is its backward pass, the solve with the transposed
operator: reverse mode gives ``b_bar = A^-T x_bar`` and ``p_bar = -(d(A_p
x)/dp)^T b_bar``. ``x0`` and ``M`` get zero: the solution does not depend
on them. The solves inside the rules are implicit again (three levels), so
``hessian``, ``grad(grad)`` and ``jacrev(jacrev)`` are exact too; forward
over forward (``jacfwd(jacfwd)``) is refused by the tangent solve's
``custom_vjp``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import numpy as inp
from ..control import fori_loop, while_loop
from ..ir import ShapeError
from ..ir.pytree import tree_flatten, tree_map, tree_unflatten
from ..ir.source import user_where
from ..record import current_builder, replay, trace_flat
from ..record.tracer import aval_of_example
from ..transforms import custom_jvp, custom_vjp, jvp, vjp
from ..typing import Array, ArrayLike, PyTree

BAD_INPUT = -1
"""``info`` where the residual is not finite or the bound is NaN: the
stopping test is false on NaN, so the loop has stopped without converging,
usually after no step."""

DEPTH = 3
"""Levels of implicit rules: the backward solve of level d is a solve of
level d - 1; level 0 is the bare loop. Three levels make every derivative
up to the third order implicit."""


# --- pytree arithmetic ------------------------------------------------------------------

def _add(x, y):
    return tree_map(lambda a, b: a + b, x, y)


def _sub(x, y):
    return tree_map(lambda a, b: a - b, x, y)


def _scale(s, x):
    return tree_map(lambda a: s * a, x)


def _vdot(x, y):
    """The inner product over every leaf."""
    return functools.reduce(operator.add, [inp.sum(a * b) for a, b in
                                           zip(tree_flatten(x)[0], tree_flatten(y)[0])])


def _zeros_like(x):
    return tree_map(inp.zeros_like, x)


def _select(pred, x, y):
    return tree_map(lambda a, b: inp.where(pred, a, b), x, y)


def _ratio(a, b):
    """``a / b``, and 0 where ``b`` is 0: a lane of a vmapped loop that has
    stopped (its residual exactly 0) keeps stepping, and must not divide 0 by
    0. Where ``b`` is not 0 this is the plain quotient, bit for bit."""
    nonzero = b != 0
    return inp.where(nonzero, a, 0.0) / inp.where(nonzero, b, 1.0)


def _size(x) -> int:
    return sum(int(np.prod(aval_of_example(a).shape)) for a in tree_flatten(x)[0])


# --- operators as functions of their parameters -----------------------------------------

class Linear:
    """A linear map over the pytree of ``b``, as a function of the traced
    values it reads (its *parameters*), so that derivatives can reach them:
    inside a recording the user's function is recorded once and replayed
    with explicit parameters; outside one it is called as it is."""

    def __init__(self, apply: Callable, params: tuple, transposed: bool = False):
        self.apply, self.params, self.transposed = apply, params, transposed

    def __call__(self, params, x):
        if not self.transposed:
            return self.apply(params, x)
        return vjp(lambda v: self.apply(params, v), x)[1](x)[0]

    @property
    def T(self) -> Linear:  # noqa: N802 - the usual name of a transpose
        return Linear(self.apply, self.params, not self.transposed)


def _identity(params, x):
    return x


def as_linear(name: str, what: str, A, b, where: str) -> Linear:
    """``A`` (a 2-D array, a function, or None for the identity) as a
    ``Linear`` over the structure of ``b``."""
    if A is None:
        return Linear(_identity, ())
    fun = A if callable(A) else _matvec(name, what, A, b, where)
    if current_builder() is None:
        return Linear(lambda params, x: fun(x), ())
    graph, out_tree, caps = trace_flat(fun, (b,), name=what)
    _check_like_b(name, what, graph, out_tree, b, where)
    tree = tree_flatten(b)[1]
    return Linear(lambda params, x: tree_unflatten(
        tree, replay(graph, *tree_flatten(x)[0], *params)), tuple(caps))


def _matvec(name: str, what: str, A, b, where: str):
    aval, leaves = aval_of_example(A), tree_flatten(b)[0]
    n = aval_of_example(leaves[0]).shape if len(leaves) == 1 else None
    if aval.ndim != 2 or n is None or n != (aval.shape[1],) or aval.shape[0] != aval.shape[1]:
        raise ShapeError(f"{name} at {where}: {what} is an array of shape {aval.shape} and b "
                         f"{'a pytree' if n is None else f'of shape {n}'}; give a square "
                         f"2-D array with b a vector of its size, or a function x -> A x")
    return lambda x: inp.matmul(A, x)


def _check_like_b(name: str, what: str, graph, out_tree, b, where: str) -> None:
    leaves, tree = tree_flatten(b)
    got = [x.aval.strong() for x in graph.outputs]
    want = [aval_of_example(a).strong() for a in leaves]
    if out_tree != tree or got != want:
        raise ShapeError(f"{name} at {where}: {what}(x) returns {out_tree} with leaves "
                         f"{[str(a) for a in got]}; it must return the structure, shapes and "
                         f"dtypes of b ({[str(a) for a in want]})")


# --- the iterations ---------------------------------------------------------------------

def _bound2(b, tol, atol):
    """The squared stopping bound max(tol * ||b||, atol)^2; NaN where a
    traced tolerance is below 0 or NaN (a number was checked before), which
    stops the loop at once and reports ``BAD_INPUT``."""
    bound = inp.maximum(tol * tol * _vdot(b, b), atol * atol)
    for value in (tol, atol):
        if not _is_number(value):
            bound = inp.where(value >= 0, bound, inp.nan)
    return bound


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.ndarray, np.generic))


def _info(converged, k):
    return inp.where(converged, 0, k)


def _checked(x, rr, bound, info):
    """``(x, info)``, with info ``BAD_INPUT`` and x NaN where the residual
    measure ``rr`` is not finite or the bound is NaN: never a success, and
    never the initial guess passed off as a solution."""
    bad = inp.logical_not(inp.isfinite(rr)) | inp.isnan(bound)
    return tree_map(lambda a: inp.where(bad, inp.nan, a), x), inp.where(bad, BAD_INPUT, info)


def cg_loop(A, M, b, x0, tol, atol, maxiter: int, plain: bool = False):
    """Conjugate gradients (A symmetric positive definite): (x, info,
    steps). ``plain``: M is the identity, so the carried r.M(r) is r.r and
    the test reads it instead of recomputing it (the same bits)."""
    bound = _bound2(b, tol, atol)
    r0 = _sub(b, A(x0))
    z0 = M(r0)

    def more(s):
        _, r, gamma, _, k = s
        return ((gamma if plain else _vdot(r, r)) > bound) & (k < maxiter)

    def step(s):
        x, r, gamma, p, k = s
        ap = A(p)
        alpha = _ratio(gamma, _vdot(p, ap))
        x, r = _add(x, _scale(alpha, p)), _sub(r, _scale(alpha, ap))
        z = M(r)
        gamma_next = _vdot(r, z)
        return x, r, gamma_next, _add(z, _scale(_ratio(gamma_next, gamma), p)), k + 1
    x, r, _, _, k = while_loop(more, step, (x0, r0, _vdot(r0, z0), z0, 0))
    rr = _vdot(r, r)
    return *_checked(x, rr, bound, _info(rr <= bound, k)), k


def bicgstab_loop(A, M, b, x0, tol, atol, maxiter: int):
    """BiCGSTAB (van der Vorst), right-preconditioned: (x, info, steps);
    the step counter turns negative on a breakdown, which ends the loop."""
    bound = _bound2(b, tol, atol)
    r0 = _sub(b, A(x0))
    one = inp.ones_like(_vdot(r0, r0))

    def more(s):
        r, k = s[1], s[-1]
        return (_vdot(r, r) > bound) & (k < maxiter) & (k >= 0)
    x, r, *_, k = while_loop(more, functools.partial(_bicgstab_step, A, M, bound),
                             (x0, r0, r0, one, one, one, r0, r0, 0))
    rr = _vdot(r, r)
    return *_checked(x, rr, bound, inp.where(k < 0, k, _info(rr <= bound, k))), k


def _bicgstab_step(A, M, bound, s):
    x, r, rhat, alpha, omega, rho, p, q, k = s
    rho_next = _vdot(rhat, r)
    beta = _ratio(rho_next, rho) * _ratio(alpha, omega)
    p = _add(r, _scale(beta, _sub(p, _scale(omega, q))))
    phat = M(p)
    q = A(phat)
    alpha = _ratio(rho_next, _vdot(rhat, q))
    s_ = _sub(r, _scale(alpha, q))
    early = _vdot(s_, s_) <= bound
    shat = M(s_)
    t = A(shat)
    omega = _ratio(_vdot(t, s_), _vdot(t, t))
    half = _add(x, _scale(alpha, phat))
    x = _select(early, half, _add(half, _scale(omega, shat)))
    r = _select(early, s_, _sub(s_, _scale(omega, t)))
    broken = inp.logical_not(early) & ((omega == 0) | (alpha == 0))  # s = 0: converged
    k = inp.where(broken, -11, k + 1)
    k = inp.where(rho_next == 0, -10, k)
    return x, r, rhat, alpha, omega, rho_next, p, q, k


def gmres_loop(A, M, b, x0, tol, atol, maxiter: int, restart: int, incremental: bool = True):
    """Restarted GMRES, right-preconditioned, Givens rotations applied as
    the Arnoldi basis grows, so the residual is known after every step:
    ``incremental`` ends a cycle as soon as it meets the bound, otherwise a
    cycle runs all ``restart`` steps and only the restart tests it (JAX's
    "batched"): (x, info, cycles). ``maxiter`` counts restart cycles, as
    JAX's does."""
    flat = _Flat(b)
    size = flat.size
    R = max(1, min(restart, size))
    bound = inp.sqrt(_bound2(b, tol, atol))
    bv = flat.vec(b)

    def av(v):
        return flat.vec(A(flat.tree(v)))

    def mv(v):
        return flat.vec(M(flat.tree(v)))
    r0 = bv - av(flat.vec(x0))

    def more(s):
        _, _, rnorm, k = s
        return (rnorm > bound) & (k < maxiter)

    def cycle(s):
        x, r, _, k = s
        x = x + mv(_arnoldi(av, mv, r, bound if incremental else 0.0, R))
        r = bv - av(x)
        return x, r, inp.sqrt(inp.sum(r * r)), k + 1
    x, _, rnorm, k = while_loop(more, cycle, (flat.vec(x0), r0, inp.sqrt(inp.sum(r0 * r0)), 0))
    x, info = _checked(x, rnorm, bound, _info(rnorm <= bound, k))
    return flat.tree(x), info, k


class _Flat:
    """A pytree of arrays as one vector (GMRES keeps a basis of them)."""

    def __init__(self, b):
        leaves, self.treedef = tree_flatten(b)
        self.shapes = [aval_of_example(a).shape for a in leaves]
        self.sizes = [int(np.prod(shape)) for shape in self.shapes]
        self.size = sum(self.sizes)

    def vec(self, x):
        leaves = [inp.ravel(a) for a in tree_flatten(x)[0]]
        return leaves[0] if len(leaves) == 1 else inp.concatenate(leaves)

    def tree(self, v):
        leaves, start = [], 0
        for shape, n in zip(self.shapes, self.sizes):
            leaves.append(inp.reshape(v[start:start + n], shape))
            start += n
        return tree_unflatten(self.treedef, leaves)


def _arnoldi(av, mv, r, bound, R: int):
    """One GMRES cycle from the residual ``r``: the correction ``u`` whose
    preconditioned image ``M u`` minimizes the residual over the Krylov
    space (the caller adds ``M u``). It stops when the residual is at most
    ``bound`` (0: at an exact solution only) or after R steps."""
    beta = inp.sqrt(inp.sum(r * r))
    rows = inp.arange(R + 1)
    basis = inp.where(inp.reshape(rows == 0, (R + 1, 1)), _ratio(r, beta), 0.0 * r)
    g = inp.where(rows == 0, beta, 0.0 * beta)
    tri = inp.zeros((R + 1, R), r.dtype) + 0.0 * beta
    rot = inp.zeros((2, R), r.dtype) + inp.reshape(inp.stack([1.0 + 0.0 * beta, 0.0 * beta]),
                                                    (2, 1))

    def more(s):
        _, g, _, _, j = s
        return (j < R) & (inp.abs(_entry(g, rows, j)) > bound)

    def step(s):
        basis, g, tri, rot, j = s
        col, basis = _orthogonalize(av, mv, basis, rows, j)
        col, rot, g = _rotate(col, rot, g, rows, j, R)
        tri = inp.where(inp.reshape(inp.arange(R) == j, (1, R)), inp.reshape(col, (R + 1, 1)),
                        tri)
        return basis, g, tri, rot, j + 1
    basis, g, tri, _, j = while_loop(more, step, (basis, g, tri, rot, 0))
    y = _back_substitute(tri, g, j, R)
    return inp.matmul(y, basis[:R])


def _orthogonalize(av, mv, basis, rows, j):
    """The next basis vector (classical Gram-Schmidt, twice) and the new
    column of the Hessenberg matrix."""
    w = av(mv(inp.sum(inp.where(inp.reshape(rows == j, (-1, 1)), basis, 0.0), axis=0)))
    h = inp.matmul(basis, w)
    w = w - inp.matmul(h, basis)
    again = inp.matmul(basis, w)
    w, h = w - inp.matmul(again, basis), h + again
    norm = inp.sqrt(inp.sum(w * w))
    basis = inp.where(inp.reshape(rows == j + 1, (-1, 1)), _ratio(w, norm), basis)
    return inp.where(rows == j + 1, norm, h), basis


def _rotate(col, rot, g, rows, j, R: int):
    """Apply the rotations so far to the new column, then the one that
    zeroes its entry below the diagonal, to the column and to ``g``."""
    def previous(i, col):
        c, s = _entry(rot[0], rows[:R], i), _entry(rot[1], rows[:R], i)
        a, b = _entry(col, rows, i), _entry(col, rows, i + 1)
        turned = inp.where(rows == i, c * a + s * b, inp.where(rows == i + 1, c * b - s * a, col))
        return inp.where(i < j, turned, col)
    col = fori_loop(0, R, previous, col)
    a, b = _entry(col, rows, j), _entry(col, rows, j + 1)
    norm = inp.sqrt(a * a + b * b)
    c, s = inp.where(norm == 0, 1.0, _ratio(a, norm)), _ratio(b, norm)
    col = inp.where(rows == j, norm, inp.where(rows == j + 1, 0.0, col))
    gj = _entry(g, rows, j)
    g = inp.where(rows == j, c * gj, inp.where(rows == j + 1, -s * gj, g))
    at = inp.reshape(rows[:R] == j, (1, R))
    return col, inp.where(at, inp.reshape(inp.stack([c, s]), (2, 1)), rot), g


def _entry(v, index, j):
    """``v[j]`` for a traced ``j`` (``index`` is ``arange(len(v))``)."""
    return inp.sum(inp.where(index == j, v, 0.0))


def _back_substitute(tri, g, j, R: int):
    """y with tri[:j, :j] y = g[:j], zeros beyond j (tri upper triangular)."""
    cols = inp.arange(R)

    def row(k, y):
        i = R - 1 - k
        tri_i = inp.sum(inp.where(inp.reshape(cols == i, (R, 1)), tri[:R], 0.0), axis=0)
        total = _entry(g[:R], cols, i) - inp.sum(tri_i * y)
        yi = inp.where(i < j, _ratio(total, _entry(tri_i, cols, i)), 0.0)
        return inp.where(cols == i, yi, y)
    return fori_loop(0, R, row, 0.0 * g[:R])


# --- the implicit derivative ------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    """A Krylov method: its name (for errors), its loop ``(A, M, b, x0) ->
    (x, info, steps)`` with the options bound, and whether its operators
    are symmetric (so the backward solve uses them as they are)."""

    name: str
    loop: Callable
    symmetric: bool


def implicit_solve(method: Method, A: Linear, M: Linear, depth: int = DEPTH):
    """``solve(b, x0, a_params, m_params) -> (x, info)`` by the method's
    loop, a ``custom_jvp`` whose tangent is ``S(db - dA x)``: ``S`` the
    solve as a linear map of its right-hand side (``linear_solve``), whose
    transpose is the solve with the transposed operators. The primal inside
    the rule is again implicit, ``depth - 1`` levels deep."""
    def run(b, x0, pa, pm):
        return method.loop(lambda v: A(pa, v), lambda v: M(pm, v), b, x0)[:2]
    run.__name__ = run.__qualname__ = method.name
    if depth == 0:
        return run
    solve = custom_jvp(run)
    inner = implicit_solve(method, A, M, depth - 1)
    linear = linear_solve(method, A, M, depth)

    @solve.defjvp
    def _rule(primals, tangents):
        (b, x0, pa, pm), (db, _, dpa, _) = primals, tangents
        x, info = inner(b, x0, pa, pm)
        rhs = db
        if pa:
            rhs = _sub(db, jvp(lambda *p: A(p, x), pa, dpa)[1])
        return (x, info), (linear(rhs, pa, pm), inp.zeros_like(info))
    return solve


def linear_solve(method: Method, A: Linear, M: Linear, depth: int):
    """``S(rhs, a_params, m_params) = A^-1 rhs`` from a zero guess, a
    ``custom_vjp`` whose backward pass is the solve with the transposed
    operators (implicit, ``depth - 1`` levels deep): the transpose of the
    tangent map, and the parameters' share ``-(d(A_p x)/dp)^T A^-T ct``."""
    def run(rhs, pa, pm):
        return method.loop(lambda v: A(pa, v), lambda v: M(pm, v), rhs, _zeros_like(rhs))[0]
    run.__name__ = run.__qualname__ = f"{method.name}_linear"
    solve = custom_vjp(run)
    AT, MT = (A, M) if method.symmetric else (A.T, M.T)

    def fwd(rhs, pa, pm):
        x = run(rhs, pa, pm)
        return x, (x, pa, pm)

    def bwd(res, ct):
        x, pa, pm = res
        back = implicit_solve(method, AT, MT, depth - 1)
        lam = back(ct, _zeros_like(ct), pa, pm)[0]
        if not pa:
            return lam, (), None
        pulled = vjp(lambda *p: A(p, x), *pa)[1](_scale(-1.0, lam))
        return lam, tuple(pulled), None
    solve.defvjp(fwd, bwd)
    return solve


def isolve(method: Method, A, b, x0, M):
    """The shared front of the solvers: operators, initial guess, the
    implicit solve."""
    where = user_where()
    op = as_linear(method.name, "A", A, b, where)
    pre = as_linear(method.name, "M", M, b, where)
    x0 = _zeros_like(b) if x0 is None else x0
    if tree_flatten(x0)[1] != tree_flatten(b)[1]:
        raise ShapeError(f"{method.name} at {where}: x0 has another structure than b; give x0 "
                         f"like b, or None for zeros")
    return implicit_solve(method, op, pre)(b, x0, op.params, pre.params)


def _maxiter(name: str, maxiter, tol, atol, b) -> int:
    """``maxiter`` (default 10 * the size of b), once the options given as
    numbers are checked."""
    for option, value in (("tol", tol), ("atol", atol)):
        if _is_number(value) and not np.all(np.asarray(value) >= 0):
            raise ValueError(f"{name} at {user_where()}: {option}={value!r}; give a tolerance "
                             f">= 0 (the solve stops when ||b - A x|| <= max(tol * ||b||, "
                             f"atol))")
    steps = 10 * _size(b) if maxiter is None else int(maxiter)
    if steps < 1:
        raise ValueError(f"{name} at {user_where()}: maxiter={maxiter!r}; give a positive "
                         f"number of {'restart cycles' if name == 'gmres' else 'steps'}, or "
                         f"None for 10 * the size of b")
    return steps


def cg(A: ArrayLike | Callable[[Any], Any], b: PyTree, x0: PyTree = None, *,
       tol: ArrayLike = 1e-5, atol: ArrayLike = 0.0, maxiter: int | None = None,
       M: ArrayLike | Callable[[Any], Any] | None = None) -> tuple[PyTree, Array]:
    """JAX's ``cg``: ``A`` symmetric positive definite (and ``M`` too)."""
    loop = functools.partial(_options, functools.partial(cg_loop, plain=M is None), tol, atol,
                             _maxiter("cg", maxiter, tol, atol, b))
    return isolve(Method("cg", loop, symmetric=True), A, b, x0, M)


def bicgstab(A: ArrayLike | Callable[[Any], Any], b: PyTree, x0: PyTree = None, *,
             tol: ArrayLike = 1e-5, atol: ArrayLike = 0.0, maxiter: int | None = None,
             M: ArrayLike | Callable[[Any], Any] | None = None) -> tuple[PyTree, Array]:
    """JAX's ``bicgstab``: any non-singular ``A``."""
    loop = functools.partial(_options, bicgstab_loop, tol, atol,
                             _maxiter("bicgstab", maxiter, tol, atol, b))
    return isolve(Method("bicgstab", loop, symmetric=False), A, b, x0, M)


def _options(loop, tol, atol, maxiter, A, M, b, x0):
    return loop(A, M, b, x0, tol, atol, maxiter)


def gmres(A: ArrayLike | Callable[[Any], Any], b: PyTree, x0: PyTree = None, *,
          tol: ArrayLike = 1e-5, atol: ArrayLike = 0.0, restart: int = 20,
          maxiter: int | None = None, M: ArrayLike | Callable[[Any], Any] | None = None,
          solve_method: str = "incremental") -> tuple[PyTree, Array]:
    """JAX's ``gmres``: any non-singular ``A``; ``restart`` Arnoldi steps a
    cycle, ``maxiter`` cycles (default 10 * size of b)."""
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"gmres at {user_where()}: solve_method={solve_method!r}; use "
                         f"'incremental' (the residual tested after every Arnoldi step) or "
                         f"'batched' (after every restart cycle)")
    maxiter = _maxiter("gmres", maxiter, tol, atol, b)
    loop = functools.partial(_gmres_options, tol, atol, maxiter, int(restart),
                             solve_method == "incremental")
    return isolve(Method("gmres", loop, symmetric=False), A, b, x0, M)


def _gmres_options(tol, atol, maxiter, restart, incremental, A, M, b, x0):
    return gmres_loop(A, M, b, x0, tol, atol, maxiter, restart, incremental)
