"""Cases from JAX's own test suite (``tests/linalg_test.py``,
``tests/lax_control_flow_test.py`` in JAX's public repository), ported from
each upstream test's intent: the determinant's derivative at singular
matrices, the pseudo-inverse's Jacobian at the identity, ``lstsq``'s
residuals, 0x0 matrices, nested ``vmap`` of a loop with a traced bound,
weakly typed loop carries and numeric ``cond`` predicates.

Every case runs eagerly and under ``jit`` on ``reference``, ``threads`` and
``native``; the expected values are NumPy's (shapes and values of ``det``,
``inv``, ``lstsq``) or JAX's, written out (analytic where there is a closed
form). Where JAX is importable, a last test per group also compares with it
live."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.ir import TracerError

HOW = ("eager", "reference", "threads", "native")


def _run(how: str, fn, *args):
    """``fn(*args)`` eagerly, or under ``jit`` with the strategy ``how``."""
    if how == "eager":
        return fn(*args)
    if how == "native" and codegen.unavailable_reason() is not None:
        pytest.skip(f"native: {codegen.unavailable_reason()}")
    options = {"workers": 2} if how in ("threads", "native") else {}
    return ik.jit(fn, strategy=how, **options)(*args)


def _close(got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), got
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
    assert np.max(np.abs(got - want), initial=0.0) <= tol * scale, (got, want)


def _cofactors(a):
    """The matrix of cofactors of each matrix of ``a`` (..., n, n), from
    minors: the gradient of the determinant, singular or not."""
    n = a.shape[-1]
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


def _jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: no live JAX comparison")
    jax.config.update("jax_enable_x64", True)
    return jax


# --- det: the derivative at singular matrices (testDetGrad, ...Corank1/2, Issue6121) ------

DET_SHAPES = ((2, 2, 2), (2, 3, 3), (2, 4, 4), (2, 5, 5), (2, 7, 7), (5, 7, 7))


def _batch_with_a_zero_matrix(shape):
    a = np.random.default_rng(sum(shape)).uniform(-5.0, 5.0, shape)
    a[0] = 0.0
    return a


def _det_sum(a):
    return inp.sum(inp.linalg.det(a))


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("shape", DET_SHAPES)
def test_det_gradient_of_a_zero_matrix_in_a_batch_is_zero(shape, how):
    """testDetGrad: "make sure there are no NaNs when a matrix is zero"; the
    gradient of det is the cofactor matrix, 0 for a zero matrix of n >= 2."""
    a = _batch_with_a_zero_matrix(shape)
    want = _cofactors(a)
    assert np.all(want[0] == 0.0)
    _close(_run(how, ik.grad(_det_sum), a), want)
    _close(_run(how, ik.jacfwd(_det_sum), a), want)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("n", (2, 5, 7))
def test_det_gradient_of_one_zero_matrix_is_zero(n, how):
    _close(_run(how, ik.grad(inp.linalg.det), np.zeros((n, n))), np.zeros((n, n)))


CORANK1 = np.array([[50.0, -30.0, 45.0], [-30.0, 90.0, -81.0], [45.0, -81.0, 81.0]])
CORANK2 = np.array([[36.0, -42.0, 18.0], [-42.0, 49.0, -21.0], [18.0, -21.0, 9.0]])


def _embedded(block, n, first=True):
    """``block`` in the top-left (``first``) or bottom-right corner of an n x n
    matrix, the rest of it a well-conditioned diagonal: the same corank, past
    the 4x4 unrolled path. LU meets the zero pivot in the middle of the
    factorization, or at its end."""
    k = block.shape[0]
    rest = np.diag(np.arange(2.0, 2.0 + n - k))
    a = np.zeros((n, n))
    if first:
        a[:k, :k], a[k:, k:] = block, rest
    else:
        a[:n - k, :n - k], a[n - k:, n - k:] = rest, block
    return a


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("n, first", ((3, True), (6, True), (6, False)))
def test_det_gradient_of_a_corank_one_matrix_is_its_cofactor_matrix(n, first, how):
    """testDetGradOfSingularMatrixCorank1: a rank n-1 matrix has a non-zero
    gradient, the rank-one cofactor matrix (also where the zero pivot is not
    LU's last, where JAX gives 0)."""
    a = _embedded(CORANK1, n, first)
    want = _cofactors(a)
    assert np.max(np.abs(want)) > 100.0
    _close(_run(how, ik.grad(inp.linalg.det), a), want, tol=1e-9)
    _close(_run(how, ik.jacfwd(inp.linalg.det), a), want, tol=1e-9)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("n, first", ((3, True), (6, True), (6, False)))
def test_det_gradient_of_a_corank_two_matrix_is_zero(n, first, how):
    """testDetGradOfSingularMatrixCorank2: rank n-2, zero gradient."""
    a = _embedded(CORANK2, n, first)
    _close(_run(how, ik.grad(inp.linalg.det), a), np.zeros((n, n)), tol=1e-9)


@pytest.mark.parametrize("how", HOW)
def test_det_gradient_of_one_by_one_matrices_is_one(how):
    """testDetGradIssue6121."""
    _close(_run(how, ik.grad(_det_sum), np.ones((16, 1, 1))), np.ones((16, 1, 1)))


@pytest.mark.parametrize("n", (6, 7))
def test_det_second_derivative_still_matches_the_cofactor_formula(n):
    """The hessian of det through its own rule: d²det/da_ij da_kl, checked
    against central differences of the analytic gradient."""
    a = np.random.default_rng(n).uniform(-2.0, 2.0, (n, n)) + n * np.eye(n)
    got = ik.hessian(inp.linalg.det)(a)
    h = 1e-6
    for i, j in ((0, 0), (1, 3), (n - 1, 2)):
        step = np.zeros((n, n))
        step[i, j] = h
        fd = (_cofactors(a + step) - _cofactors(a - step)) / (2 * h)
        assert np.max(np.abs(got[:, :, i, j] - fd)) <= 1e-5 * np.max(np.abs(fd))


def test_det_gradients_match_jax_live():
    jax = _jax()
    import jax.numpy as jnp
    for shape in DET_SHAPES:
        a = _batch_with_a_zero_matrix(shape)
        want = np.asarray(jax.grad(lambda x: jnp.sum(jnp.linalg.det(x)))(a))
        _close(ik.grad(_det_sum)(a), want)
    for block in (CORANK1, CORANK2):  # where JAX's LU meets the zero pivot last
        for n in (3, 6):
            a = _embedded(block, n, first=n == 3)
            _close(ik.grad(inp.linalg.det)(a), np.asarray(jax.grad(jnp.linalg.det)(a)),
                   tol=1e-9)


# --- pinv: the Jacobian at the identity (testPinvGradIssue2792) ---------------------------

PINV_AT_IDENTITY = np.array([[[[-1.0, 0.0], [0.0, 0.0]], [[0.0, -1.0], [0.0, 0.0]]],
                             [[[0.0, 0.0], [-1.0, 0.0]], [[0.0, 0.0], [0.0, -1.0]]]],
                            np.float32)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("jac", ("jacfwd", "jacrev"))
def test_pinv_jacobian_at_the_identity_keeps_the_rotation_part(jac, how):
    """d pinv(A)/dA_kl at A = I is -E_lk: every entry, not only the diagonal
    ones (the singular values there are all equal)."""
    got = _run(how, getattr(ik, jac)(inp.linalg.pinv), np.eye(2, dtype=np.float32))
    assert got.dtype == np.float32
    _close(got, PINV_AT_IDENTITY, tol=1e-6)


def _rank_one(p):
    """[[0, 0], [-p, 1]] / (1 + p²), built by stacking (as the upstream test
    builds it with jnp.array)."""
    zero = inp.zeros_like(p)
    return inp.stack([inp.stack([zero, zero]), inp.stack([-p, inp.ones_like(p)])]) / (1 + p**2)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("jac", ("jacfwd", "jacrev"))
def test_pinv_jacobian_of_a_rank_one_family(jac, how):
    """The first half of testPinvGradIssue2792: pinv of a rank-one matrix of
    p, differentiated along p, is [[0, -1], [0, 0]] at p = 2."""
    got = _run(how, getattr(ik, jac)(lambda p: inp.linalg.pinv(_rank_one(p))), np.float32(2.0))
    _close(got, np.array([[0.0, -1.0], [0.0, 0.0]], np.float32), tol=1e-5)


def test_pinv_jacobians_match_jax_live():
    jax = _jax()
    import jax.numpy as jnp
    eye = np.eye(2, dtype=np.float32)
    _close(ik.jacfwd(inp.linalg.pinv)(eye), np.asarray(jax.jacobian(jnp.linalg.pinv)(eye)),
           tol=1e-6)
    tall = np.random.default_rng(3).normal(size=(5, 3))
    tall[:, 2] = tall[:, 0]  # rank 2
    for fn in (ik.jacfwd, ik.jacrev):
        _close(fn(inp.linalg.pinv)(tall), np.asarray(jax.jacfwd(jnp.linalg.pinv)(tall)),
               tol=1e-8)
        _close(fn(inp.linalg.pinv)(tall.T), np.asarray(jax.jacfwd(jnp.linalg.pinv)(tall.T)),
               tol=1e-8)


# --- lstsq: residuals (testLstsq, testLstsqZeroMatrix) ------------------------------------

LSTSQ_SHAPES = (((1, 1), (1, 1)), ((4, 6), (4,)), ((6, 6), (6, 1)), ((8, 6), (8, 4)),
                ((0, 3), (0,)), ((3, 0), (3,)), ((3, 1), (3, 0)))


def _lstsq_case(lhs, rhs, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-5.0, 5.0, lhs), rng.uniform(-5.0, 5.0, rhs)


def _same_as_numpy(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rcond", (-1, None, 0.5))
@pytest.mark.parametrize("lhs, rhs", LSTSQ_SHAPES)
def test_lstsq_with_numpy_resid_is_numpys_answer(lhs, rhs, rcond):
    """testLstsq compares with NumPy through ``numpy_resid=True``: residuals
    empty when the rank is below n or m <= n (rcond=0.5 makes the 8x6 case
    rank-deficient), rcond < 0 meaning machine precision."""
    a, b = _lstsq_case(lhs, rhs)
    want = np.linalg.lstsq(a, b, rcond=rcond)
    _same_as_numpy(inp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=True), want)


@pytest.mark.parametrize("shape", ((2, 1), (2, 2), (1, 2)))
def test_lstsq_of_a_zero_matrix_is_numpys_answer(shape):
    """testLstsqZeroMatrix (JAX issue 32666); rcond=-1 (machine precision,
    as LAPACK) must not invert the zero singular values either."""
    a, b = np.zeros(shape), np.ones(shape)
    for rcond in (None, -1):
        _same_as_numpy(inp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=True),
                       np.linalg.lstsq(a, b, rcond=rcond))


