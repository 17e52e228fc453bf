"""On NVIDIA GPUs with CuPy and NCCL only (skipped elsewhere with the
reason): ``collective_value_and_grad`` through ``NcclCommunicator``, with
the partials gathered by NCCL and combined on the device.

- one rank on one GPU (in this process): a model of elementwise operations
  and sums in ``portable`` numerics gives the CPU's bits (``cuda-eager`` is
  bit-identical to ``reference`` there, deterministic reductions on); an MLP
  in ``native`` numerics (cuBLAS products and libdevice ``tanh``: other bits
  than the CPU's) gives the bits of its blocks run one by one with
  ``cuda-eager`` on the same GPU and summed in the written tree in NumPy;
- two ranks on two GPUs (one process each, multiprocessing ``spawn``): both
  ranks get the bits of one rank, given the full batch or only their rows,
  and a batch of one block (rank 1 sends padding only).

``scripts/gpu-check`` runs this file."""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import traceback

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import distributed as dist
from isokernel.backends import get_strategy

ROWS, BLOCK = 700, 128  # 6 blocks, the last one ragged
SPAWN_TIMEOUT = 150  # seconds for two fresh processes to import, compile and answer


def _reason(gpus: int) -> str | None:
    reason = get_strategy("cuda-eager").unavailable_reason()
    if reason is not None:
        return f"no GPU strategy here: {reason}"
    try:
        import cupy
        from cupy.cuda import nccl
    except Exception as err:
        return f"CuPy's NCCL module does not import: {err}"
    if not nccl.available:
        return "CuPy has no NCCL (cupy.cuda.nccl.available is False)"
    count = cupy.cuda.runtime.getDeviceCount()
    return None if count >= gpus else f"{count} GPU(s) visible, {gpus} needed"


ONE_GPU, TWO_GPUS = _reason(1), _reason(2)


def wave_loss(params, x, y):
    """Elementwise transcendentals and sums: the same bits on CPU and GPU in portable numerics."""
    r = params["a"] * inp.exp(-params["b"] * x) + params["c"] * inp.tanh(x) - y
    return inp.sum(r * r)


def mlp_loss(params, x, y):
    w1, b1, w2 = params
    r = inp.tanh(x @ w1 + b1) @ w2 - y
    return inp.sum(r * r)


def problem(model: str, dtype, rows=ROWS, seed=0):
    rng = np.random.default_rng(seed)
    if model == "wave":
        params = {"a": np.asarray(1.3, dtype), "b": np.asarray(0.4, dtype),
                  "c": rng.normal(size=4).astype(dtype)}
        x, y = rng.normal(size=(rows, 4)), rng.normal(size=(rows, 4))
    else:
        params = (rng.normal(size=(6, 12)).astype(dtype), rng.normal(size=12).astype(dtype),
                  (0.3 * rng.normal(size=(12, 1))).astype(dtype))
        x, y = rng.normal(size=(rows, 6)), rng.normal(size=(rows, 1))
    return params, x.astype(dtype), y.astype(dtype)


LOSSES = {"wave": wave_loss, "mlp": mlp_loss}
CASES = [  # (model, dtype, strategy options, rows)
    ("wave", "float32", {"numerics": "portable"}, ROWS),
    ("mlp", "float32", {}, ROWS),
    ("mlp", "float64", {}, ROWS),
    ("mlp", "float32", {}, 100),  # one block: a second rank has none
]


def written_tree(model: str, dtype, strategy: str, rows=ROWS, **options) -> list:
    """Independent of the package: each block's jitted value_and_grad (host
    arrays in and out), ``dist.pairwise`` over the blocks in NumPy, then the mean."""
    params, x, y = problem(model, dtype, rows)
    block = ik.jit(ik.value_and_grad(LOSSES[model]), strategy=strategy,
                   deterministic_reductions=True, **options)
    parts = [ik.tree_flatten(block(params, x[lo:hi], y[lo:hi]))[0]
             for lo, hi in dist.block_bounds(rows, BLOCK)]
    count = np.asarray(rows, dtype)
    return [np.asarray(dist.pairwise([np.asarray(p[j]) for p in parts]) / count)
            for j in range(len(parts[0]))]


