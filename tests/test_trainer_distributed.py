"""Trainer(..., client=...): data-parallel training on a Dask LocalCluster is
the bits of one process for 1, 2 and 3 workers, in float32 and float64; a
saved run resumes with the bits of an uninterrupted one; killing a worker
during training changes nothing; what a data-parallel step cannot do is
refused naming the fix.

The cluster tests share one LocalCluster of processes (one thread each)
per worker count, started on first use (the killing test last, spoiling
it); the local-client test starts its own."""

from __future__ import annotations

import os
import re
import signal
import threading

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import optim

pytest.importorskip("distributed")

from isokernel import distributed as dist  # noqa: E402

from .mlp_blocks import BLOCK, mlp_loss, problem  # noqa: E402
from .test_distributed import (  # noqa: E402
    TIMEOUT,
    SharedClusters,
    killing_loss,
    same_bits,
    sole_holder,
)

STEPS = 20


def optimizer():
    return optim.chain(optim.clip_by_global_norm(1.0),
                       optim.adam(optim.exponential_decay(3e-2, 5, 0.9)))


def trainer(client, dtype, loss=mlp_loss, **options):
    params = problem(dtype)[0]
    return ik.Trainer(loss, params, optimizer(), client=client, block_rows=BLOCK,
                      strategy="reference", worker_timeout=TIMEOUT, **options)


def train(t, dtype, steps=STEPS) -> list:
    x, y = problem(dtype)[1:]
    return [t.step(x, y) for _ in range(steps)]


