"""Samplers built on the basic ones, each with ``jax.random``'s algorithm on
the same keys: ``truncated_normal``, ``gamma`` and ``loggamma``
(Marsaglia and Tsang's rejection, one key chain per draw), ``beta``,
``dirichlet``, ``poisson`` (Knuth's products below 10, Hörmann's PTRS
above), ``multivariate_normal`` and ``orthogonal``.

The rejection loops are ``while_loop``s over every draw at once: a draw
that is accepted keeps its values (a select) while the others go on, which
is what JAX's batched loops compute, so each draw sees the random words it
sees in JAX. The loops run until every draw is accepted: no bound on the
number of rounds, exact in distribution (docs/random.md)."""

from __future__ import annotations

import math
import string

import numpy as np

from .. import numpy as inp
from ..control import while_loop
from ..ir import DTypeError, ShapeError, dtypes
from ..record import Tracer
from ..typing import Array, ArrayLike, DTypeLike, Shape
from ._erfinv import erfinv
from ._keys import as_shape, split, words
from ._samplers import as_dtype, float_dtype, normal, normal_from_unit, uniform, unit_floats
from ._special import erf, lgamma_from_half
from ._threefry import threefry2x32

# --- shapes ----------------------------------------------------------------------------------


def _shape_of(x) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, Tracer) else tuple(np.shape(x))


def _batch_shape(name: str, shape, *param_shapes) -> tuple[int, ...]:
    """``shape``, or the broadcast of the parameters' shapes when it is None.
    A given shape must be the broadcast of itself with every parameter's
    shape, as JAX requires."""
    try:
        common = tuple(np.broadcast_shapes(*param_shapes))
    except ValueError:
        raise ShapeError(f"random.{name}: parameter shapes {list(param_shapes)} do not "
                         f"broadcast together") from None
    if shape is None:
        return common
    shape = as_shape(shape, name)
    try:
        ok = tuple(np.broadcast_shapes(shape, *param_shapes)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"random.{name}: parameter shapes {list(param_shapes)} must broadcast "
                         f"to the shape argument {shape}; pass a shape that ends with them, "
                         f"or shape=None for their broadcast shape")
    return shape


def _broadcast(x, shape):
    return x if _shape_of(x) == tuple(shape) else inp.broadcast_to(x, shape)


# --- one key per draw ------------------------------------------------------------------------

def _lane_split(keys, num: int):
    """``split(k, num)`` of every key of ``keys`` (n, 2): keys (n, num, 2)."""
    y0, y1 = threefry2x32(keys[:, 0:1], keys[:, 1:2], 0, np.arange(num, dtype=np.int64))
    return inp.stack([y0, y1], axis=-1)


def _lane_words(keys):
    """The counter words of a scalar draw, ``shape=()``, under each key."""
    return threefry2x32(keys[:, 0], keys[:, 1], 0, 0)


def _lane_uniform(keys, dtype):
    """``uniform(k, (), dtype)`` for each key ``k`` of ``keys``."""
    return unit_floats(*_lane_words(keys), dtype)


def _lane_normal(keys, dtype):
    """``normal(k, (), dtype)`` for each key ``k`` of ``keys``."""
    return normal_from_unit(unit_floats(*_lane_words(keys), dtype), dtype)


def _log(x):
    """``log(x)`` for x >= 0, -inf at 0 without the division-by-zero flag
    (which would warn, eagerly and from compiled strategies)."""
    positive = x > 0
    return inp.where(positive, inp.log(inp.where(positive, x, np.asarray(1.0, x.dtype))),
                     np.asarray(-np.inf, x.dtype))


def _select(mask, new, old):
    """``new`` where ``mask`` holds (per draw), else ``old``."""
    if len(new.shape) > len(mask.shape):
        mask = inp.reshape(mask, tuple(mask.shape) + (1,) * (len(new.shape) - len(mask.shape)))
    return inp.where(mask, new, old)


# --- truncated normal ------------------------------------------------------------------------

