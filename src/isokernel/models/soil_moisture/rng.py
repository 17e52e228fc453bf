"""A stateless counter-based random number generator in integer ops.

``uniform(index, stream, seed)`` is a pure function of its arguments: every
strategy, device and chunking regenerates the same numbers from the pixel
index alone, so a synthetic scene never has to be stored or shipped.

Construction: a 6-round Feistel network over Z_p, p = 2³¹ − 1 (the Mersenne
prime), on the pair (L, R) = (index mod p, (stream + 1024·⌊index/p⌋) mod p),
with the cubic round function F(x) = (x + k_r)³ mod p (the MiMC round,
Albrecht et al., ASIACRYPT 2016) and round keys k_r = (seed + r·0x9E3779B9)
mod p::

    L, R ← R, (L + F(R)) mod p

Every intermediate is a non-negative int64 below 2⁶², so the arithmetic is
exact in NumPy and in C (no overflow, no undefined behaviour) and needs only
the frontend's int64 add, multiply and remainder. The output R is mapped to
(R + 0.5)/p, a float64 in (0, 1) (the division is correctly rounded
everywhere). Statistics are checked in the tests (moments, lag and
cross-stream correlation, χ² in one and two dimensions).

Not a cryptographic generator; it is a reproducible noise source.
"""

from __future__ import annotations

from ... import numpy as inp

PRIME = 2**31 - 1
ROUNDS = 6
_GOLDEN = 0x9E3779B9


def round_keys(seed: int) -> tuple[int, ...]:
    """The per-round keys of ``seed`` (0 ≤ seed < 2³¹ − 1)."""
    if not 0 <= seed < PRIME:
        raise ValueError(f"seed {seed} is out of range; use 0 <= seed < {PRIME}")
    return tuple((seed + r * _GOLDEN) % PRIME for r in range(1, ROUNDS + 1))


def hash_index(index, stream: int, seed: int):
    """The 31-bit hash (int64 in [0, p)) of (``seed``, ``stream``, ``index``);
    ``index`` an int64 array of non-negative counters."""
    left = index % PRIME
    right = (index // PRIME * 1024 + stream) % PRIME
    for key in round_keys(seed):
        x = (right + key) % PRIME
        cube = (x * x % PRIME) * x % PRIME
        left, right = right, (left + cube) % PRIME
    return right


def uniform(index, stream: int, seed: int):
    """Uniform float64 in (0, 1), one per counter in ``index``."""
    return (inp.astype(hash_index(index, stream, seed), inp.float64) + 0.5) / PRIME


def normal_pair(index, stream: int, seed: int):
    """Two independent standard normal float64 arrays (Box–Muller, 1958)
    from the uniforms of streams ``stream`` and ``stream + 1``."""
    radius = inp.sqrt(-2.0 * inp.log(uniform(index, stream, seed)))
    angle = (2.0 * inp.pi) * uniform(index, stream + 1, seed)
    return radius * inp.cos(angle), radius * inp.sin(angle)
