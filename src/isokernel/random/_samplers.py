"""Samplers: ``uniform``, ``normal``, ``bernoulli``, ``randint``,
``permutation``, ``exponential``, ``logistic``, ``laplace``, ``gumbel`` and
``categorical`` from the counter words, each in ``jax.random``'s arithmetic
(the uniform draws bit for bit; the transcendentals the strategy's, so the
others within a few ulp of JAX's)."""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp
from ..ir import DTypeError, ShapeError, dtypes
from ..record import Tracer
from ..typing import Array, ArrayLike, DTypeLike, Shape
from . import _words as w
from ._erfinv import erfinv_of_uniform
from ._keys import as_shape, counter_words, split


def float_dtype(dtype, name: str) -> np.dtype:
    """``dtype`` as a NumPy float dtype, else a ``DTypeError`` naming
    ``random.<name>``."""
    dtype = dtypes.canonical(dtype)
    if dtype not in dtypes.FLOATS:
        raise DTypeError(f"random.{name}: dtype {dtype.name} is not a float dtype; "
                         f"pass dtype=float32 or float64")
    return dtype


def as_dtype(value, dtype):
    """``value`` converted to ``dtype`` before any arithmetic, as JAX does."""
    if isinstance(value, Tracer):
        return value if value.dtype == dtype else inp.astype(value, dtype)
    return np.asarray(value, dtype=dtype)


def bits32(key, shape, name: str):
    """JAX's 32-bit random words for ``shape``: the xor of Threefry's two
    output words."""
    y0, y1 = counter_words(key, shape, name)
    return w.xor(y0, y1)


