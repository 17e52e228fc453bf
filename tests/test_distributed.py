"""isokernel.distributed: loss and gradient on a Dask LocalCluster are the
bits of one process for 1, 2 and 3 workers; the batch is sent once; a killed
worker's blocks are sent again and give the same bits; no worker is an error.

The tests that kill no worker share one LocalCluster of processes (one
thread each) per worker count, started on first use and shut down when the
next count is asked for or the module ends; a test that kills workers starts
its own. No test depends on which worker holds or computes a block, or on
how long anything takes; timeouts are generous so a busy machine is slow,
not red."""

from __future__ import annotations

import os
import re
import signal
import time

import numpy as np
import pytest

import isokernel as ik

distributed = pytest.importorskip("distributed")

from isokernel import distributed as dist  # noqa: E402

from .mlp_blocks import BLOCK, ROWS, mlp_loss, problem  # noqa: E402

TIMEOUT = 120  # seconds a busy machine may take to start or answer


def same_bits(a, b) -> bool:
    la, lb = ik.tree_flatten(a)[0], ik.tree_flatten(b)[0]
    return len(la) == len(lb) and all(
        np.asarray(p).dtype == np.asarray(q).dtype and np.asarray(p).tobytes()
        == np.asarray(q).tobytes() for p, q in zip(la, lb))


def reference(dtype, **options):
    params, x, y = problem(dtype)
    ref = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2), block_rows=BLOCK,
                                        **options)
    return ref(params, x, y)


class Cluster:
    """A LocalCluster of ``n`` worker processes with a client, shut down on exit."""

    def __init__(self, n: int):
        with dist.quiet_workers():
            self.cluster = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                death_timeout=TIMEOUT)
        self.client = distributed.Client(self.cluster, timeout=TIMEOUT)
        self.client.wait_for_workers(n, timeout=TIMEOUT)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.client.close()
        self.cluster.close()

    def worker_pids(self) -> dict:
        return self.client.run(os.getpid)


class SharedClusters:
    """``shared(n)``: a cluster of ``n`` workers for the tests of one module,
    started on first use; one is kept at a time, so tests asking for the
    same count in a row share it. Each test closes the functions it built,
    which releases their blocks. A test that kills workers calls ``spoil()``
    when done, so that no later test gets that cluster."""

    def __init__(self):
        self.kept: dict = {}

    def __call__(self, n: int) -> Cluster:
        if n not in self.kept:
            self.close()
            self.kept[n] = Cluster(n)
        return self.kept[n]

    def spoil(self) -> None:
        self.close()

    def close(self) -> None:
        for cluster in self.kept.values():
            cluster.__exit__()
        self.kept.clear()


@pytest.fixture(scope="module")
def shared_cluster():
    """This module's ``SharedClusters`` (the tests here ask for 1, 3, then 2 workers)."""
    shared = SharedClusters()
    yield shared
    shared.close()


def distributed_vg(client, **options):
    return dist.value_and_grad(mlp_loss, client=client, shard_argnums=(1, 2), block_rows=BLOCK,
                               worker_timeout=TIMEOUT, **options)


# ------------------------------------------------------------- no cluster


def test_blocks_are_fixed_by_the_row_count_alone():
    assert dist.block_bounds(700, 128) == [(0, 128), (128, 256), (256, 384), (384, 512),
                                           (512, 640), (640, 700)]
    assert dist.block_bounds(128, 128) == [(0, 128)]


def test_the_combine_tree_is_the_deterministic_reductions_halving_tree():
    class Term:
        def __init__(self, text):
            self.text = text

        def __add__(self, other):
            return Term(f"({self.text}+{other.text})")

    order = dist.pairwise([Term(str(i)) for i in range(7)]).text
    assert order == "(((0+4)+(2+6))+((1+5)+3))"  # h = 4: i + (i+4); h = 2; h = 1


