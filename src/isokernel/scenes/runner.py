"""``run``: a model over a data set, chunk by chunk, in this process or on
a Dask cluster (with one progress line per second), into an output and its
run manifest; a run killed outright is continued by ``resume``."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import shutil
import sys
import threading
import time
import uuid

from ..backends.platform import cpu_budget
from ..distributed import quiet_workers
from .catalog import Model, resolve_model
from .chunk_store import (
    DATA,
    STORE_FORMAT,
    DoneLog,
    block_index,
    create,
    identity_difference,
    layout,
    read_done,
    read_header,
    region,
    run_identity,
    store_path,
    stores_of,
    to_netcdf,
    write_chunk,
    write_gridded,
    write_header,
)
from .chunks import forget, local_strategy, tally_of, worker_record
from .datasets import (
    check_chunk_sizes,
    check_input,
    chunk_count,
    is_zarr,
    lazy_results,
    open_input,
    release,
    require_io,
)
from .outputs import (
    check_run_manifest,
    manifest,
    orphaned,
    output_dataset,
    output_pair,
    place_pair,
    prepare_output,
    read_run_manifest,
    run_manifest_path,
    write_temporary,
    written_run,
)
from .run_manifest import (
    CHECKSUMS,
    Request,
    Timing,
    check_checksum,
    checksum,
    data_sections,
    in_background,
    run_manifest_record,
)
from .smap import on_a_grid

# dask and distributed (the optional io extra) are imported in the functions that use them

def run(target: str, input_path: str, output_path: str, variables: list[str] = (),
        chunks: dict[str, int] | None = None, dask_address: str | None = None,
        workers: int | None = None, dtype: str = "float64", progress: bool = True,
        echo=print, strategy: str = "auto", overwrite: bool = False,
        resume: bool = False, ancillary: str | None = None,
        checksum: str = CHECKSUMS[0]) -> dict:
    """Run ``target`` over ``input_path`` and write ``output_path`` and,
    beside it, its run manifest ``OUTPUT.manifest.json`` (``run_manifest``
    in the summary); returns a summary (outputs, chunks, seconds,
    strategies used). ``strategy`` (default ``auto``: each process's
    fastest) names the CPU strategy every chunk runs on. An existing
    ``output_path`` is replaced only with ``overwrite`` and only when
    isokernel wrote it (``prepare_output``); its run manifest is replaced
    with it. ``progress``: a line on stderr about every second, with chunks
    done of the total and, per process, its chunks and pixels per second.
    The outputs are written chunk by chunk into a chunk store beside the
    output (``chunk_store``); ``resume`` continues the chunk store a run of
    the same output, model, input, options and code left when it was killed
    outright, and refuses one that differs. ``ancillary``: the data set on
    EASE-Grid 2.0 a SMAP granule's missing model inputs come from
    (``smap``). ``checksum``: the input's digest the run manifest records
    and a resume compares (``run_manifest.CHECKSUMS``), computed on a
    thread while the chunks run."""
    local_strategy(strategy)  # an unknown or unavailable strategy fails before any work
    check_chunk_sizes(chunks)
    check_checksum(checksum)  # an unknown or unavailable one fails before any work
    _at_least_one("--workers", workers)
    require_io()
    model = resolve_model(target)
    request = Request(target, input_path, output_path, tuple(variables), chunks, dask_address,
                      workers, dtype, strategy, overwrite, ancillary, checksum)
    timing = Timing()
    check_input(input_path)
    if ancillary is not None:
        check_input(ancillary)
    identity = run_identity(request, model)
    finished = _complete(output_path, identity, input_path, echo) if resume else None
    if finished is not None:
        return finished
    output = prepare_output(output_path, overwrite, echo, input_path)
    check_run_manifest(run_manifest_path(output))
    job = _Job(output, identity, *_resumable(output, identity, input_path, resume, echo))
    strategies, template, results = _run_into(output, request, model, timing, progress, echo,
                                              job)
    return _summary(output, results, template, strategies, timing.seconds, echo, job)


def _run_into(output: str, request: Request, model: Model, timing: Timing, progress: bool,
              echo, job: _Job):
    """Compute, write the output and its run manifest under temporary names,
    move both in; returns the strategies, the template and the results."""
    run_id = job.run_id()
    ds = open_input(request.input_path, request.ancillary)
    try:
        template, results, job.arguments = lazy_results(
            ds, model, request.variables, request.chunks, request.dtype, request.input_path,
            echo, request.strategy, run_id)
        record = manifest(model.name, request.input_path, results, run_id)
        out = output_dataset(results, model, dict(ds.attrs), record, grid=False)
        if on_a_grid(ds.attrs):  # a SMAP granule: the cells are stored, the grid written
            job.regrid = functools.partial(_gridded, model=model, source_attrs=dict(ds.attrs),
                                           record=record)
        job.prepare(out, template, timing, progress)
        source = job.source() or in_background(checksum, request.input_path,
                                                     request.checksum)
        source.add_done_callback(job.checksum_done)
        with output_pair(output) as (temporary, side), job.kept_until_done():
            strategies, records = _write_on_cluster(out, temporary, request.dask_address,
                                                    request.workers, job,
                                                    request.strategy, run_id)
            data = data_sections(request, model, ds, template, out, source.result())
            timing.stop()
            record = {**run_manifest_record(request, model, data, records, timing),
                      "resume": job.manifest_section()}
            place_pair(temporary, side, output, request.overwrite, record)
    finally:
        release(request.input_path, run_id)  # this process's handle (the reader's), if any
        ds.close()
    return strategies, template, results


def _gridded(stored, model: Model, source_attrs: dict, record: str):
    """The output data set of a granule's stored cells, on its grid."""
    results = {name: stored[name] for name in stored.data_vars}
    return output_dataset(results, model, source_attrs, record)


