"""isokernel.random's truncated_normal, gamma, loggamma, beta, dirichlet, poisson,
multivariate_normal and orthogonal: each follows its distribution (Kolmogorov-Smirnov or
chi-square against SciPy on 10^5 draws, p > 1e-3, and a wrong parameter fails the same test),
runs under jit (the default strategy) with the eager values, and with JAX installed draws
JAX's values on the same key (the fractions and bounds of docs/random.md)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import isokernel as ik
import isokernel.random as rnd
from isokernel.ir import DTypeError, ShapeError
from isokernel.random import _distributions

stats = pytest.importorskip("scipy.stats")

N = 100_000
SEED = 2026
FLOATS = (np.float64, np.float32)
ALPHA = np.array([0.3, 1.0, 2.5])
MEAN = np.array([1.0, -2.0, 0.5])
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
PROJECTION = np.array([0.5, -1.0, 2.0])

# name -> (sampler call with key k and dtype dt, the same call in jax.random)
CASES = {
    "truncated_normal(-1, 2)": (lambda r, k, dt: r.truncated_normal(k, -1.0, 2.0, (N,), dt)),
    "truncated_normal(-inf, 0.5)": (lambda r, k, dt: r.truncated_normal(k, -np.inf, 0.5, (N,), dt)),
    "gamma(0.3)": (lambda r, k, dt: r.gamma(k, 0.3, (N,), dt)),
    "gamma(1)": (lambda r, k, dt: r.gamma(k, 1.0, (N,), dt)),
    "gamma(4.5)": (lambda r, k, dt: r.gamma(k, 4.5, (N,), dt)),
    "loggamma(0.05)": (lambda r, k, dt: r.loggamma(k, 0.05, (N,), dt)),
    "beta(0.5, 2)": (lambda r, k, dt: r.beta(k, 0.5, 2.0, (N,), dt)),
    "dirichlet": (lambda r, k, dt: r.dirichlet(k, ALPHA.astype(dt), (N // 3,), dt)),
    "multivariate_normal(cholesky)": (lambda r, k, dt: r.multivariate_normal(
        k, MEAN.astype(dt), COV.astype(dt), (N,), dt, "cholesky")),
    "multivariate_normal(eigh)": (lambda r, k, dt: r.multivariate_normal(
        k, MEAN.astype(dt), COV.astype(dt), (N,), dt, "eigh")),
    "multivariate_normal(svd)": (lambda r, k, dt: r.multivariate_normal(
        k, MEAN.astype(dt), COV.astype(dt), (N,), dt, "svd")),
    "orthogonal(3)": (lambda r, k, dt: r.orthogonal(k, 3, (N,), dt)),
}
POISSON_RATES = (3.0, 9.5, 10.0, 40.0, 1000.0)


@functools.cache
def _draws(name: str, dtype=np.float64):
    """Our draws for a case, computed once for every test that reads them."""
    if name.startswith("poisson"):
        return rnd.poisson(rnd.key(SEED), float(name[8:-1]), (N,))
    return CASES[name](rnd, rnd.key(SEED), dtype)


def _ks(x, cdf) -> float:
    return stats.kstest(np.asarray(x, np.float64).ravel(), cdf).pvalue


# --- distributions -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_truncated_normal_follows_the_truncated_normal(dtype):
    for name, lo, hi, wrong in [("truncated_normal(-1, 2)", -1.0, 2.0, (-0.9, 2.0)),
                                ("truncated_normal(-inf, 0.5)", -np.inf, 0.5, (-np.inf, 0.45))]:
        x = _draws(name, dtype)
        assert x.dtype == dtype and x.shape == (N,)
        assert np.all(x > lo) and np.all(x < hi)
        assert _ks(x, stats.truncnorm(lo, hi).cdf) > 1e-3
        assert _ks(x, stats.truncnorm(*wrong).cdf) < 1e-6


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("a", [0.3, 1.0, 4.5])
def test_gamma_follows_the_gamma_distribution(dtype, a):
    """a < 1 takes the boost Gamma(a + 1) * u ** (1 / a); 3 % off in a fails."""
    x = _draws(f"gamma({a:g})", dtype)
    assert x.dtype == dtype and np.all(x >= 0)
    assert _ks(x, stats.gamma(a).cdf) > 1e-3
    assert _ks(x, stats.gamma(a * 1.03).cdf) < 1e-6
    assert _ks(x, stats.gamma(a * 0.97).cdf) < 1e-6


@pytest.mark.parametrize("dtype", FLOATS)
def test_loggamma_beta_and_dirichlet_follow_their_distributions(dtype):
    """loggamma at a = 0.05 (most gamma draws would be below 1e-10): SciPy's loggamma;
    beta; each Dirichlet component is Beta(alpha_i, sum(alpha) - alpha_i)."""
    x = _draws("loggamma(0.05)", dtype)
    assert np.all(np.isfinite(x)) and x.min() < np.log(1e-30)
    assert _ks(x, stats.loggamma(0.05).cdf) > 1e-3
    assert _ks(x, stats.loggamma(0.052).cdf) < 1e-6
    x = _draws("beta(0.5, 2)", dtype)
    assert np.all((x >= 0) & (x <= 1))
    assert _ks(x, stats.beta(0.5, 2.0).cdf) > 1e-3
    assert _ks(x, stats.beta(0.52, 2.0).cdf) < 1e-6
    x = _draws("dirichlet", dtype)
    assert x.shape == (N // 3, 3) and x.dtype == dtype
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=8 * np.finfo(dtype).eps)
    for i, a in enumerate(ALPHA):
        assert _ks(x[:, i], stats.beta(a, ALPHA.sum() - a).cdf) > 1e-3
    assert _ks(x[:, 0], stats.beta(0.33, 3.5).cdf) < 1e-6


def _chi_square(x, lam) -> float:
    """Pearson's test of the counts against Poisson(lam), bins with fewer than 5 expected
    draws merged into the two tails."""
    counts = np.bincount(x.ravel(), minlength=1).astype(np.float64)
    expected = stats.poisson(lam).pmf(np.arange(len(counts))) * x.size
    expected[-1] += stats.poisson(lam).sf(len(counts) - 1) * x.size
    big = np.flatnonzero(expected >= 5)
    lo, hi = big[0], big[-1]
    observed = np.concatenate([[counts[:lo + 1].sum()], counts[lo + 1:hi], [counts[hi:].sum()]])
    wanted = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi],
                             [expected[hi:].sum()]])
    return stats.chisquare(observed, wanted * x.size / wanted.sum()).pvalue


@pytest.mark.parametrize("lam", POISSON_RATES)
def test_poisson_follows_the_poisson_distribution(lam):
    """Knuth's products below 10, PTRS from 10 on; 2 % off in lam fails."""
    x = _draws(f"poisson({lam})")
    assert x.dtype == np.int64 and x.min() >= 0
    assert _chi_square(x, lam) > 1e-3
    assert _chi_square(x, lam * 1.02) < 1e-6


