"""``value_and_grad`` over a Dask cluster, and its single-process reference.

The driver cuts the sharded batch arguments into fixed row blocks, scatters
them once, and per call broadcasts only the parameters (with any unsharded
arguments); each worker returns one block's ``(loss, gradient)``; the driver
combines them in the fixed tree of ``_blocks.pairwise``. A block whose
worker was lost is sent again from the driver's copy and recomputed.
"""

from __future__ import annotations

import atexit
import sys
import time
import uuid
from concurrent.futures import CancelledError

from . import _blocks, _cluster, _worker

POLL_SECONDS = 1.0  # how often a waiting call looks at the cluster's workers
MAX_RESENDS = 20  # sending one block again more often than this is a fault, not a loss
TASK_FAILED = ("distributed.value_and_grad: block {index} (rows {lo}:{hi}) failed on a worker: "
               "{err!r}; the same error is raised by reference_value_and_grad on this batch, "
               "which runs the blocks in this process and is easier to debug")
TOO_MANY_LOSSES = ("distributed.value_and_grad: block {index} was lost with its worker {n} "
                   "times in one call; the workers keep dying (memory limit? a crash in the "
                   "loss?): check the workers' logs")
SCATTER_FAILED = ("distributed.value_and_grad: sending {n} blocks to the workers failed "
                  "{attempts} times in a row (workers lost while receiving them); check the "
                  "workers' logs and memory limits")
CLOSED = ("distributed.value_and_grad: this function was closed (its client is shut down); "
          "build a new one with isokernel.distributed.value_and_grad(...)")


def reference_value_and_grad(fun, *, shard_argnums=(1,), argnums=0, reduction="mean",
                             block_rows=_blocks.DEFAULT_BLOCK_ROWS, strategy="reference",
                             **jit_options):
    """The single-process result the distributed one reproduces bit for bit:
    the same blocks, the same jitted block gradient, the same combine tree."""
    shard_argnums = tuple(shard_argnums)
    _blocks.check_options(reduction, block_rows, argnums, shard_argnums)
    _blocks.check_jit_options(jit_options)
    spec = _blocks.Spec(fun, argnums, strategy, tuple(sorted(jit_options.items())), reduction)
    compiled = _blocks.build(spec)

    def reference(params, *batch):
        args = (params, *batch)
        rows = _blocks.row_count(args, shard_argnums)
        shared = _blocks.with_rows(args, rows, reduction)
        partials = [_blocks.run_block(compiled, shard_argnums, shared, block)
                    for block in _blocks.split_blocks(args, shard_argnums, block_rows)]
        return _blocks.combine(partials, rows, reduction, _blocks.grad_structure(args, argnums))

    return reference


def value_and_grad(fun, *, client, shard_argnums=(1,), argnums=0, reduction="mean",
                   block_rows=_blocks.DEFAULT_BLOCK_ROWS, strategy="reference",
                   progress=False, n_workers=None, worker_timeout=30.0, **jit_options):
    """``(params, *batch) -> (loss, grads)`` computed block by block on the
    workers of ``client`` (a ``dask.distributed.Client``, or ``"local"`` for
    a LocalCluster of ``n_workers`` processes that the function owns and
    closes on ``close()`` or at exit). ``fun(params, *block)`` returns the
    SUM of the block's per-example losses; ``reduction="mean"`` divides the
    total by the row count. See docs/distributed.md."""
    shard_argnums = tuple(shard_argnums)
    _blocks.check_options(reduction, block_rows, argnums, shard_argnums)
    _blocks.check_jit_options(jit_options)
    _cluster.check_options(client, n_workers, worker_timeout)
    spec = _blocks.Spec(fun, argnums, strategy, tuple(sorted(jit_options.items())), reduction)
    return DistributedValueAndGrad(spec, client, shard_argnums, reduction, block_rows,
                                   progress, n_workers, worker_timeout)


