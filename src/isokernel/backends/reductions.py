"""Reductions over the pixel axis: the two orders a strategy may combine
partial results in, and the choice between them.

``reference`` (the default): a reduction whose operand has the pixel axis
at axis 0 and that reduces it (``sum(x, axis=0)``, ``max(x)`` of a pixel
array ...) runs whole, by NumPy, on every CPU strategy: NumPy's pairwise
order over a contiguous axis, sequential across the others. Its bits do
not depend on the worker count (the op is not split), but it runs on one
core and its order is NumPy's, which other devices do not reproduce.

``tree`` (deterministic reductions, ``jit(..., deterministic_reductions=True)``
or ``ISOKERNEL_DETERMINISTIC_REDUCTIONS=1``): the order is fixed by the
length ``P`` of the pixel axis and the block size ``B = REDUCTION_BLOCK``
alone, so any split of the work over workers (or GPU thread blocks) gives
the same bits. Precisely, for a reduction with combine ``⊕`` (+, ×, max,
min, in the operand's dtype, NumPy's semantics for NaN and signed zeros):

1. the axes other than the pixel axis are reduced first, row by row, by
   NumPy (a row's order does not depend on P);
2. the rows are cut into blocks ``[k·B, min(P, (k+1)·B))``, k = 0 … ⌈P/B⌉−1;
3. each block of n rows is reduced by the *halving tree*: while n > 1,
   h = ⌈n/2⌉ and ``r[i] ← r[i] ⊕ r[i+h]`` for i = 0 … n−h−1, then n = h;
   the block's partial is r[0];
4. the ⌈P/B⌉ partials, in block order, are reduced by the same halving tree.

Step 3 is the shared-memory tree of a GPU block reduction with sequential
addressing (a block of B/2 threads, stride h); step 4 is a second pass over
the partials. On the CPU, ``threads`` and ``native`` hand contiguous runs of
blocks to their workers; ``reference`` runs the same function serially.

A *contraction over the pixel axis* (a ``dot_general`` contracting axis 0 of
both operands, of length P, with no batch axes: a weight gradient ``Xᵀ·δ``
of a loss summed over the rows) follows the same blocks in tree mode: each
block's product is the matrix product of its rows (NumPy's ``matmul``, with
BLAS on one thread, whose inner order then depends on the block alone), and
the ⌈P/B⌉ partial products combine by the halving tree. So a loss and its
gradient summed over rows are the same bits whether the rows run in one
process or block by block on a cluster (``isokernel.distributed``).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable

import numpy as np

from ..ir import EVAL, Node, Op

REDUCTION_BLOCK = 4096
ENV = "ISOKERNEL_DETERMINISTIC_REDUCTIONS"
MODES = ("reference", "tree")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
_COMBINE = {Op.REDUCE_SUM: np.add, Op.REDUCE_PROD: np.multiply, Op.REDUCE_MAX: np.maximum,
            Op.REDUCE_MIN: np.minimum}
_WARNED: set[str] = set()

TEXT = {
    "reference": "reference order: pixel-axis reductions run whole by NumPy (pairwise), "
                 "or in the fixed sequential order of a graph compiled as one C program "
                 "(native's 'program' line); the same bits for every worker count, on one "
                 "core",
    "tree": f"deterministic tree: pixel-axis reductions in blocks of {REDUCTION_BLOCK} rows, "
            f"a halving tree within and across blocks (bits independent of the worker "
            f"count; the order GPU block reductions follow)",
}


def resolve(deterministic: bool | None) -> tuple[str, str]:
    """(mode, where it came from): the jit option wins, else the
    environment variable, else ``reference``. A malformed variable is
    warned about (once per value) and ignored."""
    if deterministic is not None:
        if not isinstance(deterministic, bool):
            raise TypeError(f"deterministic_reductions={deterministic!r}: give True or False")
        return ("tree" if deterministic else "reference"), "deterministic_reductions= option"
    raw = os.environ.get(ENV)
    if raw is None:
        return "reference", "default"
    value = raw.strip().lower()
    if value in _TRUE:
        return "tree", f"{ENV}={raw}"
    if value not in _FALSE and raw not in _WARNED:
        _WARNED.add(raw)
        warnings.warn(f"{ENV}={raw!r} is not one of 1/true/yes/on or 0/false/no/off; "
                      f"ignored (reductions keep the reference order)", stacklevel=3)
    return "reference", "default"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"reductions={mode!r} is not one of {MODES}; or pass "
                         f"deterministic_reductions=True to jit")
    return mode


def is_pixel_reduction(node: Node, pixels: int) -> bool:
    """A reduction whose operand carries the pixel axis at axis 0 and that
    reduces it."""
    if node.op not in _COMBINE or pixels < 2:
        return False
    x = node.inputs[0]
    return x.aval.ndim > 0 and x.aval.shape[0] == pixels and 0 in node.attrs["axes"]


def is_pixel_contraction(node: Node, pixels: int) -> bool:
    """A ``dot_general`` contracting axis 0 (the pixel axis) of both operands
    and no batch axes."""
    if node.op is not Op.DOT_GENERAL or pixels < 2:
        return False
    (ca, cb), (ba, bb) = node.attrs["contracting"], node.attrs["batch"]
    a, b = node.inputs
    return (not ba and not bb and 0 in ca and 0 in cb and list(ca).index(0) == list(cb).index(0)
            and a.aval.shape[0] == pixels and b.aval.shape[0] == pixels)


NEEDS_THREADPOOLCTL = ("deterministic reductions: a contraction over the pixel axis runs its "
                       "blocks' products with BLAS on one thread, which needs threadpoolctl: "
                       "pip install threadpoolctl (in isokernel's io extra)")
_CONTROLLER: list = []


def one_blas_thread():
    """A context in which BLAS runs on one thread. OpenBLAS and MKL sum a
    matrix product's inner dimension in an order that depends on their
    thread count; one thread makes a block's product depend on the block
    alone (and Dask's worker processes run BLAS on one thread)."""
    if not _CONTROLLER:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            raise ImportError(NEEDS_THREADPOOLCTL) from None
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def tree_contract(node: Node, a: np.ndarray, b: np.ndarray,
                  block: int = REDUCTION_BLOCK) -> np.ndarray:
    """A pixel-axis contraction in the deterministic order: per block of
    ``block`` rows the product of the block's rows (BLAS on one thread),
    then the halving tree over the partial products."""
    rule = EVAL[Op.DOT_GENERAL]
    rows = a.shape[0]
    with one_blas_thread():
        parts = [rule(a[lo:lo + block], b[lo:lo + block], **node.attrs)
                 for lo in range(0, rows, block)]
    if len(parts) == 1:
        return parts[0]
    return halving_tree(np.add, np.stack(parts)).copy()


def halving_tree(ufunc, rows: np.ndarray, axis: int = 0, scratch=None) -> np.ndarray:
    """Reduce ``axis`` (0 or 1) of ``rows`` by the halving tree. The first
    level writes into ``scratch`` (half the rows; allocated if None), the
    others in place there, so ``rows`` itself is only read."""
    lead = (slice(None),) * axis
    n = rows.shape[axis]
    if n == 1:
        return rows[(*lead, 0)]
    h = (n + 1) // 2
    shape = (*rows.shape[:axis], h, *rows.shape[axis + 1:])
    out = np.empty(shape, rows.dtype) if scratch is None else scratch
    ufunc(rows[(*lead, slice(0, n - h))], rows[(*lead, slice(h, n))],
          out=out[(*lead, slice(0, n - h))])
    if n - h < h:  # the middle row has no partner at this level
        out[(*lead, slice(n - h, h))] = rows[(*lead, slice(n - h, h))]
    n = h
    while n > 1:
        h = (n + 1) // 2
        low = out[(*lead, slice(0, n - h))]
        ufunc(low, out[(*lead, slice(h, n))], out=low)
        n = h
    return out[(*lead, 0)]


class _Scratch(threading.local):
    buffers: dict | None = None  # per thread: (shape, dtype) -> buffer


_SCRATCH = _Scratch()


def _scratch(shape: tuple, dtype) -> np.ndarray:
    """A per-thread buffer, reused while the shape and dtype repeat (fresh
    pages fault; a reduction's runs mostly have one size)."""
    key = (shape, np.dtype(dtype))
    cached = _SCRATCH.buffers
    if cached is None or (key not in cached and len(cached) >= 4):
        cached = _SCRATCH.buffers = {}
    if key not in cached:
        cached[key] = np.empty(shape, dtype)
    return cached[key]


def block_partials(ufunc, x: np.ndarray, first: int, stop: int,
                   block: int = REDUCTION_BLOCK) -> np.ndarray:
    """The partials of blocks ``first … stop-1`` of ``x`` (axis 0), each by
    the halving tree; full blocks are reduced together, as axis 1 of a
    (blocks, block, ...) view."""
    rows = x.shape[0]
    full = min(stop, rows // block)
    parts = []
    if full > first:
        view = x[first * block:full * block].reshape(full - first, block, *x.shape[1:])
        scratch = _scratch((full - first, (block + 1) // 2, *x.shape[1:]), x.dtype)
        parts.append(halving_tree(ufunc, view, 1, scratch).copy())
    for k in range(max(first, full), stop):
        parts.append(halving_tree(ufunc, x[k * block:(k + 1) * block])[None])
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def tree_reduce(op: Op, x: np.ndarray, axes, run_tasks: Callable | None = None,
                block: int = REDUCTION_BLOCK, tasks: int = 1):
    """``op`` over ``axes`` (which include 0) in the deterministic order.
    ``run_tasks(work, count)`` runs ``work(k)`` for k < count, in any order
    on any threads (by default serially); the blocks are cut into ``tasks``
    contiguous runs, which changes who computes a partial, never its bits."""
    ufunc = _COMBINE[op]
    rest = tuple(a for a in axes if a != 0)
    x = np.ascontiguousarray(EVAL[op](x, axes=rest) if rest else x)
    blocks = -(-x.shape[0] // block)
    bounds = _runs(blocks, tasks)
    partials: list = [None] * len(bounds)

    def work(k: int) -> None:
        partials[k] = block_partials(ufunc, x, *bounds[k], block)
    (run_tasks or _serial)(work, len(bounds))
    return halving_tree(ufunc, np.concatenate(partials)).copy()


def _runs(blocks: int, count: int) -> list[tuple[int, int]]:
    """Blocks as at most ``count`` contiguous runs (work units, not order)."""
    count = max(1, min(count, blocks))
    edges = [blocks * k // count for k in range(count + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _serial(work, count: int) -> None:
    for k in range(count):
        work(k)


def kernel(node: Node, fallback: Callable, pixels: int, mode: str,
           run_tasks: Callable | None = None, tasks: int = 1) -> Callable:
    """The function that computes ``node`` whole under ``mode``:
    ``fallback`` (the reference rule) unless it is a pixel-axis reduction
    or contraction in tree mode."""
    if mode == "tree" and is_pixel_contraction(node, pixels):
        return lambda a, b: tree_contract(node, a, b)
    if mode != "tree" or not is_pixel_reduction(node, pixels):
        return fallback
    axes = node.attrs["axes"]
    return lambda x: tree_reduce(node.op, x, axes, run_tasks, tasks=tasks)


def report_line(mode: str, source: str, count: int) -> tuple[str, str]:
    where = f"{count} pixel-axis reduction(s)" if count else "no pixel-axis reduction"
    return ("reductions", f"{TEXT[mode]} [{source}; {where}]")