def test_the_reference_is_the_written_tree_of_jitted_block_gradients():
    """Independent of the package's combine: per block the jitted loss sum
    and the gradient of that sum over the row count (mean's cotangent), the
    halving tree written out by hand for 6 blocks, then the loss's mean."""
    params, x, y = problem(np.float64)
    block = ik.jit(ik.value_and_grad(lambda p, x, y, rows: mlp_loss(p, x, y) / rows),
                   strategy="reference", deterministic_reductions=True)
    total = ik.jit(mlp_loss, strategy="reference", deterministic_reductions=True)
    sums = [total(params, x[lo:lo + BLOCK], y[lo:lo + BLOCK]) for lo in range(0, ROWS, BLOCK)]
    parts = [block(params, x[lo:lo + BLOCK], y[lo:lo + BLOCK], float(ROWS))
             for lo in range(0, ROWS, BLOCK)]

    def tree(v):  # 6 -> (0+3, 1+4, 2+5) -> ((0+3)+(2+5), 1+4) -> one
        return ((v[0] + v[3]) + (v[2] + v[5])) + (v[1] + v[4])

    loss = tree([np.asarray(s) for s in sums]) / np.float64(ROWS)
    grads = [tree([p[1][j] for p in parts]) for j in range(3)]
    got_loss, got_grads = reference(np.float64)
    assert same_bits(got_loss, loss) and same_bits(list(got_grads), grads)
    whole = ik.value_and_grad(mlp_loss)(params, x, y)
    assert abs(float(got_loss) * ROWS - float(whole[0])) < 1e-9 * abs(float(whole[0]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_process_and_the_blocks_give_the_same_bits(dtype):
    """With the default blocks (the deterministic reductions' blocks), the
    blocks' value and gradient combined in the halving tree are the bits of
    one process's jit(value_and_grad(mean loss), deterministic_reductions=True)
    on every CPU strategy: 9,000 rows, blocks of 4096, 4096 and 808."""
    import isokernel.numpy as inp

    params, x, y = problem(dtype, rows=9000)

    def mean_loss(p, x, y):
        return inp.mean(inp.sum((inp.tanh(x @ p[0] + p[1]) @ p[2] - y) ** 2, axis=1))
    for strategy in ("reference", "threads", "native"):
        blocks = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2),
                                               strategy=strategy)(params, x, y)
        one = ik.jit(ik.value_and_grad(mean_loss), strategy=strategy,
                     deterministic_reductions=True)(params, x, y)
        assert same_bits(blocks[0], one[0]) and same_bits(list(blocks[1]), list(one[1]))


def test_bad_options_are_refused_naming_the_fix():
    with pytest.raises(ValueError, match="reduction='median'.*'mean'"):
        dist.value_and_grad(mlp_loss, client="local", reduction="median")
    with pytest.raises(ValueError, match="block_rows=0"):
        dist.value_and_grad(mlp_loss, client="local", block_rows=0)
    with pytest.raises(ValueError, match="overlap"):
        dist.value_and_grad(mlp_loss, client="local", argnums=1)
    with pytest.raises(TypeError, match="dask.distributed.Client"):
        dist.value_and_grad(mlp_loss, client="tcp://nowhere:1")


# ---------------------------------------------------------------- clusters


@pytest.mark.parametrize("workers", [1, 3, 2])  # 2 last: the next tests share its cluster
def test_loss_and_gradients_are_the_single_process_bits(workers, shared_cluster):
    expected = {dt: reference(dt) for dt in (np.float32, np.float64)}
    c = shared_cluster(workers)
    holders = set()
    for dt in (np.float32, np.float64):
        vg = distributed_vg(c.client)
        got = vg(*problem(dt)[:1], *problem(dt)[1:])
        assert got[0].dtype == dt and same_bits(got, expected[dt]), (workers, dt)
        mine = set(vg.block_keys)
        holders |= {w for w, keys in c.client.has_what().items() if mine & set(keys)}
        vg.close()
    # every worker held blocks, so the work was spread: scatter deals the 6 blocks
    # round-robin over the running workers (where tasks then ran does not enter)
    assert len(holders) == workers


