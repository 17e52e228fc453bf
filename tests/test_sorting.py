"""Sorting and order statistics (``record.sorting`` on the ``sort``
primitive): NumPy's bits eagerly and on every CPU strategy, on hand-written
cases with ties, NaN and infinities and on Hypothesis-drawn arrays;
derivatives through the permutation; and JAX itself where installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import isokernel as ik
import isokernel.numpy as inp
import isokernel.ops as iops
from isokernel.ir import Op

from .conftest import CPU_STRATEGIES as STRATEGIES
from .conftest import same

RNG = np.random.default_rng(1)
X = RNG.standard_normal((5, 6))
X[1, 2] = X[1, 4]  # a tie
XN = X.copy()
XN[2, 3] = np.nan
XN[0, 0] = np.inf



@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_argsort_are_numpys_stable_sort(run, axis):
    same(run(lambda x: inp.sort(x, axis=axis), XN), np.sort(XN, axis=axis))
    same(run(lambda x: inp.argsort(x, axis=axis), XN),
         np.argsort(XN, axis=axis, kind="stable"))


def test_lexsort_and_integer_keys(run):
    a, b = np.array([1, 2, 1, 2, 0]), np.array([3.0, 1.0, 3.0, 0.0, 9.0])
    same(run(lambda a, b: inp.lexsort((b, a)), a, b), np.lexsort((b, a)))
    same(run(lambda a: inp.sort(a), a), np.sort(a))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantiles_use_numpys_formula(run, method):
    q = [0.0, 0.1, 0.5, 0.93, 1.0]
    same(run(lambda x: inp.quantile(x, q, axis=1, method=method), X),
         np.quantile(X, q, axis=1, method=method))
    same(run(lambda x: inp.percentile(x, 37.5, method=method), X),
         np.percentile(X, 37.5, method=method))


def test_medians_and_nan_variants(run):
    same(run(lambda x: inp.median(x, axis=0), XN), np.median(XN, axis=0))
    same(run(lambda x: inp.median(x), X), np.median(X))
    same(run(lambda x: inp.nanmedian(x, axis=1), XN), np.nanmedian(XN, axis=1))
    same(run(lambda x: inp.nanquantile(x, 0.3, axis=1, keepdims=True), XN),
         np.nanquantile(XN, 0.3, axis=1, keepdims=True))
    same(run(lambda x: inp.median(x, axis=1, keepdims=True), X),
         np.median(X, axis=1, keepdims=True))


def test_searchsorted_digitize_and_unique(run):
    a = np.sort(RNG.standard_normal(9))
    a[3] = a[4]
    v = np.concatenate([a[[0, 3, 8]], RNG.standard_normal(5), [np.nan, -np.inf, np.inf]])
    for side in ("left", "right"):
        same(run(lambda a, v, side=side: inp.searchsorted(a, v, side=side), a, v),
             np.searchsorted(a, v, side=side))
    same(run(lambda v: inp.digitize(v, a), v), np.digitize(v, a))
    same(run(lambda v: inp.digitize(v, a[::-1], right=True), v),
         np.digitize(v, a[::-1], right=True))
    u = np.array([3, 1, 3, 7, 1, 0])
    same(run(lambda u: inp.unique(u, size=6, fill_value=-1), u),
         np.concatenate([np.unique(u), [-1, -1]]))
    same(run(lambda u: inp.unique(u, size=3), u), np.unique(u)[:3])


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=7),
                  elements=st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf, 3.25])),
       st.floats(0.0, 1.0), st.integers(0, 2))
def test_hypothesis_sorts_and_quantiles_are_numpys_bits(x, q, axis):
    """Few distinct values (ties, signed zeros, NaN, infinities) in arrays
    of every rank: sort, argsort, quantile and nanquantile give NumPy's
    bits under every CPU strategy."""
    axis = axis % x.ndim
    wants = (np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable"))
    for strategy in STRATEGIES:
        got = ik.jit(lambda x: (inp.sort(x, axis=axis), inp.argsort(x, axis=axis)),
                     strategy=strategy)(x)
        for g, w in zip(got, wants):
            same(g, w)
        if x.shape[axis]:
            with np.errstate(all="ignore"):
                for ours, theirs in ((inp.quantile, np.quantile),
                                     (inp.nanquantile, np.nanquantile)):
                    f = lambda x, ours=ours: ours(x, q, axis=axis)  # noqa: E731
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        want = theirs(x, q, axis=axis)
                    same(ik.jit(f, strategy=strategy)(x), want)


def test_gradients_move_through_the_permutation():
    """d sort(x)[k] / dx = e_{order[k]}; a median's gradient goes to its
    middle element(s)."""
    x = np.array([3.0, -1.0, 2.0, 0.5])
    jac = ik.jacrev(lambda x: inp.sort(x))(x)
    np.testing.assert_array_equal(jac, np.eye(4)[np.argsort(x)])
    np.testing.assert_array_equal(ik.grad(lambda x: inp.median(x))(x), [0, 0, 0.5, 0.5])
    np.testing.assert_array_equal(ik.jacfwd(lambda x: inp.sort(x))(x), jac)
    batched = ik.vmap(lambda x: inp.sort(x))(np.stack([x, -x]))
    same(batched, np.sort(np.stack([x, -x]), axis=1))
    assert Op.SORT in ik.trace(lambda x: inp.sort(x), x).ops()


def test_top_k_is_jaxs_order():
    """The k largest along the last axis, largest first, ties by position
    (an int64 index where JAX's is int32)."""
    x = np.array([[1.0, 5.0, 5.0, -2.0, 3.0], [0.0, 0.0, 1.0, 1.0, -1.0]])
    for strategy in STRATEGIES:
        values, index = ik.jit(lambda x: iops.top_k(x, 3), strategy=strategy)(x)
        np.testing.assert_array_equal(values, [[5.0, 5.0, 3.0], [1.0, 1.0, 0.0]])
        np.testing.assert_array_equal(index, [[1, 2, 4], [2, 3, 0]])


def test_unique_needs_size_under_a_recording():
    with pytest.raises(ik.TracerError, match="size="):
        ik.jit(lambda u: inp.unique(u))(np.array([1, 2]))


def test_against_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    cases = [
        (lambda x: inp.sort(x, axis=1) * np.arange(6.0),
         lambda x: jnp.sort(x, axis=1) * np.arange(6.0)),
        (lambda x: inp.quantile(x, [0.2, 0.7], axis=0),
         lambda x: jnp.quantile(x, jnp.array([0.2, 0.7]), axis=0)),
        (lambda x: inp.median(x, axis=1), lambda x: jnp.median(x, axis=1)),
        (lambda x: iops.top_k(x, 2)[0], lambda x: jax.lax.top_k(x, 2)[0]),
    ]
    for f, g in cases:
        for strategy in STRATEGIES:
            np.testing.assert_allclose(ik.jit(f, strategy=strategy)(X), g(X), rtol=1e-12)
        for ours, theirs in ((ik.jacrev, jax.jacrev), (ik.jacfwd, jax.jacfwd)):
            want = np.asarray(theirs(g)(X))
            np.testing.assert_allclose(ours(f)(X), want, rtol=0,
                                       atol=1e-12 * np.max(np.abs(want)))
        xs = np.stack([X, -X])
        np.testing.assert_allclose(ik.vmap(f)(xs), jax.vmap(g)(xs), rtol=1e-12)
    values, index = jax.lax.top_k(XN, 3)
    ours = iops.top_k(XN, 3)
    np.testing.assert_array_equal(ours[1], index)
    np.testing.assert_array_equal(ours[0], values)