@pytest.mark.parametrize("how", HOW)
def test_lstsq_with_a_negative_rcond_drops_zero_singular_values(how):
    """rcond < 0 means machine precision (LAPACK's gelsd, NumPy, JAX): a
    zero singular value is not inverted (it was, giving inf)."""
    a, b = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), np.ones(3)
    x, _, rank, _ = _run(how, lambda a, b: inp.linalg.lstsq(a, b, rcond=-1), a, b)
    np.testing.assert_array_equal(x, np.linalg.lstsq(a, b, rcond=-1)[0])
    assert int(rank) == 1


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("lhs, rhs", LSTSQ_SHAPES)
def test_lstsq_default_residuals_have_a_static_shape_everywhere(lhs, rhs, how):
    """The default (numpy_resid=False, JAX's default too): for m > n the
    squared residual norms of the minimum-norm solution, whatever the rank
    (NumPy's empty array depends on the data, which no compiled shape can);
    empty for m <= n. Eager and compiled agree on shape and value."""
    a, b = _lstsq_case(lhs, rhs)
    a[:, :1] = 0.0 if a.size else a[:, :1]  # rank-deficient where it has columns
    x, residuals, rank, s = _run(how, lambda a, b: inp.linalg.lstsq(a, b, rcond=0.5), a, b)
    want = np.linalg.lstsq(a, b, rcond=0.5)
    np.testing.assert_allclose(x, want[0], rtol=1e-10, atol=1e-10)
    assert int(rank) == want[2]
    m, n = lhs
    if m > n:
        column = b if b.ndim == 2 else b[:, None]
        solved = np.asarray(x) if b.ndim == 2 else np.asarray(x)[:, None]
        np.testing.assert_allclose(residuals, np.sum((column - a @ solved) ** 2, axis=0),
                                   rtol=1e-10, atol=1e-10)
    else:
        assert np.shape(residuals) == (0,)


