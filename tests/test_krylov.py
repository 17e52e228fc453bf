"""Krylov solvers (``isokernel.scipy.sparse.linalg``): values against NumPy's
dense solve within the requested tolerance, matrix-free operators,
preconditioners, pytrees, ``info``, one loop node under ``jit``, the
strategies' bits, lane-wise ``vmap``, and derivatives by the implicit
function theorem (against finite differences, the closed forms and JAX)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.ir import DifferentiationError, Op, ShapeError, walk
from isokernel.scipy.sparse.linalg import bicgstab, cg, gmres
from isokernel.transforms import prepare_for_execution

SOLVERS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres}
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")


def spd(n: int, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, n))
    return m @ m.T + n * np.eye(n)


def nonsymmetric(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, n)) + 2.0 * np.sqrt(n) * np.eye(n)


def rhs(n: int, seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=n)


def stencil(x, c=2.5):
    """A matrix-free SPD operator: c x_i - x_{i-1} - x_{i+1}, zero outside."""
    padded = inp.pad(x, (1, 1))
    return c * x - padded[:-2] - padded[2:]


def stencil_matrix(n: int, c=2.5) -> np.ndarray:
    return c * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)


def true_residual(a, x, b) -> float:
    return float(np.linalg.norm(b - a @ x))


# --- values -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
@pytest.mark.parametrize("tol", [1e-5, 1e-10])
def test_solution_within_the_requested_tolerance(name, tol):
    a = spd(24) if name == "cg" else nonsymmetric(24)
    b = rhs(24)
    x, info = SOLVERS[name](a, b, tol=tol)
    assert info == 0
    assert true_residual(a, x, b) <= tol * np.linalg.norm(b) * (1 + 1e-6)
    exact = np.linalg.solve(a, b)
    cond = np.linalg.cond(a)
    assert np.linalg.norm(x - exact) <= cond * tol * np.linalg.norm(exact) * (1 + 1e-6)


@settings(max_examples=30)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**16), name=st.sampled_from(sorted(SOLVERS)),
       tol=st.sampled_from([1e-4, 1e-8, 1e-12]))
def test_property_the_true_residual_meets_the_bound(n, seed, name, tol):
    a = spd(n, seed) if name == "cg" else nonsymmetric(n, seed)
    b = rhs(n, seed + 1)
    x, info = SOLVERS[name](a, b, tol=tol)
    assert info == 0
    assert true_residual(a, x, b) <= tol * np.linalg.norm(b) * (1 + 1e-6) + 1e-14 * np.linalg.norm(
        a) * np.linalg.norm(x)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_matrix_free_operator(name):
    n = 40
    b = rhs(n)
    x, info = SOLVERS[name](stencil, b, tol=1e-11)
    assert info == 0
    np.testing.assert_allclose(x, np.linalg.solve(stencil_matrix(n), b), rtol=0, atol=1e-9)


def test_gmres_batched_tests_only_at_the_restart():
    """'batched' runs every cycle to its full length, so it ends below the
    bound where 'incremental' stops as soon as it meets it."""
    a, b = nonsymmetric(40), rhs(40)
    bound = 1e-6 * np.linalg.norm(b)
    x_inc, info_inc = gmres(a, b, tol=1e-6, restart=30)
    x_bat, info_bat = gmres(a, b, tol=1e-6, restart=30, solve_method="batched")
    assert info_inc == 0 and info_bat == 0
    assert true_residual(a, x_bat, b) < 1e-3 * bound < true_residual(a, x_inc, b) <= bound


def test_atol_is_the_bound_when_larger():
    a, b = spd(16), rhs(16)
    x, info = cg(a, b, tol=0.0, atol=1e-3)
    assert info == 0
    assert 1e-6 < true_residual(a, x, b) <= 1e-3 * (1 + 1e-6)


def test_info_counts_the_steps_when_not_converged():
    a, b = spd(30), rhs(30)
    assert int(cg(a, b, tol=1e-12, maxiter=3)[1]) == 3
    assert int(bicgstab(nonsymmetric(30), b, tol=1e-12, maxiter=2)[1]) == 2
    assert int(gmres(nonsymmetric(30), b, tol=1e-12, restart=2, maxiter=2)[1]) == 2


def test_zero_rhs_is_solved_by_zero_without_a_step():
    for solve in SOLVERS.values():
        x, info = solve(stencil, np.zeros(8))
        assert info == 0 and np.array_equal(x, np.zeros(8))


def test_preconditioner_cuts_the_steps():
    """A badly scaled SPD system: Jacobi preconditioning converges in a few
    steps where plain cg has not converged after as many."""
    n = 50
    scale = np.logspace(0, 4, n)
    a = np.diag(scale) + 0.1 * stencil_matrix(n, c=0.0) * np.sqrt(np.outer(scale, scale)) / 10
    b = rhs(n)
    jacobi = lambda r: r / np.diag(a)  # noqa: E731
    x, info = cg(a, b, tol=1e-10, maxiter=12, M=jacobi)
    assert info == 0
    assert true_residual(a, x, b) <= 1e-10 * np.linalg.norm(b) * (1 + 1e-6)
    assert int(cg(a, b, tol=1e-10, maxiter=12)[1]) == 12
    for solve in (bicgstab, gmres):
        x, info = solve(a, b, tol=1e-10, maxiter=40, M=jacobi)
        assert info == 0
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-8)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_pytree_rhs(name):
    """b a dict of two arrays of different shapes; A couples them."""
    n = 6
    full = spd(2 * n) if name == "cg" else nonsymmetric(2 * n)

    def op(x):
        v = inp.concatenate([x["u"], inp.ravel(x["w"])])
        y = inp.matmul(full, v)
        return {"u": y[:n], "w": inp.reshape(y[n:], (2, 3))}
    b = rhs(2 * n)
    x, info = SOLVERS[name](op, {"u": b[:n], "w": b[n:].reshape(2, 3)}, tol=1e-11)
    assert info == 0 and set(x) == {"u", "w"} and x["w"].shape == (2, 3)
    exact = np.linalg.solve(full, b)
    np.testing.assert_allclose(np.concatenate([x["u"], x["w"].ravel()]), exact, atol=1e-9)


def test_float32_stays_float32():
    b = rhs(10).astype(np.float32)
    for solve in SOLVERS.values():
        x, _ = solve(lambda v: stencil(v, np.float32(2.5)), b, tol=1e-5)
        assert x.dtype == np.float32


def test_errors_name_the_solver_and_the_fix():
    with pytest.raises(ShapeError, match=r"cg at test_krylov.py:\d+: A is an array of shape"):
        cg(np.ones((3, 4)), np.ones(3))
    with pytest.raises(ShapeError, match=r"bicgstab at .*A\(x\) returns .* must return"):
        ik.jit(lambda b: bicgstab(lambda x: inp.sum(x), b))(np.ones(3))
    with pytest.raises(ValueError, match="solve_method='householder'; use 'incremental'"):
        gmres(stencil, np.ones(3), solve_method="householder")


# --- recording, strategies, vmap --------------------------------------------------------

def loops_at_top(fn, *args) -> int:
    graph = prepare_for_execution(ik.trace(fn, *args))
    return sum(node.op is Op.WHILE for node in graph.nodes)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_jit_records_one_loop_and_equals_eager(name):
    b = rhs(32)
    fn = lambda b: SOLVERS[name](stencil, b, tol=1e-9)  # noqa: E731
    assert loops_at_top(fn, b) == 1
    x, info = fn(b)
    xj, infoj = ik.jit(fn)(b)
    # the default strategy compiles the solve as one C program, its inner products in
    # the fixed sequential order: the iterates within the solve's tolerance of eager's
    assert np.max(np.abs(x - xj)) <= 1e-9 * np.max(np.abs(x)) and info == infoj
    assert np.array_equal(x, ik.jit(fn, strategy="reference")(b)[0])


@pytest.fixture(scope="module")
def mapped_eager():
    """Per solver: a vmapped solve, its batch, and its eager results (once)."""
    batch = np.random.default_rng(5).normal(size=(7, 24))
    found = {}
    for name in SOLVERS:
        fn = ik.vmap(_solve_stencil(name))
        found[name] = (fn, batch, *fn(batch))
    return found


def _solve_stencil(name: str):
    options = {"restart": 5} if name == "gmres" else {}

    def solve(b):
        return SOLVERS[name](stencil, b, tol=1e-9, **options)
    return solve


@pytest.mark.parametrize("strategy", ["reference", "threads", pytest.param("native",
                                                                          marks=needs_cc)])
@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_strategies_give_the_eager_bits(mapped_eager, strategy, name):
    fn, batch, x, info = mapped_eager[name]
    xs, infos = ik.jit(fn, strategy=strategy)(batch)
    assert np.array_equal(x, xs) and np.array_equal(info, infos)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_vmap_each_element_stops_on_its_own(name):
    """Rows needing different step counts: with maxiter between them some
    elements have converged (info 0) and others not (info = maxiter), and
    each equals its own unmapped solve bit for bit."""
    n = 24
    easy = np.sin(np.pi * np.arange(1, n + 1) / (n + 1))  # an eigenvector: one step
    rng = np.random.default_rng(3)
    batch = np.stack([easy, rng.normal(size=n), np.zeros(n), 3.0 * easy])
    options = {"restart": 2} if name == "gmres" else {}
    solve = lambda b: SOLVERS[name](stencil, b, tol=1e-10, maxiter=4, **options)  # noqa: E731
    xs, infos = ik.vmap(solve)(batch)
    assert infos[1] == 4 and infos[2] == 0 and infos[0] == 0
    for i, b in enumerate(batch):
        x, info = solve(b)
        assert np.array_equal(x, xs[i]) and info == infos[i]


# --- derivatives ------------------------------------------------------------------------

def central(f, x, h=1e-6):
    """Central differences of a scalar function of an array."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


