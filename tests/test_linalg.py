"""Dense linear algebra (``isokernel.numpy.linalg``, ``isokernel.scipy.linalg``):
values against NumPy (and SciPy where installed) within 1e-10 relative in
float64, batched shapes, derivatives against central finite differences and
JAX, vmap, the compiled strategies (the unrolled <= 4x4 path inside the
native row region, bit for bit), and the errors users see."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
import isokernel.scipy.linalg as isl
from isokernel import codegen
from isokernel.backends.parity import bit_identical
from isokernel.codegen import cuda
from isokernel.ir import DTypeError, Op, ShapeError

from .conftest import compile_everywhere, nvrtc_or_skip

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")
SIZES = (1, 2, 3, 4, 5, 9)  # <= 4 unrolled, larger through the LU/Cholesky primitives
TOL = 1e-10


def _rng(seed=0):
    return np.random.default_rng(seed)


def general(n, batch=(), seed=0):
    """Well-conditioned general matrices: random plus n on the diagonal."""
    rng = _rng(seed)
    return rng.normal(size=(*batch, n, n)) + n * np.eye(n)


def spd(n, batch=(), seed=0):
    m = _rng(seed).normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def lower_triangular(n, batch=(), seed=0):
    return np.tril(_rng(seed).normal(size=(*batch, n, n))) + 2 * n * np.eye(n)


def close(got, want, tol=TOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(np.max(np.abs(want)), 1e-300)
    assert np.max(np.abs(got - want)) <= tol * scale, np.max(np.abs(got - want)) / scale


def ops_of(fn, *args):
    return {node.op for node in ik.trace(fn, *args).nodes}


# --- values against NumPy ---------------------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_solve_inv_det_slogdet_match_numpy(n):
    a = general(n, (2, 3), seed=n)
    b = _rng(n + 1).normal(size=(2, 3, n, 2))
    close(inp.linalg.solve(a, b), np.linalg.solve(a, b))
    close(inp.linalg.inv(a), np.linalg.inv(a))
    close(inp.linalg.det(a), np.linalg.det(a))
    sign, logdet = inp.linalg.slogdet(a)
    want = np.linalg.slogdet(a)
    close(sign, want.sign)
    close(logdet, want.logabsdet)


@pytest.mark.parametrize("n", SIZES)
def test_cholesky_matches_numpy_and_reads_the_lower_triangle(n):
    a = spd(n, (4,), seed=n)
    garbage = a + np.triu(_rng(9).normal(size=a.shape), 1)  # NumPy never reads it
    close(inp.linalg.cholesky(garbage), np.linalg.cholesky(a))
    close(inp.linalg.cholesky(a, upper=True), np.linalg.cholesky(a, upper=True))


def test_solve_broadcasts_batch_axes_and_takes_vectors_as_numpy():
    a = general(3, (5,))
    close(inp.linalg.solve(a, np.arange(3.0)), np.linalg.solve(a, np.arange(3.0)))
    b = _rng(1).normal(size=(4, 1, 3, 2))
    close(inp.linalg.solve(a, b), np.linalg.solve(a, b))
    big = general(6, (2,))
    close(inp.linalg.solve(big, np.ones(6)), np.linalg.solve(big, np.ones(6)))


def test_float32_stays_float32():
    a = general(3, (2,)).astype(np.float32)
    assert inp.linalg.solve(a, np.ones((2, 3, 1), np.float32)).dtype == np.float32
    assert inp.linalg.inv(general(6).astype(np.float32)).dtype == np.float32
    for n in (3, 6):  # the derivative graphs too: no float64 node
        x = general(n).astype(np.float32)
        for f in (lambda m: inp.sum(inp.linalg.solve(m, m[0])), inp.linalg.det,
                  lambda m: inp.sum(inp.linalg.cholesky(m @ m.T)),
                  lambda m: inp.sum(inp.linalg.eigh(m @ m.T)[1] ** 2)):
            graph = ik.trace(ik.grad(f), x)
            assert all(node.dtype != np.float64 for node in graph.nodes if not node.several)


def test_small_path_is_elementwise_and_large_path_factorizes_once():
    small = ops_of(inp.linalg.solve, general(3), np.ones(3))
    assert not small & {Op.LU, Op.TRIANGULAR_SOLVE, Op.CHOLESKY, Op.DOT_GENERAL}
    assert Op.CHOLESKY not in ops_of(inp.linalg.cholesky, spd(4))
    big = ik.trace(ik.grad(lambda a, b: inp.sum(inp.linalg.solve(a, b))), general(6), np.ones(6))
    assert sum(node.op is Op.LU for node in big.nodes) == 1  # reverse mode reuses the factors


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_singular_and_indefinite_matrices_give_non_finite_values():
    singular = np.ones((3, 3))
    assert not np.all(np.isfinite(inp.linalg.solve(singular, np.ones(3))))
    assert not np.all(np.isfinite(inp.linalg.solve(np.ones((6, 6)), np.ones(6))))
    sign, logdet = inp.linalg.slogdet(singular)
    assert sign == 0 and logdet == -np.inf
    assert np.all(np.isnan(inp.linalg.cholesky(-np.eye(5))))
    assert np.isnan(inp.linalg.cholesky(-np.eye(2))[0, 0])


# --- SciPy's names --------------------------------------------------------------------

@pytest.mark.parametrize("n", (3, 7))
@pytest.mark.parametrize("lower", (True, False))
@pytest.mark.parametrize("trans", (0, 1))
@pytest.mark.parametrize("unit", (False, True))
def test_solve_triangular_matches_scipy(n, lower, trans, unit):
    sl = pytest.importorskip("scipy.linalg")
    t = lower_triangular(n, seed=n)
    t = t if lower else t.T
    full = t + (np.triu(np.ones((n, n)), 1) if lower else np.tril(np.ones((n, n)), -1)) * 7.0
    b = _rng(2).normal(size=(n, 2))
    got = isl.solve_triangular(full, b, trans=trans, lower=lower, unit_diagonal=unit)
    close(got, sl.solve_triangular(t, b, trans=trans, lower=lower, unit_diagonal=unit))
    vec = isl.solve_triangular(full, b[:, 0], trans=trans, lower=lower, unit_diagonal=unit)
    close(vec, got[:, 0])


@pytest.mark.parametrize("n", (3, 8))
def test_cho_and_lu_factor_solve_match_scipy(n):
    sl = pytest.importorskip("scipy.linalg")
    a, g = spd(n, seed=n), general(n, seed=n)
    b = _rng(3).normal(size=(n, 3))
    for lower in (True, False):
        c, low = isl.cho_factor(a, lower=lower)
        close(isl.cho_solve((c, low), b), sl.cho_solve(sl.cho_factor(a, lower=lower), b))
    lu, piv = isl.lu_factor(g)
    want_lu, want_piv = sl.lu_factor(g)
    close(lu, want_lu)
    np.testing.assert_array_equal(piv, want_piv)
    for trans in (0, 1):
        close(isl.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((want_lu, want_piv), b,
                                                                   trans=trans))


def test_lu_primitive_factors_with_its_permutation():
    a = general(7, (3,))
    a[0, 0, :] = 0.0  # a zero first pivot candidate forces an interchange
    lu, pivots, perm = ik.replay(ik.trace(lambda x: inp.linalg.lu_factor(x)[0], a), a), None, None
    lu, pivots, perm = (np.asarray(v) for v in _lu_parts(a))
    low = np.tril(lu, -1) + np.eye(7)
    close(low @ np.triu(lu), np.take_along_axis(a, perm[..., None].astype(np.int64), axis=-2))
    assert pivots.dtype == np.int32 and perm.dtype == np.int32


def _lu_parts(a):
    from isokernel.record import bind
    return bind(Op.LU, a)


# --- derivatives ----------------------------------------------------------------------

def _fd_check(f, x, seed=0):
    """<grad f, v> against the central difference along a random v."""
    v = _rng(seed).normal(size=x.shape)
    eps = 1e-6 * max(1.0, np.max(np.abs(x)))
    fd = (f(x + eps * v) - f(x - eps * v)) / (2 * eps)
    got = np.sum(ik.grad(f)(x) * v)
    assert abs(got - fd) <= 1e-6 * max(abs(fd), 1e-3), (got, fd)


WEIGHTS = _rng(7).normal(size=(9, 9))


def _loss(name):
    def loss(a):
        n = a.shape[-1]
        w = WEIGHTS[:n, :n]
        if name == "solve":
            return inp.sum(inp.linalg.solve(a, w[:, :2]) * w[:, 2:4])
        if name == "inv":
            return inp.sum(inp.linalg.inv(a) * w)
        if name == "det":
            return inp.linalg.det(a)
        if name == "slogdet":
            return inp.linalg.slogdet(a)[1]
        if name == "cholesky":
            return inp.sum(inp.linalg.cholesky(a @ a.T + n * np.eye(n)) * w)
        if name == "solve_triangular":
            return inp.sum(isl.solve_triangular(a, w[:, :2], lower=True) * w[:, 2:4])
        return inp.sum(isl.lu_solve(isl.lu_factor(a), w[:, 0]) * w[:, 1])
    return loss


LOSSES = ("solve", "inv", "det", "slogdet", "cholesky", "solve_triangular", "lu_solve")


@pytest.mark.parametrize("n", (3, 6))
@pytest.mark.parametrize("name", LOSSES)
def test_gradients_match_finite_differences(name, n):
    a = lower_triangular(n) if name == "solve_triangular" else general(n, seed=n)
    if name == "cholesky":
        a = _rng(n).normal(size=(n, n))
    _fd_check(_loss(name), a)


@pytest.mark.parametrize("n", (3, 6))
@pytest.mark.parametrize("name", ("solve", "inv", "det", "slogdet", "cholesky"))
def test_jacobians_match_jax(name, n):
    jax = pytest.importorskip("jax", reason="JAX is not installed: no JAX comparison")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    jfn = {"solve": lambda a: jnp.linalg.solve(a, jnp.arange(1.0, a.shape[-1] + 1)),
           "inv": jnp.linalg.inv, "det": jnp.linalg.det,
           "slogdet": lambda a: jnp.linalg.slogdet(a)[1],
           "cholesky": lambda m: jnp.linalg.cholesky(m @ m.T + m.shape[-1] * jnp.eye(
               m.shape[-1]))}[name]
    fn = {"solve": lambda a: inp.linalg.solve(a, np.arange(1.0, a.shape[-1] + 1)),
          "inv": inp.linalg.inv, "det": inp.linalg.det,
          "slogdet": lambda a: inp.linalg.slogdet(a)[1],
          "cholesky": lambda m: inp.linalg.cholesky(m @ m.T + m.shape[-1] * np.eye(
              m.shape[-1]))}[name]
    a = general(n, seed=n)
    want = np.asarray(jax.jacfwd(jfn)(a))
    close(ik.jacfwd(fn)(a), want)
    close(ik.jacrev(fn)(a), want)


@pytest.mark.parametrize("n", (3, 6))
def test_solve_triangular_jacobians_match_jax(n):
    jax = pytest.importorskip("jax", reason="JAX is not installed: no JAX comparison")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.linalg as jsl
    t, b = lower_triangular(n), np.arange(1.0, n + 1)
    for trans in (0, 1):
        for unit in (False, True):
            def f(x, y, trans=trans, unit=unit):
                return isl.solve_triangular(x, y, trans=trans, lower=True, unit_diagonal=unit)

            def g(x, y, trans=trans, unit=unit):
                return jsl.solve_triangular(x, y, trans=trans, lower=True, unit_diagonal=unit)
            got = ik.jacrev(f, argnums=(0, 1))(t, b)
            want = jax.jacrev(g, argnums=(0, 1))(t, b)
            for x, y in zip(got, want):
                close(x, np.asarray(y))


@pytest.mark.parametrize("n", (3, 6))
def test_vmap_of_grad_is_the_per_example_gradient(n):
    loss = _loss("solve")
    a = general(n, (4,), seed=n)
    got = ik.jit(ik.vmap(ik.grad(loss)))(a)
    for k in range(4):
        close(got[k], ik.grad(loss)(a[k]))


# --- vmap and the compiled strategies -------------------------------------------------

@pytest.mark.parametrize("n", (3, 6))
def test_vmap_matches_the_batched_call(n):
    a, b = spd(n, (5,)), _rng(4).normal(size=(5, n))
    close(ik.vmap(inp.linalg.solve)(a, b), np.linalg.solve(a, b[..., None])[..., 0])
    close(ik.vmap(inp.linalg.cholesky)(a), np.linalg.cholesky(a))
    close(ik.vmap(inp.linalg.det)(a), np.linalg.det(a))


SMALL_FNS = {
    "solve": lambda a, b: inp.linalg.solve(a, b),
    "inv": lambda a, b: inp.sum(inp.linalg.inv(a) * b, axis=-1),
    "det": lambda a, b: inp.linalg.det(a) * b,
    "cholesky": lambda a, b: inp.sum(inp.linalg.cholesky(a) * b, axis=-1),
    "solve_triangular": lambda a, b: isl.solve_triangular(a, b, lower=True),
}


@needs_cc
@pytest.mark.parametrize("name", sorted(SMALL_FNS))
def test_small_systems_run_inside_the_native_region_with_the_reference_bits(name):
    a, b = spd(3, (2001,)), _rng(5).normal(size=(2001, 3))
    fn = ik.vmap(SMALL_FNS[name])
    compiled = ik.jit(fn, strategy="native", workers=2).lower(a, b).compile()
    part = compiled.executable.partition
    assert part.row_independent and len(part.stages) == 1
    want = ik.jit(fn, strategy="reference")(a, b)
    assert bit_identical(compiled(a, b), want)
    assert bit_identical(ik.jit(fn, strategy="threads", workers=2)(a, b), want)


@needs_cc
def test_native_solve_matches_numpy_per_pixel_and_large_systems_run_whole():
    a, b = spd(3, (3001,)), _rng(6).normal(size=(3001, 3))
    got = ik.jit(ik.vmap(inp.linalg.solve), strategy="native")(a, b)
    close(got, np.linalg.solve(a, b[..., None])[..., 0])
    big_a, big_b = spd(6, (50,)), _rng(6).normal(size=(50, 6))
    fn = ik.vmap(inp.linalg.solve)
    want = ik.jit(fn, strategy="reference")(big_a, big_b)
    assert bit_identical(ik.jit(fn, strategy="native")(big_a, big_b), want)
    assert bit_identical(ik.jit(fn, strategy="threads")(big_a, big_b), want)
    close(want, np.linalg.solve(big_a, big_b[..., None])[..., 0])


def test_the_megakernel_source_of_a_small_solve_compiles_with_nvrtc():
    compiler = nvrtc_or_skip()
    graph = ik.trace(ik.vmap(inp.linalg.solve), spd(3, (64,)), np.ones((64, 3)))
    assert compile_everywhere([cuda.cuda_source(graph)], compiler) == []


# --- errors ---------------------------------------------------------------------------

def test_errors_name_the_function_the_line_and_the_fix():
    with pytest.raises(ShapeError, match=r"solve at test_linalg.py:\d+: a must hold square "
                                         r"matrices.*\(\.\.\., n, n\)"):
        inp.linalg.solve(np.ones((3, 4)), np.ones(3))
    with pytest.raises(ShapeError, match=r"solve at test_linalg.py:\d+: b of shape \(4,\) "
                                         r"does not fit"):
        inp.linalg.solve(np.eye(3), np.ones(4))
    with pytest.raises(DTypeError, match=r"inv at test_linalg.py:\d+: a has dtype int64.*"
                                         r"astype\(inp.float64\)"):
        inp.linalg.inv(np.eye(3, dtype=np.int64))
    with pytest.raises(DTypeError, match=r"solve at test_linalg.py:\d+: a is float64 and b "
                                         r"is float32"):
        inp.linalg.solve(np.eye(3), np.ones(3, np.float32))
    with pytest.raises(ShapeError, match=r"cholesky at test_linalg.py:\d+"):
        ik.jit(inp.linalg.cholesky)(np.ones((2, 5, 4)))


# --- qr, eigh, svd and their compositions ---------------------------------------------

TALL = _rng(11).normal(size=(2, 6, 4))


def test_qr_eigh_svd_match_numpy():
    for mode in ("reduced", "complete"):
        for got, want in zip(inp.linalg.qr(TALL, mode), np.linalg.qr(TALL, mode)):
            close(got, want)
    close(inp.linalg.qr(TALL, "r"), np.linalg.qr(TALL, "r"))
    a = spd(5, (3,))
    for uplo in ("L", "U"):
        for got, want in zip(inp.linalg.eigh(a, uplo), np.linalg.eigh(a, uplo)):
            close(got, want)
    close(inp.linalg.eigvalsh(a), np.linalg.eigvalsh(a))
    for full in (True, False):
        for got, want in zip(inp.linalg.svd(TALL, full), np.linalg.svd(TALL, full)):
            close(got, want)
    close(inp.linalg.svd(TALL, compute_uv=False), np.linalg.svd(TALL, compute_uv=False))
    close(ik.vmap(inp.linalg.eigvalsh)(a), np.linalg.eigvalsh(a))


def test_pinv_lstsq_match_numpy():
    close(inp.linalg.pinv(TALL), np.linalg.pinv(TALL))
    close(inp.linalg.pinv(TALL, rtol=None), np.linalg.pinv(TALL, rtol=None))
    rank_deficient = TALL[0] @ np.diag([1.0, 1.0, 1.0, 0.0])
    close(inp.linalg.pinv(rank_deficient), np.linalg.pinv(rank_deficient))
    b = _rng(12).normal(size=(6, 2))
    for rhs in (b, b[:, 0]):
        got, want = inp.linalg.lstsq(TALL[0], rhs), np.linalg.lstsq(TALL[0], rhs)
        for g, w in zip(got[:2] + got[3:], want[:2] + want[3:]):
            close(g, w)
        assert int(got.rank) == want[2]
    assert int(inp.linalg.lstsq(rank_deficient, b).rank) == 3


@pytest.mark.parametrize("order", (None, 2, 1, -1, np.inf, -np.inf, 0, 3, 0.5))
def test_vector_norms_match_numpy(order):
    close(inp.linalg.norm(TALL, order, axis=1), np.linalg.norm(TALL, order, axis=1))
    close(inp.linalg.norm(TALL, order, axis=-1, keepdims=True),
          np.linalg.norm(TALL, order, axis=-1, keepdims=True))


@pytest.mark.parametrize("order", (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf))
def test_matrix_norms_match_numpy(order):
    close(inp.linalg.norm(TALL, order, axis=(1, 2)), np.linalg.norm(TALL, order, axis=(1, 2)))
    close(inp.linalg.norm(TALL, order, axis=(2, 0), keepdims=True),
          np.linalg.norm(TALL, order, axis=(2, 0), keepdims=True))
    close(inp.linalg.norm(TALL), np.linalg.norm(TALL))


@pytest.mark.parametrize("power", (0, 1, 2, 3, 5, 8, -1, -3))
def test_matrix_power_matches_numpy(power):
    a = general(3, (2,)) / 3.0
    close(inp.linalg.matrix_power(a, power), np.linalg.matrix_power(a, power))
    big = general(6) / 6.0
    close(inp.linalg.matrix_power(big, power), np.linalg.matrix_power(big, power))


W6 = _rng(13).normal(size=(6, 6))


def _spectral_loss(name):
    def loss(x):
        if name == "qr":
            q, r = inp.linalg.qr(x)
            return inp.sum(q * W6[:, :4]) + inp.sum(r * r)
        if name == "eigh":  # eigenvalues, and squared eigenvector entries (sign-free)
            w, v = inp.linalg.eigh(x @ x.T + np.eye(6))
            return inp.sum(w * W6[0]) + inp.sum(v * v * W6)
        if name == "svd":
            u, s, vh = inp.linalg.svd(x, full_matrices=False)
            return inp.sum(s * W6[0, :4]) + inp.sum(u * u * W6[:, :4]) + inp.sum(vh * vh)
        if name == "pinv":
            return inp.sum(inp.linalg.pinv(x) * W6[:4])
        if name == "lstsq":
            return inp.sum(inp.linalg.lstsq(x, W6[:, 0])[0] * W6[1, :4])
        if name == "norm":
            return (inp.linalg.norm(x, 2) + inp.linalg.norm(x, "nuc") + inp.linalg.norm(x)
                    + inp.linalg.norm(x, 3, axis=0)[1])
        return inp.sum(inp.linalg.matrix_power(x[:4] / 4.0, 5) * W6[:4, :4])
    return loss


SPECTRAL = ("qr", "eigh", "svd", "pinv", "lstsq", "norm", "matrix_power")


@pytest.mark.parametrize("name", SPECTRAL)
def test_spectral_gradients_match_finite_differences(name):
    x = TALL[0] if name != "eigh" else _rng(14).normal(size=(6, 6))
    _fd_check(_spectral_loss(name), x)


@pytest.mark.parametrize("name", ("qr", "svd", "pinv", "lstsq", "eigh"))
def test_spectral_gradients_match_jax(name):
    jax = pytest.importorskip("jax", reason="JAX is not installed: no JAX comparison")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def jloss(x):
        if name == "qr":
            q, r = jnp.linalg.qr(x)
            return jnp.sum(q * W6[:, :4]) + jnp.sum(r * r)
        if name == "svd":
            u, s, vh = jnp.linalg.svd(x, full_matrices=False)
            return jnp.sum(s * W6[0, :4]) + jnp.sum(u * u * W6[:, :4]) + jnp.sum(vh * vh)
        if name == "pinv":
            return jnp.sum(jnp.linalg.pinv(x) * W6[:4])
        if name == "lstsq":
            return jnp.sum(jnp.linalg.lstsq(x, W6[:, 0])[0] * W6[1, :4])
        w, v = jnp.linalg.eigh(x @ x.T + jnp.eye(6))
        return jnp.sum(w * W6[0]) + jnp.sum(v * v * W6)
    x = TALL[0] if name != "eigh" else _rng(14).normal(size=(6, 6))
    want = np.asarray(jax.grad(jloss)(x))
    close(ik.grad(_spectral_loss(name))(x), want)
    close(ik.jacfwd(_spectral_loss(name))(x), want)


def test_eigh_gradient_of_a_repeated_eigenspace_projector_is_right():
    q, _ = np.linalg.qr(_rng(15).normal(size=(5, 5)))
    a = q @ np.diag([1.0, 1.0, 2.0, 3.0, 4.0]) @ q.T

    def projector(m):
        v = inp.linalg.eigh(m).eigenvectors[:, :2]
        return inp.sum(v @ v.T * W6[:5, :5])
    _fd_check(projector, a)


def test_derivatives_that_do_not_exist_are_refused():
    wide = TALL[0].T
    with pytest.raises(ik.DifferentiationError, match=r"qr at test_linalg.py:\d+: .*qr\(a.T\)"):
        ik.grad(lambda x: inp.sum(inp.linalg.qr(x)[1]))(wide)
    with pytest.raises(ik.DifferentiationError, match=r"svd at .*full_matrices=False"):
        ik.grad(lambda x: inp.sum(inp.linalg.svd(x)[0]))(TALL[0])


# --- the GPU strategies, host-emulated (tests/cuda_host.py) ----------------------------

@needs_cc
def test_small_solve_runs_inside_the_megakernel_region_with_the_reference_bits():
    from .test_cuda_host import executables
    a, b = spd(3, (777,)), _rng(16).normal(size=(777, 3))
    fn = ik.vmap(inp.linalg.solve)
    eager, mega, _ = executables(fn, a, b)
    want = ik.jit(fn, strategy="reference")(a, b)
    assert bit_identical(eager(a, b)[0], want) and bit_identical(mega(a, b)[0], want)
    assert mega.partition.row_independent and len(mega.module.kernels) == 1


def _fake_cupyx(monkeypatch):
    """SciPy's lu_factor and solve_triangular in place of cupyx's (the same
    call forms), so the host emulation runs the device rules' plumbing."""
    import sys
    import types
    sl = pytest.importorskip("scipy.linalg")
    linalg = types.ModuleType("cupyx.scipy.linalg")
    linalg.lu_factor, linalg.solve_triangular = sl.lu_factor, sl.solve_triangular
    for name, module in (("cupyx", types.ModuleType("cupyx")),
                         ("cupyx.scipy", types.ModuleType("cupyx.scipy")),
                         ("cupyx.scipy.linalg", linalg)):
        monkeypatch.setitem(sys.modules, name, module)


