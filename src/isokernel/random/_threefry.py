"""Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror and Shaw, "Parallel
random numbers: as easy as 1, 2, 3", SC'11), in the schedule JAX uses
(``jax._src.random.threefry2x32``): five groups of four rounds, the key
injected after each group with the group number added to the second word."""

from __future__ import annotations

from . import _words as w

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def threefry2x32(k0, k1, x0, x1):
    """The two output words for key words ``(k0, k1)`` and counter words
    ``(x0, x1)``; words are int64 arrays in [0, 2**32), key words scalars or
    arrays that broadcast against the counters."""
    ks = (k0, k1, w.xor(w.xor(k0, k1), _PARITY))
    x0 = w.add(x0, ks[0])
    x1 = w.add(x1, ks[1])
    for group in range(5):
        x0, x1 = _four_rounds(x0, x1, _ROTATIONS[group % 2])
        x0 = w.add(x0, ks[(group + 1) % 3])
        x1 = w.add(x1, w.add(ks[(group + 2) % 3], group + 1))
    return x0, x1


def _four_rounds(x0, x1, rotations):
    """``x0 += x1; x1 = rotl(x1, r) ^ x0`` four times."""
    for rotate in rotations:
        x0 = w.add(x0, x1)
        x1 = w.rotl_xor(x1, rotate, x0)
    return x0, x1