def test_poisson_of_mixed_rates_zero_and_dtype():
    lam = np.array([0.0, 0.5, 12.0, 300.0])
    x = rnd.poisson(rnd.key(1), lam, (20_000, 4), np.int32)
    assert x.dtype == np.int32 and x.shape == (20_000, 4)
    assert np.all(x[:, 0] == 0)
    assert np.all(np.abs(x.mean(axis=0) - lam) <= 5 * np.sqrt(np.maximum(lam, 1) / 20_000))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_has_the_mean_and_covariance(dtype, method):
    """A projection w.x is N(w.mean, w' cov w) and the whitened draws L^-1 (x - mean) are
    standard normal (Kolmogorov-Smirnov); 5 % off in the projection's deviation fails."""
    x = _draws(f"multivariate_normal({method})", dtype)
    assert x.shape == (N, 3) and x.dtype == dtype
    wide = x.astype(np.float64)
    sd = np.sqrt(PROJECTION @ COV @ PROJECTION)
    assert _ks(wide @ PROJECTION, stats.norm(PROJECTION @ MEAN, sd).cdf) > 1e-3
    assert _ks(wide @ PROJECTION, stats.norm(PROJECTION @ MEAN, 1.05 * sd).cdf) < 1e-6
    white = np.linalg.solve(np.linalg.cholesky(COV), (wide - MEAN).T)
    for row in white:
        assert _ks(row, stats.norm.cdf) > 1e-3


