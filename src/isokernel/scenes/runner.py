"""``run``: a model over a data set, in this process or on a Dask cluster
(with one progress line per second there), into an output and its run
manifest."""

from __future__ import annotations

import sys
import time
import uuid

from ..backends.platform import cpu_budget
from .catalog import Model, resolve_model
from .chunks import forget, local_strategy, tally_of, worker_record
from .datasets import (
    check_chunk_sizes,
    check_input,
    chunk_count,
    is_zarr,
    lazy_results,
    open_input,
    require_io,
)
from .outputs import (
    check_run_manifest,
    manifest,
    output_dataset,
    output_pair,
    place_pair,
    prepare_output,
    run_manifest_path,
    write_temporary,
)
from .run_manifest import (
    Request,
    Timing,
    checksum,
    data_sections,
    in_background,
    run_manifest_record,
)

# dask and distributed (the optional io extra) are imported in the functions that use them

def run(target: str, input_path: str, output_path: str, variables: list[str] = (),
        chunks: dict[str, int] | None = None, dask_address: str | None = None,
        workers: int | None = None, dtype: str = "float64", progress: bool = True,
        echo=print, strategy: str = "auto", overwrite: bool = False) -> dict:
    """Run ``target`` over ``input_path`` and write ``output_path`` and,
    beside it, its run manifest ``OUTPUT.manifest.json`` (``run_manifest``
    in the summary); returns a summary (outputs, chunks, seconds,
    strategies used). ``strategy`` (default ``auto``: each process's
    fastest) names the CPU strategy every chunk runs on. An existing
    ``output_path`` is replaced only with ``overwrite`` and only when
    isokernel wrote it (``prepare_output``); its run manifest is replaced
    with it. ``progress``: dask's progress bar in this process, per-worker
    lines on stderr on a cluster."""
    local_strategy(strategy)  # an unknown or unavailable strategy fails before any work
    check_chunk_sizes(chunks)
    _at_least_one("--workers", workers)
    require_io()
    model = resolve_model(target)
    request = Request(target, input_path, output_path, tuple(variables), chunks, dask_address,
                      workers, dtype, strategy, overwrite)
    timing = Timing()
    check_input(input_path)
    output = prepare_output(output_path, overwrite, echo, input_path)
    check_run_manifest(run_manifest_path(output))
    strategies, template, results = _run_into(output, request, model, timing, progress, echo)
    return _summary(output, results, template, strategies, timing.seconds, echo)


def _run_into(output: str, request: Request, model: Model, timing: Timing, progress: bool,
              echo):
    """Compute, write the output and its run manifest under temporary names,
    move both in; returns the strategies, the template and the results."""
    run_id = uuid.uuid4().hex
    ds = open_input(request.input_path)
    try:
        template, results = lazy_results(ds, model, request.variables, request.chunks,
                                         request.dtype, request.input_path, echo,
                                         request.strategy, run_id)
        out = output_dataset(results, model, dict(ds.attrs),
                             manifest(model.name, request.input_path, results, run_id))
        source = in_background(checksum, request.input_path)  # while the chunks run
        watch = _Progress(run_id, chunk_count(template)) if progress else None
        with output_pair(output) as (temporary, side):
            strategies, records = _write_on_cluster(out, temporary, request.dask_address,
                                                    request.workers, watch,
                                                    request.strategy, run_id)
            data = data_sections(request, model, ds, template, out, source.result())
            timing.stop()
            record = run_manifest_record(request, model, data, records, timing)
            place_pair(temporary, side, output, request.overwrite, record)
    finally:
        ds.close()
    return strategies, template, results


def _summary(output: str, results: dict, template, strategies: dict, seconds: float,
             echo) -> dict:
    n_chunks = chunk_count(template)
    path = run_manifest_path(output)
    echo(f"wrote {output}: {', '.join(results)} over {dict(template.sizes)} in "
         f"{n_chunks} chunks, {seconds:.1f} s; strategy per process: "
         f"{', '.join(sorted(set(strategies.values())))}; run manifest {path}")
    return {"outputs": list(results), "chunks": n_chunks, "seconds": seconds,
            "strategies": strategies, "run_manifest": path}


def _strategies(client, strategy: str) -> dict[str, str]:
    if client is None:
        return {"this process": local_strategy(strategy)}
    return client.run(local_strategy, strategy)