def assert_relative(got, want, bound=1e-6):
    assert np.linalg.norm(got - want) <= bound * np.linalg.norm(want)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_grad_wrt_b_and_the_matrix(name):
    a = spd(8) if name == "cg" else nonsymmetric(8)
    b = rhs(8)
    solve = SOLVERS[name]
    loss = lambda a, b: inp.sum(solve(a, b, tol=1e-12)[0] ** 2)  # noqa: E731
    ga, gb = ik.grad(loss, argnums=(0, 1))(a, b)
    x = np.linalg.solve(a, b)
    lam = np.linalg.solve(a.T, 2 * x)
    assert_relative(gb, lam, 1e-9)
    assert_relative(ga, -np.outer(lam, x), 1e-9)
    assert_relative(gb, central(lambda b: float(np.sum(np.linalg.solve(a, b) ** 2)), b))


def test_grad_wrt_an_operator_parameter_matches_finite_differences():
    b = rhs(20)

    def loss(c):
        x, _ = cg(lambda v: stencil(v, c), b, tol=1e-12)
        return inp.sum(x * inp.cos(x))
    g = ik.grad(loss)(np.float64(2.3))
    fd = (loss(2.3 + 1e-6) - loss(2.3 - 1e-6)) / 2e-6
    assert abs(g - fd) <= 1e-6 * abs(fd)


