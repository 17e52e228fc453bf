"""What a run manifest (``OUTPUT.manifest.json``) records: the input's
checksum, the request as a command line, the model, chunking, kernels,
workers, versions and times."""

from __future__ import annotations

import concurrent.futures
import datetime
import hashlib
import json
import os
import shlex
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from .catalog import Model
from .chunks import versions
from .datasets import chunk_count, parse_mapping
from .input_units import units_record
from .outputs import MANIFEST, RUN_MANIFEST_FORMAT

HASH_BLOCK = 8 << 20  # bytes of the input read (into one reused buffer) and hashed at a time
CHECKSUMS = ("xxh3-128", "sha256")  # the input checksums a run may record; the first is the default
_PACKAGES = ("isokernel", "numpy", "dask", "distributed", "xarray", "netCDF4", "h5netcdf",
             "zarr")


def checksum(path: str, algorithm: str = CHECKSUMS[0]) -> dict:
    """The ``algorithm`` digest of a data set (``CHECKSUMS``: XXH3-128, the
    default, a quarter of SHA-256's time here, or SHA-256), read
    ``HASH_BLOCK`` bytes at a time: of the file, or for a Zarr store (a
    folder) of its listing as ``xxhsum -H2`` or ``sha256sum`` prints it, one
    line ``HEX  RELATIVE/PATH`` per file in sorted order of the paths."""
    new, buffer = _hasher(algorithm), bytearray(HASH_BLOCK)  # one buffer for every file
    if not os.path.isdir(path):
        digest, size = _file_digest(path, new(), buffer)
        return {"algorithm": algorithm, "digest": digest, "bytes": size, "files": 1}
    listing, total, names = new(), 0, _store_files(path)
    for name in names:
        digest, size = _file_digest(os.path.join(path, name), new(), buffer)
        listing.update(f"{digest}  {name}\n".encode())
        total += size
    return {"algorithm": algorithm, "digest": listing.hexdigest(), "bytes": total,
            "files": len(names), "of": "the sorted listing of the store's files' digests"}


def check_checksum(algorithm: str) -> None:
    """Raise when ``algorithm`` is not one of ``CHECKSUMS`` or its package is missing."""
    _hasher(algorithm)


def _hasher(algorithm: str):
    if algorithm == "sha256":
        return hashlib.sha256
    if algorithm != "xxh3-128":
        raise ValueError(f"unknown checksum {algorithm!r}; choose one of {', '.join(CHECKSUMS)}")
    try:
        import xxhash
    except ImportError:
        raise ImportError("the xxh3-128 checksum needs xxhash: pip install 'isokernel[io]', "
                          "or ask for --checksum sha256") from None
    return xxhash.xxh3_128


def _file_digest(path: str, digest, buffer: bytearray) -> tuple[str, int]:
    view, size = memoryview(buffer), 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
            size += n
    return digest.hexdigest(), size


def _store_files(path: str) -> list[str]:
    """Every file under ``path``, relative and with ``/``, sorted (as
    ``LC_ALL=C sort`` sorts their UTF-8 names)."""
    found = []
    for folder, _, names in os.walk(path):
        found += [os.path.relpath(os.path.join(folder, n), path) for n in names]
    return sorted(name.replace(os.sep, "/") for name in found)


def in_background(fn, *args) -> concurrent.futures.Future:
    """``fn(*args)`` on a daemon thread (an interrupted run does not wait
    for it at exit)."""
    future = concurrent.futures.Future()

    def work() -> None:
        try:
            future.set_result(fn(*args))
        except Exception as err:  # handed to whoever asks for the result
            future.set_exception(err)
    threading.Thread(target=work, name="isokernel-checksum", daemon=True).start()
    return future


@dataclass(frozen=True)
class Request:
    """What ``run`` was asked to do, as the manifest records it."""

    target: str
    input_path: str
    output: str
    variables: tuple[str, ...]
    chunks: dict[str, int] | None
    dask_address: str | None
    workers: int | None
    dtype: str
    strategy: str
    overwrite: bool
    ancillary: str | None = None  # a SMAP granule's ancillary data set (``smap``)
    checksum: str = CHECKSUMS[0]  # the input's digest (``checksum``)

    def command(self) -> str:
        """The ``isokernel run`` command line that asks the same."""
        argv = ["isokernel", "run", self.target, self.input_path, self.output,
                *(f"--var={v}" for v in self.variables)]
        if self.ancillary is not None:
            argv += ["--ancillary", self.ancillary]
        if self.chunks:
            argv.append("--chunks=" + ",".join(f"{d}={n}" for d, n in self.chunks.items()))
        if self.dask_address is not None:
            argv += ["--dask", self.dask_address]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        argv += ["--dtype", self.dtype, "--strategy", self.strategy, "--checksum", self.checksum]
        return shlex.join(argv + ["--overwrite"] * self.overwrite)