def test_multivariate_normal_of_a_singular_covariance_by_eigh_and_svd():
    cov = np.array([[1.0, 1.0], [1.0, 1.0]])
    for method in ("eigh", "svd"):
        x = rnd.multivariate_normal(rnd.key(0), np.zeros(2), cov, (1000,), method=method)
        np.testing.assert_allclose(x[:, 0], x[:, 1], atol=1e-7)
        assert 0.8 < x[:, 0].std() < 1.2


@pytest.mark.parametrize("dtype", FLOATS)
def test_orthogonal_is_orthogonal_and_haar(dtype):
    """Q'Q = I; under Haar measure on O(3) an entry q is uniform on [-1, 1] (the sign
    correction makes it symmetric: without it Q[0, 0] is never positive) and det Q = +-1
    with probability 1/2 each."""
    q = _draws("orthogonal(3)", dtype)
    assert q.shape == (N, 3, 3) and q.dtype == dtype
    eye = np.einsum("nij,nik->njk", q.astype(np.float64), q.astype(np.float64))
    np.testing.assert_allclose(eye, np.broadcast_to(np.eye(3), eye.shape),
                               atol=20 * np.finfo(dtype).eps)
    for i, j in [(0, 0), (2, 1)]:
        assert _ks((q[:, i, j] + 1) / 2, stats.uniform.cdf) > 1e-3
    assert _ks((q[:, 0, 0] + 1) / 2, stats.beta(1.1, 1.1).cdf) < 1e-6
    positive = np.mean(np.linalg.det(q.astype(np.float64)) > 0)
    assert abs(positive - 0.5) < 5 * np.sqrt(0.25 / len(q))


def test_orthogonal_with_unequal_rows_and_columns():
    wide = rnd.orthogonal(rnd.key(1), 3, (4,), m=5)
    tall = rnd.orthogonal(rnd.key(1), 5, (4,), m=3)
    assert wide.shape == (4, 3, 5) and tall.shape == (4, 5, 3)
    for rows in (wide, np.swapaxes(tall, -1, -2)):
        np.testing.assert_allclose(rows @ np.swapaxes(rows, -1, -2),
                                   np.broadcast_to(np.eye(3), (4, 3, 3)), atol=1e-13)


# --- JAX's draws on the same key --------------------------------------------------------------

# case -> {dtype: (least fraction of draws identical to JAX's, largest difference in
# eps * max(1, |x|))}: docs/random.md states the measured figures these bound
JAX_AGREEMENT = {
    "truncated_normal(-1, 2)": {np.float64: (0.45, 32), np.float32: (0.49, 8)},
    "truncated_normal(-inf, 0.5)": {np.float64: (0.42, 32), np.float32: (0.45, 16)},
    "gamma(0.3)": {np.float64: (0.63, 32), np.float32: (0.65, 8)},
    "gamma(1)": {np.float64: (0.65, 32), np.float32: (0.79, 10)},
    "gamma(4.5)": {np.float64: (0.87, 24), np.float32: (0.89, 10)},
    "loggamma(0.05)": {np.float64: (0.81, 300), np.float32: (0.78, 10)},
    "beta(0.5, 2)": {np.float64: (0.60, 64), np.float32: (0.46, 8)},
    "dirichlet": {np.float64: (0.36, 100), np.float32: (0.38, 8)},
    "multivariate_normal(cholesky)": {np.float64: (0.80, 40), np.float32: (0.90, 10)},
    "multivariate_normal(eigh)": {np.float64: (0.73, 42), np.float32: (0.33, 20)},
    "multivariate_normal(svd)": {np.float64: (0.72, 42), np.float32: (0.12, 30)},
    "orthogonal(3)": {np.float64: (0.70, 400), np.float32: (0.26, 160)},
}
POISSON_IDENTICAL = {3.0: 1.0, 9.5: 1.0, 10.0: 1.0, 40.0: 0.9999, 1000.0: 0.9995}