def test_reverse_over_reverse_is_implicit_too():
    """grad of grad and jacrev of jacrev against finite differences of the
    first derivative, and the closed form of the Hessian in b."""
    a, b = spd(6), rhs(6)
    ainv = np.linalg.inv(a)
    loss = lambda b: inp.sum(cg(a, b, tol=1e-12)[0] ** 2)  # noqa: E731
    hess = ik.jacrev(ik.jacrev(loss))(b)
    assert_relative(hess, 2 * ainv.T @ ainv, 1e-9)

    def scaled(s):
        return ik.grad(lambda b: inp.sum(cg(s * a, b, tol=1e-12)[0] ** 3))(b)
    gg = ik.grad(lambda s: inp.sum(scaled(s)))(np.float64(1.2))
    fd = (np.sum(scaled(1.2 + 1e-6)) - np.sum(scaled(1.2 - 1e-6))) / 2e-6
    assert abs(gg - fd) <= 1e-6 * abs(fd)


@pytest.mark.parametrize("solver", [cg, bicgstab, gmres])
def test_forward_mode_and_forward_over_reverse_are_implicit(solver):
    """jvp, jacfwd and hessian (= jacfwd(jacrev)) against the closed forms:
    dx = A^-1 (db - dA x); the Hessian in a scale s of A of sum(x^2) against
    differences of the gradient."""
    a, b = spd(5), rhs(5)
    ainv = np.linalg.inv(a)
    x = ainv @ b
    t = rhs(5) * 0.5
    got = ik.jvp(lambda b: solver(a, b, tol=1e-12)[0], (b,), (t,))[1]
    assert_relative(got, ainv @ t, 1e-9)
    assert_relative(ik.jacfwd(lambda b: solver(a, b, tol=1e-12)[0])(b), ainv, 1e-9)
    moved = ik.jvp(lambda s: solver(s * a, b, tol=1e-12)[0], (1.0,), (1.0,))[1]
    assert_relative(moved, -ainv @ (a @ x), 1e-9)

    def loss(s):
        return inp.sum(solver(s * a, b, tol=1e-12)[0] ** 2)
    hess = ik.hessian(loss)(np.float64(1.2))
    fd = (ik.grad(loss)(1.2 + 1e-5) - ik.grad(loss)(1.2 - 1e-5)) / 2e-5
    assert abs(hess - fd) <= 1e-6 * abs(fd)


