"""isokernel.distributed when the cluster itself is gone or was never
usable: a cluster whose processes were all killed (scheduler included) is a
clear isokernel error once ``worker_timeout`` has passed, not a raw Dask
error when the client gives up; ``n_workers`` below 1 is refused before a
cluster starts; a closed client is refused naming it, when the function is
built and when it is called. The Trainer's data-parallel path gets the same
errors through ``distributed.value_and_grad``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import isokernel as ik
from isokernel import optim

distributed = pytest.importorskip("distributed")

from isokernel import distributed as dist  # noqa: E402

from .mlp_blocks import BLOCK, mlp_loss, problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STARTUP = 120  # seconds a busy machine may take to start a cluster or connect to it
CLUSTER_SCRIPT = """
import sys, time
from distributed import LocalCluster
from isokernel import distributed as dist

if __name__ == "__main__":
    with dist.quiet_workers():
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               dashboard_address=":0", scheduler_port=0)
    print(cluster.scheduler_address, flush=True)
    time.sleep(3600)  # until the test kills this process group
"""


def vg_on(client, **options):
    return dist.value_and_grad(mlp_loss, client=client, shard_argnums=(1, 2), block_rows=BLOCK,
                               **options)


def trainer_on(client, **options):
    return ik.Trainer(mlp_loss, problem(np.float64)[0], optim.adam(1e-3), client=client,
                      block_rows=BLOCK, strategy="reference", **options)


@pytest.fixture
def cluster_in_own_process(tmp_path):
    """The scheduler address of a LocalCluster (one worker process) started
    by a child process in a session of its own, and a function that kills
    that whole process group: scheduler, nanny and worker."""
    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=str(ROOT),
                            start_new_session=True)

    def kill():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("tcp://"), "the cluster process did not start"
        yield address, kill
    finally:
        kill()
        proc.stdout.close()


def test_a_cluster_whose_processes_were_all_killed_is_a_clear_error_after_worker_timeout(
        cluster_in_own_process):
    """The client would try to reconnect for its own timeout (here 120 s)
    and then close, which surfaced as ``KeyError: 'workers'``; the call
    gives up after ``worker_timeout`` (2 s) with an error naming the
    scheduler and the fix. The bound on the time is half the client's own
    timeout: 30 times worker_timeout, so a loaded machine stays green, and
    still below what the old wait took."""
    address, kill = cluster_in_own_process
    client = distributed.Client(address, timeout=120)
    try:
        client.wait_for_workers(1, timeout=STARTUP)
        vg = vg_on(client, worker_timeout=2.0)
        vg(*problem(np.float64))
        kill()
        start = time.monotonic()
        with pytest.raises(dist.ClusterError) as raised:
            vg(*problem(np.float64))
        elapsed = time.monotonic() - start
        message = str(raised.value)
        assert "\n" not in message
        assert f"scheduler at {address}" in message and "worker_timeout=2" in message
        assert "new cluster" in message
        assert elapsed < 60, f"the call took {elapsed:.0f} s, not about worker_timeout=2 s"
    finally:
        client.close(timeout=5)


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_n_workers_below_one_is_refused_before_a_cluster_starts(n):
    """The function used to start a LocalCluster of no worker and wait
    ``worker_timeout`` (30 s) at its first call; now nothing starts."""
    with pytest.raises(ValueError, match=rf"n_workers={n!r}.*whole number of at least 1"):
        vg_on("local", n_workers=n)
    trainer = trainer_on("local", n_workers=n)
    with pytest.raises(ValueError, match=rf"n_workers={n!r}"):
        trainer.step(*problem(np.float64)[1:])


@pytest.mark.parametrize("timeout", [-1.0, float("nan"), "30"])
def test_a_bad_worker_timeout_is_refused(timeout):
    with pytest.raises(ValueError, match=r"worker_timeout=.*seconds"):
        vg_on("local", n_workers=1, worker_timeout=timeout)


def test_a_closed_client_is_refused_naming_it():
    """Closed before the function is built: ``ValueError`` naming the
    client. Closed between two calls: ``ClusterError`` naming it (Dask's
    ``ClosedClientError`` came through raw)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        client = distributed.Client(cluster, timeout=STARTUP)
        vg = vg_on(client)
        vg(*problem(np.float64))
        client.close()
        with pytest.raises(dist.ClusterError, match=r"client .*is closed.*new client"):
            vg(*problem(np.float64))
        with pytest.raises(ValueError, match=r"client=<Client.*is closed.*open "
                                             r"dask.distributed.Client"):
            vg_on(client)
        trainer = trainer_on(client)
        with pytest.raises(ValueError, match=r"client=<Client.*is closed"):
            trainer.step(*problem(np.float64)[1:])
        with pytest.raises(ValueError, match=r"n_workers=2 starts a LocalCluster for "
                                             r"client='local' only"):
            vg_on(client, n_workers=2)