def _next_float(x, direction: int, dtype):
    """``nextafter(x, direction * inf)``. A traced ``x`` moves by
    ``|x| * 2**-p * (1 + 2**-(p - 1))`` (p the precision): more than half
    its ulp and less than one and a half, so the sum rounds to the
    neighbouring float. Below 2**(p + 1) times the smallest normal number
    that step is computed on x scaled up by 2**(p + 2) (exact both ways);
    a subnormal x (or the smallest normal) moves by the smallest
    subnormal; infinities move as nextafter moves them."""
    target = np.asarray(direction * np.inf, dtype)
    if not isinstance(x, Tracer):
        return np.nextafter(np.asarray(x, dtype), target)
    info = np.finfo(dtype)
    p = info.nmant + 1
    c = np.asarray(2.0**-p * (1 + 2.0**-(p - 1)), dtype)
    up, down = np.asarray(2.0**(p + 2), dtype), np.asarray(2.0**-(p + 2), dtype)
    sign = np.asarray(direction, dtype)
    infinite = inp.isinf(x)
    finite = inp.where(infinite, np.asarray(0.0, dtype), x)
    size = inp.abs(finite)
    small = size < np.asarray(info.tiny * 2.0**(p + 1), dtype)
    wide = inp.where(small, finite * up, finite)
    moved = wide + sign * (inp.abs(wide) * c)
    moved = inp.where(small, moved * down, moved)
    subnormal = finite + sign * np.asarray(info.smallest_subnormal, dtype)
    moved = inp.where(size <= np.asarray(info.tiny, dtype), subnormal, moved)
    away = inp.logical_and(infinite, inp.not_equal(x, target))
    moved = inp.where(infinite, x, moved)
    return inp.where(away, inp.sign(x) * np.asarray(info.max, dtype), moved)


def truncated_normal(key: ArrayLike, lower: ArrayLike, upper: ArrayLike, shape: Shape | None = None,
                     dtype: DTypeLike = np.float64) -> Array:
    """Standard normal draws truncated to the open interval (lower, upper):
    ``sqrt(2) * erfinv(u)`` for ``u`` uniform between ``erf(lower / sqrt 2)``
    and ``erf(upper / sqrt 2)``, clipped inside the interval, as
    ``jax.random.truncated_normal``. ``shape`` defaults to the bounds'
    broadcast shape."""
    dtype = float_dtype(dtype, "truncated_normal")
    shape = _batch_shape("truncated_normal", shape, _shape_of(lower), _shape_of(upper))
    sqrt2 = np.asarray(np.sqrt(2), dtype)
    lower, upper = as_dtype(lower, dtype), as_dtype(upper, dtype)
    u = uniform(key, shape, dtype, erf(lower / sqrt2), erf(upper / sqrt2))
    return inp.clip(sqrt2 * erfinv(u), _next_float(lower, 1, dtype), _next_float(upper, -1, dtype))


# --- gamma -----------------------------------------------------------------------------------

def _standard_normal_positive_v(keys, c, active, dtype):
    """JAX's inner loop: ``x`` normal and ``v = 1 + x * c`` redrawn (splitting
    each draw's key) until ``v > 0``, for the draws ``active``."""
    zero = inp.zeros(tuple(active.shape), dtype)

    def body(carry):
        keys, x, v, pending = carry
        pairs = _lane_split(keys, 2)
        new_x = _lane_normal(pairs[:, 1], dtype)
        new_v = np.asarray(1.0, dtype) + new_x * c
        keys = _select(pending, pairs[:, 0], keys)
        x, v = _select(pending, new_x, x), _select(pending, new_v, v)
        return keys, x, v, inp.logical_and(pending, v <= 0)

    carry = (keys, zero, zero - np.asarray(1.0, dtype), active)
    _, x, v, _ = while_loop(lambda carry: inp.any(carry[3]), body, carry)
    return x, v


