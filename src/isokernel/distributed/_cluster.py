"""The Dask client: open (or own) one, list its workers, wait for one."""

from __future__ import annotations

import asyncio
import math
import time
from numbers import Integral, Real

from ..ir import IsokernelError

NEEDS_DISTRIBUTED = ("isokernel.distributed needs Dask's distributed scheduler: pip install "
                     "'isokernel[io]' (dask[distributed])")
NO_WORKER = ("distributed.value_and_grad: no Dask worker is left on the cluster at {address} "
             "(waited {waited:.0f} s; {pending} of {blocks} blocks not computed); the blocks are "
             "kept on the driver: start workers (cluster.scale(n), or `dask worker {address}` "
             "on a host) and call again, or pass a new client")
SCHEDULER_LOST = ("distributed.value_and_grad: the client lost its scheduler at {address} and "
                  "it did not come back within worker_timeout={timeout:g} s ({pending} of "
                  "{blocks} blocks not computed): the cluster's processes were killed or the "
                  "network to them is down; start a new cluster and build a new function with "
                  "its client (value_and_grad(..., client=Client(address)) or client='local'), "
                  "or raise worker_timeout if the scheduler is being restarted")
CLIENT_CLOSED = ("distributed.value_and_grad: the client of this function ({address}) is "
                 "closed (client.close() was called, or it gave up reconnecting to its "
                 "scheduler); build a new function with a new client: "
                 "value_and_grad(..., client=Client(address)) or client='local'")
CLOSED_CLIENT_GIVEN = ("distributed.value_and_grad: client={got!r} is closed (client.close() "
                       "was called, or it gave up reconnecting to its scheduler); pass an open "
                       "dask.distributed.Client, or 'local' to start a LocalCluster")
BAD_CLIENT = ("distributed.value_and_grad: client={got!r}; pass a dask.distributed.Client, "
              "or 'local' to start a LocalCluster of worker processes")
BAD_N_WORKERS = ("distributed.value_and_grad: n_workers={got!r}; the LocalCluster that "
                 "client='local' starts needs a whole number of at least 1 worker processes "
                 "(or None for Dask's default)")
N_WORKERS_LOCAL_ONLY = ("distributed.value_and_grad: n_workers={got!r} starts a LocalCluster "
                        "for client='local' only; the cluster of the client you pass is yours "
                        "to size (cluster.scale({got!r})): drop n_workers")
BAD_TIMEOUT = ("distributed.value_and_grad: worker_timeout={got!r}; give the seconds a call "
               "waits for a worker, or for a lost scheduler to come back, as a number >= 0 "
               "(e.g. 30.0)")
CLOSED_STATES = ("closing", "closed")
POLL = 0.1  # seconds between two looks at the cluster while waiting
IDENTITY_TIMEOUT = 10.0  # the least time the scheduler is given to list its workers


class ClusterError(IsokernelError, RuntimeError):
    """The Dask cluster cannot compute the blocks: its client is closed, its
    scheduler is gone, or no worker is left."""


class NoWorkerError(ClusterError):
    """The cluster has no worker left to compute the blocks on."""


def check_options(client, n_workers, worker_timeout) -> None:
    """Refuse, before any cluster starts, a worker count or a timeout no
    cluster can honour."""
    if n_workers is not None:
        if isinstance(n_workers, bool) or not isinstance(n_workers, Integral) or n_workers < 1:
            raise ValueError(BAD_N_WORKERS.format(got=n_workers))
        if not (isinstance(client, str) and client == "local"):
            raise ValueError(N_WORKERS_LOCAL_ONLY.format(got=n_workers))
    if (isinstance(worker_timeout, bool) or not isinstance(worker_timeout, Real)
            or math.isnan(worker_timeout) or worker_timeout < 0):
        raise ValueError(BAD_TIMEOUT.format(got=worker_timeout))


def open_client(client, n_workers: int | None):
    """``(client, owned)``: a Client as given, or for ``"local"`` a new
    LocalCluster of processes with one thread each (the caller owns it)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError(NEEDS_DISTRIBUTED) from None
    if isinstance(client, Client):
        if is_closed(client):
            raise ValueError(CLOSED_CLIENT_GIVEN.format(got=client))
        return client, False
    if not (isinstance(client, str) and client == "local"):
        raise TypeError(BAD_CLIENT.format(got=client))
    with quiet_workers():
        cluster = LocalCluster(n_workers=None if n_workers is None else int(n_workers),
                               threads_per_worker=1, processes=True, dashboard_address=":0")
    return Client(cluster), True


def quiet_workers():
    """Dask configuration for workers that compute blocks: no statistical
    profiler. Its thread samples every worker's stack every 10 ms and holds
    the GIL meanwhile, which made a block of NumPy-sized operations take 2-3
    times as long on a worker as in the driver."""
    import dask
    return dask.config.set({"distributed.worker.profile.enabled": False})


def close_owned(client) -> None:
    cluster = client.cluster
    client.close()
    if cluster is not None:
        cluster.close()


def address(client) -> str:
    """The scheduler's address as the client knows it."""
    return getattr(client.scheduler, "address", None) or "an unknown address"


def is_closed(client) -> bool:
    """Whether the client was closed, by its owner or by itself after it
    gave up reconnecting to its scheduler."""
    return client.status in CLOSED_STATES


def workers(client, timeout: float | None = None) -> list[str] | None:
    """The addresses of the workers the scheduler knows now, sorted; None
    when the scheduler cannot be asked (the client is reconnecting to it or
    closed, or it did not answer within ``timeout`` seconds). The scheduler
    is asked directly: ``client.scheduler_info()`` answers from a cache that
    its own periodic refresh overwrites with a worker-less summary, and
    from that cache again when the scheduler cannot be reached."""
    if client.status != "running":
        return None
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1,
                           callback_timeout=timeout if timeout and math.isfinite(timeout)
                           else None)
    except (OSError, asyncio.TimeoutError):  # CommClosedError is an OSError
        return None
    return sorted(info["workers"])


def wait_for_worker(client, where: str, timeout: float, pending: int, blocks: int) -> list[str]:
    """The workers, waiting up to ``timeout`` seconds for one (a restarting
    nanny brings its worker back) or for a lost scheduler to come back:
    ``NoWorkerError`` if no worker comes, ``ClusterError`` if the scheduler
    does not, or at once if the client is closed. ``where``: the
    scheduler's address, for the messages."""
    start = time.monotonic()
    while True:
        if is_closed(client):
            raise ClusterError(CLIENT_CLOSED.format(address=where))
        found = workers(client, max(timeout, IDENTITY_TIMEOUT))
        if found:
            return found
        if time.monotonic() - start > timeout:
            if found is None:
                raise ClusterError(SCHEDULER_LOST.format(address=where, timeout=timeout,
                                                         pending=pending, blocks=blocks))
            raise NoWorkerError(NO_WORKER.format(address=where, waited=timeout,
                                                 pending=pending, blocks=blocks))
        time.sleep(POLL)