def _summary(output: str, results: dict, template, strategies: dict, seconds: float,
             echo, job: _Job) -> dict:
    n_chunks = chunk_count(template)
    path = run_manifest_path(output)
    before = f" ({len(job.done_before)} done before, resumed)" if job.resumed else ""
    echo(f"wrote {output}: {', '.join(results)} over {dict(template.sizes)} in "
         f"{n_chunks} chunks{before}, {seconds:.1f} s; strategy per process: "
         f"{', '.join(sorted(set(strategies.values())))}; run manifest {path}")
    return {"outputs": list(results), "chunks": n_chunks, "seconds": seconds,
            "strategies": strategies, "run_manifest": path,
            "computed": n_chunks - len(job.done_before)}


def _strategies(client, strategy: str) -> dict[str, str]:
    if client is None:
        return {"this process": local_strategy(strategy)}
    return client.run(local_strategy, strategy)


def _write_on_cluster(ds, temporary: str, address, workers, job: _Job,
                      strategy: str, run: str) -> tuple[dict[str, str], dict[str, dict]]:
    """Write ``ds`` into ``temporary``; returns the strategy of each process
    (asked before) and what each did (``worker_record``, asked after)."""
    client = open_client(address, workers)
    try:
        strategies = _strategies(client, strategy)
        job.strategies = strategies
        write_temporary(_write, temporary, ds, temporary, client, job)
        records = _worker_records(client, run, strategy)
    finally:
        _close(client)  # stops what still runs on the cluster before the temporary goes
        forget(run)
    return strategies, records


def _write(ds, path: str, client, job: _Job) -> None:
    """Every chunk not yet done computed and written into the chunk store
    (here, one at a time, or on the cluster's workers, a few per worker at a
    time), its index recorded in ``done.log`` after its write returned; then
    the store becomes ``path``: moved there (Zarr) or converted (NetCDF)."""
    job.open()
    if client is None:
        _chunks_here(ds, job)
    else:
        _chunks_on_cluster(ds, job, client)
    job.finish(ds, path)


def _chunk_blocks(ds, job: _Job, k: int) -> tuple[list, dict]:
    """Chunk ``k``: the lazy block of each output, and its region. The
    blocks are computed together, so the model runs once per chunk."""
    index = block_index(job.layout["chunks"], k)
    blocks = [ds[name].data.blocks[index] for name in job.header["outputs"]]
    return blocks, region(job.layout["dims"], job.layout["chunks"], index)


