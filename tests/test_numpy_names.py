"""The NumPy names a training script uses (``cumsum`` ... ``einsum``): NumPy's
values (bits where NumPy computes the same operations in the same order),
derivatives against central differences (and JAX's where installed),
recording under jit on every CPU strategy, batching, and errors that name
the function and the user's line."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp

from .conftest import folds_in_own_order

RNG = np.random.default_rng(2026)
A = RNG.normal(size=(4, 5))
B = RNG.normal(size=(5, 3))
V = RNG.normal(size=6)
SQ = RNG.normal(size=(4, 4))
A_NAN = np.where(A > 1.0, np.nan, A)
XP = np.array([0.0, 1.0, 2.5, 4.0, 4.0, 6.0])
FP = np.array([1.0, 3.0, -2.0, 0.5, 2.0, 1.0])

# (id, f(module, x), x, NumPy's bits?). ``module`` is numpy or isokernel.numpy,
# so each case states the NumPy call it must match.
CASES = [
    ("cumsum_axis", lambda m, x: m.cumsum(x, axis=1), A, False),
    ("cumsum_flat", lambda m, x: m.cumsum(x), A, False),
    ("cumprod", lambda m, x: m.cumprod(x, axis=0), A, False),
    ("var", lambda m, x: m.var(x, axis=0), A, True),
    ("var_ddof_keepdims", lambda m, x: m.var(x, axis=1, ddof=1, keepdims=True), A, True),
    ("std", lambda m, x: m.std(x), A, True),
    ("outer", lambda m, x: m.outer(x, x[:3]), V, True),
    ("tensordot", lambda m, x: m.tensordot(x, B, axes=1), A, False),
    ("tensordot_pairs", lambda m, x: m.tensordot(x, x, axes=([0], [0])), A, False),
    ("diff", lambda m, x: m.diff(x, n=2, axis=0), A, True),
    ("diff_prepend", lambda m, x: m.diff(x, prepend=0.5), A, True),
    ("trapezoid", lambda m, x: m.trapezoid(x, axis=1), A, True),
    ("trapezoid_x", lambda m, x: m.trapezoid(x, x=np.array([0., .5, 2., 2.5, 4.])), A, True),
    ("interp", lambda m, x: m.interp(x, XP, FP), np.linspace(-1.1, 7.1, 31), True),
    ("roll", lambda m, x: m.roll(x, -2, axis=1), A, True),
    ("roll_flat", lambda m, x: m.roll(x, 7), A, True),
    ("tile", lambda m, x: m.tile(x, (2, 1, 3)), A, True),
    ("repeat", lambda m, x: m.repeat(x, 3, axis=0), A, True),
    ("repeat_counts", lambda m, x: m.repeat(x, np.array([1, 0, 2, 1, 3]), axis=1), A, True),
    ("moveaxis", lambda m, x: m.moveaxis(m.reshape(x, (2, 2, 5)), 0, -1), A, True),
    ("diag_vector", lambda m, x: m.diag(x, -2), V, True),
    ("diag_matrix", lambda m, x: m.diag(x, 1), A, True),
    ("diagonal", lambda m, x: m.diagonal(m.reshape(x, (2, 2, 5)), 1, 0, 2), A, True),
    ("trace", lambda m, x: m.trace(x, -1), A, True),
    ("kron", lambda m, x: m.kron(x[:2, :3], x[1:, 3:]), A, True),
    ("cross", lambda m, x: m.cross(x[:, :3], x[:, 2:]), A, True),
    ("cross_axis0", lambda m, x: m.cross(x[:3], x[1:], axis=0), A, True),
    ("polyval", lambda m, x: m.polyval(np.array([0.5, -1.0, 2.0, 3.0]), x), A, True),
    ("logaddexp", lambda m, x: m.logaddexp(x, x[::-1]), A * 40.0, False),
    ("nan_to_num", lambda m, x: m.nan_to_num(m.log(x)), A, True),
    ("split", lambda m, x: m.split(x, [1, 3], axis=1)[1], A, True),
    ("split_sections", lambda m, x: m.split(x, 2)[1], A, True),
    ("meshgrid", lambda m, x: m.meshgrid(x[0], x[1, :3])[0] * m.meshgrid(x[0], x[1, :3])[1],
     A, True),
    ("eye_times", lambda m, x: m.eye(4, 5, 1) * x, A, True),
    ("tril", lambda m, x: m.tril(x, 1), A, True),
    ("triu", lambda m, x: m.triu(x, -1), A, True),
    ("fmod", lambda m, x: m.fmod(x * 7.0, 2.5), A, True),
    ("fmod_negative_divisor", lambda m, x: m.fmod(x * 7.0, -1.5), A, True),
    ("copysign", lambda m, x: m.copysign(x, x[::-1]), A, True),
    ("heaviside", lambda m, x: m.heaviside(x, 0.5) * x, np.concatenate([A[0], [0.0]]), True),
    ("deg2rad", lambda m, x: m.deg2rad(x * 90.0), A, True),
    ("rad2deg", lambda m, x: m.rad2deg(x), A, True),
    ("sinc", lambda m, x: m.sinc(x), np.concatenate([A[0], [0.0]]), True),
    ("logaddexp2", lambda m, x: m.logaddexp2(x, x[::-1]), A * 40.0, False),
    ("inner", lambda m, x: m.inner(x, x), A, False),
    ("vdot", lambda m, x: m.vdot(x, x), A, False),
    ("identity_tri", lambda m, x: (m.identity(5)[:4] + m.tri(4, 5, 1)) * x, A, True),
    ("ptp", lambda m, x: m.ptp(x, axis=1), A, True),
    ("nansum", lambda m, x: m.nansum(x, axis=0), A_NAN, True),
    ("nanmean", lambda m, x: m.nanmean(x, axis=1, keepdims=True), A_NAN, True),
    ("average", lambda m, x: m.average(x, axis=1, weights=np.arange(1.0, 6.0)), A, True),
    ("average_flat", lambda m, x: m.average(x), A, True),
    ("einsum_matmul", lambda m, x: m.einsum("ij,jk->ik", x, B), A, False),
    ("einsum_batch", lambda m, x: m.einsum("bij,bkj->bik", m.reshape(x, (2, 2, 5)),
                                           m.reshape(x, (2, 2, 5))), A, False),
    ("einsum_trace_implicit", lambda m, x: m.einsum("ii", x), SQ, False),
    ("einsum_diagonal", lambda m, x: m.einsum("ii->i", x), SQ, True),
    ("einsum_sum_transpose", lambda m, x: m.einsum("ij->j", x), A, True),
    ("einsum_three", lambda m, x: m.einsum("ij,jk,k->i", x, B, B[0]), A, False),
]
IDS = [c[0] for c in CASES]
# Cases whose value is piecewise constant or an index: values only.
NOT_DIFFERENTIABLE = {"nan_to_num"}


def ulps(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    gap = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), np.abs(got)))
    return float(np.max(np.where(same, 0.0, gap), initial=0.0))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_numpy(case):
    _, f, x, exact = case
    with np.errstate(all="ignore"):
        got, want = f(inp, x), f(np, x)
    assert isinstance(got, (np.ndarray, np.generic))
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype
    if exact:
        assert ulps(got, want) == 0
    else:  # summed in another order (tree scan, BLAS): a few ulps of the largest term
        scale = np.max(np.abs(want)) if want.size else 1.0
        assert np.max(np.abs(got - want), initial=0.0) <= 16 * np.finfo(float).eps * scale


def test_cumsum_of_integers_and_bools_is_numpy_exactly():
    ints = RNG.integers(-1000, 1000, size=(3, 37))
    assert np.array_equal(inp.cumsum(ints, axis=1), np.cumsum(ints, axis=1))
    assert np.array_equal(inp.cumsum(ints > 0), np.cumsum(ints > 0))
    assert np.array_equal(inp.cumprod(ints[:, :5] % 7, axis=1), np.cumprod(ints[:, :5] % 7, 1))
    assert inp.cumsum(np.array([-0.0])).tobytes() == np.cumsum(np.array([-0.0])).tobytes()


def test_reductions_and_indices_match_numpy():
    with_nan = A.copy()
    with_nan[2, 3] = np.nan
    for x in (A, with_nan, np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])):
        for axis in (None, 0, 1):
            for name in ("argmax", "argmin"):
                got, want = getattr(inp, name)(x, axis), getattr(np, name)(x, axis)
                assert np.array_equal(got, want) and np.asarray(got).dtype == np.int64
    assert np.argmax(A, 1, keepdims=True).shape == inp.argmax(A, 1, keepdims=True).shape
    assert np.array_equal(inp.any(A > 1.5, axis=0), np.any(A > 1.5, axis=0))
    assert np.array_equal(inp.all(A > -2.5, axis=1, keepdims=True),
                          np.all(A > -2.5, axis=1, keepdims=True))
    assert bool(inp.any(np.zeros(3))) is False and bool(inp.all(np.ones(3))) is True
    assert np.array_equal(inp.isclose(A, A + 1e-9), np.isclose(A, A + 1e-9))
    assert np.array_equal(inp.count_nonzero(A > 0, axis=0), np.count_nonzero(A > 0, axis=0))
    assert inp.count_nonzero(np.arange(-3, 4)) == 6
    signs = np.array([-0.0, 0.0, -np.nan, np.nan, -2.0, 3.0])
    assert np.array_equal(inp.signbit(signs), np.signbit(signs))
    assert np.array_equal(inp.empty_like(A), np.zeros_like(A))
    assert inp.logaddexp2(3.0, 3.0) == 4.0 and inp.logaddexp(3.0, 3.0) == np.logaddexp(3., 3.)


def test_fmod_is_exact_and_signed_as_c():
    x = np.array([5.5, -5.5, 1e300, -1e-300, -0.0, 3.0, np.inf, 2.0])
    y = np.array([2.0, 2.0, 3.0, 7.0, 1.0, -2.0, 1.0, np.inf])
    with np.errstate(invalid="ignore"):
        assert ulps(inp.fmod(x, y), np.fmod(x, y)) == 0
        assert np.signbit(inp.fmod(x, y)[4])
    ints = np.arange(-7, 8)
    assert np.array_equal(inp.fmod(ints, 3), np.fmod(ints, 3))
    assert np.array_equal(inp.fmod(ints, -4), np.fmod(ints, -4))


def test_interp_at_knots_edges_and_nan():
    x = np.concatenate([XP, [-1.0, 7.0, np.nan, 2.0, 4.0 - 1e-15]])
    assert ulps(inp.interp(x, XP, FP), np.interp(x, XP, FP)) == 0
    assert ulps(inp.interp(x, XP, FP, left=-9.0, right=9.0),
                np.interp(x, XP, FP, left=-9.0, right=9.0)) == 0
    assert ulps(inp.interp(x, XP[:1], FP[:1]), np.interp(x, XP[:1], FP[:1])) == 0
    slope_right = ik.grad(lambda z: inp.sum(inp.interp(z, XP, FP)))(np.array([1.0, 2.5]))
    assert np.array_equal(slope_right, [(-2.0 - 3.0) / 1.5, (0.5 + 2.0) / 1.5])


def test_eye_inside_a_recording_is_not_a_materialized_constant():
    graph = ik.trace(lambda x: inp.eye(64) @ x, np.ones(64))
    assert all(node.aval.size < 64 for node in graph.nodes if node.op.value == "const")
    assert np.array_equal(ik.jit(lambda x: inp.eye(5, 7, -2) + x)(np.zeros((5, 7))),
                          np.eye(5, 7, -2))


# ------------------------------------------------------------ derivatives

DIFFERENTIABLE = [c for c in CASES if c[0] not in NOT_DIFFERENTIABLE]


def central_gradient(loss, x, h=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += h
        down[index] -= h
        grad[index] = (loss(up) - loss(down)) / (2 * h)
    return grad


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=[c[0] for c in DIFFERENTIABLE])
def test_gradient_matches_central_differences(case):
    _, f, x, _ = case
    weights = np.cos(np.arange(np.size(f(np, x)))).reshape(np.shape(f(np, x)))

    def loss(x):
        return inp.sum(f(inp, x) * weights)

    got = ik.grad(loss)(x)
    want = central_gradient(lambda z: float(np.sum(f(np, z) * weights)), x)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * (1 + np.max(np.abs(want))))


def test_gradients_match_jax_to_rounding():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    for name, f, x, _ in DIFFERENTIABLE:
        if name in ("trapezoid_x", "fmod_negative_divisor"):
            continue  # jax's trapezoid/fmod take the same path; one case each suffices
        weights = np.cos(np.arange(np.size(f(np, x)))).reshape(np.shape(f(np, x)))
        got = ik.grad(lambda z, f=f, w=weights: inp.sum(f(inp, z) * w))(x)
        want = np.asarray(jax.jit(jax.grad(lambda z, f=f, w=weights: jnp.sum(f(jnp, z) * w)))(x))
        scale = np.max(np.abs(want)) + 1e-300
        assert np.max(np.abs(got - want)) <= 1e-12 * scale, name


def test_second_derivatives_compose():
    def loss(x):
        return inp.sum(inp.cumsum(x) * inp.roll(x, 1) + inp.var(x) * inp.logaddexp(x, 0.0))

    hess = ik.hessian(loss)(V)
    eps = 1e-5
    columns = []
    for i in range(V.size):
        e = np.zeros_like(V)
        e[i] = eps
        columns.append((ik.grad(loss)(V + e) - ik.grad(loss)(V - e)) / (2 * eps))
    np.testing.assert_allclose(hess, np.stack(columns, 1), rtol=1e-6, atol=1e-8)


# --------------------------------------------------- recording and strategies


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_recording_replays_eager_bits(case):
    _, f, x, _ = case
    with np.errstate(all="ignore"):
        eager = f(inp, x)
        jitted = ik.jit(lambda z: f(inp, z), strategy="reference")(x)
    assert ulps(jitted, eager) == 0 and np.shape(jitted) == np.shape(eager)


def _many(x):
    """Several of the names in one function, so one compilation covers them."""
    return (inp.cumsum(x, axis=1) + inp.roll(x, 2, 1) + inp.fmod(x * 7.0, 2.5),
            inp.var(x, 0) + inp.std(x, 0) + inp.argmax(x, 0).astype(inp.float64),
            inp.einsum("ij,kj->ik", x, x) + inp.tril(inp.outer(x[0], x[1, :5])[:4, :4]),
            inp.interp(x, XP, FP) + inp.polyval([1.0, -2.0, 0.5], x),
            inp.trace(x[:, :4]) + inp.trapezoid(x)[0])


@pytest.mark.parametrize("name", ["threads", "native"])
def test_cpu_strategies_meet_their_contract(name):
    x = RNG.normal(size=(4, 5))
    reference = ik.jit(_many, strategy="reference")(x)
    got = ik.jit(_many, strategy=name)(x)
    own = folds_in_own_order(name, ik.jit(_many).lower(x).graph)
    for g, r in zip(got, reference):  # basic IEEE operations only: bit-identical
        if own:  # sums and products in native's fixed order: within n·eps of the reference
            np.testing.assert_allclose(g, r, rtol=1e-14, atol=1e-14 * np.max(np.abs(r)))
        else:
            assert ulps(g, r) == 0


def test_vmap_is_a_loop():
    xs = RNG.normal(size=(3, 4, 5))

    def f(x):
        return (inp.cumsum(x, 0), inp.diff(x), inp.tile(x[0], 2), inp.diagonal(x),
                inp.einsum("ij,ij->i", x, x), inp.argmin(x, 1), inp.roll(x, 1, 0))

    batched = ik.vmap(f)(xs)
    for i, x in enumerate(xs):
        for got, want in zip(batched, f(x)):
            assert ulps(got[i], want) == 0


# ------------------------------------------------------------------- errors


def test_errors_name_the_function_the_line_and_the_fix():
    with pytest.raises(ValueError, match=r"split at test_numpy_names.py:\d+.*array_split"):
        inp.split(A, 3, axis=1)
    with pytest.raises(ValueError, match=r"einsum at test_numpy_names.py:\d+.*'ij,jk->ik'"):
        inp.einsum("i...j->ij", A)
    with pytest.raises(ik.ShapeError, match=r"tensordot at test_numpy_names.py:\d+.*match"):
        inp.tensordot(A, A, axes=1)
    with pytest.raises(ValueError, match=r"interp at test_numpy_names.py:\d+.*remainder"):
        inp.interp(A, XP, FP, period=2.0)
    with pytest.raises(ik.ShapeError, match=r"cross at test_numpy_names.py:\d+.*length 3"):
        inp.cross(A, A)
    with pytest.raises(ik.ShapeError, match=r"repeat at test_numpy_names.py:\d+.*one count"):
        inp.repeat(A, [1, 2], axis=1)


def test_where_with_python_scalar_branches_and_an_array_condition_is_an_array():
    got = inp.where(A > 0, 1.0, 0.0)
    assert isinstance(got, np.ndarray) and np.array_equal(got, np.where(A > 0, 1.0, 0.0))
    assert inp.where(True, 1.0, 0.0) == 1.0 and isinstance(inp.where(True, 1.0, 0.0), float)
