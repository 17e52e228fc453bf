"""What runs on a Dask worker: one block's value and gradient.

The loss arrives pickled once per call (a few hundred bytes) and is compiled
once per worker process: the compiled function is kept under the call
object's token, so later calls only look it up.
"""

from __future__ import annotations

import pickle

from . import _blocks

_COMPILED: dict = {}  # token -> jitted value_and_grad of the block loss, per worker process


def block_task(token: str, payload: bytes, shard_argnums: tuple, args: tuple, block: tuple):
    """``(loss, gradient leaves)`` of one block, computed on this worker."""
    compiled = _COMPILED.get(token)
    if compiled is None:
        compiled = _COMPILED[token] = _blocks.build(pickle.loads(payload))
    return _blocks.run_block(compiled, shard_argnums, args, block)


def hold(value):
    """The call's parameters (and unsharded arguments), kept on a worker for
    the block tasks to fetch; recomputed from its task if that worker is lost."""
    return value
