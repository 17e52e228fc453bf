"""The order of a device reduction, fixed so it is deterministic and, for a
C-contiguous operand, NumPy's own.

NumPy's ``add.reduce`` over a C-contiguous operand, restated (length-1 axes
dropped, neighbouring reduced or kept axes merged):

- when the innermost axis is reduced, the trailing run of reduced axes is one
  inner loop of ``K`` elements summed *pairwise* (``pairwise_sum`` in
  NumPy's ``loops_utils.h.src``): below 8 elements a left fold from 0; up to
  128, eight accumulators over strided lanes, combined as
  ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``, then the remainder in order;
  beyond 128, the halves ``n2 = n/2 - (n/2 mod 8)`` and ``n - n2`` summed
  the same way and added;
- every other reduced axis is an outer loop: the output starts at the
  identity and adds each inner result in C order;
- when the innermost axis is kept, the inner loop is plain addition into
  the outputs, so every output is a left fold from 0 in C order.

The device follows exactly that: the operand is laid out as
``(M outputs, R outer chunks, K inner elements)``; the ``K`` elements of
every chunk are summed by the pairwise tree (leaves in parallel, one kernel
launch per tree level), then each output folds its ``R`` chunk results in
order. ``max`` and ``min`` use the same tree beyond 7 elements (their value
does not depend on the order, NaN payload and the sign of a zero maximum
aside) and a left fold in C order up to 7. ``prod`` is a left fold from 1
over every reduced element in C order, as NumPy's ``multiply.reduce`` is.
The C emitter unrolls small reductions in this same order (``emit.py``
calls ``layout_of``), so a reduction the megakernel computes inside a region
gives the eager kernel's bits.

An operand that is a view (transposed, sliced with a step, broadcast) is
reduced in its logical C order, i.e. as a contiguous copy of it would be.
NumPy walks some views in memory order instead, with buffering, so for
those its last bits may differ (within the ulp contract); single-axis
reductions of up to 7 elements agree in every layout. ``layout_of`` computes the
layout and ``pairwise_tree`` the tree; ``emulate`` runs both with NumPy,
which is how the CPU tests pin the order against ``numpy.add.reduce`` bit
for bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..ir import Op

PW_BLOCK = 128
"""NumPy's ``PW_BLOCKSIZE``: the longest pairwise leaf."""
SEQUENTIAL_UP_TO = 7
"""Max and min over at most this many elements are a left fold in C order."""
PAIRWISE = frozenset({Op.REDUCE_SUM, Op.REDUCE_MAX, Op.REDUCE_MIN})


@dataclass(frozen=True)
class Layout:
    """How to view the operand: transpose by ``perm``, then reshape to
    ``(outputs, chunks, length)`` (C-contiguous)."""

    perm: tuple[int, ...]
    outputs: int  # M: the kept elements
    chunks: int  # R: outer reduced elements
    length: int  # K: the trailing run of reduced elements
    sequential: bool  # a left fold over chunks * length elements per output

    @property
    def reduced(self) -> int:
        return self.chunks * self.length