def unit_floats(high, low, dtype):
    """Floats in [0, 1) from Threefry's two output words: the top
    mantissa-width bits of JAX's 32-bit word ``high ^ low`` (float32) or
    64-bit word ``high << 32 | low`` (float64), exactly JAX's
    ``bitcast(bits >> (width - nmant) | bits(1.0)) - 1``."""
    if dtype == np.float32:
        mantissa = w.xor(high, low) // 2**9
        return inp.astype(mantissa, inp.float32) * 2.0**-23
    return inp.astype(high * 2**20 + low // 2**12, inp.float64) * 2.0**-52


def _unit(key, shape, dtype, name: str):
    """``unit_floats`` of the counter words of ``shape`` under ``key``."""
    return unit_floats(*counter_words(key, shape, name), dtype)


def scaled(floats, minval, maxval, dtype):
    """``max(minval, u * (maxval - minval) + minval)``: JAX's map of floats
    in [0, 1) onto [minval, maxval)."""
    lo, hi = as_dtype(minval, dtype), as_dtype(maxval, dtype)
    return inp.maximum(lo, floats * (hi - lo) + lo)


def uniform(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64,
            minval: ArrayLike = 0.0, maxval: ArrayLike = 1.0) -> Array:
    """Floats uniform in [minval, maxval), ``jax.random.uniform``'s bits."""
    dtype = float_dtype(dtype, "uniform")
    floats = _unit(key, as_shape(shape, "uniform"), dtype, "uniform")
    return scaled(floats, minval, maxval, dtype)


def normal_from_unit(floats, dtype):
    """``sqrt(2) * erfinv(u)`` for ``u`` the floats in [0, 1) mapped onto
    [nextafter(-1, 0), 1): ``jax.random.normal``'s arithmetic."""
    lo = np.nextafter(np.asarray(-1.0, dtype), np.asarray(0.0, dtype))
    return np.asarray(np.sqrt(2), dtype) * erfinv_of_uniform(scaled(floats, lo, 1.0, dtype))


def normal(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64) -> Array:
    """Standard normal draws: ``sqrt(2) * erfinv(u)`` for ``u`` uniform in
    (-1, 1), as ``jax.random.normal``."""
    dtype = float_dtype(dtype, "normal")
    return normal_from_unit(_unit(key, as_shape(shape, "normal"), dtype, "normal"), dtype)


def _tiny(dtype):
    return np.asarray(np.finfo(dtype).tiny, dtype)


def exponential(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64) -> Array:
    """Exponential(1) draws: ``-log1p(-u)``, ``jax.random.exponential``'s
    formula (u uniform in [0, 1), so the log's argument is in (0, 1])."""
    dtype = float_dtype(dtype, "exponential")
    u = uniform(key, as_shape(shape, "exponential"), dtype)
    return -inp.log1p(-u)


def logistic(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64) -> Array:
    """Standard logistic draws: ``log(u) - log1p(-u)`` for u uniform in
    [tiny, 1), ``jax.random.logistic``'s formula."""
    dtype = float_dtype(dtype, "logistic")
    u = uniform(key, as_shape(shape, "logistic"), dtype, _tiny(dtype), 1.0)
    return inp.log(u) - inp.log1p(-u)


def laplace(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64) -> Array:
    """Laplace(0, 1) draws: ``sign(u) * log1p(-|u|)`` for u uniform in
    [-1 + epsneg, 1), ``jax.random.laplace``'s formula."""
    dtype = float_dtype(dtype, "laplace")
    lo = np.asarray(-1.0 + np.finfo(dtype).epsneg, dtype)
    u = uniform(key, as_shape(shape, "laplace"), dtype, lo, 1.0)
    return inp.sign(u) * inp.log1p(-inp.abs(u))


def gumbel(key: ArrayLike, shape: Shape = (), dtype: DTypeLike = np.float64) -> Array:
    """Standard Gumbel draws: ``-log(-log(u))`` for u uniform in [tiny, 1),
    ``jax.random.gumbel``'s default ("low") mode."""
    dtype = float_dtype(dtype, "gumbel")
    u = uniform(key, as_shape(shape, "gumbel"), dtype, _tiny(dtype), 1.0)
    return -inp.log(-inp.log(u))


def categorical(key: ArrayLike, logits: ArrayLike, axis: int = -1,
                shape: Shape | None = None) -> Array:
    """Indices drawn with probabilities ``softmax(logits)`` along ``axis``:
    the Gumbel-max trick, ``argmax(gumbel + logits)``, as
    ``jax.random.categorical`` (``shape``: the batch shape, a prefix of
    leading axes before ``logits``'s other axes)."""
    logits = inp.asarray(logits)
    dtype = logits.dtype if logits.dtype in dtypes.FLOATS else np.dtype(np.float64)
    rank = len(logits.shape)
    axis = axis % rank
    batch = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch if shape is None else as_shape(shape, "categorical")
    if tuple(shape[len(shape) - len(batch):]) != batch:
        raise ShapeError(f"random.categorical: shape {shape} does not end with the logits' "
                         f"batch shape {batch}")
    prefix = tuple(shape[:len(shape) - len(batch)])
    full = list(batch)
    full.insert(axis, logits.shape[axis])
    noise = gumbel(key, prefix + tuple(full), dtype)
    moved = inp.reshape(inp.astype(logits, dtype), (1,) * len(prefix) + tuple(logits.shape))
    return inp.argmax(noise + moved, axis=len(prefix) + axis)


def bernoulli(key: ArrayLike, p: ArrayLike = 0.5, shape: Shape | None = None) -> Array:
    """Booleans that are True with probability ``p``: ``uniform < p`` in
    ``p``'s float dtype (float64 for a Python float)."""
    p = inp.asarray(p)
    dtype = p.dtype if p.dtype in dtypes.FLOATS else np.dtype(np.float64)
    shape = tuple(p.shape) if shape is None else as_shape(shape, "bernoulli")
    return uniform(key, shape, dtype) < p


_INT32_MIN, _INT32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)