def _gamma_lanes(keys, alpha, log_space: bool, dtype):
    """JAX's ``_gamma_one`` for every draw: Marsaglia and Tsang's method
    ("A simple method for generating gamma variables", 2000) for
    ``alpha >= 1``; ``alpha < 1`` draws Gamma(alpha + 1) times
    ``u ** (1 / alpha)`` (in log space: plus ``log(u) / alpha``)."""
    one = np.asarray(1.0, dtype)
    boost = alpha >= one
    alpha_orig = alpha
    alpha = inp.where(boost, alpha, alpha + one)
    d = alpha - np.asarray(1.0 / 3.0, dtype)
    c = np.asarray(1.0 / 3.0, dtype) / inp.sqrt(d)
    squeeze, half = np.asarray(0.0331, dtype), np.asarray(0.5, dtype)

    def rejects(big_x, big_v, u):
        first = u >= one - squeeze * (big_x * big_x)
        second = _log(u) >= big_x * half + d * ((one - big_v) + inp.log(big_v))
        return inp.logical_and(first, second)

    def body(carry):
        keys, big_x, big_v, u, active = carry
        three = _lane_split(keys, 3)
        x, v = _standard_normal_positive_v(three[:, 1], c, active, dtype)
        new = (three[:, 0], x * x, (v * v) * v, _lane_uniform(three[:, 2], dtype))
        keys, big_x, big_v, u = (_select(active, n, o) for n, o in
                                 zip(new, (keys, big_x, big_v, u)))
        return keys, big_x, big_v, u, inp.logical_and(active, rejects(big_x, big_v, u))

    pairs = _lane_split(keys, 2)
    n = tuple(alpha.shape)
    carry = (pairs[:, 0], inp.zeros(n, dtype), inp.ones(n, dtype),
             inp.full(n, 2.0, dtype), inp.ones(n, np.bool_))
    big_v = while_loop(lambda carry: inp.any(carry[4]), body, carry)[2]
    u = _lane_uniform(pairs[:, 1], dtype)
    if log_space:
        log_u = inp.log1p(-u)  # -exponential(subkey): JAX negates -log1p(-u)
        log_boost = inp.where(inp.logical_or(boost, log_u == 0), np.asarray(0.0, dtype),
                              log_u * (one / alpha_orig))
        return (inp.log(d) + inp.log(big_v)) + log_boost
    boost_factor = inp.where(boost, one, inp.power(one - u, one / alpha_orig))
    return (d * big_v) * boost_factor


def _gamma(key, a, shape, dtype, log_space: bool, name: str):
    dtype = float_dtype(dtype, name)
    shape = _batch_shape(name, shape, _shape_of(a))
    words(key, name)
    count = math.prod(shape)
    if count == 0:
        return inp.zeros(shape, dtype)
    alpha = inp.reshape(_broadcast(as_dtype(a, dtype), shape), (count,))
    return inp.reshape(_gamma_lanes(split(key, count), alpha, log_space, dtype), shape)


def gamma(key: ArrayLike, a: ArrayLike, shape: Shape | None = None,
          dtype: DTypeLike = np.float64) -> Array:
    """Gamma(a, 1) draws, ``jax.random.gamma``'s algorithm: the draws'
    keys are ``split(key, size)`` and each runs Marsaglia and Tsang's
    rejection (its normal redrawn until ``v > 0``, then accepted or
    redrawn), with the boost ``Gamma(a + 1) * u ** (1 / a)`` for ``a < 1``.
    ``shape`` defaults to ``a``'s shape."""
    return _gamma(key, a, shape, dtype, False, "gamma")


def loggamma(key: ArrayLike, a: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike = np.float64) -> Array:
    """The logarithm of Gamma(a, 1) draws, computed in log space
    (``jax.random.loggamma``): accurate where ``a`` is small and the draws
    underflow; ``exp(loggamma(...))`` is ``gamma(...)`` to rounding."""
    return _gamma(key, a, shape, dtype, True, "loggamma")


def beta(key: ArrayLike, a: ArrayLike, b: ArrayLike, shape: Shape | None = None,
         dtype: DTypeLike = np.float64) -> Array:
    """Beta(a, b) draws, ``jax.random.beta``'s: log-gamma draws ``la`` of
    a and ``lb`` of b (keys ``split(key)``), then
    ``exp(la - m) / (exp(la - m) + exp(lb - m))`` with ``m = max(la, lb)``.
    ``shape`` defaults to the broadcast of a and b."""
    dtype = float_dtype(dtype, "beta")
    shape = _batch_shape("beta", shape, _shape_of(a), _shape_of(b))
    words(key, "beta")
    count = math.prod(shape)
    if count == 0:
        return inp.zeros(shape, dtype)
    key_a, key_b = split(key)
    # loggamma(key_a, a) and loggamma(key_b, b) as one loop over both sets of draws
    keys = inp.concatenate([split(key_a, count), split(key_b, count)])
    alpha = inp.concatenate([inp.reshape(_broadcast(as_dtype(x, dtype), shape), (count,))
                             for x in (a, b)])
    logs = _gamma_lanes(keys, alpha, True, dtype)
    log_a, log_b = inp.reshape(logs[:count], shape), inp.reshape(logs[count:], shape)
    log_max = inp.maximum(log_a, log_b)
    scaled_a, scaled_b = inp.exp(log_a - log_max), inp.exp(log_b - log_max)
    return scaled_a / (scaled_a + scaled_b)