def test_lstsq_numpy_resid_inside_jit_is_refused_with_the_fix():
    a, b = _lstsq_case((8, 6), (8,))
    with pytest.raises(TracerError, match=r"lstsq at .*numpy_resid=True.*numpy_resid=False"):
        ik.jit(lambda a, b: inp.linalg.lstsq(a, b, numpy_resid=True))(a, b)


def test_lstsq_matches_jax_live():
    _jax()
    import jax.numpy as jnp
    for lhs, rhs in LSTSQ_SHAPES:
        for rcond in (-1, None, 0.5):
            a, b = _lstsq_case(lhs, rhs)
            want = jnp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=True)
            _same_as_numpy(inp.linalg.lstsq(a, b, rcond=rcond, numpy_resid=True),
                           [np.asarray(w) for w in want])


# --- 0x0 matrices (testDet and testInv with n = 0) ----------------------------------------

@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("batch", ((), (3,)))
def test_det_inv_slogdet_solve_of_0x0_matrices_are_numpys(batch, how):
    a, b = np.zeros((*batch, 0, 0)), np.zeros((*batch, 0, 2))
    det = _run(how, inp.linalg.det, a)
    assert np.shape(det) == batch and np.all(np.asarray(det) == 1.0)
    assert np.asarray(det).dtype == np.float64
    inv = _run(how, inp.linalg.inv, a)
    assert np.shape(inv) == a.shape and np.asarray(inv).dtype == np.float64
    sign, logdet = _run(how, inp.linalg.slogdet, a)
    np.testing.assert_array_equal(sign, np.linalg.slogdet(a)[0])
    np.testing.assert_array_equal(logdet, np.linalg.slogdet(a)[1])
    assert np.shape(_run(how, inp.linalg.solve, a, b)) == np.linalg.solve(a, b).shape
    assert np.shape(_run(how, inp.linalg.cholesky, a)) == a.shape