def _bound(value, argument: str, dtype: np.dtype):
    """A ``randint`` bound as int64. With dtype int64 (JAX draws 64-bit words
    for it), a known bound whose draws would leave the int32 range that the
    32-bit algorithm covers is refused rather than clipped."""
    if isinstance(value, Tracer):
        return inp.astype(value, inp.int64)
    if isinstance(value, int):
        value = min(max(value, -(2**63)), 2**63 - 1)  # Python ints beyond int64 still clip
    value = np.asarray(value)
    if argument == "minval":
        outside = (value < _INT32_MIN) | (value > _INT32_MAX)
    else:
        outside = value > _INT32_MAX + 1  # maxval is exclusive; a low one is an empty range
    if dtype == np.int64 and np.any(outside):
        raise ValueError(f"random.randint: {argument} {value[outside].flat[0]} is outside "
                         f"the int32 range [-2**31, 2**31 - 1] that its 32-bit algorithm "
                         f"draws from, also for dtype=int64; pass bounds within it, or "
                         f"dtype=int32 to clip them to it as jax.random.randint does")
    return inp.astype(inp.asarray(value), inp.int64)


def _clip_to_int32(lo, hi):
    """JAX's bounds and span: both bounds clipped to the int32 range; the span
    ``hi - lo`` is 1 where the range is empty, and one more where ``maxval``
    was above the range, so that 2**31 - 1 can be drawn."""
    above = hi > _INT32_MAX
    lo, hi = inp.clip(lo, _INT32_MIN, _INT32_MAX), inp.clip(hi, _INT32_MIN, _INT32_MAX)
    span = inp.where(hi <= lo, 1, hi - lo)
    return lo, inp.where(inp.logical_and(above, hi > lo), span + 1, span)


def randint(key: ArrayLike, shape: Shape, minval: ArrayLike, maxval: ArrayLike,
            dtype: DTypeLike = np.int32) -> Array:
    """Integers in [minval, maxval): ``jax.random.randint``'s 32-bit
    algorithm (two words per draw reduced modulo the span). Bounds are
    clipped to the int32 range as JAX clips them to the dtype's: a ``maxval``
    above 2**31 - 1 draws up to 2**31 - 1 inclusive (docs/random.md)."""
    dtype = dtypes.canonical(dtype)
    if dtype not in dtypes.INTS:
        raise DTypeError(f"random.randint: dtype {dtype.name} is not an integer dtype; "
                         f"pass dtype=int32 or int64")
    shape = as_shape(shape, "randint")
    lo, span = _clip_to_int32(_bound(minval, "minval", dtype), _bound(maxval, "maxval", dtype))
    k1, k2 = split(key)
    higher, lower = bits32(k1, shape, "randint"), bits32(k2, shape, "randint")
    half = 2**16 % span
    multiplier = w.mul(half, half) % span  # 2**32 wraps to 0 in uint32, as in JAX
    offset = w.add(w.mul(higher % span, multiplier), lower % span) % span
    return inp.astype(lo + offset, dtype)