def on_host(result) -> list:
    import cupy

    return [cupy.asnumpy(v) for v in ik.tree_flatten(result)[0]]


def same_bits(a: list, b: list) -> bool:
    return len(a) == len(b) and all(p.dtype == q.dtype and p.shape == q.shape
                                    and p.tobytes() == q.tobytes() for p, q in zip(a, b))


def run_case(comm, case) -> tuple[list, list]:
    """(full batch, own rows) results of one case on this rank, on the host."""
    model, dtype, options, rows = case
    params, x, y = problem(model, dtype, rows)
    vg = dist.collective_value_and_grad(LOSSES[model], comm=comm, shard_argnums=(1, 2),
                                        block_rows=BLOCK, strategy="cuda-eager", **options)
    lo, hi = vg.local_rows(rows)
    return on_host(vg(params, x, y)), on_host(vg(params, x[lo:hi], y[lo:hi], rows=rows))


def rank_main(world_size: int, unique_id, rank: int, results) -> None:
    """One process per GPU: join the NCCL world, run every case, send the results home."""
    try:
        comm = dist.NcclCommunicator(world_size, unique_id, rank)
        found = [run_case(comm, case) for case in CASES]
        comm.close()
        results.put((rank, comm.device, found))
    except BaseException:
        results.put((rank, None, traceback.format_exc()))


@pytest.mark.skipif(ONE_GPU is not None, reason=str(ONE_GPU))
def test_one_rank_on_one_gpu_gives_the_written_tree_and_portable_the_cpu_bits():
    import cupy

    comm = dist.NcclCommunicator(1, dist.nccl_unique_id(), 0)
    try:
        model, dtype, options, rows = CASES[0]
        vg = dist.collective_value_and_grad(wave_loss, comm=comm, shard_argnums=(1, 2),
                                            block_rows=BLOCK, strategy="cuda-eager", **options)
        got = vg(*problem(model, dtype))
        assert isinstance(got[0], cupy.ndarray) and got[0].device.id == 0  # combined on the GPU
        cpu = written_tree(model, dtype, "reference", **options)
        assert same_bits(on_host(got), cpu)
        for case in CASES:
            model, dtype, options, rows = case
            gpu = written_tree(model, dtype, "cuda-eager", rows, **options)
            whole, own_rows = run_case(comm, case)
            assert same_bits(whole, gpu) and same_bits(own_rows, gpu), case
    finally:
        comm.close()


@pytest.mark.skipif(TWO_GPUS is not None, reason=str(TWO_GPUS))
def test_two_ranks_on_two_gpus_give_the_bits_of_one():
    expected = [written_tree(model, dtype, "cuda-eager", rows, **options)
                for model, dtype, options, rows in CASES]
    cpu = written_tree("wave", "float32", "reference", numerics="portable")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    uid = dist.nccl_unique_id()
    ranks = [context.Process(target=rank_main, args=(2, uid, r, results)) for r in range(2)]
    for process in ranks:
        process.start()
    try:
        found = dict((r, (device, out)) for r, device, out in
                     (results.get(timeout=SPAWN_TIMEOUT) for _ in ranks))
    except queue_module.Empty:
        pytest.fail(f"the two ranks did not answer within {SPAWN_TIMEOUT} s")
    finally:
        for process in ranks:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    for rank, (device, out) in sorted(found.items()):
        assert device is not None, f"rank {rank} failed:\n{out}"
        assert device == f"cuda:{rank}"
        for case, want, (whole, own_rows) in zip(CASES, expected, out):
            assert same_bits(whole, want) and same_bits(own_rows, want), (rank, case)
        assert same_bits(out[0][0], cpu)  # portable numerics: the CPU's bits