def _region(job: _Job, k: int) -> dict:
    index = block_index(job.layout["chunks"], k)
    return region(job.layout["dims"], job.layout["chunks"], index)


def _chunks_here(ds, job: _Job) -> None:
    """Chunk by chunk in this process, three at a time in three stages: a
    reader thread reads chunk k+1's inputs while this thread computes chunk
    k and a writer thread writes chunk k-1 and records it done. At most two
    chunks' inputs and two chunks' outputs are held (the one being written
    and the one being computed), whatever the number of chunks."""
    names, dims = tuple(job.header["outputs"]), tuple(job.layout["dims"])
    pending, arguments = job.pending(), job.arguments
    with concurrent.futures.ThreadPoolExecutor(1, "isokernel-read") as reader, \
            concurrent.futures.ThreadPoolExecutor(1, "isokernel-write") as writer:
        writing: concurrent.futures.Future | None = None
        reading = _read_next(reader, arguments, job, pending, 0)
        for i, k in enumerate(pending):
            blocks = reading.result()  # a failed read raises here
            reading = _read_next(reader, arguments, job, pending, i + 1)
            held = list(arguments.run(blocks))
            del blocks
            if writing is not None:
                writing.result()  # a failed write raises here
            writing = writer.submit(_write_held, job, k, _region(job, k), names, dims, held)
            del held
            job.show(None, final=False)
        if writing is not None:
            writing.result()
    # leaving the ``with`` waits for a read or write under way, also when this raised
    job.show(None, final=True)


def _read_next(reader, arguments, job: _Job, pending: list[int], i: int):
    """The read of chunk ``pending[i]``'s input blocks, started on
    ``reader``; None past the last chunk."""
    if i >= len(pending):
        return None
    return reader.submit(arguments.read, _region(job, pending[i]))


def _write_held(job: _Job, k: int, where: dict, names: tuple, dims: tuple,
                held: list) -> None:
    """Write chunk ``k`` and record it done; its arrays are let go before
    the write counts as finished."""
    arrays = tuple(held)
    held.clear()
    write_chunk(job.data, where, names, dims, *arrays)
    del arrays
    job.add(k)


def _chunks_on_cluster(ds, job: _Job, client) -> None:
    """At most ``CHUNKS_PER_WORKER`` chunks per worker at a time: one task
    per chunk that reads its inputs on the worker, runs the model and
    writes the outputs into the store (``chunk_task``; a SMAP granule's
    cells, made in this process, go through their dask graph and a write
    task instead): the outputs never travel to this process; a chunk is
    recorded done when its task has finished."""
    from distributed import TimeoutError as Waiting  # asyncio's, before Python 3.11
    names, dims = tuple(job.header["outputs"]), tuple(job.layout["dims"])
    waiting = list(job.pending())
    limit = CHUNKS_PER_WORKER * max(1, len(job.strategies))
    running: dict = {}
    arguments = job.arguments
    shipped = None
    if arguments.portable:  # the workers read their chunks themselves
        shipped = client.scatter(arguments, broadcast=True, hash=False)
    try:
        while waiting or running:
            while waiting and len(running) < limit:
                k = waiting.pop(0)
                if shipped is not None:
                    running[client.submit(chunk_task, shipped, _region(job, k), job.data,
                                          names, dims, pure=False)] = k
                    continue
                blocks, where = _chunk_blocks(ds, job, k)
                computed = client.compute(blocks)
                running[client.submit(write_chunk, job.data, where, names, dims, *computed,
                                      pure=False)] = k
            try:
                finished = _first_finished(list(running))
            except Waiting:
                finished = []
            for future in finished:
                future.result()  # a failed chunk raises here
                job.add(running.pop(future))
            job.show(client, final=False)
    finally:
        if running:
            client.cancel(list(running))
        if shipped is not None:  # the workers' handles on the input; never masks an error
            with contextlib.suppress(Exception):
                client.run(release, arguments.path, job.run_id(), on_error="return")
    job.show(client, final=True)


