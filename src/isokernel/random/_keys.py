"""Keys: ``key``, ``split``, ``fold_in`` and the counter words every sampler
draws from, as ``jax.random`` forms them with its default (partitionable)
Threefry implementation.

A key is an int64 array of shape (2,) holding two unsigned 32-bit words,
the values of JAX's raw ``uint32[2]`` key (isokernel has no unsigned dtype).
A NumPy ``uint32`` key (``np.asarray(jax.random.key_data(k))``) is accepted
and read as those words.
"""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp
from ..ir import DTypeError, ShapeError
from ..record import Tracer
from ..typing import Array, ArrayLike, Shape
from ._threefry import threefry2x32
from ._words import MOD

KEY_FORM = ("a key is an int64 array of shape (2,) holding two 32-bit words, as "
            "isokernel.random.key(seed) or split(key) make; for a batch of keys, map over "
            "them with isokernel.vmap")


def _check_key(key, name: str):
    if not isinstance(key, Tracer):
        key = np.asarray(key)
        if key.dtype == np.uint32:
            key = key.astype(np.int64)
    if tuple(key.shape) != (2,) or key.dtype != np.int64:
        raise ShapeError(f"random.{name}: got a key of shape {tuple(key.shape)} and dtype "
                         f"{key.dtype}; {KEY_FORM}")
    if not isinstance(key, Tracer) and ((key < 0) | (key >= MOD)).any():
        raise ValueError(f"random.{name}: key words {key.tolist()} are not 32-bit words "
                         f"(each must lie in [0, 2**32)); make keys with key(seed), split "
                         f"or fold_in")
    return key


def words(key, name: str):
    """The key's two words, int64 scalars."""
    key = _check_key(key, name)
    return key[0], key[1]


def as_shape(shape, name: str, argument: str = "shape") -> tuple[int, ...]:
    """``shape`` as a tuple of sizes, each an integer 0 or more (``argument``
    of ``random.<name>`` in the error otherwise)."""
    sizes = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for size in sizes:
        if not isinstance(size, (int, np.integer)):
            raise ShapeError(f"random.{name}: {argument} {shape!r} has a size {size!r} that is "
                             f"not an integer; sizes are integer counts, e.g. (3, 2)")
        if size < 0:
            raise ShapeError(f"random.{name}: {argument} {shape!r} has a negative size "
                             f"{size}; every size must be 0 or more")
    return tuple(int(size) for size in sizes)


def counter_words(key, shape, name: str):
    """Threefry of the row-major index of every element of ``shape``: JAX's
    ``iota_2x32_shape`` counters (high word, low word) under the key."""
    k0, k1 = words(key, name)
    index = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    high = index // MOD if index.size and index.max() >= MOD else 0
    return threefry2x32(k0, k1, high, index % MOD)


def _seed_words(seed):
    if isinstance(seed, (int, np.integer)):
        seed = int(seed)
        if not -(2**63) <= seed < 2**64:
            raise ValueError(f"random.key: seed {seed} does not fit in 64 bits (a seed is a "
                             f"signed or unsigned 64-bit integer, in [-2**63, 2**64)); pass "
                             f"e.g. seed % 2**64 to keep its low 64 bits")
        seed %= 2**64
        return np.int64(seed // MOD), np.int64(seed % MOD)
    seed = inp.asarray(seed)
    if seed.dtype not in (np.int32, np.int64) or seed.shape != ():
        raise DTypeError(f"random.key: the seed must be an integer scalar, got "
                         f"{seed.dtype}{list(seed.shape)}; pass e.g. key(0)")
    wide = inp.astype(seed, inp.int64)
    high = 0 * wide if seed.dtype == np.int32 else (wide // MOD) % MOD
    return high, wide % MOD


def key(seed: ArrayLike) -> Array:
    """A key from an integer seed: the seed's high and low 32-bit words, as
    ``jax.random.key_data(jax.random.key(seed))`` with 64-bit seeds. A Python
    or NumPy integer seed must fit in 64 bits, signed or unsigned (it is read
    as its 64 bits, so ``key(-1) == key(2**64 - 1)``)."""
    high, low = _seed_words(seed)
    return inp.stack([inp.asarray(high), inp.asarray(low)])


def split(key: ArrayLike, num: Shape = 2) -> Array:
    """``num`` new keys (an int64 array of shape (num, 2)); ``num`` may be a
    shape tuple, giving keys of shape (*num, 2)."""
    y0, y1 = counter_words(key, as_shape(num, "split", "num"), "split")
    return inp.stack([y0, y1], axis=-1)


def fold_in(key: ArrayLike, data: ArrayLike) -> Array:
    """A new key from ``key`` and an integer ``data`` (taken modulo 2**32)."""
    k0, k1 = words(key, "fold_in")
    if isinstance(data, (int, np.integer)):
        low = np.int64(int(data) % MOD)
    else:
        low = inp.astype(inp.asarray(data), inp.int64) % MOD
    y0, y1 = threefry2x32(k0, k1, 0, low)
    return inp.stack([y0, y1])