# --- nested vmap of a loop with a traced bound (test_vmaps_of_while_loop) ------------------

def _add_n_times(x, n):
    return ik.fori_loop(0, n, lambda _, x: x + 1, x)


@pytest.mark.parametrize("how", HOW)
def test_vmaps_of_a_fori_loop_with_a_traced_bound(how):
    """JAX issue 3164: vmap over x of vmap over n of fori_loop(0, n, ...)."""
    x, n = np.arange(3), np.arange(4)
    fn = ik.vmap(ik.vmap(_add_n_times, (None, 0)), (0, None))
    got = _run(how, fn, x, n)
    np.testing.assert_array_equal(got, x[:, None] + n[None, :])
    assert np.asarray(got).dtype == np.int64
    other = ik.vmap(ik.vmap(_add_n_times, (0, None)), (None, 0))
    np.testing.assert_array_equal(_run(how, other, x, n), n[:, None] + x[None, :])


@pytest.mark.parametrize("how", HOW)
def test_vmaps_of_a_lane_wise_while_loop_with_both_axes_mapped(how):
    """Both levels mapping the loop's predicate: every (x, n) its own count."""
    x, n = np.arange(3.0), np.arange(4)
    fn = ik.vmap(ik.vmap(_add_n_times, (None, 0)), (0, 0))
    got = _run(how, fn, x, np.stack([n, n + 1, n + 2]))
    np.testing.assert_array_equal(got, x[:, None] + n[None, :] + np.arange(3)[:, None])


# --- weakly typed initial carries (test_scan_init_weak_type, test_while_loop_...) ---------