def wide_problem():
    """Matrix products big enough for OpenBLAS to use several threads, whose
    float32 bits then depend on the thread count."""
    rng = np.random.default_rng(1)
    params = ((0.1 * rng.normal(size=(64, 32))).astype(np.float32),
              np.zeros(32, np.float32), (0.1 * rng.normal(size=(32, 1))).astype(np.float32))
    x = rng.normal(size=(2 * 2048, 64)).astype(np.float32)
    return params, x, rng.normal(size=(2 * 2048, 1)).astype(np.float32)


def scaled_loss(params, x, scale, y):
    """An unsharded argument (``scale``) between two sharded ones."""
    return mlp_loss(params, x * scale, y)


def test_native_strategy_sum_reduction_and_wide_products_on_two_workers(shared_cluster):
    expected = reference(np.float64, strategy="native", reduction="sum")
    wide = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2), block_rows=2048)
    wide_expected = wide(*wide_problem())
    params, x, y = problem(np.float64)
    scale = np.linspace(0.5, 1.5, 6)
    options = dict(shard_argnums=(1, 3), block_rows=BLOCK, argnums=(0, 2))
    scaled = dist.reference_value_and_grad(scaled_loss, **options)(params, x, scale, y)
    c = shared_cluster(2)
    with dist.value_and_grad(scaled_loss, client=c.client, worker_timeout=TIMEOUT,
                             **options) as vg_scaled:
        got = vg_scaled(params, x, scale, y)
        assert same_bits(got, scaled) and got[1][1].shape == (6,)
    with distributed_vg(c.client, strategy="native", reduction="sum") as vg:
        assert same_bits(vg(*problem(np.float64)), expected)
    with dist.value_and_grad(mlp_loss, client=c.client, shard_argnums=(1, 2),
                             block_rows=2048, worker_timeout=TIMEOUT) as vg_wide:
        assert same_bits(vg_wide(*wide_problem()), wide_expected)


def test_blocks_run_with_blas_on_one_thread():
    from threadpoolctl import threadpool_info

    from isokernel.distributed import _blocks
    with _blocks.one_blas_thread():
        assert {lib["num_threads"] for lib in threadpool_info()
                if lib["user_api"] == "blas"} == {1}


PROGRESS = re.compile(r"distributed\.value_and_grad: call (\d+): 6 blocks of 128 rows "
                      r"\(700 rows\) on \d+ workers \[[^\]]*\]; (\d+) blocks sent")


def test_the_batch_is_sent_once_and_again_only_when_it_changes(capsys, shared_cluster):
    """Counts of blocks sent, per call and in total, and the blocks' keys:
    nothing here depends on which worker holds or computes a block, or on
    how many workers the cluster lists when a call ends."""
    params, x, y = problem(np.float32)
    c = shared_cluster(2)
    with distributed_vg(c.client, progress=True) as vg:
        first = vg(params, x, y)
        keys = vg.block_keys
        second = vg(tuple(p * 0.5 for p in params), x.copy(), y)  # same values: not sent
        assert vg.blocks_sent == 6 and vg.block_keys == keys and len(set(keys)) == 6
        assert not same_bits(first, second)  # the new parameters reached the workers
        x2 = x.copy()
        x2[3, 1] += 1.0  # same shape, new data: the blocks are sent again
        vg(params, x2, y)
        assert vg.blocks_sent == 12 and not set(vg.block_keys) & set(keys)
    calls = [(int(n), int(sent)) for n, sent in PROGRESS.findall(capsys.readouterr().err)]
    assert calls == [(1, 6), (2, 0), (3, 6)]


def killing_loss(flag: str):
    """``mlp_loss`` whose recording on a worker kills that worker's process
    once: the first to claim ``flag`` (an atomic rename) dies mid-call."""
    def loss(params, x, y):
        try:
            os.rename(flag, flag + ".taken")
        except FileNotFoundError:
            return mlp_loss(params, x, y)
        os.kill(os.getpid(), signal.SIGKILL)
    return loss