def test_device_rules_of_the_factorizations_host_emulated(monkeypatch):
    from .test_cuda_host import executables
    _fake_cupyx(monkeypatch)

    def model(a, b):
        x = inp.linalg.solve(a, b)
        w, v = inp.linalg.eigh(a)
        q, r = inp.linalg.qr(a)
        return (x, inp.linalg.cholesky(a), w, v * v, r * r, inp.linalg.svd(a)[1],
                isl.solve_triangular(a, b, lower=True, trans=1))
    a, b = spd(6, (3,)), _rng(17).normal(size=(3, 6, 2))
    eager, mega, _ = executables(model, a, b)
    want = ik.jit(model, strategy="reference")(a, b)
    for got_eager, got_mega, w in zip(eager(a, b), mega(a, b), want):
        close(got_eager, w)
        close(got_mega, w)
    lines = str(eager.plan)
    assert "cuSOLVER getrf" in lines and "cuBLAS trsm" in lines


@pytest.mark.parametrize("n", (3, 6))
def test_hessians_match_central_differences_of_the_gradient(n):
    """hessian = jacfwd(grad): forward mode over the reverse pass's solves."""
    a, v = general(n, seed=n), _rng(n).normal(size=(n, n))
    for f in (lambda x: inp.linalg.slogdet(x)[1],
              lambda x: inp.sum(inp.linalg.eigh(x @ x.T)[0] ** 3)):
        eps = 1e-6
        fd = (ik.grad(f)(a + eps * v) - ik.grad(f)(a - eps * v)) / (2 * eps)
        close(np.tensordot(ik.hessian(f)(a), v, axes=2), fd, tol=1e-6)


def test_lu_solve_reads_the_permutation_of_its_factorization_or_rebuilds_it():
    sl = pytest.importorskip("scipy.linalg")
    a, b = general(30), np.arange(30.0)
    want = sl.lu_solve(sl.lu_factor(a), b)
    together = ik.trace(lambda m, v: isl.lu_solve(isl.lu_factor(m), v), a, b)
    assert len(together.nodes) < 25  # the lu node's own permutation, no rebuild
    close(ik.jit(lambda m, v: isl.lu_solve(isl.lu_factor(m), v))(a, b), want)
    lu, piv = isl.lu_factor(a)  # interchanges from outside the recording: rebuilt
    close(ik.jit(lambda f, p, v: isl.lu_solve((f, p), v))(lu, piv, b), want)