@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("dtype", (np.int32, np.int64, np.float32))
def test_scan_with_a_python_zero_takes_the_body_dtype(dtype, how):
    x = np.ones(5, dtype)

    def sums(xs):
        return ik.scan(lambda carry, x: (carry + x, x), 0, xs)
    carry, ys = _run(how, sums, x)
    assert np.asarray(carry).dtype == dtype and carry == 5
    np.testing.assert_array_equal(ys, x)
    assert np.asarray(ys).dtype == dtype


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("dtype", (np.int32, np.int64, np.float32))
def test_while_loop_with_a_python_zero_takes_the_body_dtype(dtype, how):
    def count(increment):
        return ik.while_loop(lambda v: v < 2, lambda v: v + increment, 0)
    got = _run(how, count, np.array(1, dtype))
    assert np.asarray(got).dtype == dtype and got == 2


@pytest.mark.parametrize("how", HOW)
def test_fori_loop_with_a_python_zero_takes_the_body_dtype(how):
    def total(step):
        return ik.fori_loop(0, 4, lambda i, c: c + step, 0)
    got = _run(how, total, np.int32(3))
    assert np.asarray(got).dtype == np.int32 and got == 12


@pytest.mark.parametrize("how", HOW)
def test_a_python_scalar_carry_the_body_keeps_weak_stays_the_default_dtype(how):
    """``0`` whose body adds only Python scalars is an int64 carry, as before."""
    got = _run(how, lambda x: (x, ik.while_loop(lambda v: v < 3, lambda v: v + 1, 0)),
               np.float32(1.0))[1]
    assert np.asarray(got).dtype == np.int64 and got == 3


def test_a_body_that_keeps_the_default_dtypes_is_recorded_once():
    """The weak-scalar rule costs a second recording only where the default
    dtype fails: a counter ``0`` the body adds 1 to is recorded once."""
    calls = []

    def step(state):
        calls.append(1)
        return state[0] * 0.5, state[1] + 1
    ik.jit(lambda x: ik.while_loop(lambda s: s[0] > 1.0, step, (x, 0)))(np.float64(8.0))
    assert len(calls) == 1
    calls.clear()
    ik.jit(lambda x: ik.scan(lambda c, _: (step(c), None), (x, 0), length=3))(np.float64(8.0))
    assert len(calls) == 1


def test_weak_carries_match_jax_live():
    jax = _jax()
    import jax.numpy as jnp
    for dtype in (np.int32, np.float32):
        x = np.ones(5, dtype)
        want = jax.lax.scan(lambda c, x: (c + x, x), 0, jnp.asarray(x))[0]
        got = ik.scan(lambda c, x: (c + x, x), 0, x)[0]
        assert np.asarray(got).dtype == np.asarray(want).dtype and got == want


# --- a float cond predicate (docs/control_flow.md: a number is true when non-zero) --------

def _branch(p, x):
    return ik.cond(p, lambda x: x + 1.0, lambda x: x - 1.0, x)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("pred, want", ((0.5, 2.0), (-3.0, 2.0), (0.0, 0.0), (-0.0, 0.0),
                                        (np.nan, 2.0)))
def test_cond_with_a_float_predicate_takes_true_when_non_zero(pred, want, how):
    """JAX's cond turns a number into ``pred != 0`` (so NaN is true, as
    Python's ``bool(nan)``)."""
    for p in (np.float64(pred), np.float32(pred)):
        got = _run(how, _branch, p, np.float64(1.0))
        assert float(got) == want
    if how == "eager":
        assert _branch(pred, 1.0) == want


@pytest.mark.parametrize("how", HOW)
def test_cond_with_a_float_predicate_under_vmap_selects_per_element(how):
    p = np.array([0.0, 0.5, -2.0, np.nan, -0.0])
    got = _run(how, ik.vmap(_branch), p, np.ones(5))
    np.testing.assert_array_equal(got, [0.0, 2.0, 2.0, 2.0, 0.0])


def test_cond_with_a_float_predicate_matches_jax_live():
    jax = _jax()
    for pred in (0.5, 0.0, np.nan):
        want = jax.lax.cond(pred, lambda x: x + 1.0, lambda x: x - 1.0, 1.0)
        assert float(_branch(np.float64(pred), np.float64(1.0))) == float(want)
