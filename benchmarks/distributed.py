"""Data parallelism on a Dask LocalCluster against one process: (1) the value
and gradient of an MLP, (2) a 10^7-pixel soil-moisture retrieval chunk by chunk.

Part ``mlp``. A digits-sized MLP (64 inputs, 32 tanh units, 10 classes,
softmax cross-entropy; synthetic data of the digits data set's shape) over N
rows cut into blocks of B rows. Contenders, all computing ``(loss, grads)`` of
the mean loss:

- ``whole``: ``jit(value_and_grad(mean loss))`` over the whole batch in this
  process (a different summation order: not the same bits, the baseline a
  user has without isokernel.distributed);
- ``blocked``: ``reference_value_and_grad`` in this process: the blocks one
  after another, the bits the cluster reproduces;
- ``dask-1``, ``dask-2``: ``isokernel.distributed.value_and_grad`` on a
  LocalCluster of 1 and 2 worker processes (one thread each); the batch is
  on the workers after the first call, each call sends the parameters.

Part ``retrieval``. The soil-moisture retrieval (Stages 1-4, ``isokernel run
soil-moisture``) over a synthetic scene of ``--pixels`` pixels, written once
as NetCDF to a temporary folder before any timing (``write_scene``; its
generation and writing are not timed). Contenders, each computing mv, eps_re
and vwc for every pixel of the scene's grid:

- ``jit 1 thread``: ``jit(retrieve, workers=1)`` on this process's fastest
  CPU strategy over the whole scene, already in memory: the single-core
  compute rate;
- ``jit``: the same on all the cores this process may use: the
  single-process compute baseline, no file read or written;
- ``read inputs`` and ``write outputs``: loading the retrieval's 8 inputs
  from the scene file, and writing its 3 outputs as NetCDF, in this process:
  the file I/O that the ``run`` rows include;
- ``checksum``: the input checksum of the scene file alone (XXH3-128, the
  default), which ``run`` computes on a background thread for the run
  manifest and ``--resume``;
- ``run``: ``isokernel.scenes.run`` without a cluster (``isokernel run``
  without ``--dask``): read, compute chunk by chunk, write the output file;
- ``dask-1``, ``dask-2``: the same ``run`` on the LocalClusters
  ``isokernel run --dask local --workers n`` starts (``open_client("local",
  n)``: n worker processes sharing the CPUs, so one worker has them all and
  two on 2 cores have one each); ``dask-1x1``: one worker with one thread,
  which ``dask-2`` is compared with. Each is started once (the start time is
  printed, not timed) and reached by its scheduler address. Every chunk runs
  on the strategy ``auto`` picks on its worker, whose thread pool has as
  many threads as the worker's ``nthreads`` (printed).

The retrieval is measured in two phases: first this process alone (``jit``,
the I/O rows, ``run``), then with the clusters started, ``run`` again beside
the ``dask-*`` rows. The clusters' schedulers and clients live in this
process, and idle they still took about a fifth of ``run``'s time here
(7.5-7.9 s against 6.0 s at 10^7 pixels), so each ratio compares contenders
measured in the same phase.

The ``run`` rows include reading the inputs and writing the output file (to
a temporary name, renamed when complete); ``read inputs`` and ``write
outputs`` show that share. ``same bits`` compares each contender's outputs
with ``jit``'s. Below the table, the ratios: ``run`` against ``jit`` with the
file I/O taken out, jit / (run - read - write) (1.0: ``run`` adds nothing to
the compute but the I/O; the checksum and the chunk store's own writes are
in the remainder), ``dask-1`` against ``run`` and ``dask-2`` against
``dask-1x1``; then the peak resident memory of this process (which holds the
whole scene for ``jit``; ``benchmarks/run_memory.py`` measures ``run`` alone). Beside them, two
limits: the memory-bandwidth bound (the inputs' and outputs' bytes per pixel
at the copy bandwidth measured in this run) and the compute roof (``jit 1
thread``'s rate times the cores). On a machine with 2 cores, 2 workers share
them with each other and with the driver (and the scheduler): they cannot run
twice as fast as one. Each
worker's strategy runs as many threads as the worker's Dask ``nthreads`` (1
here), so two workers run 2 threads on 2 cores.

The files are NetCDF, as ``isokernel demo --save-scene scene.nc`` writes
them: ``run`` over Zarr stores took 2-3.5 times as long here (10^6 pixels).
At 10^7 pixels the scene takes about 30 s to generate and the retrieval
part about 1-2 minutes on 2 cores; ``--pixels 1000000`` takes about 30 s.

Timings are best of N with the contenders interleaved; rates and ratios are
from the same run. Scaling efficiency is t(dask-1x1) / (2 t(dask-2)) in the
retrieval part, t(dask-1) / (2 t(dask-2)) in the MLP part.

    python benchmarks/distributed.py [--part mlp|retrieval|all]
        [--rows 32768] [--block-rows 4096] [--repeats 10] [--strategy reference|native]
        [--dtype float32] [--pixels 10000000] [--chunk 1048576] [--retrieval-repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass

# this file's name is the Dask package's: keep its folder off the import path
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import numpy as np  # noqa: E402

import isokernel as ik  # noqa: E402
import isokernel.numpy as inp  # noqa: E402
from isokernel import distributed as dist  # noqa: E402


def _load_common():
    """benchmarks/_common.py, loaded by its path (the folder is off the import path)."""
    spec = importlib.util.spec_from_file_location("_common", os.path.join(HERE, "_common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_common = _load_common()
interleaved_best, try_import = _common.interleaved_best, _common.try_import

FEATURES, HIDDEN, CLASSES = 64, 32, 10


# ------------------------------------------------------------------ part 1: the MLP


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


def mlp_part(args) -> None:
    from distributed import Client, LocalCluster
    with dist.quiet_workers():  # no statistical profiler on the workers
        clusters = {n: LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                    dashboard_address=":0") for n in (1, 2)}
    clients = {n: Client(c) for n, c in clusters.items()}
    try:
        batch = data(args.rows, np.dtype(args.dtype))
        functions = contenders(args, clients)
        best = interleaved_best(functions, batch, args.repeats)[1]
        report(args, best, functions, batch)
    finally:  # newest first: each client, closing, restores the Dask scheduler set before it
        for n in reversed(clients):
            clients[n].close()
            clusters[n].close()


# ------------------------------------------------------------------ part 2: the retrieval

MODEL = "soil-moisture"
OUTPUTS = ("mv", "eps_re", "vwc")
CLUSTERS = {"dask-1": (1, None), "dask-1x1": (1, 1), "dask-2": (2, None)}
"""Row name -> (workers, threads per worker; None: as ``--dask local --workers n``
splits the CPUs, ``scenes.runner.local_threads``)."""
WORKERS = (1, 2)
RUN_ROWS = ("run", *CLUSTERS)


def _quiet(*_args, **_kwargs) -> None:
    """``echo`` for ``run`` and ``write_scene``: the table says what happened."""


def cpu_threads() -> int:
    """The CPU budget of the calling process: the threads its strategy runs."""
    return ik.deploy.cpu_budget().value


def auto_strategy():
    """The CPU strategy ``auto`` picks in the calling process (a worker's too)."""
    from isokernel.backends import Device, choose
    return choose("auto", Device("cpu"))


def timed(fn, *args):
    """(fn(*args), seconds)."""
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def make_scene(folder: str, pixels: int):
    """The synthetic scene written once as NetCDF; returns (path, grid)."""
    from isokernel.models.soil_moisture import Grid, generate_scene
    from isokernel.scenes import write_scene
    path, grid = os.path.join(folder, "scene.nc"), Grid.square(pixels)
    scene, made = timed(generate_scene, pixels)
    _, wrote = timed(write_scene, path, scene, grid, _quiet)
    print(f"scene: {pixels:,} pixels generated in {made:.1f} s, written to NetCDF in "
          f"{wrote:.1f} s ({os.path.getsize(path) / 1e6:.0f} MB); neither is timed below")
    return path, grid


def read_inputs(path: str) -> tuple:
    """The retrieval's inputs from the scene file, flat, as ``run`` reads them."""
    import xarray as xr

    from isokernel.models.soil_moisture import RETRIEVAL_INPUTS
    with xr.open_dataset(path) as ds:
        return tuple(np.ascontiguousarray(ds[name].values).reshape(-1)
                     for name in RETRIEVAL_INPUTS)


def write_outputs(outputs: dict, grid, path: str) -> None:
    """The retrieval's outputs on the scene's (y, x) grid as NetCDF."""
    import xarray as xr
    shape = (grid.height, grid.width)
    ds = xr.Dataset({n: (("y", "x"), np.asarray(outputs[n]).reshape(shape)) for n in OUTPUTS})
    ds.to_netcdf(path)


def run_call(scene: str, output: str, chunks: dict, address: str | None):
    """``isokernel run soil-moisture SCENE OUTPUT`` in this process (address
    None) or on the cluster at ``address``; replaces its own earlier output."""
    from isokernel.scenes import run

    def call():
        return run(MODEL, scene, output, chunks=chunks, dask_address=address, progress=False,
                   echo=_quiet, overwrite=True)
    return call


def start_clusters() -> dict:
    """The LocalClusters of the ``dask-*`` rows (``CLUSTERS``): ``--dask local
    --workers n``'s, and one single-thread worker beside them."""
    from distributed import Client, LocalCluster

    from isokernel.distributed import quiet_workers
    from isokernel.scenes import open_client
    clients = {}
    for name, (n, threads) in CLUSTERS.items():
        start = time.perf_counter()
        if threads is None:
            clients[name] = open_client("local", n)
        else:
            with quiet_workers():
                clients[name] = Client(LocalCluster(n_workers=n, threads_per_worker=threads,
                                                    processes=True, dashboard_address=":0"))
        print(f"{name}: LocalCluster of {n} worker(s) started in "
              f"{time.perf_counter() - start:.1f} s (not timed below)")
    return clients


def close_clusters(clients: dict) -> None:
    """Newest first: each client, closing, restores the Dask scheduler set before it."""
    for client in reversed(clients.values()):
        cluster = client.cluster
        client.close()
        cluster.close()


@dataclass(frozen=True)
class Setup:
    """What every retrieval contender shares: the scene file, its grid, the
    chunk rows, the strategy ``auto`` picks here and the inputs in memory."""
    folder: str
    scene: str
    grid: object
    chunk_rows: int
    strategy: object
    inputs: tuple

    @property
    def pixels(self) -> int:
        """Every pixel of the grid, the last row's padding too: all are computed."""
        return self.grid.height * self.grid.width

    @property
    def chunks(self) -> int:
        return -(-self.grid.height // self.chunk_rows)

    def output(self, name: str) -> str:
        return os.path.join(self.folder, f"{name.replace(' ', '-')}.nc")


def compute_rows(setup: Setup) -> dict:
    """The retrieval jitted over the whole scene in memory: one thread (when
    the strategy takes ``workers=``) and every core."""
    from isokernel.models.soil_moisture import retrieve
    name, rows = setup.strategy.name, {}
    if "workers" in setup.strategy.options:
        rows["jit 1 thread"] = functools.partial(ik.jit(retrieve, strategy=name, workers=1),
                                                 *setup.inputs)
    rows["jit"] = functools.partial(ik.jit(retrieve, strategy=name), *setup.inputs)
    return rows


def file_rows(setup: Setup, outputs: dict) -> dict:
    """Reading the inputs, writing the outputs, the checksum and ``run`` in this process."""
    from isokernel.scenes.run_manifest import checksum
    chunks = {"y": setup.chunk_rows}
    return {"read inputs": functools.partial(read_inputs, setup.scene),
            "write outputs": functools.partial(write_outputs, outputs, setup.grid,
                                               setup.output("write outputs")),
            "checksum": functools.partial(checksum, setup.scene),
            "run": run_call(setup.scene, setup.output("run"), chunks, None)}


def cluster_rows(setup: Setup, clients: dict) -> dict:
    """``run`` in this process and on each cluster (``CLUSTERS``)."""
    chunks = {"y": setup.chunk_rows}
    rows = {"run": run_call(setup.scene, setup.output("run"), chunks, None)}
    for name, client in clients.items():
        rows[name] = run_call(setup.scene, setup.output(name), chunks, client.scheduler.address)
    return rows


def output_bits(path: str, outputs: dict, grid) -> bool:
    """Whether the file holds ``outputs`` bit for bit (NaN payloads too: no decoding)."""
    import xarray as xr
    shape = (grid.height, grid.width)
    with xr.open_dataset(path, mask_and_scale=False) as ds:
        return all(ds[n].values.tobytes() == np.asarray(outputs[n]).reshape(shape).tobytes()
                   for n in OUTPUTS)


def bits(setup: Setup, first: dict, reference) -> dict:
    """Per contender: the same bits as ``jit``'s outputs (``reference``), or
    '-' (I/O alone)."""
    found = {name: "-" for name in first}
    if "jit 1 thread" in first:
        found["jit 1 thread"] = same_bits(first["jit 1 thread"], reference)
    if "jit" in first:
        found["jit"] = "reference"
    for name in RUN_ROWS:
        if name in first:
            found[name] = output_bits(setup.output(name), reference, setup.grid)
    return found


def retrieval_header(args, setup: Setup) -> None:
    g, rows, padding = setup.grid, setup.chunk_rows, setup.pixels - args.pixels
    padded = f", and {padding:,} NaN pixels padding its last row" if padding else ""
    print(f"soil-moisture retrieval (Stages 1-4, `isokernel run {MODEL}`), {args.pixels:,} "
          f"pixels on a {g.height}x{g.width} grid{padded}, float64; chunks of {rows} rows "
          f"({rows * g.width:,} pixels), {setup.chunks} chunk(s); strategy "
          f"{setup.strategy.name}; best of {args.retrieval_repeats}, interleaved")
    if setup.chunks < max(WORKERS):
        print(f"note: fewer chunks than the {max(WORKERS)} workers: some idle; pass a smaller "
              f"--chunk, e.g. --chunk {setup.pixels // (2 * max(WORKERS))}")


def retrieval_table(setup: Setup, best: dict, same: dict) -> None:
    print(f"{'contender':<14} {'s/call':>8} {'Mpixel/s':>9} {'vs run':>7}  same bits as jit")
    for name, t in best.items():
        print(f"{name:<14} {t:8.3f} {setup.pixels / t / 1e6:9.2f} {best['run'] / t:6.2f}x  "
              f"{same[name]}")


def limits(setup: Setup, best: dict, outputs: dict) -> None:
    """The memory-bandwidth bound and the compute roof, in Mpixel/s."""
    from isokernel.models.demo import memory_bandwidth
    per_pixel = sum(a.itemsize for a in setup.inputs)
    per_pixel += sum(np.asarray(outputs[n]).itemsize for n in OUTPUTS)
    bandwidth = memory_bandwidth()
    print(f"{'memory bound':<14} {'':8} {bandwidth / per_pixel / 1e6:9.2f}  {per_pixel} B/pixel "
          f"of inputs and outputs at {bandwidth / 1e9:.1f} GB/s (copy bandwidth, this run)")
    if "jit 1 thread" in best:
        compute_roof(setup, best)


def compute_roof(setup: Setup, best: dict) -> None:
    """``jit 1 thread``'s rate times the cores; a contender that computes
    the retrieval faster says the load changed during the run."""
    cores = cpu_threads()
    roof = cores * setup.pixels / best["jit 1 thread"]
    print(f"{'compute roof':<14} {'':8} {roof / 1e6:9.2f}  jit 1 thread's rate x {cores} cores")
    if min(best[name] for name in ("jit", "run")) < setup.pixels / roof:
        print("note: a contender beat the compute roof: the machine's load changed during the "
              "run (other processes on its cores); read the ratios with care")


def pool_threads() -> int:
    """The threads the calling process's native and threads strategies run:
    its CPU budget, capped in a Dask worker by the worker's ``nthreads``."""
    from isokernel.backends.cpu.pool import resolve_workers
    return resolve_workers(None)[0]


def peak_rss_mib() -> float:
    """Peak resident memory of this process (Linux: ru_maxrss in KiB)."""
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_process_ratio(best: dict) -> None:
    """``run`` against ``jit`` without the file I/O."""
    io = best["read inputs"] + best["write outputs"]
    rest = best["run"] - io
    print(f"run without the file I/O: run - read - write = {rest:.3f} s; jit / that = "
          f"{best['jit'] / rest if rest > 0 else float('inf'):.2f} (run adds "
          f"{rest - best['jit']:+.3f} s to jit's compute: chunking, the checksum "
          f"({best['checksum']:.3f} s alone), the chunk store)")


def cluster_ratios(best: dict) -> None:
    """A 1-worker cluster against ``run``, 2 single-thread workers against 1."""
    print(f"dask-1 / run throughput: {best['run'] / best['dask-1']:.2f} (one worker with "
          f"every CPU, as --dask local --workers 1 starts it)")
    print(f"dask-2 / dask-1x1 throughput: {best['dask-1x1'] / best['dask-2']:.2f} (two "
          f"single-thread workers against one; scaling efficiency "
          f"{best['dask-1x1'] / (2 * best['dask-2']):.2f})")


def cluster_notes(best: dict, clients: dict) -> None:
    """What each worker runs on how many threads, and the peak memory of
    this process."""
    for name, client in clients.items():
        workers = client.scheduler_info()["workers"]
        nthreads = sorted({w["nthreads"] for w in workers.values()})
        asked = [client.submit(pool_threads, workers=[w], pure=False) for w in workers]
        threads = sorted(set(client.gather(asked)))  # in a task: the worker's nthreads apply
        kinds = sorted({s.name for s in client.run(auto_strategy).values()})
        print(f"{name}: {len(workers)} worker process(es), {', '.join(map(str, nthreads))} "
              f"Dask thread(s) each, strategy {', '.join(kinds)} with "
              f"{', '.join(map(str, threads))} thread(s) each in a task (the worker's nthreads)")
    print(f"peak RSS of this process: {peak_rss_mib():.0f} MiB (the whole scene's inputs and "
          f"outputs for jit, and the run in one process)")
    print(f"{cpu_threads()} cores here: the workers share them with each other, the scheduler "
          f"and this driver process; `run` and `jit` use them all in one process")


def measure_retrieval(args, folder: str, scene: str, grid) -> None:
    """Two phases: this process alone (jit, the I/O, ``run``), then with the
    clusters started (``run`` again beside them: the clusters' schedulers
    and clients live in this process and take some of its time, so each
    ratio compares contenders measured together)."""
    setup = Setup(folder, scene, grid, max(1, args.chunk // grid.width), auto_strategy(),
                  read_inputs(scene))
    retrieval_header(args, setup)
    rows = compute_rows(setup)
    outputs = rows["jit"]()  # compiles; the outputs ``write outputs`` writes
    rows.update(file_rows(setup, outputs))
    first, best = interleaved_best(rows, (), args.retrieval_repeats)
    print("in this process, no cluster running:")
    retrieval_table(setup, best, bits(setup, first, outputs))
    limits(setup, best, outputs)
    in_process_ratio(best)
    print("`run` rows: read the inputs, compute, write the output file (under a temporary "
          "name, renamed when complete); `read inputs` and `write outputs` are that I/O alone")
    clients = start_clusters()
    try:
        first, best = interleaved_best(cluster_rows(setup, clients), (),
                                       args.retrieval_repeats)
        print("with the LocalClusters started (their schedulers run in this process):")
        retrieval_table(setup, best, bits(setup, first, outputs))
        cluster_ratios(best)
        cluster_notes(best, clients)
    finally:
        close_clusters(clients)


IO_FIX = "pip install 'isokernel[io]'"


def retrieval_part(args) -> None:
    notes: list = []
    missing = [m for m in ("xarray", "distributed") if try_import(m, notes, IO_FIX) is None]
    if missing:
        print("retrieval part skipped:\n" + "\n".join(notes))
        return
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the start: {load} ({cpu_threads()} cores)")
    with tempfile.TemporaryDirectory(prefix="isokernel-retrieval-") as folder:
        scene, grid = make_scene(folder, args.pixels)
        measure_retrieval(args, folder, scene, grid)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end: {load}")


# ------------------------------------------------------------------ command line


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("mlp", "retrieval", "all"), default="all")
    p.add_argument("--rows", type=int, default=32768, help="MLP: rows of the batch")
    p.add_argument("--block-rows", type=int, default=4096, help="MLP: rows per block")
    p.add_argument("--repeats", type=int, default=10, help="MLP: interleaved rounds")
    p.add_argument("--strategy", default="reference", help="MLP: the strategy of every block")
    p.add_argument("--dtype", default="float32", help="MLP: dtype of the data")
    p.add_argument("--pixels", type=positive, default=10_000_000,
                   help="retrieval: pixels of the scene (default 10^7)")
    p.add_argument("--chunk", type=positive, default=1 << 20,
                   help="retrieval: pixels per chunk, rounded down to whole rows of the "
                        "scene's grid (default 2^20, isokernel run's own)")
    p.add_argument("--retrieval-repeats", type=positive, default=3,
                   help="retrieval: interleaved rounds after one warm-up call each")
    return p


def main() -> None:
    args = parser().parse_args()
    if args.part in ("mlp", "all"):
        mlp_part(args)
    if args.part == "all":
        print()
    if args.part in ("retrieval", "all"):
        retrieval_part(args)


if __name__ == "__main__":
    main()