def test_a_worker_killed_mid_call_gives_the_same_bits(tmp_path):
    expected = reference(np.float64)
    flag = str(tmp_path / "kill-one-worker")
    with Cluster(3) as c:
        open(flag, "w").close()
        vg = dist.value_and_grad(killing_loss(flag), client=c.client, shard_argnums=(1, 2),
                                 block_rows=BLOCK, worker_timeout=TIMEOUT)
        args = problem(np.float64)
        got = vg(*args)
        assert os.path.exists(flag + ".taken")  # a worker did die during the call
        assert same_bits(got, expected)
        holder = sole_holder(c.client, vg.block_keys)
        os.kill(c.worker_pids()[holder], signal.SIGKILL)  # between calls, with its blocks
        sent = vg.blocks_sent
        assert same_bits(vg(*args), expected)
        assert vg.blocks_sent > sent  # the lost blocks were sent again from the driver


def sole_holder(client, keys: list) -> str:
    """A worker holding the only copy of one of ``keys`` (a task that read a
    block on another worker may have left a second copy there)."""
    copies = client.who_has()  # every key the cluster holds
    sole = [copies[k][0] for k in keys if len(copies.get(k, ())) == 1]
    assert sole, "every block has two copies: killing one worker would lose none"
    return sole[0]


def failing_loss(params, x, y):
    raise ValueError("no y for this model")


def test_a_failing_loss_and_no_worker_left_are_clear_errors():
    with Cluster(1) as c:
        vg = dist.value_and_grad(mlp_loss, client=c.client, shard_argnums=(1, 2),
                                 block_rows=BLOCK, worker_timeout=2.0)
        vg(*problem(np.float64))
        failing = dist.value_and_grad(failing_loss, client=c.client, shard_argnums=(1, 2),
                                      block_rows=BLOCK, worker_timeout=TIMEOUT)
        with pytest.raises(RuntimeError, match=r"block \d+ \(rows \d+:\d+\) failed.*no y"):
            failing(*problem(np.float64))
        c.cluster.scale(0)
        deadline = time.monotonic() + TIMEOUT  # a bound on waiting, not on the code's speed
        while c.client.nthreads():  # asks the scheduler (scheduler_info() may be its cache)
            assert time.monotonic() < deadline, "the worker never retired"
            time.sleep(0.1)
        with pytest.raises(dist.NoWorkerError, match="no Dask worker is left.*cluster.scale"):
            vg(*problem(np.float64))


def test_local_starts_and_closes_its_own_cluster():
    vg = dist.value_and_grad(mlp_loss, client="local", n_workers=1, shard_argnums=(1, 2),
                             block_rows=BLOCK, worker_timeout=TIMEOUT)
    cluster = vg.client.cluster
    try:
        assert same_bits(vg(*problem(np.float32)), reference(np.float32))
    finally:
        vg.close()
    assert cluster.status.name == "closed"
    with pytest.raises(RuntimeError, match="was closed"):
        vg(*problem(np.float32))


def test_a_dask_workers_pool_takes_its_nthreads(monkeypatch):
    """Inside a Dask worker the native and threads pools size themselves to
    the worker's nthreads, not to the whole machine (several workers of one
    machine would otherwise each take every core)."""
    import sys
    import types

    from isokernel.backends.cpu.pool import resolve_workers
    from isokernel.backends.platform import cpu_budget

    fake = types.SimpleNamespace(get_worker=lambda: types.SimpleNamespace(
        state=types.SimpleNamespace(nthreads=1)))
    monkeypatch.setitem(sys.modules, "distributed", fake)
    count, source = resolve_workers(None)
    assert count == 1
    assert source.startswith("Dask worker nthreads=1") or cpu_budget().value == 1
    assert resolve_workers(3) == (3, "workers= option")

    def outside():
        raise ValueError("No worker found")
    monkeypatch.setitem(sys.modules, "distributed", types.SimpleNamespace(get_worker=outside))
    assert "Dask" not in resolve_workers(None)[1]
