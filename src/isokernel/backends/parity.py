"""Comparing a strategy's results with the reference: bits and ulps."""

from __future__ import annotations

import numpy as np

_VIEW = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def bit_identical(a, b) -> bool:
    """Same shape, dtype and bytes (NaN payloads and signed zeros included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def bit_identical_but_nan(a, b) -> bool:
    """Bit-identical except inside NaNs: NaN where the other has NaN, any
    payload or sign. A GPU makes its own NaNs (NVIDIA's canonical NaN is
    0x7fffffff, x86's default NaN 0xffc00000), so this is bit identity
    across devices; every other value, signed zeros included, must match."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype not in _VIEW:
        return a.tobytes() == b.tobytes()
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return bool(np.array_equal(nan_a, nan_b)) and a[~nan_a].tobytes() == b[~nan_b].tobytes()


def max_ulp(a, b) -> float:
    """The largest distance in units in the last place between matching
    elements (0 for equal values, NaN = NaN; inf when exactly one is NaN).
    Non-float arrays give 0 when equal and inf otherwise."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"cannot compare {a.dtype}{list(a.shape)} with {b.dtype}{list(b.shape)}")
    if a.size == 0:
        return 0.0
    if a.dtype not in _VIEW:
        return 0.0 if np.array_equal(a, b) else float("inf")
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a != nan_b):
        return float("inf")
    oa, ob = _ordered(a[~nan_a]), _ordered(b[~nan_b])
    if not oa.size:
        return 0.0
    # integer differences are exact where the signs agree; across zero the
    # distance is |a| + |b| (taken in float: only its size matters there)
    same = (oa < 0) == (ob < 0)
    near = np.abs(np.where(same, oa - ob, 0)).astype(np.float64)
    far = np.abs(oa).astype(np.float64) + np.abs(ob).astype(np.float64)
    return float(np.max(np.where(same, near, far)))


def _ordered(x: np.ndarray) -> np.ndarray:
    """Integers (int64, exact) in the order of the floats, adjacent floats
    one apart."""
    i = x.view(_VIEW[x.dtype]).astype(np.int64)
    mask = np.int64(np.iinfo(_VIEW[x.dtype]).max)
    return np.where(i < 0, -(i & mask), i)