def dirichlet(key: ArrayLike, alpha: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike = np.float64) -> Array:
    """Dirichlet(alpha) draws over the last axis of ``alpha``,
    ``jax.random.dirichlet``'s: log-gamma draws of shape
    ``shape + alpha.shape[-1:]`` normalized by a softmax. ``shape`` (the
    batch shape) defaults to ``alpha.shape[:-1]``."""
    dtype = float_dtype(dtype, "dirichlet")
    alpha_shape = _shape_of(alpha)
    if len(alpha_shape) < 1:
        raise ShapeError("random.dirichlet: alpha is a scalar; pass the concentrations as an "
                         "array of shape (..., k)")
    shape = _batch_shape("dirichlet", shape, alpha_shape[:-1])
    full = tuple(shape) + alpha_shape[-1:]
    logs = loggamma(key, _broadcast(as_dtype(alpha, dtype), full), full, dtype)
    unnormalized = inp.exp(logs - inp.max(logs, axis=-1, keepdims=True))
    return unnormalized / inp.sum(unnormalized, axis=-1, keepdims=True)


# --- poisson ---------------------------------------------------------------------------------

def _poisson_knuth(key, lam, shape, dtype):
    """Knuth's algorithm: the count of uniform factors whose product stays
    above exp(-lam), one ``uniform(subkey, shape, float32)`` per round for
    every draw (``log`` of the product, as JAX)."""
    def body(carry):
        key, k, log_prod = carry
        pair = split(key)
        k = inp.where(log_prod > -lam, k + 1, k)
        u = uniform(pair[1], shape, np.float32)
        return pair[0], k, log_prod + _log(u)

    carry = (key, inp.zeros(shape, dtype), inp.zeros(shape, np.float32))
    k = while_loop(lambda carry: inp.any(carry[2] > -lam), body, carry)[1]
    return k - 1


def _poisson_rejection(key, lam, shape, dtype):
    """Hörmann's transformed rejection with squeeze (PTRS, "The transformed
    rejection method for generating Poisson random variables", 1993), in
    float32 as JAX: one pair of uniforms per round for every draw."""
    log_lam = inp.log(lam)
    b = 0.931 + 2.53 * inp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        key, k_out, accepted = carry
        three = split(key, 3)
        u = uniform(three[1], shape, np.float32) - 0.5
        v = uniform(three[2], shape, np.float32)
        u_shifted = 0.5 - inp.abs(u)
        # u = -0.5 gives u_shifted = 0, where JAX's k is -inf (rejected): the
        # division is kept off that draw, which is rejected below all the same
        edge = u_shifted == 0
        u_shifted = inp.where(edge, np.float32(0.5), u_shifted)
        k = inp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = _log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        # lgamma(k + 1) at k >= 0: a negative k is rejected whatever t is
        t = -lam + k * log_lam - lgamma_from_half(inp.maximum(k, 0.0) + 1)
        accept1 = inp.logical_and(u_shifted >= 0.07, v <= v_r)
        reject = inp.logical_or(inp.logical_or(k < 0, edge),
                                inp.logical_and(u_shifted < 0.013, v > u_shifted))
        accept = inp.logical_or(accept1, inp.logical_and(inp.logical_not(reject), s <= t))
        k_out = inp.where(accept, k, k_out)
        return three[0], k_out, inp.logical_or(accepted, accept)

    carry = (key, inp.full(shape, -1.0, np.float32), inp.zeros(shape, np.bool_))
    k = while_loop(lambda carry: inp.any(inp.logical_not(carry[2])), body, carry)[1]
    return inp.astype(k, dtype)


def poisson(key: ArrayLike, lam: ArrayLike, shape: Shape | None = None,
            dtype: DTypeLike = np.int64) -> Array:
    """Poisson(lam) counts, ``jax.random.poisson``'s algorithm: ``lam`` in
    float32; Knuth's multiplication method where ``lam < 10`` (or NaN),
    Hörmann's PTRS elsewhere, both run for every draw on the same key and
    selected; 0 where ``lam == 0``. ``shape`` defaults to ``lam``'s."""
    dtype = dtypes.canonical(dtype)
    if dtype not in dtypes.INTS:
        raise DTypeError(f"random.poisson: dtype {dtype.name} is not an integer dtype; pass "
                         f"dtype=int32 or int64")
    shape = _batch_shape("poisson", shape, _shape_of(lam))
    words(key, "poisson")
    lam = _broadcast(as_dtype(lam, np.float32), shape)
    use_knuth = inp.logical_or(inp.isnan(lam), lam < 10)
    lam_knuth = inp.where(use_knuth, lam, np.float32(0.0))
    lam_rejection = inp.where(use_knuth, np.float32(1e5), lam)
    knuth = _poisson_knuth(key, lam_knuth, shape, dtype)
    rejection = _poisson_rejection(key, lam_rejection, shape, dtype)
    result = inp.where(use_knuth, knuth, rejection)
    return inp.where(lam == 0, inp.zeros(shape, dtype), result)


