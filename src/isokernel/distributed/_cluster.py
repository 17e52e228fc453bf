"""The Dask client: open (or own) one, list its workers, wait for one."""

from __future__ import annotations

import time

from ..ir import IsokernelError

NEEDS_DISTRIBUTED = ("isokernel.distributed needs Dask's distributed scheduler: pip install "
                     "'isokernel[io]' (dask[distributed])")
NO_WORKER = ("distributed.value_and_grad: no Dask worker is left on the cluster at {address} "
             "(waited {waited:.0f} s; {pending} of {blocks} blocks not computed); the blocks are "
             "kept on the driver: start workers (cluster.scale(n), or `dask worker {address}` "
             "on a host) and call again, or pass a new client")
BAD_CLIENT = ("distributed.value_and_grad: client={got!r}; pass a dask.distributed.Client, "
              "or 'local' to start a LocalCluster of worker processes")


class NoWorkerError(IsokernelError, RuntimeError):
    """The cluster has no worker left to compute the blocks on."""


def open_client(client, n_workers: int | None):
    """``(client, owned)``: a Client as given, or for ``"local"`` a new
    LocalCluster of processes with one thread each (the caller owns it)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError(NEEDS_DISTRIBUTED) from None
    if isinstance(client, Client):
        return client, False
    if client != "local":
        raise TypeError(BAD_CLIENT.format(got=client))
    with quiet_workers():
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
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


def workers(client) -> list[str]:
    """The addresses of the workers the scheduler knows now, sorted."""
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def wait_for_worker(client, timeout: float, pending: int, blocks: int) -> list[str]:
    """The workers, waiting up to ``timeout`` seconds for one (a restarting
    nanny brings its worker back); ``NoWorkerError`` if none comes."""
    start = time.monotonic()
    while not (found := workers(client)):
        if time.monotonic() - start > timeout:
            raise NoWorkerError(NO_WORKER.format(address=client.scheduler.address,
                                                 waited=timeout, pending=pending,
                                                 blocks=blocks))
        time.sleep(0.1)
    return found
