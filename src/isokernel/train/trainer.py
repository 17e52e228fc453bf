"""``Trainer``: a training step — value, gradient and optimizer update — as
one compiled executable, with the parameters and the optimizer state kept
between steps as flat lists of arrays.

``step(*batch)`` hands those lists and the batch straight to the compiled
executable of the batch's signature (``Compiled.call_plain`` on the CPU: no
pytree walk, no conversion) and keeps its outputs as the next step's inputs.
The executable is ``isokernel.jit`` of ``(params, opt_state, *batch) ->
(loss, new_params, new_state)`` written with ``value_and_grad`` and the
optimizer's ``update``, so N steps give the bits of the same N steps written
by hand on the same strategy.

A Trainer may be shared between threads: ``step``, ``save``, ``close`` and
the ``params`` / ``opt_state`` snapshots hold one lock per Trainer, so steps
run one at a time (N threads of M steps are N*M sequential steps) and a
snapshot or a checkpoint is always the state between two steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any

import numpy as np

from ..backends.reductions import REDUCTION_BLOCK
from ..ir.pytree import tree_flatten, tree_unflatten
from ..optim import GradientTransformation, apply_updates
from ..pipeline import jit
from ..transforms import value_and_grad
from ..typing import PyTree
from .data_parallel import DataParallel
from .saving import CheckpointError, load, save

NOT_AN_OPTIMIZER = ("Trainer: optimizer must be an isokernel.optim transformation (e.g. "
                    "isokernel.optim.adam(1e-3)), got a {kind}")
PARALLEL_ONLY = ("Trainer: {names} are options of data-parallel training and do nothing in one "
                 "process; give client= (a dask.distributed.Client, 'local' or 'serial') or "
                 "drop them")
STATE_MISMATCH = ("Trainer.load({path}): the saved optimizer state has {saved} arrays where "
                  "this optimizer keeps {expected}; load with the optimizer the file was "
                  "trained with")
NOT_A_RUN = ("Trainer.load({path}): {problem}, not what Trainer.save writes (a dict of params, "
             "opt_state and steps); read a file isokernel.save wrote with isokernel.load, and "
             "start a Trainer from its parameters")


class Trainer:
    """``Trainer(loss_fn, params, optimizer, *, strategy="auto", has_aux=False)``.

    ``loss_fn(params, *batch)`` returns a scalar loss (with ``has_aux``,
    ``(loss, aux)``). ``step(*batch)`` runs one optimizer step and returns the
    loss before it (with ``has_aux``, ``(loss, aux)``); ``evaluate(*batch)``
    returns the same at the current parameters without a step (a validation
    batch: the forward pass alone, compiled once per batch signature). ``params`` and
    ``opt_state`` build the current pytrees on access. Other keyword arguments
    go to ``isokernel.jit`` (``numerics=``, ``deterministic_reductions=``...).

    Data-parallel: with ``client`` (a ``dask.distributed.Client``, ``"local"``
    for a LocalCluster of ``n_workers`` processes, or ``"serial"`` for the
    same blocks in this process), ``loss_fn(params, *block)`` returns the SUM
    of a block's per-example losses and the gradient comes from
    ``isokernel.distributed.value_and_grad`` (``shard_argnums``: the
    arguments cut into row blocks, default every batch argument;
    ``block_rows``, ``reduction``, ``worker_timeout`` as there; ``progress``
    prints a line per step). The parameters and optimizer state stay in this
    process; the steps are the same bits for any number of workers.

    Thread safety: ``step``, ``save``, ``close``, ``params`` and ``opt_state``
    take the Trainer's lock, so steps from several threads run one after
    another and never lose an update.
    """

    def __init__(self, loss_fn: Callable[..., Any], params: PyTree,
                 optimizer: GradientTransformation, *, strategy: str = "auto",
                 has_aux: bool = False, client: Any = None,
                 shard_argnums: int | Sequence[int] | None = None,
                 block_rows: int = REDUCTION_BLOCK, reduction: str = "mean",
                 progress: bool = False, n_workers: int | None = None,
                 worker_timeout: float = 30.0, **jit_options: Any) -> None:
        if not isinstance(optimizer, GradientTransformation):
            raise TypeError(NOT_AN_OPTIMIZER.format(kind=type(optimizer).__name__))
        self.loss_fn, self.optimizer, self.has_aux = loss_fn, optimizer, has_aux
        self._lock = threading.RLock()  # one step, snapshot or save at a time
        self.strategy, self._jit_options = strategy, jit_options
        leaves, self._param_def = tree_flatten(params)
        self._params = [np.array(x) for x in leaves]  # own copies, never the caller's arrays
        state = optimizer.init(tree_unflatten(self._param_def, self._params))
        state_leaves, self._state_def = tree_flatten(state)
        self._state = [np.array(x) for x in state_leaves]
        self._calls: dict = {}  # batch signature -> (call, aux treedef holder)
        self._evaluations: dict = {}  # the same, for the forward pass alone
        self.compiled = None  # the most recently compiled step (its report says what ran)
        self.steps = 0
        self.client = client
        if client is None:
            _check_single_process(shard_argnums, block_rows, reduction, progress, n_workers)
        self._parallel = None if client is None else DataParallel(
            self, client, shard_argnums, block_rows, reduction, progress, n_workers,
            worker_timeout)

    def step_fn(self, params: PyTree, opt_state: PyTree,
                *batch: Any) -> tuple[Any, PyTree, PyTree]:
        """One step as a pure function: ``(loss, new_params, new_state)``
        (with ``has_aux``, ``((loss, aux), new_params, new_state)``). The
        update also gets ``value``, ``grad`` and ``value_fn`` (optax's extra
        arguments), which only transformations that take them (L-BFGS's line
        search) use."""
        value, grads = value_and_grad(self.loss_fn, has_aux=self.has_aux)(params, *batch)
        loss = value[0] if self.has_aux else value
        updates, new_state = self.optimizer.update(
            grads, opt_state, params, value=loss, grad=grads,
            value_fn=lambda p: self._loss_only(p, *batch))
        return value, apply_updates(params, updates), new_state

    def _loss_only(self, params, *batch):
        """The scalar loss, for optimizers that evaluate it (L-BFGS's line search)."""
        value = self.loss_fn(params, *batch)
        return value[0] if self.has_aux else value

    def step(self, *batch: Any) -> Any:
        """One optimizer step on ``batch``; the loss at the current parameters.
        Thread-safe: steps from several threads run one at a time."""
        with self._lock:
            return self._step(batch)

    def _step(self, batch):
        if self._parallel is not None:
            loss, self._params, self._state = self._parallel.step(batch)
            self.steps += 1
            return loss
        key = _signature(batch)
        found = self._calls.get(key)
        if found is None:
            found = self._compile(key, batch)
        call, holder = found
        outs = call([*self._params, *self._state, *_batch_leaves(batch)])
        n_aux = holder["n_aux"]
        first = 1 + n_aux
        self._params = list(outs[first:first + len(self._params)])
        self._state = list(outs[first + len(self._params):])
        self.steps += 1
        if not self.has_aux:
            return outs[0]
        return outs[0], tree_unflatten(holder["aux"], list(outs[1:first]))

    def evaluate(self, *batch: Any) -> Any:
        """The loss at the current parameters on ``batch`` (with ``has_aux``,
        ``(loss, aux)``), with no step and no change to the parameters or
        the optimizer state: ``loss_fn``'s forward pass, compiled once per
        batch signature. A data-parallel Trainer evaluates in this process
        and reduces the summed loss as its steps do (``reduction``)."""
        with self._lock:
            key = _signature(batch)
            found = self._evaluations.get(key)
            if found is None:
                found = self._compile_evaluation(key, batch)
            call, holder = found
            outs = call([*self._params, *_batch_leaves(batch)])
        value = outs[0] if self._parallel is None else self._parallel.reduce(outs[0], batch)
        if not self.has_aux:
            return value
        return value, tree_unflatten(holder["aux"], list(outs[1:]))

    def _compile_evaluation(self, key, batch):
        batch_leaves, batch_def = tree_flatten(batch)
        holder = {"aux": None}
        n = len(self._params)

        def forward(*arrays):
            params = tree_unflatten(self._param_def, arrays[:n])
            value = self.loss_fn(params, *tree_unflatten(batch_def, arrays[n:]))
            if not self.has_aux:
                return (value,)
            loss, aux = value
            leaves, holder["aux"] = tree_flatten(aux)
            return (loss, *leaves)
        strategy = self.strategy if self._parallel is None else self._parallel.strategy
        arrays = [*self._params, *[np.asarray(x) for x in batch_leaves]]
        compiled = jit(forward, strategy=strategy, **self._jit_options).lower(*arrays).compile()
        call = compiled.call_plain if compiled.plain_ok else compiled.call_flat
        self._evaluations[key] = (call, holder)
        return call, holder

    def _compile(self, key, batch):
        """Record and compile the flat step for this batch signature once."""
        batch_leaves, batch_def = tree_flatten(batch)
        holder = {"n_aux": 0, "aux": None}
        def train_step(*arrays):
            return self._flat_step(batch_def, holder, *arrays)
        jitted = jit(train_step, strategy=self.strategy, **self._jit_options)
        arrays = [*self._params, *self._state, *[np.asarray(x) for x in batch_leaves]]
        compiled = jitted.lower(*arrays).compile()
        self.compiled = compiled
        call = compiled.call_plain if compiled.plain_ok else compiled.call_flat
        self._calls[key] = (call, holder)
        return call, holder

    def _flat_step(self, batch_def, holder, *arrays):
        """``step_fn`` over flat arrays, returning a flat tuple."""
        n, m = len(self._params), len(self._params) + len(self._state)
        params = tree_unflatten(self._param_def, arrays[:n])
        state = tree_unflatten(self._state_def, arrays[n:m])
        batch = tree_unflatten(batch_def, arrays[m:])
        value, new_params, new_state = self.step_fn(params, state, *batch)
        aux = []
        if self.has_aux:
            value, aux_tree = value
            aux, holder["aux"] = tree_flatten(aux_tree)
            holder["n_aux"] = len(aux)
        return (value, *aux, *tree_flatten(new_params)[0], *tree_flatten(new_state)[0])

    @property
    def params(self) -> PyTree:
        """The current parameters (copies), in the structure they were given."""
        with self._lock:
            return tree_unflatten(self._param_def, [np.array(x) for x in self._params])

    @property
    def opt_state(self) -> PyTree:
        """The current optimizer state (copies)."""
        with self._lock:
            return tree_unflatten(self._state_def, [np.array(x) for x in self._state])

    def close(self) -> None:
        """Release the batch's blocks on the workers (and a ``"local"`` cluster)."""
        with self._lock:
            if self._parallel is not None:
                self._parallel.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save(self, path: str | PathLike[str]) -> None:
        """The parameters, the optimizer state and the step count in one file
        (``isokernel.save``), all of the same step: taken under the lock, written
        after it (steps from other threads go on meanwhile)."""
        with self._lock:
            tree = {"params": self.params, "opt_state": [np.array(x) for x in self._state],
                    "steps": np.int64(self.steps)}
        save(path, tree)

    @classmethod
    def load(cls, path: str | PathLike[str], loss_fn: Callable[..., Any],
             optimizer: GradientTransformation, *, like: PyTree = None,
             **options: Any) -> Trainer:
        """A Trainer resuming from ``save``'s file: the same parameters and
        optimizer state. ``like``: a parameter tree of the saved structure,
        needed when the parameters hold namedtuples or dataclasses."""
        if like is None:
            tree = load(path)
        else:
            n_state = len(tree_flatten(optimizer.init(like))[0])
            tree = load(path, like={"params": like, "opt_state": [0] * n_state, "steps": 0})
        _check_run(path, tree)
        trainer = cls(loss_fn, tree["params"], optimizer, **options)
        saved = tree["opt_state"]
        if len(saved) != len(trainer._state) or any(
                a.shape != b.shape or a.dtype != b.dtype for a, b in zip(saved, trainer._state)):
            raise CheckpointError(STATE_MISMATCH.format(path=path, saved=len(saved),
                                                        expected=len(trainer._state)))
        trainer._state = [np.array(x) for x in saved]
        trainer.steps = int(tree["steps"])
        return trainer


def _check_run(path, tree) -> None:
    """``tree`` is what ``Trainer.save`` writes: params, a list of state arrays, a
    natural step count."""
    problem = None
    if not isinstance(tree, dict) or set(tree) != {"params", "opt_state", "steps"}:
        what = sorted(map(str, tree)) if isinstance(tree, dict) else type(tree).__name__
        problem = f"the file holds {what}"
    elif not isinstance(tree["opt_state"], list) or not all(
            isinstance(x, np.ndarray) for x in tree["opt_state"]):
        problem = f"its opt_state is a {type(tree['opt_state']).__name__}, not a list of arrays"
    elif not isinstance(tree["steps"], (int, np.integer)) or tree["steps"] < 0:
        problem = f"its steps is {tree['steps']!r}"
    if problem is not None:
        raise CheckpointError(NOT_A_RUN.format(path=path, problem=problem))


def _check_single_process(shard_argnums, block_rows, reduction, progress, n_workers) -> None:
    """Data-parallel options without a client would be ignored: refused."""
    given = [name for name, value, default in (
        ("shard_argnums", shard_argnums, None), ("block_rows", block_rows, REDUCTION_BLOCK),
        ("reduction", reduction, "mean"), ("progress", progress, False),
        ("n_workers", n_workers, None)) if value != default]
    if given:
        raise TypeError(PARALLEL_ONLY.format(names=", ".join(given)))


def _signature(batch) -> tuple:
    """The batch's shapes and dtypes (plain arrays), else its full tree key."""
    key = []
    for x in batch:
        if type(x) is not np.ndarray:
            leaves, td = tree_flatten(batch)
            return ("tree", td, tuple((np.shape(v), np.asarray(v).dtype) for v in leaves))
        key.append((x.shape, x.dtype))
    return tuple(key)


def _batch_leaves(batch) -> list:
    if all(type(x) is np.ndarray for x in batch):
        return list(batch)
    return [np.asarray(x) for x in tree_flatten(batch)[0]]
