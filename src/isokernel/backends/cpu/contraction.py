"""Contractions over the pixel axis as a path of their own.

A ``dot_general`` is not row-local for the tiles or the C emitter (BLAS may
block a slice of a matrix differently from the whole), so ``threads`` and
``native`` used to run every one whole, on one core. One kind is safe to
slice: a *batched* contraction whose batch dimension 0 of both operands is
the pixel axis (a small matrix or vector per pixel: ``(P, n, k) @ (P, k,
m)``). NumPy's ``matmul`` computes each batch entry by itself, with the same
inner routine for every entry (the routine depends on the entry's shape and
strides, which a slice keeps), so the rows of a slice are the rows of the
whole: the contraction runs over pixel slices on the pool, each writing its
rows of one preallocated result, bit-identical to the reference. Every
other contraction still runs whole.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir import Node, Op
from .pool import split

MIN_SLICE_ROWS = 1 << 10
"""Fewest pixels per slice: below, a slice's call overhead outweighs its work."""


def is_sliceable(node: Node, pixels: int) -> bool:
    """A dot_general batched over the pixel axis (batch dim 0 of both
    operands, the result's axis 0), with pixels enough for two slices."""
    if node.op is not Op.DOT_GENERAL or pixels < 2 * MIN_SLICE_ROWS:
        return False
    a, b = node.inputs
    batch_a, batch_b = node.attrs["batch"]
    return (batch_a[:1] == (0,) and batch_b[:1] == (0,) and a.shape[:1] == (pixels,)
            and b.shape[:1] == (pixels,) and node.shape[:1] == (pixels,))


def sliced(node: Node, rule: Callable, pixels: int, run_tasks: Callable,
           tasks: int) -> Callable:
    """The contraction ``rule`` (the reference's) over pixel slices on the
    pool, into one result array."""
    slices = split(pixels, max(1, min(tasks, pixels // MIN_SLICE_ROWS)))

    def run(a, b):
        out = np.empty(node.shape, node.dtype)

        def work(k: int) -> None:
            lo, hi = slices[k]
            out[lo:hi] = rule(a[lo:hi], b[lo:hi])
        run_tasks(work, len(slices))
        return out
    return run