def _compare_exchange(keys, values, j: int, k: int):
    """One stage of a bitonic sorting network: element ``i`` meets ``i + j``
    (``i`` with bit ``j`` clear), ascending where bit ``k`` of ``i`` is clear."""
    n, rest = keys.shape[0], tuple(values.shape[1:])
    blocks = n // (2 * j)
    descending = ((np.arange(blocks) // (k // (2 * j))) % 2 == 1)[:, None]
    pairs = inp.reshape(keys, (blocks, 2, j))
    lo, hi = pairs[:, 0], pairs[:, 1]
    swap = inp.not_equal(lo > hi, descending)
    keys = inp.stack([inp.where(swap, hi, lo), inp.where(swap, lo, hi)], axis=1)
    rows = inp.reshape(values, (blocks, 2, j) + rest)
    swap = inp.reshape(swap, (blocks, j) + (1,) * len(rest))
    lo, hi = rows[:, 0], rows[:, 1]
    values = inp.stack([inp.where(swap, hi, lo), inp.where(swap, lo, hi)], axis=1)
    return inp.reshape(keys, (n,)), inp.reshape(values, (n,) + rest)


def _sort_rows(words, x):
    """The rows of ``x`` stably sorted by ``words``: a bitonic network over
    the unique keys ``word * size + position`` (ties keep their order), padded
    to a power of two with keys above every real one. n log(n)**2 work."""
    n, rest = x.shape[0], tuple(x.shape[1:])
    size = 1 << max(0, (n - 1).bit_length())
    keys = words * size + np.arange(n)
    if size > n:
        keys = inp.concatenate([keys, np.arange(n, size) + (2**32 - 1) * size])
        x = inp.concatenate([x, inp.zeros((size - n,) + rest, x.dtype)])
    for k in (2**p for p in range(1, size.bit_length())):
        for j in (k >> q for q in range(1, k.bit_length())):
            keys, x = _compare_exchange(keys, x, j, k)
    return x[:n]


def _count(x) -> int:
    """``permutation``'s ``n`` from an integer scalar."""
    n = np.asarray(x)
    if n.dtype.kind not in "iu":
        raise DTypeError(f"random.permutation: x {x!r} is a {n.dtype} scalar; pass an integer "
                         f"n to permute range(n), or an array of at least one dimension to "
                         f"shuffle its rows")
    if n < 0:
        raise ShapeError(f"random.permutation: x {int(n)} is negative; pass an integer n, 0 "
                         f"or more, to permute range(n)")
    return int(n)


def permutation(key: ArrayLike, x: ArrayLike) -> Array:
    """A random permutation of ``range(x)`` for an integer ``x``, or of the
    rows of the array ``x``: ``jax.random.permutation``'s rounds of stable
    sorts by random words (3 log n / log(2**32 - 1) rounds, one below 1626
    rows), each a bitonic sorting network."""
    if not isinstance(x, Tracer) and np.ndim(x) == 0:
        x = np.arange(_count(x), dtype=np.int64)
    if len(x.shape) == 0:
        raise ShapeError("random.permutation: x is a traced scalar; the number of elements "
                         "must be known while recording: pass a Python int n")
    n = x.shape[0]
    if n >= 2**31:
        raise ShapeError(f"random.permutation: {n} rows; at most 2**31 - 1 can be permuted")
    rounds = math.ceil(3 * math.log(max(1, n)) / math.log(2**32 - 1))
    for _ in range(rounds):
        key, subkey = split(key)
        x = _sort_rows(bits32(subkey, (n,), "permutation"), x)
    return x


def choice(key: ArrayLike, a: ArrayLike, shape: Shape = (), replace: bool = True,
           p: ArrayLike = None, axis: int = 0) -> Array:
    """``jax.random.choice``'s algorithms: uniform indices by ``randint``
    (with replacement), the first draws of a ``permutation`` (without), the
    inverse of the cumulative ``p`` at a uniform draw (weighted, with), the
    Gumbel top-k trick (weighted, without). ``a``: an int n (draw from
    range(n)) or an array (draw along ``axis``). The integer paths follow
    JAX's bits where its int32 algorithms apply; the weighted ones its
    arithmetic (cumsum's order and the logs may differ in the last bits)."""
    from ..ops import top_k
    shape = as_shape(shape, "choice")
    scalar = not isinstance(a, Tracer) and np.ndim(a) == 0
    arr = None if scalar else inp.asarray(a)
    if scalar:
        n = _count(a)
    else:
        axis = axis % len(arr.shape)
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        return inp.zeros(shape, np.int64 if scalar else arr.dtype)
    if n <= 0:
        raise ValueError("random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"random.choice: cannot take {draws} samples from {n} without "
                         f"replacement; pass replace=True or fewer samples")
    if p is None:
        if replace:
            index = inp.astype(randint(key, shape, 0, n), np.int64)
        else:
            index = inp.reshape(permutation(key, n)[:draws], shape)
    else:
        weights = inp.asarray(p)
        dtype = weights.dtype if weights.dtype in dtypes.FLOATS else np.dtype(np.float64)
        weights = inp.astype(weights, dtype)
        if tuple(weights.shape) != (n,):
            raise ShapeError(f"random.choice: p of shape {tuple(weights.shape)} for {n} "
                             f"choices; give one weight per choice")
        if replace:
            total = inp.cumsum(weights)
            r = total[-1] * (1.0 - uniform(key, shape, dtype))
            index = inp.searchsorted(total, r)
        else:
            g = gumbel(key, (n,), dtype) + inp.log(weights)
            index = inp.reshape(top_k(g, draws)[1], shape)
    if scalar:
        return index
    return inp.take(arr, index, axis=axis, mode="clip")
