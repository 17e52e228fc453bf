"""``isokernel.optimize.root`` (Newton with a dense pivoted solve): values,
the result pytree, strategies, lane-wise ``vmap``, use inside control flow,
and derivatives of the root by the implicit function theorem in both modes
and composed twice (against closed forms and finite differences)."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.ir import Op, ShapeError, walk
from isokernel.optimize import RootResults, root
from isokernel.optimize.dense import solve as dense_solve

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")


def square(x, a):
    return x * x - a


def system(x, a, c):
    """Two equations in two unknowns with a root near (1, 0.66) for a = 1.5."""
    return inp.stack([x[0] ** 3 + a * x[1] - c[0], inp.sin(x[0]) + a * x[1] ** 2 - c[1]])


X0 = np.array([1.0, 1.0])
A = np.float64(1.5)
C = np.array([2.0, 1.5])


def poly_system(x, a, c):
    """Basic operations only: every strategy gives the same bits."""
    cube = x[0] * x[0] * x[0]
    return inp.stack([cube + a * x[1] - c[0], x[0] - cube / 6.0 + a * x[1] * x[1] - c[1]])


def numpy_system_root(a, c):
    """The same root by Newton in NumPy, iterated to the last bit."""
    x = X0.copy()
    for _ in range(60):
        f = np.array([x[0] ** 3 + a * x[1] - c[0], np.sin(x[0]) + a * x[1] ** 2 - c[1]])
        jac = np.array([[3 * x[0] ** 2, a], [np.cos(x[0]), 2 * a * x[1]]])
        x = x - np.linalg.solve(jac, f)
    return x


# --- the dense solve --------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_dense_solve_matches_numpy(n):
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=(n, n)), rng.normal(size=n)
    np.testing.assert_allclose(dense_solve(a, b), np.linalg.solve(a, b), rtol=1e-12, atol=1e-12)


def test_dense_solve_pivots():
    """A zero on the diagonal needs a row swap; without pivoting this is NaN."""
    a = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 1.0]])
    b = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(dense_solve(a, b), np.linalg.solve(a, b), rtol=1e-14)
    batch = np.stack([a, a[::-1], a.T])
    got = ik.vmap(dense_solve, in_axes=(0, None))(batch, b)
    np.testing.assert_allclose(got, np.linalg.solve(batch, b[None, :, None])[..., 0], rtol=1e-13)


# --- values -----------------------------------------------------------------------------

def test_scalar_root_and_result():
    r = root(square, np.float64(1.0), np.float64(2.0))
    assert isinstance(r, RootResults) and r.success
    assert abs(r.x * r.x - 2.0) <= 1e-10 and 3 <= r.nit <= 6
    assert abs(r.x - np.sqrt(2.0)) <= 1e-10


def test_system_root_within_tolerance():
    r = root(system, X0, A, C, tol=1e-12)
    assert r.success and np.max(np.abs(system(r.x, A, C))) <= 1e-12
    np.testing.assert_allclose(r.x, numpy_system_root(A, C), rtol=1e-12)


def test_no_root_reports_failure():
    """x^2 + 1 has no real root: Newton wanders and stops at maxiter."""
    r = root(lambda x: x * x + 1.0, np.float64(0.5), maxiter=7)
    assert not r.success and r.nit == 7


def test_singular_jacobian_fails_without_raising():
    """Two parallel lines: the Jacobian is singular, the step infinite, the
    loop stops at once and reports failure."""
    def parallel(x):
        return inp.stack([x[0] + x[1] - 1.0, 2.0 * x[0] + 2.0 * x[1] - 3.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = root(parallel, np.zeros(2))
    assert not r.success and r.nit == 1 and not np.all(np.isfinite(r.x))


def test_errors():
    with pytest.raises(ValueError, match="method='broyden' is not known"):
        root(square, 1.0, 2.0, method="broyden")
    with pytest.raises(ShapeError, match=r"root at test_root.py:\d+: fun\(x, \*args\) returns"):
        ik.jit(lambda a: root(lambda x, a: inp.sum(x) - a, np.ones(2), a).x)(np.float64(1.0))


# --- recording, strategies, vmap --------------------------------------------------------

def test_jit_records_one_loop():
    from isokernel.transforms import prepare_for_execution
    graph = prepare_for_execution(ik.trace(lambda a: root(system, X0, a, C).x, A))
    assert sum(node.op is Op.WHILE for node in graph.nodes) == 1
    assert not graph.ops() & {Op.CUSTOM_JVP_CALL, Op.CUSTOM_VJP_CALL}


@pytest.mark.parametrize("strategy", ["reference", "threads", pytest.param("native",
                                                                          marks=needs_cc)])
def test_strategies_give_the_eager_bits(strategy):
    a = np.linspace(0.5, 3.0, 9)
    fn = ik.vmap(lambda a: root(poly_system, X0, a, C))
    want = fn(a)
    got = ik.jit(fn, strategy=strategy)(a)
    assert np.array_equal(want.x, got.x) and np.array_equal(want.nit, got.nit)
    assert np.array_equal(want.success, got.success)


def test_vmap_each_element_stops_on_its_own():
    a = np.array([1.0, 1.0 + 1e-12, 4.0, 1e4, 0.25])
    results = ik.vmap(lambda a: root(square, np.float64(1.0), a))(a)
    assert len(set(results.nit.tolist())) >= 3 and results.nit[0] == 0
    for i, ai in enumerate(a):
        one = root(square, np.float64(1.0), ai)
        assert np.array_equal(one.x, results.x[i]) and one.nit == results.nit[i]


def twice_in_a_while_loop(a):
    """A while_loop whose body solves for a root: sqrt(sqrt(a) + 1)."""
    def body(s):
        x, k = s
        return root(square, np.float64(1.0), x + inp.astype(k, inp.float64)).x, k + 1
    return ik.while_loop(lambda s: s[1] < 2, body, (a, 0))[0]


def roots_along_a_scan(a):
    """A scan whose body solves for a root: sum of sqrt(a s)."""
    def body(x, s):
        r = root(square, x, a * s).x
        return r, r
    return inp.sum(ik.scan(body, np.float64(1.0), np.array([1.0, 2.0, 4.0]))[1])


def test_root_inside_a_while_loop_and_a_scan():
    a = np.float64(2.0)
    value = twice_in_a_while_loop(a)
    assert abs(value - np.sqrt(np.sqrt(a) + 1.0)) <= 1e-10
    root_a = root(square, np.float64(1.0), a).x
    want = 1.0 / (2.0 * value) / (2.0 * root_a)  # the chain rule at the computed roots
    assert abs(ik.grad(twice_in_a_while_loop)(a) - want) <= 1e-6 * want
    total = roots_along_a_scan(a)
    assert abs(total - np.sqrt(a) * (1 + np.sqrt(2) + 2)) <= 1e-9
    assert abs(ik.grad(roots_along_a_scan)(a) - total / (2 * a)) <= 1e-9
    assert abs(ik.jacfwd(roots_along_a_scan)(a) - total / (2 * a)) <= 1e-9


def test_root_inside_a_loop_under_jit():
    assert ik.jit(roots_along_a_scan)(np.float64(2.0)) == roots_along_a_scan(np.float64(2.0))


# --- derivatives ------------------------------------------------------------------------

def test_derivative_of_sqrt_in_every_mode():
    """Exact at the computed root x: 1/(2x) and -1/(4x^3), to the last bit
    or two, however loose the tolerance that gave x."""
    f = lambda a: root(square, np.float64(1.0), a, tol=1e-3).x  # noqa: E731
    a = np.float64(2.0)
    x = f(a)
    assert abs(x - np.sqrt(2.0)) > 1e-7  # a loose root ...
    first, second = 0.5 / x, -0.25 / x ** 3  # ... and its exact derivatives
    assert abs(ik.grad(f)(a) - first) <= 1e-15
    assert abs(ik.jvp(f, (a,), (1.0,))[1] - first) <= 1e-15
    assert abs(ik.jacfwd(f)(a) - first) <= 1e-15
    assert abs(ik.hessian(f)(a) - second) <= 1e-15
    assert abs(ik.grad(ik.grad(f))(a) - second) <= 1e-15
    assert abs(ik.jacfwd(ik.jacfwd(f))(a) - second) <= 1e-15


def test_derivative_is_implicit_even_when_no_step_is_taken():
    """Started at the root, Newton takes no step: differentiating the steps
    would give 0 (x0 is a constant); the implicit rule gives 1/(2 sqrt a)."""
    f = lambda a: root(square, np.float64(2.0), a).x  # noqa: E731
    assert root(square, np.float64(2.0), np.float64(4.0)).nit == 0
    assert ik.grad(f)(np.float64(4.0)) == 0.25
    graph = ik.trace(ik.grad(f), np.float64(4.0))
    assert not {node.op for node in walk(graph)} & {Op.WHILE_LIN, Op.WHILE_VJP}


def test_system_jacobians_match_the_closed_form_and_finite_differences():
    x = root(system, X0, A, C, tol=1e-13).x
    jx = np.array([[3 * x[0] ** 2, A], [np.cos(x[0]), 2 * A * x[1]]])
    want_c = np.linalg.solve(jx, np.eye(2))  # dF/dc = -I
    want_a = -np.linalg.solve(jx, np.array([x[1], x[1] ** 2]))
    fwd = ik.jacfwd(lambda c: root(system, X0, A, c, tol=1e-13).x)(C)
    rev = ik.jacrev(lambda c: root(system, X0, A, c, tol=1e-13).x)(C)
    np.testing.assert_allclose(fwd, want_c, rtol=1e-13)
    np.testing.assert_allclose(rev, want_c, rtol=1e-13)
    ga = ik.jacfwd(lambda a: root(system, X0, a, C, tol=1e-13).x)(A)
    np.testing.assert_allclose(ga, want_a, rtol=1e-13)
    h = 1e-6
    fd = (numpy_system_root(A + h, C) - numpy_system_root(A - h, C)) / (2 * h)
    assert np.linalg.norm(ga - fd) <= 1e-6 * np.linalg.norm(fd)


def test_hessian_and_grad_of_grad_match_finite_differences():
    loss = lambda c: inp.sum(root(system, X0, A, c, tol=1e-13).x ** 2)  # noqa: E731
    grad = ik.grad(loss)
    hess = ik.hessian(loss)(C)
    h = 1e-5
    fd = np.stack([(grad(C + h * e) - grad(C - h * e)) / (2 * h) for e in np.eye(2)], axis=1)
    assert np.linalg.norm(hess - fd) <= 1e-6 * np.linalg.norm(fd)
    rr = ik.jacrev(ik.jacrev(loss))(C)
    np.testing.assert_allclose(rr, hess, rtol=1e-12)


def test_gradient_through_a_closed_over_traced_value():
    def loss(a):
        return root(lambda x: x * x * x - a, np.float64(1.0)).x
    assert abs(ik.grad(loss)(np.float64(8.0)) - 1.0 / 12.0) <= 1e-15


def test_vmap_of_grad_per_element():
    a = np.array([0.5, 2.0, 9.0, 100.0])
    f = lambda a: root(square, np.float64(1.0), a).x  # noqa: E731
    g = ik.vmap(ik.grad(f))(a)
    np.testing.assert_allclose(g, 0.5 / ik.vmap(f)(a), rtol=1e-15)
