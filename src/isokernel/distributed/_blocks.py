"""Fixed row blocks, the per-block gradient and the fixed combine tree.

Everything here runs the same way in the driver process
(``reference_value_and_grad``) and on a Dask worker, so the two give the
same bits: the blocks depend only on the batch size and ``block_rows``, each
block runs the same jitted function, and the partial results combine in a
tree over block index alone.

It is also the order of one process: with ``block_rows`` equal to
``backends.reductions.REDUCTION_BLOCK`` (the default) the blocks are the
deterministic reductions' blocks and ``pairwise`` is their halving tree, and
for ``reduction="mean"`` each block differentiates its sum divided by the
batch's row count (as ``mean``'s derivative does), so
``value_and_grad(fun)(p, *batch)`` is the bits of ``jit(value_and_grad(
lambda p, *b: fun(p, *b) / rows), deterministic_reductions=True)`` on the
same strategy, for a ``fun`` that sums per-row losses.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from ..backends.reductions import REDUCTION_BLOCK, one_blas_thread
from ..ir.pytree import tree_flatten, tree_unflatten
from ..pipeline import jit
from ..transforms import value_and_grad

REDUCTIONS = ("mean", "sum")
BAD_REDUCTION = ("distributed.value_and_grad: reduction={got!r}; use 'mean' (the sum of the "
                 "per-example losses divided by the row count) or 'sum'")
BAD_BLOCK_ROWS = ("distributed.value_and_grad: block_rows={got!r}; give a whole number of rows "
                  "of at least 1 (e.g. 1024)")
BAD_ROWS = ("distributed.value_and_grad: the sharded arguments {argnums} have {rows} rows along "
            "axis 0; they must all have the same number of rows (at least 1)")
SHARDED_ARGNUM = ("distributed.value_and_grad: argnums {argnums} and shard_argnums {shard} "
                  "overlap; differentiate with respect to the parameters, not the batch")
NONDETERMINISTIC = ("distributed.value_and_grad: deterministic_reductions=False; blocks always "
                    "run with deterministic reductions (the same bits on every worker), drop "
                    "the option")
DEFAULT_BLOCK_ROWS = REDUCTION_BLOCK


@dataclass(frozen=True)
class Spec:
    """What a worker needs to compute a block: the user's loss, which
    arguments to differentiate, and the ``isokernel.jit`` options."""
    fun: object
    argnums: object
    strategy: str
    jit_options: tuple
    reduction: str = "sum"


def check_options(reduction, block_rows, argnums, shard_argnums) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(BAD_REDUCTION.format(got=reduction))
    if isinstance(block_rows, bool) or not isinstance(block_rows, Integral) or block_rows < 1:
        raise ValueError(BAD_BLOCK_ROWS.format(got=block_rows))
    nums = set(argnums) if isinstance(argnums, tuple) else {argnums}
    if nums & set(shard_argnums):
        raise ValueError(SHARDED_ARGNUM.format(argnums=argnums, shard=shard_argnums))


def check_jit_options(jit_options: dict) -> None:
    if jit_options.get("deterministic_reductions", True) is not True:
        raise ValueError(NONDETERMINISTIC)


def row_count(args: tuple, shard_argnums: tuple) -> int:
    rows = {np.shape(args[i])[0] if np.ndim(args[i]) else 0 for i in shard_argnums}
    if len(rows) != 1 or 0 in rows:
        raise ValueError(BAD_ROWS.format(argnums=shard_argnums, rows=sorted(rows)))
    return rows.pop()


def block_bounds(rows: int, block_rows: int) -> list[tuple[int, int]]:
    """``[k·B, min(N, (k+1)·B))`` for k = 0 … ⌈N/B⌉ − 1: fixed by the data
    size and the block size, never by the worker count."""
    return [(lo, min(rows, lo + block_rows)) for lo in range(0, rows, block_rows)]


def batch_key(args: tuple, shard_argnums: tuple) -> tuple:
    """Shape, dtype and a 128-bit BLAKE2 digest of every sharded argument's
    bytes: the same key means the blocks already on the workers hold this
    batch (a copy with the same values included; an array changed in place
    is a new batch). One pass over the batch per call."""
    return tuple(_fingerprint(np.ascontiguousarray(args[i])) for i in shard_argnums)


def _fingerprint(array: np.ndarray) -> tuple:
    digest = hashlib.blake2b(array.reshape(-1).view(np.uint8), digest_size=16).hexdigest()
    return array.shape, array.dtype.str, digest


def split_blocks(args: tuple, shard_argnums: tuple, block_rows: int) -> list[tuple]:
    """Per block, the contiguous rows of each sharded argument (the driver's
    copy, from which lost blocks are sent again)."""
    rows = row_count(args, shard_argnums)
    return [tuple(np.ascontiguousarray(np.asarray(args[i])[lo:hi]) for i in shard_argnums)
            for lo, hi in block_bounds(rows, block_rows)]


def build(spec: Spec):
    """The jitted value and gradient of the block loss, with deterministic
    reductions (the same bits for any number of threads inside a worker).
    For ``mean`` the function takes the batch's row count last (``with_rows``)
    and returns the block's sum with the gradient of that sum over the row
    count: the cotangent ``1/rows`` each row gets from ``mean``."""
    options = {**dict(spec.jit_options), "deterministic_reductions": True}
    if spec.reduction == "sum":
        return jit(value_and_grad(spec.fun, argnums=spec.argnums), strategy=spec.strategy,
                   **options)
    fun = spec.fun

    def scaled(*args):
        total = fun(*args[:-1])
        return total / args[-1], total

    differentiated = value_and_grad(scaled, argnums=spec.argnums, has_aux=True)

    def block(*args):
        (_, total), grads = differentiated(*args)
        return total, grads
    block.__name__ = getattr(fun, "__name__", "block")
    return jit(block, strategy=spec.strategy, **options)


def with_rows(args: tuple, rows: int, reduction: str) -> tuple:
    """The arguments a block function of ``build`` takes: for ``mean`` the
    batch's row count follows them (a Python float, weak: one compilation
    for every batch size)."""
    return (*args, float(rows)) if reduction == "mean" else tuple(args)


def run_block(compiled, shard_argnums: tuple, args: tuple, block: tuple):
    """``(loss, gradient leaves)`` of one block, as NumPy arrays, with BLAS on
    one thread."""
    full = list(args)
    for i, part in zip(shard_argnums, block):
        full[i] = part
    with one_blas_thread():
        loss, grads = compiled(*full)
    leaves, _ = tree_flatten(grads)
    return np.asarray(loss), [np.asarray(x) for x in leaves]


def pairwise(values: list):
    """The fixed combine tree over block index: the halving tree of the
    deterministic reductions (``backends.reductions``): while n > 1,
    h = ⌈n/2⌉ and ``v[i] ← v[i] + v[i+h]`` for i < n − h (the middle one
    carried up when n is odd)."""
    level = list(values)
    while len(level) > 1:
        n, h = len(level), (len(level) + 1) // 2
        level = [level[i] + level[i + h] for i in range(n - h)] + level[n - h:h]
    return level[0]


def combine(partials: list, rows: int, reduction: str, grad_tree):
    """Combine the per-block ``(loss, leaves)`` in the fixed tree; for
    ``mean`` the loss is then divided by the row count (the blocks'
    gradients already carry it: ``build``); the gradient gets the
    parameters' structure."""
    loss = pairwise([p[0] for p in partials])
    leaves = [pairwise([p[1][j] for p in partials]) for j in range(len(partials[0][1]))]
    if reduction == "mean":
        loss = np.divide(loss, np.asarray(rows, loss.dtype))
    return np.asarray(loss), tree_unflatten(grad_tree, [np.asarray(x) for x in leaves])


def grad_structure(args: tuple, argnums):
    """The pytree structure of the gradient: of ``args[argnums]``, or a tuple of them."""
    target = tuple(args[i] for i in argnums) if isinstance(argnums, tuple) else args[argnums]
    return tree_flatten(target)[1]
