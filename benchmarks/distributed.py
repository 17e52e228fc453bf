"""Data-parallel value and gradient on a Dask LocalCluster, against one process.

A digits-sized MLP (64 inputs, 32 tanh units, 10 classes, softmax
cross-entropy; synthetic data of the digits data set's shape) over N rows cut
into blocks of B rows. Contenders, all computing ``(loss, grads)`` of the mean
loss:

- ``whole``: ``jit(value_and_grad(mean loss))`` over the whole batch in this
  process (a different summation order: not the same bits, the baseline a
  user has without isokernel.distributed);
- ``blocked``: ``reference_value_and_grad`` in this process: the blocks one
  after another, the bits the cluster reproduces;
- ``dask-1``, ``dask-2``: ``isokernel.distributed.value_and_grad`` on a
  LocalCluster of 1 and 2 worker processes (one thread each); the batch is
  on the workers after the first call, each call sends the parameters.

Timings are best of N with the contenders interleaved; rows per second and
ratios are from the same run. Scaling efficiency is t(dask-1) / (2 t(dask-2)).

    python benchmarks/distributed.py [--rows 32768] [--block-rows 4096] [--repeats 10]
                                     [--strategy reference|native] [--dtype float32]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# this file's name is the Dask package's: keep its folder off the import path
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import numpy as np  # noqa: E402

import isokernel as ik  # noqa: E402
import isokernel.numpy as inp  # noqa: E402
from isokernel import distributed as dist  # noqa: E402

FEATURES, HIDDEN, CLASSES = 64, 32, 10


def mlp_loss(params, x, onehot):
    """The sum over the block's rows of the softmax cross-entropy of a
    one-hidden-layer tanh MLP."""
    w1, b1, w2, b2 = params
    logits = inp.tanh(x @ w1 + b1) @ w2 + b2
    shifted = logits - inp.max(logits, axis=1, keepdims=True)
    logp = shifted - inp.log(inp.sum(inp.exp(shifted), axis=1, keepdims=True))
    return -inp.sum(logp * onehot)


def data(rows: int, dtype):
    rng = np.random.default_rng(0)
    params = (0.1 * rng.normal(size=(FEATURES, HIDDEN)), np.zeros(HIDDEN),
              0.1 * rng.normal(size=(HIDDEN, CLASSES)), np.zeros(CLASSES))
    x = rng.integers(0, 17, size=(rows, FEATURES)) / 16.0  # digits' 0..16 grey levels
    labels = rng.integers(0, CLASSES, size=rows)
    onehot = np.eye(CLASSES)[labels]
    return tuple(p.astype(dtype) for p in params), x.astype(dtype), onehot.astype(dtype)


def best_of(fn, args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def same_bits(a, b) -> bool:
    la, lb = ik.tree_flatten(a)[0], ik.tree_flatten(b)[0]
    return all(np.asarray(p).tobytes() == np.asarray(q).tobytes() for p, q in zip(la, lb))


def contenders(args, clients):
    options = dict(shard_argnums=(1, 2), block_rows=args.block_rows, strategy=args.strategy)
    rows = args.rows
    whole = ik.jit(ik.value_and_grad(lambda p, x, t: mlp_loss(p, x, t) / rows),
                   strategy=args.strategy, deterministic_reductions=True)
    found = {"whole": whole, "blocked": dist.reference_value_and_grad(mlp_loss, **options)}
    for n, client in clients.items():
        found[f"dask-{n}"] = dist.value_and_grad(mlp_loss, client=client, **options)
    return found


def measure(functions, batch, repeats: int) -> dict:
    for fn in functions.values():
        fn(*batch)  # compile, and scatter the batch
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeats):
        for name, fn in functions.items():
            best[name] = min(best[name], best_of(fn, batch))
    return best


def report(args, best: dict, functions, batch) -> None:
    blocked = functions["blocked"](*batch)
    n_blocks = len(dist.block_bounds(args.rows, args.block_rows))
    print(f"MLP {FEATURES}-{HIDDEN}-{CLASSES}, {args.rows} rows in {n_blocks} blocks of "
          f"{args.block_rows}, {args.dtype}, strategy {args.strategy}, best of {args.repeats}")
    print(f"{'contender':<10} {'ms/call':>9} {'rows/s':>12} {'vs blocked':>11}  same bits")
    for name, t in best.items():
        same = "-" if name == "whole" else same_bits(functions[name](*batch), blocked)
        print(f"{name:<10} {t * 1e3:9.2f} {args.rows / t:12.0f} {best['blocked'] / t:10.2f}x"
              f"  {same}")
    if "dask-1" in best and "dask-2" in best:
        print(f"scaling efficiency 1 -> 2 workers: {best['dask-1'] / (2 * best['dask-2']):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--block-rows", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--strategy", default="reference")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    from distributed import Client, LocalCluster
    with dist.quiet_workers():  # no statistical profiler on the workers
        clusters = {n: LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                    dashboard_address=None) for n in (1, 2)}
    clients = {n: Client(c) for n, c in clusters.items()}
    try:
        batch = data(args.rows, np.dtype(args.dtype))
        functions = contenders(args, clients)
        report(args, measure(functions, batch, args.repeats), functions, batch)
    finally:
        for n in clients:
            clients[n].close()
            clusters[n].close()


if __name__ == "__main__":
    main()