def _write_on_cluster(ds, temporary: str, address, workers, progress: _Progress | None,
                      strategy: str, run: str) -> tuple[dict[str, str], dict[str, dict]]:
    """Write ``ds`` into ``temporary``; returns the strategy of each process
    (asked before) and what each did (``worker_record``, asked after)."""
    client = open_client(address, workers)
    try:
        strategies = _strategies(client, strategy)
        write_temporary(_write, temporary, ds, temporary, client, progress)
        records = _worker_records(client, run, strategy)
    finally:
        _close(client)  # stops what still runs on the cluster before the temporary goes
        forget(run)
    return strategies, records


def _write(ds, path: str, client, progress: _Progress | None) -> None:
    delayed = (ds.to_zarr(path, compute=False, mode="w", consolidated=False) if is_zarr(path)
               else ds.to_netcdf(path, compute=False))
    if client is not None:
        future = client.compute(delayed)
        if progress:
            progress.watch(client, future)
        future.result()
        return
    import dask
    if progress:
        from dask.diagnostics import ProgressBar
        with ProgressBar(out=sys.stderr):
            dask.compute(delayed, scheduler="synchronous")
    else:
        dask.compute(delayed, scheduler="synchronous")


def _worker_records(client, run: str, strategy: str) -> dict[str, dict]:
    """``worker_record`` of this process, or of every worker of the cluster
    (one that cannot answer is recorded with its error, never dropped)."""
    if client is None:
        return {"this process": worker_record(run, strategy)}
    answers = client.run(worker_record, run, strategy, on_error="return")
    return {name: answer if isinstance(answer, dict) else
            {"error": f"{type(answer).__name__}: {answer}"} for name, answer in answers.items()}


# ------------------------------------------------------------------ clusters

CONNECT_SECONDS = 10  # how long a --dask scheduler address may take to answer


def open_client(address: str | None, workers: int | None = None):
    """A distributed client: ``local`` starts a LocalCluster of worker
    processes (one thread each: the strategy inside a worker owns its
    cores); anything else is a scheduler address."""
    if address is None:
        return None
    _at_least_one("--workers", workers)
    from distributed import Client, LocalCluster
    if address == "local":
        n = workers or max(1, cpu_budget().value)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster)
    try:
        return Client(address, timeout=CONNECT_SECONDS)
    except ValueError as err:
        raise ValueError(f"bad --dask address {address!r}: {err}; write a scheduler address "
                         f"such as tcp://HOST:8786, or local") from None
    except OSError as err:  # TimeoutError and refused connections alike
        raise ConnectionError(f"no Dask scheduler answered at {address} within "
                              f"{CONNECT_SECONDS} s ({type(err).__name__}); check the address "
                              f"and that the scheduler runs, or use --dask local") from None


def _close(client) -> None:
    if client is None:
        return
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def _at_least_one(option: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{option} must be at least 1, got {value}")


# ------------------------------------------------------------------ progress

PROGRESS_SECONDS = 1.0  # at most one progress line per this many seconds


class _Progress:
    """Progress of a run: on a Dask cluster one line on stderr about every
    ``PROGRESS_SECONDS`` and a final one, with chunks done of the total and,
    per worker, its chunks and pixels per second of the computation so far;
    in this process, dask's progress bar."""

    def __init__(self, run: str, total: int):
        self.run, self.total = run, total
        self.started = time.perf_counter()

    def watch(self, client, future) -> None:
        from distributed import TimeoutError as Waiting  # asyncio's, before Python 3.11
        from distributed import wait
        self.started = time.perf_counter()
        while True:
            try:
                wait(future, timeout=PROGRESS_SECONDS)
                break
            except Waiting:
                self.show(client, final=False)
        future.result()  # a failed chunk raises here, before any final line
        self.show(client, final=True)

    def show(self, client, final: bool) -> None:
        tallies = client.run(tally_of, self.run, on_error="return")
        print(self.line(tallies, final), file=sys.stderr, flush=True)

    def line(self, tallies: dict, final: bool) -> str:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        done = sum(t["chunks"] for t in tallies.values() if isinstance(t, dict))
        workers = "; ".join(_worker_progress(name, tallies[name], seconds)
                            for name in sorted(tallies))
        state = "done" if final else "running"
        return (f"isokernel run: {state}, {done}/{self.total} chunks, {seconds:.1f} s | "
                f"{workers}")


def _worker_progress(name: str, tally, seconds: float) -> str:
    if not isinstance(tally, dict):
        return f"{name} no answer ({type(tally).__name__})"
    n = tally["chunks"]
    return f"{name} {n} chunk{'s' * (n != 1)} {_rate(tally['pixels'] / seconds)}"


def _rate(per_second: float) -> str:
    """``812 pixel/s``, ``3.4 kpixel/s``, ``12.5 Mpixel/s``, ``1.02 Gpixel/s``."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.3g} {prefix}pixel/s"
    return f"{per_second:.3g} pixel/s"