class Timing:
    """A run's start and end: UTC times and wall seconds."""

    def __init__(self):
        self.started_utc, self._started = _utc_now(), time.perf_counter()
        self.finished_utc, self.seconds = None, None

    def stop(self) -> None:
        self.finished_utc, self.seconds = _utc_now(), time.perf_counter() - self._started


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def run_manifest_record(request: Request, model: Model, data: dict, records: dict,
                        timing: Timing) -> dict:
    """The run manifest: ``data`` holds the input, output and chunking
    sections (``data_sections``); ``records`` what each process did."""
    kernels = _kernels(records)
    return {"format": RUN_MANIFEST_FORMAT, "run": data["run"], "command": request.command(),
            "argv": list(sys.argv),
            "model": {"name": model.name, "description": model.description,
                      "inputs": list(model.inputs)},
            **{k: v for k, v in data.items() if k != "run"},
            "dtype": request.dtype,
            "numerics": sorted({k["numerics"] for k in kernels}),
            "strategy": {"requested": request.strategy,
                         "per_worker": {n: r.get("strategy") for n, r in records.items()}},
            "kernels": kernels,
            "workers": {n: {k: v for k, v in r.items() if k != "kernels"}
                        for n, r in records.items()},
            "cluster": {"dask": request.dask_address, "workers": request.workers},
            "versions": versions(_PACKAGES), "started_utc": timing.started_utc,
            "finished_utc": timing.finished_utc, "wall_seconds": round(timing.seconds, 3)}


def data_sections(request: Request, model: Model, ds, template, out, source: dict) -> dict:
    """The run id, input (path, checksum, variables), output and chunking."""
    record = json.loads(out.attrs[MANIFEST])
    return {"run": record["run"],
            "input": {"path": os.path.abspath(request.input_path), "checksum": source,
                      "variables": _input_variables(ds, model, request)},
            "output": {"path": os.path.abspath(request.output), "attribute": record,
                       "variables": [_variable(name, a) for name, a in out.data_vars.items()]},
            "chunks": _chunking(template, request.chunks)}


def _input_variables(ds, model: Model, request: Request) -> list[dict]:
    """Each model input: the variable read, its dims, shape, stored dtype
    and the dtype it was computed in (floats become ``dtype``)."""
    mapping = parse_mapping(list(request.variables), "--var")
    found = []
    for name in model.inputs:
        var = ds[mapping.get(name, name)]
        floating = np.issubdtype(var.dtype, np.floating)
        units = units_record(var, (model.input_units or {}).get(name))
        found.append({"input": name, **_variable(var.name, var),
                      "computed_as": request.dtype if floating else str(var.dtype), **units})
    return found


def _variable(name, array) -> dict:
    units = array.attrs.get("units")
    return {"name": str(name), "dims": list(map(str, array.dims)),
            "shape": [int(n) for n in array.shape], "dtype": str(array.dtype),
            **({"units": str(units)} if units is not None else {})}


def _chunking(template, requested: dict[str, int] | None) -> dict:
    """The chunks that ran: their count, and per dimension runs of
    ``[size, how many]`` (``[[512, 9], [100, 1]]``)."""
    sizes = {str(d): _runs(c) for d, c in zip(template.dims, template.chunks)}
    return {"requested": requested, "count": chunk_count(template), "sizes": sizes}


def _runs(sizes) -> list[list[int]]:
    found: list[list[int]] = []
    for size in map(int, sizes):
        if found and found[-1][0] == size:
            found[-1][1] += 1
        else:
            found.append([size, 1])
    return found


def _kernels(records: dict) -> list[dict]:
    """The kernels that ran, each once, with the workers that ran it."""
    found: dict[str, dict] = {}
    for name, record in records.items():
        for kernel in record.get("kernels", []):
            key = json.dumps(kernel, sort_keys=True)
            found.setdefault(key, {**kernel, "workers": []})["workers"].append(name)
    return list(found.values())
