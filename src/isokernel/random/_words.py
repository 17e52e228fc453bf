"""Unsigned 32-bit words as int64 arrays holding values in [0, 2**32).

isokernel has no unsigned dtype; an int64 holds every word and every
intermediate below exactly, and its bit operations are NumPy's on int64:

- ``a + b (mod 2**32)`` is ``(a + b) & 0xFFFFFFFF`` (the sum stays below 2**33);
- ``a ^ b`` is the int64 xor (of two words: a word);
- ``rotl(a, r)`` is ``((a << r) | (a >> (32 - r))) & 0xFFFFFFFF`` for
  ``0 < r < 32`` (``a << r`` stays below 2**63);
- ``a * b (mod 2**32)`` splits ``a`` into 16-bit halves so that no product
  passes 2**48.

So NumPy, the threads tiles and the generated C (which computes int64
``+ - *`` and the shifts in uint64_t, and ``//``, ``%`` by Python's rules)
give the same bits.
"""

from __future__ import annotations

from .. import numpy as inp

MOD = 2**32
MASK = MOD - 1


def add(a, b):
    """``a + b`` modulo 2**32."""
    return inp.bitwise_and(a + b, MASK)


def xor(a, b):
    """``a ^ b``."""
    return inp.bitwise_xor(a, b)


def rotl(a, rotate: int):
    """``a`` rotated left by ``rotate`` bits (a static count)."""
    rotate %= 32
    if rotate == 0:
        return a
    wide = inp.bitwise_or(inp.left_shift(a, rotate), inp.right_shift(a, 32 - rotate))
    return inp.bitwise_and(wide, MASK)


def rotl_xor(a, rotate: int, b):
    """``rotl(a, rotate) ^ b`` for words ``a`` and ``b`` of one shape."""
    return xor(rotl(a, rotate), b)


def mul(a, b):
    """``a * b`` modulo 2**32 (no intermediate reaches 2**49)."""
    high = inp.remainder((a // 2**16) * b, 2**16)
    return inp.remainder((a % 2**16) * b + high * 2**16, MOD)