@pytest.fixture(scope="module")
def jax_random():
    jax = pytest.importorskip("jax", reason="jax is not installed: no comparison of draws")
    jax.config.update("jax_enable_x64", True)
    return jax.random


@pytest.mark.parametrize("name", list(JAX_AGREEMENT))
@pytest.mark.parametrize("dtype", FLOATS)
def test_draws_agree_with_jax(jax_random, name, dtype):
    """The same algorithm on the same random words: most draws identical, the rest within
    a few eps (libm's transcendentals here, XLA's there, and XLA's fused multiply-adds;
    loggamma's log of a tiny draw, a large |x|, scales the difference of the draw)."""
    ours = _draws(name, dtype)
    theirs = np.asarray(CASES[name](jax_random, jax_random.key(SEED), dtype))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    least, most = JAX_AGREEMENT[name][dtype]
    err = (np.abs(ours.astype(np.float64) - theirs) / np.maximum(1.0, np.abs(theirs))
           / np.finfo(dtype).eps)
    assert np.mean(ours == theirs) >= least
    assert err.max() <= most


def test_poisson_agrees_with_jax(jax_random):
    """Knuth's counts are JAX's; PTRS's accept-reject test compares float32 logs and
    lgamma that may differ in the last bit, so a few large counts differ."""
    for lam, least in POISSON_IDENTICAL.items():
        theirs = np.asarray(jax_random.poisson(jax_random.key(SEED), lam, (N,)))
        assert np.mean(_draws(f"poisson({lam})") == theirs) >= least
    lam = np.array([[0.0, 0.5, 12.0, 300.0]])
    np.testing.assert_array_equal(
        rnd.poisson(rnd.key(4), lam, (500, 4)),
        np.asarray(jax_random.poisson(jax_random.key(4), lam, (500, 4))))


# --- jit, vmap, traced parameters -------------------------------------------------------------

JIT_CASES = {
    "truncated_normal": lambda k: rnd.truncated_normal(k, -1.0, 2.0, (2000,)),
    "gamma": lambda k: rnd.gamma(k, np.array([0.3, 4.5]), (1000, 2), np.float32),
    "loggamma": lambda k: rnd.loggamma(k, 0.05, (2000,)),
    "beta": lambda k: rnd.beta(k, 0.5, 2.0, (2000,)),
    "dirichlet": lambda k: rnd.dirichlet(k, ALPHA, (700,)),
    "multivariate_normal": lambda k: rnd.multivariate_normal(k, MEAN, COV, (700,)),
    "orthogonal": lambda k: rnd.orthogonal(k, 3, (700,)),
    "poisson": lambda k: rnd.poisson(k, np.array([3.0, 40.0]), (1000, 2)),
}


@pytest.mark.parametrize("name", list(JIT_CASES))
def test_jit_gives_the_eager_draws(name):
    """Under jit's default strategy (one C program; the rejection loops are while loops)
    the draws are the eager ones, within 16 eps * max(1, |x|): the compiled log1p, pow and
    exp may differ from NumPy's in the last bits. Counts are equal."""
    key = rnd.key(SEED)
    eager, compiled = JIT_CASES[name](key), ik.jit(JIT_CASES[name])(key)
    assert eager.dtype == compiled.dtype and eager.shape == compiled.shape
    if eager.dtype.kind == "i":
        np.testing.assert_array_equal(compiled, eager)
    else:
        err = np.abs(compiled - eager) / np.maximum(1.0, np.abs(eager))
        assert err.max() <= 16 * np.finfo(eager.dtype).eps


def test_reference_strategy_gives_the_eager_bits():
    key = rnd.key(SEED)
    for name in ("gamma", "loggamma", "truncated_normal"):
        compiled = ik.jit(JIT_CASES[name], strategy="reference")(key)
        assert compiled.tobytes() == JIT_CASES[name](key).tobytes()