def chunk_task(arguments, where: dict, data: str, names: tuple, dims: tuple) -> int:
    """One chunk on a worker: its inputs read there (``ChunkArguments.read``,
    without dask), the model run, the outputs written into the chunk store
    ``data``; returns the pixels written. One task per chunk, no graph."""
    outputs = arguments.run(arguments.read(where))
    return write_chunk(data, where, names, dims, *outputs)


def _first_finished(futures: list) -> list:
    from distributed import wait
    return list(wait(futures, timeout=PROGRESS_SECONDS, return_when="FIRST_COMPLETED").done)


CHUNKS_PER_WORKER = 2  # chunks submitted per worker at a time: one computing, one queued


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
    """A distributed client: ``local`` starts a LocalCluster of ``workers``
    worker processes (default: one per CPU) that split this machine's CPUs
    between them (``local_threads``), without Dask's statistical profiler
    (``distributed.quiet_workers``); anything else is a scheduler
    address."""
    if address is None:
        return None
    _at_least_one("--workers", workers)
    from distributed import Client, LocalCluster
    if address == "local":
        cpus = max(1, cpu_budget().value)
        n = workers or cpus
        with quiet_workers():  # no statistical profiler holding the workers' GIL
            cluster = LocalCluster(n_workers=n, threads_per_worker=local_threads(cpus, n),
                                   processes=True, dashboard_address=":0")
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