def test_forward_over_forward_in_the_operator_is_refused_with_the_remedy():
    """jacfwd(jacfwd) in b is the closed form; in a parameter of A it would
    differentiate the tangent solve forward, which is a custom_vjp: refused,
    naming reverse mode (hessian works, above)."""
    a, b = spd(4), rhs(4)
    ainv = np.linalg.inv(a)
    h = ik.jacfwd(ik.jacfwd(lambda b: inp.sum(cg(a, b, tol=1e-12)[0] ** 2)))(b)
    assert_relative(h, 2 * ainv.T @ ainv, 1e-9)
    with pytest.raises(DifferentiationError, match="cg_linear.*reverse mode"):
        ik.jacfwd(ik.jacfwd(lambda s: inp.sum(cg(s * a, b)[0] ** 2)))(np.float64(1.2))


def test_gradient_is_the_transposed_solve_not_the_iterations():
    """At a loose tolerance the gradient of sum(x) with respect to b is
    exactly cg(A, ones) at that tolerance (the implicit rule), not the
    derivative of the steps taken, and the gradient graph holds no loop
    derivative (while_lin / while_vjp) anywhere."""
    a, b = spd(30), rhs(30)
    loss = lambda b: inp.sum(cg(a, b, tol=1e-2)[0])  # noqa: E731
    g = ik.grad(loss)(b)
    assert np.array_equal(g, cg(a, np.ones(30), tol=1e-2)[0])
    graph = ik.trace(ik.grad(loss), b)
    ops = {node.op for node in walk(graph)}
    assert Op.WHILE in ops and not ops & {Op.WHILE_LIN, Op.WHILE_VJP}
    from isokernel.linalg.krylov import cg_loop
    bare = lambda b: inp.sum(cg_loop(lambda v: inp.matmul(a, v), lambda v: v, b,  # noqa: E731
                                     inp.zeros_like(b), 1e-2, 0.0, 300)[0])  # x, info, steps
    through_steps = ik.grad(bare)(b)
    assert not np.allclose(through_steps, g, rtol=1e-6)


def test_vmap_of_grad_per_element():
    a = spd(10)
    batch = np.random.default_rng(4).normal(size=(5, 10))
    g = ik.vmap(ik.grad(lambda b: inp.sum(cg(a, b, tol=1e-12)[0] ** 2)))(batch)
    ainv = np.linalg.inv(a)
    assert_relative(g, 2 * (ainv.T @ ainv @ batch.T).T, 1e-9)


def test_cg_inside_a_scan_body_differentiates():
    a = spd(5)

    def run(b):
        def body(c, s):
            x, _ = cg(a, c * s, tol=1e-12)
            return c + 0.1 * x, inp.sum(x)
        return inp.sum(ik.scan(body, b, np.array([1.0, 2.0, 0.5]))[1])
    b = rhs(5)
    g = ik.grad(run)(b)
    fd = central(lambda b: float(run(b)), b)
    assert_relative(g, fd)


