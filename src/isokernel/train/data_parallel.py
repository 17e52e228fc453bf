"""The data-parallel step of ``Trainer(..., client=...)``.

The loss and gradient come from ``isokernel.distributed``: fixed row blocks
of the batch on the workers of a Dask cluster, combined in a fixed tree over
block index, so they are the same bits for any number of workers
(``client="serial"`` runs the same blocks in this process). The optimizer
update runs here, compiled once, on the parameters and optimizer state the
driver keeps; a step is therefore the same bits on 1, 2 or 3 workers, after
a worker is lost, and after ``save``/``load``.
"""

from __future__ import annotations

import sys

import numpy as np

from ..backends.devices import Device
from ..backends.strategies import choose, get_strategy
from ..distributed import DistributedValueAndGrad, reference_value_and_grad, value_and_grad
from ..ir.pytree import tree_flatten, tree_unflatten
from ..optim import apply_updates
from ..pipeline import jit

SERIAL = "serial"  # the client that runs the blocks in this process
NO_AUX = ("Trainer(client=...): has_aux=True is not supported data-parallel (each block's aux "
          "would need its own combine rule); return the loss alone, or train without client=")
NO_LOSS_CALLS = ("Trainer(client=...): the optimizer evaluates the loss at trial parameters "
                 "inside its update (L-BFGS's line search), which a data-parallel step cannot "
                 "do; use a first-order optimizer (adam, sgd, ...) or train without client=")
REDUCTION = ("Trainer(client=...): loss_fn(params, *block) returns the SUM of the block's "
             "per-example losses; reduction={got!r} must be 'mean' (divide by the rows) or "
             "'sum'")


class DataParallel:
    """Gradients from the blocks, the update compiled on the driver.

    ``shard_argnums`` index ``loss_fn``'s arguments (the parameters are
    argument 0); ``None`` shards every batch argument along axis 0."""

    def __init__(self, trainer, client, shard_argnums, block_rows, reduction, progress,
                 n_workers, worker_timeout):
        if trainer.has_aux:
            raise ValueError(NO_AUX)
        if reduction not in ("mean", "sum"):
            raise ValueError(REDUCTION.format(got=reduction))
        self.trainer, self.client, self.progress = trainer, client, progress
        # one concrete strategy for the driver and every worker ("auto" may differ per host)
        self.strategy = choose(trainer.strategy, Device("cpu")).name
        self._options = dict(block_rows=block_rows, reduction=reduction,
                             n_workers=n_workers, worker_timeout=worker_timeout)
        self._shard_argnums = None if shard_argnums is None else tuple(shard_argnums)
        self.value_and_grad = None  # built at the first step, when the batch's arity is known
        self._update = None

    def reduce(self, total, batch: tuple):
        """A loss summed over ``batch`` (``loss_fn`` over every row at once),
        reduced as the steps reduce it: ``mean`` divides by the rows of the
        first sharded argument."""
        if self._options["reduction"] == "sum":
            return total
        first = (self._shard_argnums or (1,))[0]
        return np.asarray(total) / np.shape(batch[first - 1])[0]

    def step(self, batch: tuple):
        """One step: ``(loss, new parameter leaves, new state leaves)``."""
        trainer = self.trainer
        vg = self.value_and_grad or self._build(len(batch))
        params = tree_unflatten(trainer._param_def, trainer._params)
        sent = self._sent()
        loss, grads = vg(params, *batch)
        update = self._update or self._compile(grads, loss)
        outs = update([*trainer._params, *trainer._state, *tree_flatten(grads)[0], loss])
        n = len(trainer._params)
        if self.progress:
            self._announce(trainer.steps + 1, loss, batch, self._sent() - sent)
        return loss, list(outs[:n]), list(outs[n:])

    def _build(self, arity: int):
        if self._shard_argnums is None:
            self._shard_argnums = tuple(range(1, 1 + arity))
        options = dict(self._options, shard_argnums=self._shard_argnums, strategy=self.strategy,
                       **self.trainer._jit_options)
        if self.client == SERIAL:
            for key in ("n_workers", "worker_timeout"):
                del options[key]
            self.value_and_grad = reference_value_and_grad(self.trainer.loss_fn, **options)
        else:
            self.value_and_grad = value_and_grad(self.trainer.loss_fn, client=self.client,
                                                 **options)
        return self.value_and_grad

    def _compile(self, grads, loss):
        """``(params, state, grads, loss) -> (new params, new state)``, flat."""
        trainer = self.trainer
        n, m = len(trainer._params), len(trainer._state)
        grad_def = tree_flatten(grads)[1]

        def update(*arrays):
            params = tree_unflatten(trainer._param_def, arrays[:n])
            state = tree_unflatten(trainer._state_def, arrays[n:n + m])
            g = tree_unflatten(grad_def, arrays[n + m:-1])
            updates, new_state = trainer.optimizer.update(
                g, state, params, value=arrays[-1], grad=g, value_fn=_no_loss_calls)
            return (*tree_flatten(apply_updates(params, updates))[0],
                    *tree_flatten(new_state)[0])

        # on the CPU by the reference rules: the parameter-sized update is then the
        # bits of a single-process Trainer(..., deterministic_reductions=True) step,
        # whose compiled strategies run every op without the batch axis that way
        cpu = self.strategy == "auto" or get_strategy(self.strategy).device == "cpu"
        jitted = jit(update, strategy="reference" if cpu else self.strategy,
                     **trainer._jit_options)
        arrays = [*trainer._params, *trainer._state, *tree_flatten(grads)[0], loss]
        compiled = jitted.lower(*arrays).compile()
        trainer.compiled = compiled
        self._update = compiled.call_plain if compiled.plain_ok else compiled.call_flat
        return self._update

    def _sent(self) -> int:
        """Blocks scattered to the workers so far (none in this process)."""
        vg = self.value_and_grad
        return vg.blocks_sent if isinstance(vg, DistributedValueAndGrad) else 0

    def _announce(self, step: int, loss, batch: tuple, sent: int) -> None:
        """One line per step: the loss, the blocks, the workers that computed them."""
        rows = np.shape(batch[self._shard_argnums[0] - 1])[0]
        blocks = -(-rows // self._options["block_rows"])
        vg = self.value_and_grad
        where = "in this process"
        if isinstance(vg, DistributedValueAndGrad):
            where = (f"on {len(vg.last_workers)} workers [{', '.join(vg.last_workers)}], "
                     f"{sent} blocks sent")
        print(f"Trainer step {step}: loss {float(np.asarray(loss)):.6g}; {blocks} blocks of "
              f"{rows} rows {where}", file=sys.stderr)

    def close(self) -> None:
        if self.value_and_grad is not None and self.client != SERIAL:
            self.value_and_grad.close()


def _no_loss_calls(*args, **kwargs):
    raise ValueError(NO_LOSS_CALLS)
