"""Unsigned 32-bit words as int64 arrays holding values in [0, 2**32).

isokernel has no unsigned dtype and its ``and``/``or`` ops are logical (bool
operands only), so the bit operations Threefry needs are written with the
integer arithmetic every strategy computes exactly:

- ``a + b (mod 2**32)`` is ``(a + b) % 2**32`` (the sum stays below 2**33);
- bit ``i`` of ``a`` is ``a % 2**(i+1) >= 2**i``, one comparison per bit plane
  along a trailing axis of 32;
- ``rotl(a, r) ^ b`` compares the bit planes of ``a``, read with divisors
  rotated by ``r``, with those of ``b`` (``!=`` on bools is xor) and sums the
  planes that differ, ``sum(where(ne, 2**i, 0))``;
- ``a * b (mod 2**32)`` splits ``a`` into 16-bit halves so that no product
  passes 2**48.

Every intermediate is an int64 in [0, 2**49) or a bool, so NumPy, the
threads tiles and the generated C (which computes int64 ``+ - *`` in
uint64_t and ``//``, ``%`` by Python's rules) give the same bits.
"""

from __future__ import annotations

import numpy as np

from .. import numpy as inp

MOD = 2**32
_POW2 = np.array([2**i for i in range(32)], dtype=np.int64)


def add(a, b):
    """``a + b`` modulo 2**32."""
    return inp.remainder(a + b, MOD)


def planes(a, rotate: int = 0):
    """Bool bit planes (trailing axis of 32) of ``rotl(a, rotate)``: plane
    ``i`` holds bit ``(i - rotate) % 32`` of ``a``."""
    divisors = np.roll(_POW2, rotate)
    return inp.expand_dims(a, -1) % (2 * divisors) >= divisors


def rotate_planes(bits, rotate: int):
    """The planes of ``rotl(a, rotate)`` from the planes of ``a`` (a layout
    op: no arithmetic)."""
    if rotate == 0:
        return bits
    return inp.concatenate([bits[..., 32 - rotate:], bits[..., :32 - rotate]], axis=-1)


def from_planes(bits):
    """The word whose bit planes are ``bits``."""
    return inp.sum(inp.where(bits, _POW2, 0), axis=-1)


def rotl_xor(a, rotate: int, b):
    """``rotl(a, rotate) ^ b`` for words ``a`` and ``b`` of one shape."""
    return from_planes(inp.not_equal(planes(a, rotate), planes(b)))


def xor(a, b):
    """``a ^ b``."""
    return rotl_xor(a, 0, b)


def mul(a, b):
    """``a * b`` modulo 2**32 (no intermediate reaches 2**49)."""
    high = inp.remainder((a // 2**16) * b, 2**16)
    return inp.remainder((a % 2**16) * b + high * 2**16, MOD)