def test_gradients_agree_with_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax)")
    jax.config.update("jax_enable_x64", True)
    jnp, jcg = jax.numpy, jax.scipy.sparse.linalg.cg
    a, b = spd(12), rhs(12)
    ga, gb = ik.grad(lambda a, b: inp.sum(inp.sin(cg(a, b, tol=1e-12)[0])),
                     argnums=(0, 1))(a, b)
    ja, jb = jax.grad(lambda a, b: jnp.sum(jnp.sin(jcg(a, b, tol=1e-12)[0])),
                      argnums=(0, 1))(a, b)
    assert_relative(gb, np.asarray(jb))
    # JAX symmetrizes nothing: its cotangent of A is the VJP of A @ x, as here
    assert_relative(ga, np.asarray(ja))

    def jstencil(x, c):
        p = jnp.pad(x, (1, 1))
        return c * x - p[:-2] - p[2:]
    g = ik.grad(lambda c: inp.sum(cg(lambda v: stencil(v, c), b, tol=1e-12)[0] ** 2))(2.3)
    jg = jax.grad(lambda c: jnp.sum(jcg(lambda v: jstencil(v, c), b, tol=1e-12)[0] ** 2))(2.3)
    assert abs(g - float(jg)) <= 1e-6 * abs(float(jg))


@pytest.mark.parametrize("name", ["bicgstab", "gmres"])
def test_nonsymmetric_operator_parameter_uses_the_transposed_operator(name):
    """A matrix-free nonsymmetric operator (an upwind term c x_{i-1}): its
    backward solve runs with the transposed map, found by the matvec's VJP."""
    b = rhs(16)

    def loss(c):
        op = lambda v: stencil(v) - c * inp.pad(v, (1, 0))[:-1]  # noqa: E731
        return inp.sum(inp.sin(SOLVERS[name](op, b, tol=1e-12)[0]))
    c = np.float64(0.7)
    g = ik.grad(loss)(c)
    fd = (loss(c + 1e-6) - loss(c - 1e-6)) / 2e-6
    assert abs(g - fd) <= 1e-6 * abs(fd)


def test_preconditioner_and_x0_change_nothing_in_the_gradient():
    """The solution depends on neither, so neither does its gradient; the
    preconditioned backward solve gives the same gradient to its tolerance,
    and x0 and the preconditioner's parameters get exact zeros."""
    a, b = spd(12), rhs(12)

    def loss(b, x0, d):
        x, _ = cg(a, b, x0, tol=1e-12, M=lambda r: r / d)
        return inp.sum(x ** 2)
    gb, gx0, gd = ik.grad(loss, argnums=(0, 1, 2))(b, np.ones(12), np.diag(a).copy())
    ainv = np.linalg.inv(a)
    assert_relative(gb, 2 * ainv @ ainv @ b, 1e-9)
    assert not np.any(gx0) and not np.any(gd)


def test_pytree_gradient():
    n = 4
    full = spd(2 * n)

    def op(x):
        y = inp.matmul(full, inp.concatenate([x["u"], x["v"]]))
        return {"u": y[:n], "v": y[n:]}
    b = rhs(2 * n)
    g = ik.grad(lambda u: inp.sum(cg(op, {"u": u, "v": b[n:]}, tol=1e-12)[0]["v"]))(b[:n])
    ainv = np.linalg.inv(full)
    assert_relative(g, ainv[n:, :n].sum(axis=0), 1e-9)


def test_jit_of_grad_equals_eager_grad():
    a, b = spd(9), rhs(9)
    g = ik.grad(lambda a, b: inp.sum(cg(a, b, tol=1e-10)[0] ** 3), argnums=(0, 1))
    for eager, jitted, reference in zip(g(a, b), ik.jit(g)(a, b),
                                        ik.jit(g, strategy="reference")(a, b)):
        assert np.array_equal(eager, reference)
        # the default strategy's own summation order: within the solve's tolerance
        assert np.max(np.abs(eager - jitted)) <= 1e-8 * np.max(np.abs(eager))


def test_vmap_over_the_operator_and_b():
    mats = np.stack([spd(6, seed) for seed in range(4)])
    batch = np.random.default_rng(6).normal(size=(4, 6))
    xs, infos = ik.vmap(lambda a, b: cg(a, b, tol=1e-12))(mats, batch)
    assert not np.any(infos)
    np.testing.assert_allclose(xs, np.linalg.solve(mats, batch[..., None])[..., 0], rtol=1e-9)
    gs = ik.vmap(ik.grad(lambda a, b: inp.sum(cg(a, b, tol=1e-12)[0] ** 2)))(mats, batch)
    x = np.linalg.solve(mats, batch[..., None])[..., 0]
    lam = np.linalg.solve(mats, 2 * x[..., None])[..., 0]
    assert_relative(gs, -lam[:, :, None] * x[:, None, :], 1e-9)