def test_traced_parameters_and_vmap_over_keys():
    """a, the bounds and lam may be traced (jit arguments); a batch of keys under vmap
    draws what the loop over the keys draws."""
    def draws(key, a, lower):
        return (rnd.gamma(key, a), rnd.truncated_normal(key, lower, 1.0),
                rnd.poisson(key, 10 * a), rnd.beta(key, a, 2.0))
    a = np.array([0.5, 2.0, 7.0])
    lower = np.array([-np.inf, -1.0, 0.5])
    key = rnd.key(1)
    for got, want in zip(ik.jit(draws, strategy="reference")(key, a, lower),
                         draws(key, a, lower)):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    keys = rnd.split(rnd.key(3), 4)
    batched = ik.vmap(lambda k: rnd.gamma(k, 0.7, (3,)))(keys)
    np.testing.assert_array_equal(batched, np.stack([rnd.gamma(k, 0.7, (3,)) for k in keys]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_traced_bounds_step_to_the_next_float_as_nextafter(dtype):
    """truncated_normal clips into (nextafter(lower, inf), nextafter(upper, -inf)); a
    traced bound steps by arithmetic, which must give nextafter's float everywhere: powers
    of two and their neighbours in every binade, subnormals, 0, the extremes, infinities."""
    info = np.finfo(dtype)
    p = info.nmant + 1
    exponents = np.arange(info.minexp - info.nmant, info.maxexp)
    x = np.concatenate([np.ldexp(1.0, exponents) * m for m in (1.0, 1.5, 2 - 2.0**(1 - p))])
    rng = np.random.default_rng(0)
    x = np.concatenate([x, -x, rng.uniform(-2, 2, 5000) * 10.0 ** rng.integers(-30, 30, 5000),
                        [0.0, -0.0, np.inf, -np.inf, info.max, -info.max, np.nan]]).astype(dtype)
    for direction in (1, -1):
        step = ik.jit(lambda x, d=direction: _distributions._next_float(x, d, dtype),
                      strategy="reference")
        with np.errstate(over="ignore"):
            want = np.nextafter(x, np.asarray(direction * np.inf, dtype))
            assert np.array_equal(step(x), want, equal_nan=True)


# --- arguments ---------------------------------------------------------------------------------

def test_shapes_and_dtypes_are_checked():
    key = rnd.key(0)
    assert rnd.gamma(key, np.ones((2, 3))).shape == (2, 3)
    assert rnd.gamma(key, np.ones(3), (4, 3)).shape == (4, 3)
    assert rnd.gamma(key, 1.0, (0,)).shape == (0,)
    assert rnd.truncated_normal(key, np.zeros(2), 1.0).shape == (2,)
    assert rnd.dirichlet(key, np.ones((2, 3))).shape == (2, 3)
    with pytest.raises(ShapeError, match=r"random\.gamma: parameter shapes \[\(3,\)\] must "
                                         r"broadcast to the shape argument \(3, 2\)"):
        rnd.gamma(key, np.ones(3), (3, 2))
    with pytest.raises(ShapeError, match=r"random\.beta: .*do not broadcast"):
        rnd.beta(key, np.ones(2), np.ones(3))
    with pytest.raises(DTypeError, match=r"random\.gamma: dtype int32 is not a float"):
        rnd.gamma(key, 1.0, dtype=np.int32)
    with pytest.raises(DTypeError, match=r"random\.poisson: dtype float64 is not an integer"):
        rnd.poisson(key, 1.0, dtype=np.float64)
    with pytest.raises(ShapeError, match=r"random\.dirichlet: alpha is a scalar"):
        rnd.dirichlet(key, 1.0)
    with pytest.raises(ShapeError, match=r"random\.multivariate_normal: cov of shape \(3, 3\)"):
        rnd.multivariate_normal(key, np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="method 'qr'"):
        rnd.multivariate_normal(key, np.zeros(2), np.eye(2), method="qr")
    with pytest.raises(ValueError, match=r"random\.gamma: key words"):
        rnd.gamma(np.array([2**40, 0], np.int64), 1.0)