class DistributedValueAndGrad:
    """The function ``value_and_grad`` returns; a Trainer calls it once per
    step with the parameters. ``blocks_sent`` counts blocks scattered (first
    sends and re-sends), ``block_keys`` names them on the cluster,
    ``last_workers`` lists the workers the cluster had when the last call ended."""

    def __init__(self, spec, client, shard_argnums, reduction, block_rows, progress,
                 n_workers, worker_timeout):
        import cloudpickle
        self.client, self._owned = _cluster.open_client(client, n_workers)
        self._address = _cluster.address(self.client)
        self.shard_argnums, self.reduction, self.block_rows = shard_argnums, reduction, block_rows
        self.progress, self.worker_timeout = progress, worker_timeout
        self._token, self._payload = uuid.uuid4().hex, cloudpickle.dumps(spec)
        self.argnums = spec.argnums
        self._key, self._blocks, self._futures = None, [], []
        self.blocks_sent, self.calls, self.last_workers = 0, 0, []
        if self._owned:
            atexit.register(self.close)  # an owned LocalCluster never outlives the program

    def __call__(self, params, *batch):
        if self.client is None:
            raise _cluster.ClusterError(CLOSED)
        args = (params, *batch)
        rows = _blocks.row_count(args, self.shard_argnums)
        sent_before = self.blocks_sent
        try:
            if self.client.status != "running":  # closed, or reconnecting to its scheduler
                self._wait_for_worker(len(_blocks.block_bounds(rows, self.block_rows)))
            self._load(args)
            partials = self._compute(args)
        except _cluster.ClusterError:
            raise
        except Exception as err:
            if _cluster.is_closed(self.client):  # it gave up reconnecting during the call
                raise _cluster.ClusterError(
                    _cluster.CLIENT_CLOSED.format(address=self._address)) from err
            raise
        self.calls += 1
        if self.progress:
            self._announce(rows, self.blocks_sent - sent_before)
        return _blocks.combine(partials, rows, self.reduction,
                               _blocks.grad_structure(args, self.argnums))

    @property
    def block_keys(self) -> list:
        """The Dask keys of the batch's blocks on the workers, in block order."""
        return [future.key for future in self._futures]

    def close(self) -> None:
        """Release the blocks on the workers; shut down an owned LocalCluster."""
        if self.client is None:
            return
        self._futures, self._blocks, self._key = [], [], None
        if self._owned:
            atexit.unregister(self.close)
            _cluster.close_owned(self.client)
        self.client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------- blocks

    def _load(self, args) -> None:
        """Scatter the batch's blocks unless the workers already hold this batch."""
        key = _blocks.batch_key(args, self.shard_argnums)
        if key == self._key:
            return
        self._key, self._futures = None, []  # releases the previous batch's blocks
        self._blocks = _blocks.split_blocks(args, self.shard_argnums, self.block_rows)
        self._futures = self._scatter(self._blocks)
        self._key = key

    def _scatter(self, blocks: list) -> list:
        """Scatter ``blocks``; a worker lost while they are sent (the
        scheduler may not know it yet) means waiting for one and sending again."""
        for _attempt in range(MAX_RESENDS):
            self._wait_for_worker(len(blocks))
            try:
                futures = self.client.scatter(list(blocks), hash=False)
            except (OSError, CancelledError):  # CommClosedError and TimeoutError are OSErrors
                time.sleep(POLL_SECONDS)
                continue
            self.blocks_sent += len(blocks)
            return futures
        raise RuntimeError(SCATTER_FAILED.format(n=len(blocks), attempts=MAX_RESENDS))

    def _resend(self, indices: list) -> None:
        """Send again, from the driver's copy, the blocks whose data was lost."""
        lost = [i for i in indices if self._futures[i].status != "finished"]
        if lost:
            for i, future in zip(lost, self._scatter([self._blocks[i] for i in lost])):
                self._futures[i] = future

    def _wait_for_worker(self, pending: int) -> list[str]:
        return _cluster.wait_for_worker(self.client, self._address, self.worker_timeout,
                                        pending, max(pending, len(self._blocks)))

    # --------------------------------------------------------------- compute

    def _compute(self, args) -> list:
        """One ``(loss, leaves)`` per block, in block order, whichever worker
        computed it; lost blocks are sent again and recomputed."""
        sent = _blocks.with_rows(
            tuple(None if i in self.shard_argnums else a for i, a in enumerate(args)),
            _blocks.row_count(args, self.shard_argnums), self.reduction)
        shared = self.client.submit(_worker.hold, sent, pure=False)  # one send per call
        tasks = self._submit(range(len(self._blocks)), shared)
        results, losses = [None] * len(self._blocks), [0] * len(self._blocks)
        while tasks:
            self._wait(list(tasks.values()))
            lost = self._collect(tasks, results)
            if lost:
                self._recover(lost, losses)
                tasks.update(self._submit(lost, shared))
            elif tasks:
                self._wait_for_worker(len(tasks))
        self.last_workers = _cluster.workers(
            self.client, max(self.worker_timeout, _cluster.IDENTITY_TIMEOUT)) or []
        return results

    def _submit(self, indices, shared) -> dict:
        indices = list(indices)
        n = len(indices)
        futures = self.client.map(_worker.block_task, [self._token] * n, [self._payload] * n,
                                  [self.shard_argnums] * n, [shared] * n,
                                  [self._futures[i] for i in indices], pure=False)
        return dict(zip(indices, futures))

    def _wait(self, futures: list) -> None:
        from distributed import wait
        try:
            wait(futures, timeout=POLL_SECONDS)
        except (TimeoutError, CancelledError):
            pass  # the statuses below say what happened

    def _collect(self, tasks: dict, results: list) -> list:
        """Move finished blocks into ``results``; the indices of lost ones."""
        done = [i for i, task in tasks.items() if task.status == "finished"]
        try:  # no gather for nothing: it is a round trip, and it blocks without a scheduler
            values = self.client.gather([tasks[i] for i in done]) if done else []
        except (OSError, CancelledError):  # lost after finishing: the statuses say so next
            return []
        for i, value in zip(done, values):
            results[i] = value
            del tasks[i]
        for i, task in list(tasks.items()):
            if task.status == "error":
                self._raise_failed(i, task)
        lost = [i for i, task in tasks.items() if task.status in ("cancelled", "lost")]
        for i in lost:
            del tasks[i]
        return lost

    def _raise_failed(self, index: int, task) -> None:
        lo = index * self.block_rows
        hi = lo + len(self._blocks[index][0])
        err = task.exception()
        raise RuntimeError(TASK_FAILED.format(index=index, lo=lo, hi=hi, err=err)) from err

    def _recover(self, lost: list, losses: list) -> None:
        """Wait for a worker and send the lost blocks again from the driver's copy."""
        for i in lost:
            losses[i] += 1
            if losses[i] > MAX_RESENDS:
                raise RuntimeError(TOO_MANY_LOSSES.format(index=i, n=losses[i]))
        self._wait_for_worker(len(lost))
        self._resend(lost)

    def _announce(self, rows: int, sent: int) -> None:
        names = ", ".join(self.last_workers)
        print(f"distributed.value_and_grad: call {self.calls}: {len(self._blocks)} blocks of "
              f"{self.block_rows} rows ({rows} rows) on {len(self.last_workers)} workers "
              f"[{names}]; {sent} blocks sent", file=sys.stderr)