# --- multivariate normal and orthogonal matrices ---------------------------------------------

def multivariate_normal(key: ArrayLike, mean: ArrayLike, cov: ArrayLike, shape: Shape | None = None,
                        dtype: DTypeLike = None, method: str = "cholesky") -> Array:
    """Draws of N(mean, cov), ``jax.random.multivariate_normal``'s:
    ``mean + factor @ z`` with ``z = normal(key, shape + (n,))`` and
    ``factor`` the Cholesky factor of ``cov`` (``method="cholesky"``), or
    ``u * sqrt(s)`` of its SVD ("svd") or ``v * sqrt(w)`` of its
    eigendecomposition ("eigh"; both allow a singular ``cov``). ``dtype``:
    by default the float dtype mean and cov promote to (float64 for
    integers); both are converted to it.
    ``shape`` (the batch shape) defaults to the broadcast of
    ``mean.shape[:-1]`` and ``cov.shape[:-2]``."""
    if method not in ("cholesky", "svd", "eigh"):
        raise ValueError(f"random.multivariate_normal: method {method!r}; pass 'cholesky', "
                         f"'svd' or 'eigh'")
    mean, cov = inp.asarray(mean), inp.asarray(cov)
    if dtype is None:  # JAX's promotion of the two to a float dtype
        dtype = np.promote_types(*(x.dtype if x.dtype in dtypes.FLOATS else np.float64
                                   for x in (mean, cov)))
    dtype = float_dtype(dtype, "multivariate_normal")
    mean, cov = as_dtype(mean, dtype), as_dtype(cov, dtype)
    mean_shape, cov_shape = _shape_of(mean), _shape_of(cov)
    if len(mean_shape) < 1 or len(cov_shape) < 2:
        raise ShapeError(f"random.multivariate_normal: mean of shape {mean_shape} and cov of "
                         f"shape {cov_shape}; pass mean (..., n) and cov (..., n, n)")
    n = mean_shape[-1]
    if cov_shape[-2:] != (n, n):
        raise ShapeError(f"random.multivariate_normal: cov of shape {cov_shape} for a mean of "
                         f"{n} components; cov must be (..., {n}, {n})")
    shape = _batch_shape("multivariate_normal", shape, mean_shape[:-1], cov_shape[:-2])
    if method == "svd":
        u, s, _ = inp.linalg.svd(cov)
        factor = u * inp.expand_dims(inp.sqrt(s), -2)
    elif method == "eigh":
        w, v = inp.linalg.eigh(cov)
        factor = v * inp.expand_dims(inp.sqrt(w), -2)
    else:
        factor = inp.linalg.cholesky(cov)
    z = normal(key, tuple(shape) + (n,), dtype)
    batch = string.ascii_letters[:len(shape)]
    factor = _broadcast(factor, tuple(shape) + (n, n))
    return mean + inp.einsum(f"{batch}ij,{batch}j->{batch}i", factor, z)


def orthogonal(key: ArrayLike, n: int, shape: Shape = (), dtype: DTypeLike = np.float64,
               m: int | None = None) -> Array:
    """Matrices uniform on the orthogonal group O(n) (Haar measure),
    ``jax.random.orthogonal``'s: the QR factorization of a normal matrix
    with Q's columns multiplied by the signs of R's diagonal (Mezzadri,
    "How to generate random matrices from the classical compact groups",
    2007). With ``m`` columns (``m != n``) the rows (n < m) or columns
    (n > m) are orthonormal. Shape ``shape + (n, m)``."""
    dtype = float_dtype(dtype, "orthogonal")
    shape = as_shape(shape, "orthogonal")
    m = n if m is None else m
    for name, size in (("n", n), ("m", m)):
        if not isinstance(size, (int, np.integer)) or size < 0:
            raise ShapeError(f"random.orthogonal: {name}={size!r}; pass a count, an int 0 or "
                             f"more")
    z = normal(key, tuple(shape) + (max(n, m), min(n, m)), dtype)
    q, r = inp.linalg.qr(z)
    d = inp.diagonal(r, axis1=-2, axis2=-1)
    x = q * inp.expand_dims(inp.sign(d), -2)
    return inp.swapaxes(x, -1, -2) if n < m else x