def layout_of(shape: tuple[int, ...], axes, op: Op) -> Layout:
    """The layout of a reduction of ``op`` over ``axes`` of a C-contiguous
    operand of ``shape``."""
    axes = {a % len(shape) for a in axes} if shape else set()
    kept = [a for a in range(len(shape)) if a not in axes]
    reduced = sorted(axes)
    perm = (*kept, *reduced)
    outputs = math.prod(shape[a] for a in kept)
    total = math.prod(shape[a] for a in reduced)
    live = [a for a in range(len(shape)) if shape[a] != 1]
    trailing = []
    for a in reversed(live):
        if a not in axes:
            break
        trailing.append(a)
    length = math.prod(shape[a] for a in trailing)
    small_extreme = op is not Op.REDUCE_SUM and total <= SEQUENTIAL_UP_TO
    if op not in PAIRWISE or small_extreme or not trailing or total == 0:
        return Layout(perm, outputs, 1, total, True)
    # the trailing run stays last in ``perm``: reduced axes keep their order
    return Layout(perm, outputs, total // length, length, False)


@dataclass(frozen=True)
class Tree:
    """The pairwise tree of a length: nodes numbered breadth-first from the
    root (node 0); leaves have at most ``PW_BLOCK`` elements."""

    nodes: int
    leaf_offset: np.ndarray  # int64, one per leaf, in node order
    leaf_length: np.ndarray
    leaf_node: np.ndarray
    levels: tuple  # per tree level, root first: (parent, left, right) node arrays

    @property
    def leaves(self) -> int:
        return len(self.leaf_node)


@functools.lru_cache(maxsize=64)
def pairwise_tree(length: int) -> Tree:
    """Split ``[0, length)`` as NumPy's ``pairwise_sum`` recursion does, one
    tree level at a time (vectorized: a 10⁸-element reduction has about
    10⁶ leaves)."""
    offset, size = np.zeros(1, np.int64), np.array([length], np.int64)
    ids = np.zeros(1, np.int64)
    count = 1
    leaf_parts, levels = [], []
    while len(ids):
        split = size > PW_BLOCK
        leaf_parts.append((offset[~split], size[~split], ids[~split]))
        parent, off, n = ids[split], offset[split], size[split]
        half = n // 2
        half -= half % 8
        left = count + 2 * np.arange(len(parent), dtype=np.int64)
        right = left + 1
        count += 2 * len(parent)
        if len(parent):
            levels.append((parent, left, right))
        offset = np.stack([off, off + half], axis=1).ravel()
        size = np.stack([half, n - half], axis=1).ravel()
        ids = np.stack([left, right], axis=1).ravel()
    leaf_offset, leaf_length, leaf_node = (np.concatenate(p) for p in zip(*leaf_parts))
    return Tree(count, leaf_offset, leaf_length, leaf_node, tuple(levels))


# --- the same order on the host: the specification of the kernels -------------------------

def _combine(op: Op):
    if op is Op.REDUCE_SUM:
        return np.add
    if op is Op.REDUCE_PROD:
        return np.multiply
    pick = np.greater if op is Op.REDUCE_MAX else np.less

    def extreme(a, b):  # C_EXPR's max/min: a when a wins or a is NaN, else b
        return np.where(pick(a, b) | (a != a), a, b)
    return extreme


def _identity(op: Op, dtype):
    return {Op.REDUCE_SUM: 0, Op.REDUCE_PROD: 1}.get(op)


def _fold(op: Op, x: np.ndarray) -> np.ndarray:
    """Left fold over the last axis of ``x`` (identity start, or first)."""
    combine, start = _combine(op), _identity(op, x.dtype)
    if start is None:
        acc, first = x[..., 0], 1
    else:
        acc, first = np.full(x.shape[:-1], start, x.dtype), 0
    for k in range(first, x.shape[-1]):
        acc = combine(acc, x[..., k])
    return acc


def _leaves(op: Op, x: np.ndarray, tree: Tree) -> np.ndarray:
    """The value of every tree node that is a leaf, per row: ``(rows, nodes)``."""
    combine = _combine(op)
    vals = np.zeros((x.shape[0], tree.nodes), x.dtype)
    for n in np.unique(tree.leaf_length):
        pick = tree.leaf_length == n
        index = tree.leaf_offset[pick][:, None] + np.arange(n)
        a = x[:, index]  # (rows, leaves of length n, n)
        if n < 8:
            res = _fold(op, a)
        else:
            tail = n - n % 8
            r = a[..., :8]
            for j in range(8, tail, 8):
                r = combine(r, a[..., j:j + 8])
            res = combine(combine(combine(r[..., 0], r[..., 1]), combine(r[..., 2], r[..., 3])),
                          combine(combine(r[..., 4], r[..., 5]), combine(r[..., 6], r[..., 7])))
            for j in range(tail, n):
                res = combine(res, a[..., j])
        vals[:, tree.leaf_node[pick]] = res
    return vals


def emulate(x: np.ndarray, axes, op: Op) -> np.ndarray:
    """The device reduction of ``x`` over ``axes``, computed with NumPy in
    exactly the kernels' order (flattened outputs)."""
    x = np.asarray(x)
    layout = layout_of(x.shape, axes, op)
    y = np.ascontiguousarray(np.transpose(x, layout.perm)).reshape(
        layout.outputs, layout.chunks, layout.length)
    with np.errstate(all="ignore"):
        if layout.sequential:
            if layout.reduced == 0:
                return np.full(layout.outputs, _identity(op, x.dtype), x.dtype)
            return _fold(op, y.reshape(layout.outputs, -1))
        tree = pairwise_tree(layout.length)
        vals = _leaves(op, y.reshape(-1, layout.length), tree)
        combine = _combine(op)
        for parent, left, right in reversed(tree.levels):
            vals[:, parent] = combine(vals[:, left], vals[:, right])
        return _fold(op, vals[:, 0].reshape(layout.outputs, layout.chunks))