def by_hand(dtype, steps=STEPS):
    """The same steps written with reference_value_and_grad, optim and jit."""
    params, x, y = problem(dtype)
    vg = dist.reference_value_and_grad(mlp_loss, shard_argnums=(1, 2), block_rows=BLOCK)
    opt = optimizer()

    def update(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state
    jupdate = ik.jit(update, strategy="reference")
    state, losses = opt.init(params), []
    for _ in range(steps):
        loss, grads = vg(params, x, y)
        params, state = jupdate(params, state, grads)
        losses.append(loss)
    return losses, params, state


@pytest.fixture(scope="module")
def clusters():
    """This module's ``SharedClusters`` (the tests ask for 1, 2, then 3 workers)."""
    shared = SharedClusters()
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def serial():
    """Per dtype: losses and final parameters of the steps in this process."""
    runs = {}
    for dt in (np.float32, np.float64):
        t = trainer("serial", dt)
        runs[dt] = (train(t, dt), t.params, t.opt_state)
    return runs


# ------------------------------------------------------------- no cluster


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_serial_steps_are_the_hand_written_bits(serial, dtype):
    losses, params, state = by_hand(dtype)
    assert same_bits(serial[dtype][0], losses) and serial[dtype][0][0].dtype == dtype
    assert same_bits(serial[dtype][1], params) and same_bits(serial[dtype][2], state)
    assert float(losses[-1]) < 0.7 * float(losses[0])  # it trains


def mean_loss(params, x, y):
    """``mlp_loss`` over the row count: the single-process form of its mean."""
    w1, b1, w2 = params
    r = inp.tanh(x @ w1 + b1) @ w2 - y
    return inp.mean(inp.sum(r * r, axis=1))


def one_process_run(client, dtype, strategy, steps=STEPS):
    """(data-parallel steps with the default blocks, single-process steps with
    deterministic reductions) on 9,000 rows: blocks of 4096, 4096 and 808."""
    params, x, y = problem(dtype, rows=9000)
    blocks = ik.Trainer(mlp_loss, params, optimizer(), client=client, strategy=strategy,
                        worker_timeout=TIMEOUT)
    one = ik.Trainer(mean_loss, params, optimizer(), strategy=strategy,
                     deterministic_reductions=True)
    runs = [([t.step(x, y) for _ in range(steps)], t.params, t.opt_state) for t in (blocks, one)]
    blocks.close()
    return runs


@pytest.mark.parametrize("strategy", ["reference", "auto"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_data_parallel_steps_are_one_process_deterministic_steps(dtype, strategy):
    """Trainer(client=...) equals Trainer(deterministic_reductions=True) step
    for step: the same blocks, the same halving tree, the same update."""
    (losses, params, state), (losses1, params1, state1) = one_process_run("serial", dtype,
                                                                          strategy)
    assert same_bits(losses, losses1) and same_bits(params, params1)
    assert same_bits(state, state1)


def test_what_a_data_parallel_step_cannot_do_is_refused():
    params = problem(np.float64)[0]
    with pytest.raises(ValueError, match="has_aux=True is not supported data-parallel"):
        ik.Trainer(mlp_loss, params, optim.adam(1e-3), client="serial", has_aux=True)
    with pytest.raises(ValueError, match="reduction='max'"):
        ik.Trainer(mlp_loss, params, optim.adam(1e-3), client="serial", reduction="max")
    t = ik.Trainer(mlp_loss, params, optim.lbfgs(), client="serial", block_rows=BLOCK,
                   strategy="reference")
    with pytest.raises(ValueError, match="L-BFGS's line search.*first-order optimizer"):
        train(t, np.float64, steps=1)
    with pytest.raises(TypeError, match="block_rows, progress are options of data-parallel"):
        ik.Trainer(mlp_loss, params, optim.adam(1e-3), block_rows=64, progress=True)
    with pytest.raises(ValueError, match="deterministic_reductions=False"):
        ik.Trainer(mlp_loss, params, optim.adam(1e-3), client="serial",
                   deterministic_reductions=False).step(*problem(np.float64)[1:])


def test_a_saved_run_resumes_with_the_uninterrupted_bits(serial, tmp_path):
    t = trainer("serial", np.float64)
    train(t, np.float64, steps=8)
    t.save(tmp_path / "run.npz")
    resumed = ik.Trainer.load(tmp_path / "run.npz", mlp_loss, optimizer(), client="serial",
                              block_rows=BLOCK, strategy="reference")
    assert resumed.steps == 8
    train(resumed, np.float64, steps=STEPS - 8)
    assert same_bits(resumed.params, serial[np.float64][1])
    assert same_bits(resumed.opt_state, serial[np.float64][2])


# ---------------------------------------------------------------- clusters


@pytest.mark.parametrize("workers", [1, 2, 3])  # 3 last: the killing test shares its cluster
def test_steps_on_workers_are_the_single_process_bits(serial, workers, capsys, tmp_path,
                                                      clusters):
    c = clusters(workers)
    for dt in (np.float32, np.float64):
        with trainer(c.client, dt, progress=True) as t:
            losses = train(t, dt)
            assert same_bits(losses, serial[dt][0]), (workers, dt)
            assert same_bits(t.params, serial[dt][1]), (workers, dt)
            assert same_bits(t.opt_state, serial[dt][2]), (workers, dt)
    if workers == 2:  # a one-process run's bits on the cluster, default blocks
        (losses, params, _), (losses1, params1, _) = one_process_run(c.client, np.float32,
                                                                     "reference", steps=5)
        assert same_bits(losses, losses1) and same_bits(params, params1)
    if workers == 2:  # save on the cluster half-way, resume in a new Trainer
        t = trainer(c.client, np.float64)
        train(t, np.float64, steps=STEPS // 2)
        t.save(tmp_path / "half.npz")
        t.close()
        resumed = ik.Trainer.load(tmp_path / "half.npz", mlp_loss, optimizer(),
                                  client=c.client, block_rows=BLOCK, strategy="reference")
        train(resumed, np.float64, steps=STEPS // 2)
        assert same_bits(resumed.params, serial[np.float64][1])
        resumed.close()
    err = capsys.readouterr().err
    assert f"Trainer step {STEPS}: loss " in err
    assert re.search(r"6 blocks of 700 rows on \d+ workers \[tcp://", err)  # any count listed
    assert "6 blocks sent" in err and "0 blocks sent" in err


def test_killing_one_of_three_workers_during_training_gives_the_same_bits(serial, tmp_path,
                                                                            clusters):
    """One worker dies inside step 1 (while compiling its blocks), one
    holding the only copy of a block is killed between steps, and one is
    killed from another thread while steps run: training completes with the
    same bits. The cluster is spoiled afterwards: no later test gets it."""
    flag = str(tmp_path / "kill-one-worker")
    open(flag, "w").close()
    c = clusters(3)
    try:
        t = trainer(c.client, np.float64, loss=killing_loss(flag))
        x, y = problem(np.float64)[1:]
        losses = [t.step(x, y) for _ in range(6)]
        assert os.path.exists(flag + ".taken")  # a worker died during step 1
        holder = sole_holder(c.client, t._parallel.value_and_grad.block_keys)
        sent = t._parallel.value_and_grad.blocks_sent
        os.kill(c.worker_pids()[holder], signal.SIGKILL)
        losses += [t.step(x, y) for _ in range(6)]
        assert t._parallel.value_and_grad.blocks_sent > sent  # its blocks were sent again
        pid = next(iter(c.worker_pids().values()))
        killer = threading.Timer(0.05, kill_quietly, (pid,))  # whenever it lands, no bit moves
        killer.start()
        losses += [t.step(x, y) for _ in range(STEPS - 12)]
        killer.join()
        t.close()
    finally:
        clusters.spoil()
    assert same_bits(losses, serial[np.float64][0])
    assert same_bits(t.params, serial[np.float64][1])


def kill_quietly(pid: int) -> None:
    """SIGKILL ``pid``, which may already be gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_local_client_starts_and_closes_its_own_cluster(serial):
    t = trainer("local", np.float32, n_workers=1)
    try:
        assert same_bits(train(t, np.float32, steps=3), serial[np.float32][0][:3])
        cluster = t._parallel.value_and_grad.client.cluster
    finally:
        t.close()
    assert cluster.status.name == "closed"


def test_a_data_parallel_trainer_evaluates_in_this_process_with_its_reduction():
    """``evaluate`` runs ``loss_fn`` over the whole batch here (the sum of
    every row's loss) and divides by the rows as ``reduction="mean"`` does:
    the loss the next step reports, within the blocks' different order of
    summation."""
    t = trainer("serial", np.float64)
    x, y = problem(np.float64)[1:]
    value = t.evaluate(x, y)
    assert t.steps == 0
    np.testing.assert_allclose(value, t.step(x, y), rtol=1e-13)
    summed = trainer("serial", np.float64, reduction="sum")
    np.testing.assert_allclose(summed.evaluate(x, y), value * len(x), rtol=1e-13)