def local_threads(cpus: int, workers: int) -> int:
    """The ``nthreads`` of each of ``workers`` local workers on ``cpus``
    CPUs: an equal share, at least one. A chunk's compiled model runs on as
    many threads as its worker's ``nthreads`` (``backends.cpu.pool``), so
    one worker uses every CPU and N workers do not oversubscribe them."""
    return max(1, cpus // workers)


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


# ------------------------------------------------------------------ the chunk store


class _Job:
    """The chunked write of one run: its chunk store (new, or adopted from a
    killed run by ``_resumable``), the chunks done, and the progress lines.
    ``run.json`` gets the input's checksum when the background hash ends
    (``checksum_done``, on the hashing thread): a store is resumable only
    with it."""

    def __init__(self, output: str, identity: dict, store: str | None = None,
                 header: dict | None = None, done=(), source: dict | None = None):
        self.output, self.identity, self.resumed = output, identity, store is not None
        self.store = store or store_path(output)
        self.data = os.path.join(self.store, DATA)
        self.header: dict = header or {}
        self.done_before, self.done = frozenset(done), set(done)
        self._source, self.strategies = source, {}
        self._run = self.header.get("run") or uuid.uuid4().hex
        self.lock = threading.Lock()
        self.created = self.closed = False
        self.log: DoneLog | None = None
        self.watch: _Progress | None = None
        self.out = None
        self.layout: dict = {}
        self.arguments = None  # datasets.ChunkArguments: a chunk's input blocks, run_chunk
        self.regrid = None  # stored cells -> the output on a grid (a SMAP granule)

    def run_id(self) -> str:
        return self._run

    def prepare(self, out, template, timing: Timing, progress: bool) -> None:
        """The layout of ``template``; a resumed run checks it against the
        store's and takes the store's attributes (its run id, times)."""
        self.out, self.layout = out, layout(template)
        outputs = list(map(str, out.data_vars))
        if self.resumed:
            if self.header["layout"] != self.layout or self.header["outputs"] != outputs:
                raise ValueError(f"cannot resume {self.output}: its chunk store {self.store} "
                                 f"holds another chunk layout or other outputs; run without "
                                 f"--resume to start over")
            out.attrs = _stored_attrs(self.data)
        else:
            self.header = {"format": STORE_FORMAT, "identity": self.identity, "run": self._run,
                           "pid": os.getpid(), "started_utc": timing.started_utc,
                           "layout": self.layout, "outputs": outputs, "strategies": None,
                           "checksum": None}
        if progress:
            self.watch = _Progress(self._run, chunk_count(template), len(self.done))

    def source(self) -> concurrent.futures.Future | None:
        """The input's checksum, computed when the run was resumed."""
        if self._source is None:
            return None
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(self._source)
        return future

    def checksum_done(self, future: concurrent.futures.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return  # the run raises it when it asks for the result
        with self.lock:
            if self.header.get("checksum") == future.result():
                return
            self.header["checksum"] = future.result()
            if self.created and not self.closed:
                write_header(self.store, self.header)

    def open(self) -> None:
        """Create the store (a new run) or check the strategies against the
        store's (a resumed run: the chunks done and those to do must come
        from the same strategies); then open ``done.log``."""
        used = sorted(set(self.strategies.values()))
        if self.resumed and not set(used) <= set(self.header["strategies"]):
            raise ValueError(f"cannot resume {self.output}: its chunks were computed with "
                             f"strategy {', '.join(self.header['strategies'])}, this run's "
                             f"processes resolve {', '.join(used)}; pass --strategy "
                             f"{self.header['strategies'][0]}, or run without --resume")
        if not self.resumed:
            with self.lock:
                self.header["strategies"] = used
                create(self.store, self.out, self.header, is_zarr(self.output))
                self.created = True
        self.log = DoneLog(self.store)

    def pending(self) -> list[int]:
        total = chunk_count_of(self.layout)
        return [k for k in range(total) if k not in self.done]

    def add(self, k: int) -> None:
        assert self.log is not None
        self.log.add(k)
        self.done.add(k)

    def show(self, client, final: bool) -> None:
        if self.watch is not None:
            self.watch.show(client, final)

    def finish(self, ds, path: str) -> None:
        """The store as ``path``: a Zarr store moved there, or NetCDF
        converted into it (a granule's cells written on its grid,
        ``regrid``); then the chunk store goes."""
        if self.regrid is not None:
            self._close()
            write_gridded(self.data, self.regrid, ds, path, is_zarr(self.output))
        elif is_zarr(path):
            self._close()
            os.rename(self.data, path)
        else:
            to_netcdf(self.data, ds, path)
        self.discard()

    def _close(self) -> None:
        with self.lock:
            self.closed = True
        if self.log is not None:
            self.log.close()

    def discard(self) -> None:
        self._close()
        shutil.rmtree(self.store, ignore_errors=True)

    @contextlib.contextmanager
    def kept_until_done(self):
        """The chunk store removed when the run fails or is interrupted
        (after the cluster stopped writing into it, ``_write_on_cluster``)."""
        try:
            yield
        except BaseException:
            self.discard()
            raise

    def manifest_section(self) -> dict:
        """The run manifest's ``resume``: the identity a resume compares,
        and which interrupted run this one continued."""
        source = ({"pid": self.header["pid"], "started_utc": self.header["started_utc"]}
                  if self.resumed else None)
        return {"identity": self.identity, "chunks_done_before": len(self.done_before),
                "resumed_from": source}


def chunk_count_of(chunk_layout: dict) -> int:
    n = 1
    for sizes in chunk_layout["chunks"]:
        n *= len(sizes)
    return n


def _stored_attrs(data: str) -> dict:
    import xarray as xr
    with xr.open_zarr(data, consolidated=False) as stored:
        return dict(stored.attrs)


def _resumable(output: str, identity: dict, input_path: str, resume: bool,
               echo) -> tuple:
    """The chunk stores killed runs of ``output`` left: without ``resume``
    removed (the run starts over); with it, the one with the most chunks
    done is adopted (renamed to this process) when it is the same run over
    the same input bytes, and refused otherwise. Returns ``_Job``'s
    store, header, chunks done and input checksum, or () to start anew."""
    stores = [(path, pid) for path, pid in stores_of(output)
              if pid != os.getpid() and orphaned(path, pid)]
    stores.sort(key=lambda found: -len(read_done(found[0])))
    if not resume:
        for path, pid in stores:
            _drop(path, pid, output, echo, "--resume would have continued it")
        return ()
    for i, (path, pid) in enumerate(stores):
        adopted = _adopt(path, pid, output, identity, input_path, echo)
        if adopted:
            for other, other_pid in stores[i + 1:]:
                _drop(other, other_pid, output, echo, "an older attempt")
            return adopted
    echo(f"note: no interrupted run of {output} to resume; starting from the first chunk")
    return ()


def _adopt(path: str, pid: int, output: str, identity: dict, input_path: str, echo) -> tuple:
    header = read_header(path)
    if header is None or not os.path.isdir(os.path.join(path, DATA)):
        _drop(path, pid, output, echo, "it had not finished creating its store")
        return ()
    done, total = read_done(path), chunk_count_of(header["layout"])
    which = f"the interrupted run in {path} (process {pid}, {len(done)}/{total} chunks done)"
    why = identity_difference(header["identity"], identity)
    if why is not None:
        raise ValueError(f"cannot resume {output}: {which} differs in {why}; repeat its "
                         f"command to resume it, or run without --resume to start over")
    if header.get("checksum") is None:
        _drop(path, pid, output, echo, "it was killed before its input was checksummed")
        return ()
    then = header["checksum"]
    now = checksum(input_path, then["algorithm"])
    if now["digest"] != then["digest"]:
        raise ValueError(f"cannot resume {output}: the input {input_path} changed since "
                         f"{which} read it ({then['algorithm']} {then['digest'][:12]}… then, "
                         f"{now['digest'][:12]}… now); run without --resume to start over")
    mine = store_path(output)
    os.rename(path, mine)  # one rename: of two resuming processes, one adopts it
    echo(f"note: resuming {output}: {len(done)} of {total} chunks were done by process {pid} "
         f"(started {header['started_utc']})")
    return mine, header, read_done(mine), now


def _drop(path: str, pid: int, output: str, echo, why: str) -> None:
    n = len(read_done(path))
    shutil.rmtree(path, ignore_errors=True)
    echo(f"removed {path}, {n} chunk{'s' * (n != 1)} of an interrupted run of {output} "
         f"(process {pid}, gone): {why}")


def _complete(output_path: str, identity: dict, input_path: str, echo) -> dict | None:
    """With ``resume``: the summary of ``output_path`` when it is already the
    finished result of this run (its run manifest records the same
    identity and input checksum, and no chunk store of it is left), after
    a note; else None (a run follows)."""
    output = output_path.rstrip("/") or output_path
    if not os.path.lexists(output) or not os.path.isdir(os.path.dirname(
            os.path.abspath(output))) or stores_of(output):
        return None
    path = run_manifest_path(output)
    record = read_run_manifest(path)
    same = record is not None and (record.get("resume") or {}).get("identity") == identity
    if not same or written_run(output) != record["run"]:
        return None
    then = record["input"]["checksum"]
    if checksum(input_path, then["algorithm"])["digest"] != then["digest"]:
        return None
    echo(f"note: {output} is complete: run {record['run']} finished it at "
         f"{record['finished_utc']} with this model, input, options and code; nothing to "
         f"resume")
    return {"outputs": [v["name"] for v in record["output"]["variables"]],
            "chunks": record["chunks"]["count"], "seconds": 0.0,
            "strategies": record["strategy"]["per_worker"], "run_manifest": path,
            "computed": 0}


# ------------------------------------------------------------------ progress

PROGRESS_SECONDS = 1.0  # at most one progress line per this many seconds


class _Progress:
    """Progress of a run: one line on stderr about every
    ``PROGRESS_SECONDS`` and a final one, with chunks done of the total
    (those an interrupted run did included) and, per process (this one, or
    each worker of a cluster), its chunks and pixels per second so far."""

    def __init__(self, run: str, total: int, before: int = 0):
        self.run, self.total, self.before = run, total, before
        self.started = self.last = time.perf_counter()

    def show(self, client, final: bool) -> None:
        now = time.perf_counter()
        if not final and now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        tallies = ({"this process": tally_of(self.run)} if client is None
                   else client.run(tally_of, self.run, on_error="return"))
        print(self.line(tallies, final), file=sys.stderr, flush=True)

    def line(self, tallies: dict, final: bool) -> str:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        done = self.before + sum(t["chunks"] for t in tallies.values() if isinstance(t, dict))
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
