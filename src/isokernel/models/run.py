"""``isokernel run MODEL INPUT OUTPUT``: a pointwise model over a NetCDF or
Zarr data set, chunk by chunk, in this process or on a Dask cluster.

Variables are mapped to the model's inputs by name (``--var tbv=TB_V``);
every chunk goes through ``xarray.apply_ufunc(..., dask="parallelized")``
and, on whichever process runs it, through ``jit(model, strategy="auto")``:
the best strategy of that machine. Chunks are flattened to one dimension
before the call (the models are pointwise), so chunks of one size share one
compiled executable.

Failure is explicit: a chunk that raises is reported with its index ranges
and coordinates, and the output is written under a temporary name in the
destination folder and renamed only when every chunk succeeded, so no
partial file ever carries the requested name.

Nothing isokernel did not write is deleted or overwritten. Every data set it
writes carries an ``isokernel_manifest`` global attribute (JSON: model,
input, version, UTC time, variables); an existing output is replaced only
with ``overwrite`` and only when it carries that manifest; the input is
never the output. A replaced Zarr store is renamed aside before the new one
moves in and deleted after, and temporaries left by killed runs are cleared
by the next run in that folder (``prepare_output``).

Beside every output ``run`` writes its run manifest, ``OUTPUT.manifest.json``:
the input's SHA-256 and variables, the outputs, the model and the digests of
the kernels that ran, numerics, strategy and tally per worker, chunking,
versions, times and the command line, enough to audit and reproduce the
run. It is written under a temporary name and moved in right after the
output (the same run id is in both), so it is replaced with the output and
an interrupted run leaves the old pair as it was. On a cluster, progress is
one line per second on stderr with each worker's chunks and pixels/s.

Needs the ``io`` extra (xarray, netCDF4 or h5netcdf, zarr, dask[distributed]).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np

from ..backends import choose
from ..backends.devices import Device
from ..backends.platform import cpu_budget
from ..pipeline import jit
from .soil_moisture import REFINED_INPUTS, RETRIEVAL_INPUTS, observe, retrieve, retrieve_refined

CHUNK_PIXELS = 1 << 20  # default chunk size when the input is not chunked
_IO_MISSING = ("isokernel run needs xarray and dask: pip install 'isokernel[io]' "
               "(xarray, netCDF4, h5netcdf, zarr, dask[distributed])")


class ChunkError(RuntimeError):
    """A chunk failed; the message names its index ranges and coordinates."""


@dataclass(frozen=True)
class Output:
    name: str
    units: str | None = None
    long_name: str | None = None
    standard_name: str | None = None

    def attrs(self) -> dict:
        keys = ("units", "long_name", "standard_name")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


@dataclass(frozen=True)
class Model:
    name: str
    fn: object
    inputs: tuple[str, ...]
    outputs: tuple[Output, ...]
    description: str


MODELS = {
    "soil-moisture": Model(
        "soil-moisture", retrieve, RETRIEVAL_INPUTS,
        (Output("mv", "m3 m-3", "volumetric soil moisture (Stages 1-4 retrieval)",
                "volume_fraction_of_condensed_water_in_soil"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Stage 3)"),
         Output("vwc", "kg m-2", "vegetation water content from NDVI")),
        "soil moisture from V-pol brightness temperature (SMAP baseline, Stages 1-4)"),
    "soil-moisture-stage5": Model(
        "soil-moisture-stage5", retrieve_refined, REFINED_INPUTS,
        (Output("mv", "m3 m-3", "volumetric soil moisture (Stages 1-5 retrieval)",
                "volume_fraction_of_condensed_water_in_soil"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Stage 3)"),
         Output("vwc", "kg m-2", "vegetation water content (Stage 5, prior from NDVI)"),
         Output("mv_stage4", "m3 m-3", "volumetric soil moisture before Stage 5",
                "volume_fraction_of_condensed_water_in_soil")),
        "soil moisture and VWC from TB_V and sigma0_HH (Stages 1-4, then per-pixel "
        "Levenberg-Marquardt with Gaussian priors)"),
    "soil-moisture-forward": Model(
        "soil-moisture-forward", observe,
        ("mv", "clay", "ts", "ndvi", "ndvi_max", "ndvi_min", "landcover"),
        (Output("tbh", "K", "H-pol brightness temperature at 40 deg (tau-omega)",
                "brightness_temperature"),
         Output("tbv", "K", "V-pol brightness temperature at 40 deg (tau-omega)",
                "brightness_temperature"),
         Output("sigma0_hh", "dB", "HH backscatter coefficient, Water Cloud Model"),
         Output("vwc", "kg m-2", "vegetation water content from NDVI"),
         Output("eps_re", "1", "real part of the soil relative permittivity (Mironov)"),
         Output("eps_im", "1", "imaginary part of the soil relative permittivity (Mironov)")),
        "TB_H, TB_V and sigma0_HH from soil moisture and ancillary data"),
}


# ------------------------------------------------------------------ models


def stage5_model(target: str, stage5: bool) -> str:
    """The model ``run --stage5`` means: soil-moisture with Stage 5."""
    if not stage5 or target == "soil-moisture-stage5":
        return target
    if target != "soil-moisture":
        raise ValueError(f"--stage5 refines the soil-moisture retrieval; model {target!r} "
                         f"has no Stage 5")
    return "soil-moisture-stage5"


def resolve_model(target: str) -> Model:
    """A shipped model by name, or ``MODULE:FUNCTION`` / ``file.py:FUNCTION``
    (inputs named by its parameters, outputs by its dict keys)."""
    if target in MODELS:
        return MODELS[target]
    if ":" not in target:
        raise ValueError(f"unknown model {target!r}; use one of {', '.join(MODELS)} or "
                         f"MODULE:FUNCTION")
    import inspect
    fn = _load_function(target)
    params = tuple(inspect.signature(fn).parameters)
    return Model(target, fn, params, (), f"user model {target}")


def _load_function(target: str):
    import importlib
    import importlib.util
    module_name, _, attr = target.rpartition(":")
    if module_name.endswith(".py"):
        if not os.path.exists(module_name):
            raise FileNotFoundError(f"no such model file: {module_name}")
        spec = importlib.util.spec_from_file_location("isokernel_run_model", module_name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise AttributeError(f"{module_name} has no function {attr!r}")
    return getattr(module, attr)


_COMPILED: dict = {}  # (target, chunk signature, strategy) -> the Compiled that runs it
_COMPILE_LOCK = threading.Lock()  # one compile per key, however many threads a worker runs


def _compiled(target: str, flat: list, strategy: str) -> tuple[tuple, object]:
    """The key and the compiled model of this process for one chunk
    signature (length, dtypes): chunks of different sizes are expected
    here, not retraces to warn about."""
    key = (target, (flat[0].size, *(a.dtype.str for a in flat)), strategy)
    with _COMPILE_LOCK:
        if key not in _COMPILED:
            _COMPILED[key] = jit(resolve_model(target).fn, strategy=strategy).lower(
                *flat).compile()
    return key, _COMPILED[key]


def local_strategy(strategy: str = "auto") -> str:
    """The strategy ``strategy`` resolves to on this process's CPU."""
    return choose(strategy, Device("cpu")).name


# ------------------------------------------------------------------ chunks


def _describe(dims, coords) -> str:
    """'y[0:50] (y = 10.0 … 59.0), x[…]' from the index and value blocks."""
    parts = []
    for d, (index, values) in zip(dims, zip(coords[::2], coords[1::2])):
        lo, hi = int(np.min(index)), int(np.max(index))
        v = np.ravel(values)
        parts.append(f"{d}[{lo}:{hi + 1}] ({d} = {v.min()} … {v.max()})")
    return ", ".join(parts)


def as_dict(result) -> dict:
    """A model's outputs by name: dict keys, else out0, out1, …"""
    if isinstance(result, dict):
        return result
    if isinstance(result, (tuple, list)):
        return {f"out{i}": r for i, r in enumerate(result)}
    return {"out0": result}


def run_chunk(*blocks, target: str, n_inputs: int, dims: tuple, outputs: tuple,
              strategy: str = "auto", run: str = ""):
    """One chunk: the model over the flattened, broadcast input blocks;
    the trailing blocks are each dim's index and coordinate values. The
    chunk is counted in this process's tally of ``run``."""
    data, coords = blocks[:n_inputs], blocks[n_inputs:]
    shape = np.broadcast_shapes(*(b.shape for b in data))
    flat = [np.ascontiguousarray(np.broadcast_to(b, shape)).reshape(-1) for b in data]
    try:
        key, compiled = _compiled(target, flat, strategy)
        result = as_dict(compiled.call_plain(tuple(flat)))  # CPU arrays of its signature
        arrays = [np.asarray(result[name]) for name in outputs]
    except Exception as err:
        raise ChunkError(f"chunk {_describe(dims, coords)} failed: "
                         f"{type(err).__name__}: {err}") from err
    _count(run, key, flat[0].size)
    shaped = tuple(a.reshape(shape) for a in arrays)
    return shaped if len(shaped) > 1 else shaped[0]  # apply_ufunc: one output, no tuple


# ------------------------------------------------------------------ tallies
# Each process (this one, or each Dask worker) counts the chunks it ran for a
# run and the compiled kernels that ran them; the progress lines poll the
# counts and the run manifest collects the kernels (``client.run``).


@dataclass
class _Tally:
    chunks: int = 0
    pixels: int = 0
    kernels: set = field(default_factory=set)  # keys of _COMPILED


_TALLIES: dict[str, _Tally] = {}
_TALLY_LOCK = threading.Lock()  # never held while compiling: polls must answer at once


def _count(run: str, key: tuple, pixels: int) -> None:
    with _TALLY_LOCK:
        tally = _TALLIES.setdefault(run, _Tally())
        tally.chunks += 1
        tally.pixels += pixels
        tally.kernels.add(key)


def _tally_of(run: str) -> dict:
    """Chunks and pixels this process finished for ``run`` so far."""
    with _TALLY_LOCK:
        tally = _TALLIES.get(run, _Tally())
        return {"chunks": tally.chunks, "pixels": tally.pixels}


def _worker_record(run: str, strategy: str) -> dict:
    """What this process did for ``run`` (its tally is dropped): host, pid,
    strategy, chunks, pixels, versions and the kernels that ran."""
    with _TALLY_LOCK:
        tally = _TALLIES.pop(run, _Tally())
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "strategy": local_strategy(strategy), "chunks": tally.chunks,
            "pixels": tally.pixels, "versions": _versions(_WORKER_PACKAGES),
            "kernels": [_kernel_record(key) for key in sorted(tally.kernels)]}


_KERNEL_LINES = ("compiler", "contract", "mathlib")  # report lines that shape the code
_PROVENANCE = re.compile(r" +# .*$", re.MULTILINE)  # the ``# model.py:14`` of a node


def _kernel_record(key: tuple) -> dict:
    """A compiled kernel: its signature, strategy, numerics and digests.
    ``graph_sha256`` hashes the recorded IR as printed, without the
    source-line comments (ops, wiring, constants, attributes, shapes,
    dtypes: the computation); ``source_sha256`` hashes the code the
    strategy generated and ran, exactly (C for native, the NumPy or tile
    programs otherwise; its comments name source lines, so it can differ
    between call paths of one computation)."""
    _, signature, _ = key
    compiled = _COMPILED[key]
    lowered = compiled.lowered
    lines = dict(compiled.executable.report_lines())
    return {"strategy": lowered.strategy.name, "numerics": lowered.numerics,
            "reductions": lowered.reductions, "chunk_pixels": signature[0],
            "dtypes": list(signature[1:]),
            "graph_sha256": _sha256_text(_PROVENANCE.sub("", str(compiled.graph))),
            "source_sha256": _sha256_text(compiled.source()),
            **{name: lines[name] for name in _KERNEL_LINES if name in lines}}


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------ data sets


def parse_mapping(specs: list[str], what: str) -> dict[str, str]:
    """``["mv=SM", "x=3"]`` -> {"mv": "SM", "x": "3"}."""
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"bad {what} {spec!r}; write NAME=VALUE, e.g. tbv=TB_V_obs")
        out[name.strip()] = value.strip()
    return out


def parse_chunks(spec: str | None) -> dict[str, int] | None:
    """``"y=512,x=512"`` -> {"y": 512, "x": 512}; None stays None."""
    if not spec:
        return None
    try:
        chunks = {k: int(v) for k, v in parse_mapping(spec.split(","), "--chunks").items()}
    except ValueError:
        raise ValueError(f"bad --chunks {spec!r}; write DIM=SIZE,..., e.g. y=512,x=512"
                         ) from None
    _check_chunk_sizes(chunks)
    return chunks


def _check_chunk_sizes(chunks: dict[str, int] | None) -> None:
    for dim, size in (chunks or {}).items():
        if size <= 0:
            raise ValueError(f"bad --chunks {dim}={size}: a chunk size must be greater than 0, "
                             f"e.g. {dim}=512")


def _is_zarr(path: str) -> bool:
    return path.rstrip("/").endswith(".zarr")


def _check_input(path: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such input data set: {path}")


def _open(path: str):
    import xarray as xr
    try:
        if _is_zarr(path):
            return xr.open_zarr(path, consolidated=False)
        return xr.open_dataset(path, chunks={})
    except Exception as err:  # every reader's own error class: say which file and format
        kind = "a Zarr store" if _is_zarr(path) else "NetCDF (any other suffix than .zarr)"
        first = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"cannot read input {path} as {kind}: {type(err).__name__}: "
                         f"{first}") from err


def _inputs(ds, model: Model, mapping: dict[str, str], dtype):
    unknown = set(mapping) - set(model.inputs)
    if unknown:
        raise ValueError(f"--var names {sorted(unknown)} are not inputs of {model.name}; its "
                         f"inputs are {', '.join(model.inputs)}")
    arrays = []
    for name in model.inputs:
        var = mapping.get(name, name)
        if var not in ds.variables:
            raise ValueError(f"input {name!r} of {model.name}: the data set has no variable "
                             f"{var!r}; map it with --var {name}=VARIABLE (variables: "
                             f"{', '.join(map(str, ds.data_vars))})")
        array = ds[var]
        if np.issubdtype(array.dtype, np.floating) and array.dtype != dtype:
            array = array.astype(dtype)
        arrays.append(array)
    return arrays


def _check_template(arrays, chunks: dict[str, int] | None, input_path: str, echo) -> None:
    """Refuse empty dimensions and --chunks names that are no dimension of
    the inputs; announce a dimension only a few inputs have."""
    import xarray as xr
    template = xr.broadcast(*arrays)[0]
    for dim, size in template.sizes.items():
        if size == 0:
            raise ValueError(f"input {input_path}: dimension {dim!r} has length 0; there is "
                             f"nothing to compute")
    unknown = sorted(set(chunks or {}) - set(template.dims))
    if unknown:
        raise ValueError(f"--chunks names {', '.join(unknown)}, but the dimensions of the "
                         f"inputs are {', '.join(map(str, template.dims))}")
    _announce_broadcast(arrays, template, echo)


def _announce_broadcast(arrays, template, echo) -> None:
    """One line per dimension that at most half of the (non-scalar) inputs
    have: the other inputs are repeated along it, which would otherwise go
    unnoticed."""
    shaped = [a for a in arrays if a.ndim]
    shape = ", ".join(f"{d}: {n}" for d, n in template.sizes.items())
    for dim in template.dims:
        holders = [repr(str(a.name)) for a in shaped if dim in a.dims]
        if 2 * len(holders) <= len(shaped):
            which = "variable" if len(holders) == 1 else "variables"
            echo(f"note: only {which} {', '.join(holders)} has dimension {dim!r} "
                 f"({template.sizes[dim]}); the other inputs are repeated along it and the "
                 f"outputs have shape ({shape})")


def _chunked(arrays, chunks: dict[str, int] | None):
    """Inputs chunked as asked, else as stored, else ~CHUNK_PIXELS along the
    first dimension."""
    import xarray as xr
    template = xr.broadcast(*arrays)[0]
    if chunks:
        return [a.chunk({d: c for d, c in chunks.items() if d in a.dims}) for a in arrays]
    if template.chunks is not None and all(len(c) > 1 for c in template.chunks[:1]):
        return arrays
    rest = math.prod(template.shape[1:])
    first = max(1, CHUNK_PIXELS // max(1, rest))
    return [a.chunk({template.dims[0]: first}) if template.dims[0] in a.dims else a
            for a in arrays]


def _coordinate_blocks(template):
    """Per dim: its index and coordinate values, chunked like ``template``."""
    import xarray as xr
    out = []
    for dim, sizes in zip(template.dims, template.chunks):
        n = template.sizes[dim]
        values = template[dim].values if dim in template.coords else np.arange(n)
        for data in (np.arange(n), values):
            out.append(xr.DataArray(data, dims=dim).chunk({dim: sizes}))
    return out


def _compute(target_arrays, model: Model, output_names, template, strategy: str,
             run: str = ""):
    import xarray as xr
    coords = _coordinate_blocks(template)
    first = [a.isel({d: 0 for d in a.dims}).values.reshape(1) for a in target_arrays]
    probe = as_dict(model.fn(*first))  # one pixel, eagerly: output names and dtypes
    names = output_names or tuple(probe)
    results = xr.apply_ufunc(
        run_chunk, *target_arrays, *coords, dask="parallelized",
        output_dtypes=[np.asarray(probe[n]).dtype for n in names],
        output_core_dims=[[] for _ in names],
        kwargs={"target": model.name, "n_inputs": len(target_arrays),
                "dims": tuple(template.dims), "outputs": tuple(names),
                "strategy": strategy, "run": run})
    results = results if isinstance(results, tuple) else (results,)
    return dict(zip(names, results))


# ------------------------------------------------------------------ outputs

MANIFEST = "isokernel_manifest"  # global attribute of every data set isokernel writes
_ZARR_METADATA = frozenset({"zarr.json", ".zgroup", ".zattrs", ".zmetadata"})
# ``.out.partial-PID.nc`` (being written) and ``.out.replaced-PID.zarr`` (an old
# store set aside while its replacement moves in), in the output's folder
_SIBLING = re.compile(r"\.(?P<stem>.+)\.(?P<kind>partial|replaced)-(?P<pid>\d+)"
                      r"(?P<suffix>\.[^.]*)?")
_NOT_OURS = ("output {path} exists and was not written by isokernel ({why}); isokernel "
             "replaces only its own outputs, even with --overwrite: move it away or choose "
             "another OUTPUT")


def manifest(model: str, input_path: str | None, variables, run: str | None = None) -> str:
    """The ``isokernel_manifest`` attribute: a small JSON record of who wrote
    the data set, from what, when, and which variables; with ``run``, the id
    its run manifest (``OUTPUT.manifest.json``) carries too."""
    from importlib.metadata import version
    source = None if input_path is None else os.path.abspath(input_path)
    record = {"model": model, "input": source, "isokernel": version("isokernel"),
              "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "variables": sorted(map(str, variables))}
    return json.dumps(record if run is None else {**record, "run": run})


def prepare_output(path: str, overwrite: bool, echo=print, input_path: str | None = None,
                   model: str | None = None) -> str:
    """``path`` checked before any work: its folder exists and takes files,
    stale temporaries there are cleared, it is not the input, and an
    existing data set there is one isokernel wrote (of ``model``, if given)
    and ``overwrite`` allows replacing. Returns it without a trailing slash."""
    output = _normalised(path)
    folder = os.path.dirname(os.path.abspath(output))
    _check_folder(folder)
    remove_stale(folder, echo)
    if input_path is not None:
        _check_not_input(output, input_path)
    if os.path.lexists(output):
        _check_replaceable(output, overwrite, model)
    _probe(_sibling(output, "partial"), folder)
    return output


def _normalised(path: str) -> str:
    """``path`` without a trailing slash, which only a Zarr store (or an
    existing path, refused later if not ours) may have."""
    output = path.rstrip("/") or path[:1]
    if not output or (output != path and not _is_zarr(output)
                       and not os.path.lexists(output)):
        raise ValueError(f"output {path!r} names a folder; give a NetCDF file (.nc) or a Zarr "
                         f"store (.zarr), e.g. {output or '.'}/retrieved.nc")
    return output


def _check_folder(folder: str) -> None:
    if not os.path.exists(folder):
        raise FileNotFoundError(f"output folder {folder} does not exist; create it "
                                f"(mkdir -p {folder}) or choose another OUTPUT")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"output folder {folder} is not a folder; choose another "
                                 f"OUTPUT")


def _check_not_input(output: str, input_path: str) -> None:
    out, source = os.path.realpath(output), os.path.realpath(input_path)
    both = os.path.exists(output) and os.path.exists(input_path)
    same = both and os.path.samefile(output, input_path)
    if out == source or same:
        raise ValueError(f"output {output} is the input {input_path}; write the results to "
                         f"another path")
    common = os.path.commonpath([out, source])
    if common in (out, source):
        where = "inside the input" if common == source else "a folder holding the input"
        raise ValueError(f"output {output} is {where} {input_path}; write the results beside "
                         f"the input instead")


def _check_replaceable(output: str, overwrite: bool, model: str | None = None) -> None:
    record, why = _record(output)
    if record is None:
        raise FileExistsError(_NOT_OURS.format(path=output, why=why))
    if model is not None and record["model"] != model:
        raise FileExistsError(f"output {output} is an isokernel output of {record['model']}, "
                              f"not a {model}; only a {model} is replaced there: choose "
                              f"another path")
    if not overwrite:
        raise FileExistsError(f"output {output} exists (written by isokernel); pass "
                              f"--overwrite (overwrite=True) to replace it")


def _record(path: str) -> tuple[dict | None, str]:
    """The manifest of the data set isokernel wrote at ``path``, else None
    and why not."""
    if os.path.islink(path):
        return None, "a symbolic link"
    if os.path.isdir(path) != _is_zarr(path):
        return None, "a folder, not a .zarr store" if os.path.isdir(path) else "not a folder"
    try:
        attrs, data_vars, names = _header(path)
    except Exception as err:  # anything unreadable is, by definition, not ours
        kind = "Zarr" if _is_zarr(path) else "NetCDF"
        return None, f"unreadable as {kind}: {type(err).__name__}"
    record = _parsed(attrs.get(MANIFEST))
    if record is None:
        return None, f"no {MANIFEST} attribute"
    if record["variables"] != sorted(data_vars):
        return None, "its variables differ from those its manifest lists"
    extra = set(os.listdir(path)) - _ZARR_METADATA - names if os.path.isdir(path) else set()
    if extra:
        return None, f"the store also holds {', '.join(sorted(extra)[:3])}"
    return record, ""


def _header(path: str) -> tuple[dict, list[str], set[str]]:
    """Global attributes, data variables and all variable names."""
    import xarray as xr
    opened = (xr.open_zarr(path, consolidated=False) if _is_zarr(path)
              else xr.open_dataset(path, decode_cf=False))
    with opened as ds:
        return dict(ds.attrs), list(map(str, ds.data_vars)), set(map(str, ds.variables))


def _parsed(text) -> dict | None:
    """An ``isokernel_manifest`` record, or None for anything else."""
    try:
        record = json.loads(text)
    except (TypeError, ValueError):
        return None
    keys = {"isokernel", "model", "variables"}
    return record if isinstance(record, dict) and keys <= set(record) else None


def _probe(temporary: str, folder: str) -> None:
    """Create and remove the temporary: an unwritable folder fails here,
    before any computing."""
    try:
        with open(temporary, "wb"):
            pass
        os.remove(temporary)
    except OSError as err:
        raise _folder_error(folder, err) from None


def _folder_error(folder: str, err: OSError) -> OSError:
    return type(err)(f"cannot write into output folder {folder}: {err.strerror or err}")


def _sibling(output: str, kind: str) -> str:
    """A hidden sibling of ``output`` with the same suffix (which selects
    the format): ``dir/.name.partial-PID.nc``, ``dir/.name.replaced-PID.zarr``."""
    head, tail = os.path.split(os.path.abspath(output))
    stem, suffix = os.path.splitext(tail)
    return os.path.join(head, f".{stem}.{kind}-{os.getpid()}{suffix}")


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


def remove_stale(folder: str, echo=print) -> None:
    """Settle the temporaries in ``folder`` left by killed isokernel processes:
    of this user, named by the pattern above, whose process is gone."""
    for name in sorted(os.listdir(folder)):
        match = _SIBLING.fullmatch(name)
        path = os.path.join(folder, name)
        if match and _orphaned(path, int(match["pid"])):
            _settle(path, match, echo)


def _orphaned(path: str, pid: int) -> bool:
    try:
        if os.lstat(path).st_uid != os.getuid():
            return False
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # not ours to judge, or not a process id at all
        return False
    return False


def _settle(path: str, match: re.Match, echo) -> None:
    """A stale ``partial`` is removed, except a run manifest whose output
    moved in (it is moved in too); a stale ``replaced`` store is removed
    when its replacement is in place, else renamed back."""
    output = os.path.join(os.path.dirname(path), match["stem"] + (match["suffix"] or ""))
    if match["kind"] == "replaced" and not os.path.lexists(output):
        os.rename(path, output)
        echo(f"restored {output} from {path}: process {match['pid']} was stopped while "
             f"replacing it")
        return
    if match["kind"] == "partial" and _describes(path, output):
        os.replace(path, output)
        echo(f"completed {output} from {path}: process {match['pid']} was stopped after "
             f"moving its output in")
        return
    _remove(path)
    echo(f"removed {path}, left behind by process {match['pid']}, which is gone")


@contextlib.contextmanager
def _temporary(output: str):
    """The temporary ``output`` is written under; removed if anything fails."""
    temporary = _sibling(output, "partial")
    try:
        yield temporary
    except BaseException:
        _remove(temporary)
        raise


def _place(temporary: str, output: str, overwrite: bool, model: str | None = None) -> None:
    """Move the finished temporary to ``output``. A file replaces an old one
    atomically; an old store (a folder) is renamed aside first, the new one
    moved in, then the old one deleted, so one of them always has a name."""
    if not os.path.lexists(output):
        os.rename(temporary, output)
        return
    _check_replaceable(output, overwrite, model)  # again: it may have changed meanwhile
    if not os.path.isdir(output):
        os.replace(temporary, output)
        return
    aside = _sibling(output, "replaced")
    os.rename(output, aside)
    try:
        os.rename(temporary, output)
    except BaseException:
        os.rename(aside, output)
        raise
    _remove(aside)


def _dataset(results: dict, model: Model, source_attrs: dict, record: str):
    import xarray as xr
    meta = {o.name: o for o in model.outputs}
    ds = xr.Dataset()
    for name, array in results.items():
        if name in array.dims:
            raise ValueError(f"{model.name}: output {name!r} has the name of a dimension of "
                             f"the data set; return it under another name")
        attrs = meta[name].attrs() if name in meta else {"long_name": f"{model.name}: {name}"}
        ds[name] = array.assign_attrs(attrs)
    ds.attrs = {"Conventions": "CF-1.8", "source": f"isokernel run {model.name}",
                "history": f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} isokernel "
                           f"run {model.name}: {model.description}",
                **{k: v for k, v in source_attrs.items() if k in ("title", "institution")},
                MANIFEST: record}
    return ds


def _write(ds, path: str, client, progress: _Progress | None) -> None:
    delayed = (ds.to_zarr(path, compute=False, mode="w", consolidated=False) if _is_zarr(path)
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


def _written(write, temporary: str, *args) -> None:
    """``write(*args)`` into ``temporary``; a file-system error names the
    output folder, not the hidden temporary."""
    try:
        write(*args)
    except OSError as err:
        if err.filename is None or not str(err.filename).startswith(temporary):
            raise
        raise _folder_error(os.path.dirname(temporary), err) from err


def _write_on_cluster(ds, temporary: str, address, workers, progress: _Progress | None,
                      strategy: str, run: str) -> tuple[dict[str, str], dict[str, dict]]:
    """Write ``ds`` into ``temporary``; returns the strategy of each process
    (asked before) and what each did (``_worker_record``, asked after)."""
    client = open_client(address, workers)
    try:
        strategies = _strategies(client, strategy)
        _written(_write, temporary, ds, temporary, client, progress)
        records = _worker_records(client, run, strategy)
    finally:
        _close(client)  # stops what still runs on the cluster before the temporary goes
        _forget(run)
    return strategies, records


def _worker_records(client, run: str, strategy: str) -> dict[str, dict]:
    """``_worker_record`` of this process, or of every worker of the cluster
    (one that cannot answer is recorded with its error, never dropped)."""
    if client is None:
        return {"this process": _worker_record(run, strategy)}
    answers = client.run(_worker_record, run, strategy, on_error="return")
    return {name: answer if isinstance(answer, dict) else
            {"error": f"{type(answer).__name__}: {answer}"} for name, answer in answers.items()}


def _forget(run: str) -> None:
    """Drop this process's tally of ``run`` (left by a failed run)."""
    with _TALLY_LOCK:
        _TALLIES.pop(run, None)


# ------------------------------------------------------------------ run manifest
# ``OUTPUT.manifest.json`` beside every output of ``run``: what ran, on what,
# where and how, to audit and reproduce it. It is written under a temporary
# name and moved in right after the output, whose ``isokernel_manifest``
# attribute carries the same run id.

RUN_MANIFEST_SUFFIX = ".manifest.json"
RUN_MANIFEST_FORMAT = "isokernel-run-manifest/1"
HASH_BLOCK = 1 << 20  # bytes of the input read and hashed at a time
_PACKAGES = ("isokernel", "numpy", "dask", "distributed", "xarray", "netCDF4", "h5netcdf",
             "zarr")
_WORKER_PACKAGES = ("isokernel", "numpy", "dask", "distributed")


def run_manifest_path(output: str) -> str:
    """Where the run manifest of ``output`` lies: ``OUTPUT.manifest.json``."""
    return output.rstrip("/") + RUN_MANIFEST_SUFFIX


def read_run_manifest(path: str) -> dict | None:
    """The run manifest at ``path``, or None for anything else (a link, a
    folder, another JSON file, unreadable bytes)."""
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    ours = isinstance(record, dict) and record.get("format") == RUN_MANIFEST_FORMAT
    return record if ours and isinstance(record.get("run"), str) else None


def _check_run_manifest(path: str) -> None:
    if os.path.lexists(path) and read_run_manifest(path) is None:
        raise FileExistsError(f"{path} exists and is not a run manifest isokernel wrote; "
                              f"isokernel writes the output's run manifest there and replaces "
                              f"only its own: move it away or choose another OUTPUT")


def _describes(manifest_path: str, path: str) -> bool:
    """Whether ``manifest_path`` is the run manifest of the data set that
    ``path`` (``OUTPUT.manifest.json``) belongs to: the same run id."""
    if not path.endswith(RUN_MANIFEST_SUFFIX):
        return False
    output = path[: -len(RUN_MANIFEST_SUFFIX)]
    written = read_run_manifest(manifest_path)
    record = _record(output)[0] if written is not None and os.path.lexists(output) else None
    return record is not None and record.get("run") == written["run"]


@contextlib.contextmanager
def _pair(output: str):
    """The temporaries of ``output`` and of its run manifest, written in
    that order and moved in in that order. A failure before the output
    moved in removes both (an old pair stays as it was); after, the new
    manifest still follows its output, so a manifest always describes the
    output beside it."""
    data, side = _sibling(output, "partial"), _sibling(run_manifest_path(output), "partial")
    try:
        yield data, side
    except BaseException:
        if not os.path.lexists(data) and _describes(side, run_manifest_path(output)):
            _follow(side, run_manifest_path(output))
        else:
            _remove(data)
            _remove(side)
        raise


def _follow(temporary: str, path: str) -> None:
    """Move the new run manifest in beside its output; where that fails,
    the old one (which describes the replaced output) goes too."""
    try:
        os.replace(temporary, path)
    except OSError:
        _remove(path)
        _remove(temporary)
        raise


def _write_json(path: str, record: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def checksum(path: str) -> dict:
    """SHA-256 of a data set, read ``HASH_BLOCK`` bytes at a time: of the
    file, or for a Zarr store (a folder) of its ``sha256sum`` listing, one
    line ``HEX  RELATIVE/PATH`` per file in sorted order of the paths."""
    if not os.path.isdir(path):
        digest, size = _file_sha256(path)
        return {"algorithm": "sha256", "sha256": digest, "bytes": size, "files": 1}
    listing, total, names = hashlib.sha256(), 0, _store_files(path)
    for name in names:
        digest, size = _file_sha256(os.path.join(path, name))
        listing.update(f"{digest}  {name}\n".encode())
        total += size
    return {"algorithm": "sha256 of the sorted sha256sum listing of the store's files",
            "sha256": listing.hexdigest(), "bytes": total, "files": len(names)}


def _file_sha256(path: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _store_files(path: str) -> list[str]:
    """Every file under ``path``, relative and with ``/``, sorted (as
    ``LC_ALL=C sort`` sorts their UTF-8 names)."""
    found = []
    for folder, _, names in os.walk(path):
        found += [os.path.relpath(os.path.join(folder, n), path) for n in names]
    return sorted(name.replace(os.sep, "/") for name in found)


def _in_background(fn, *args) -> concurrent.futures.Future:
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
class _Request:
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

    def command(self) -> str:
        """The ``isokernel run`` command line that asks the same."""
        argv = ["isokernel", "run", self.target, self.input_path, self.output,
                *(f"--var={v}" for v in self.variables)]
        if self.chunks:
            argv.append("--chunks=" + ",".join(f"{d}={n}" for d, n in self.chunks.items()))
        if self.dask_address is not None:
            argv += ["--dask", self.dask_address]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        argv += ["--dtype", self.dtype, "--strategy", self.strategy]
        return shlex.join(argv + ["--overwrite"] * self.overwrite)


class _Timing:
    """A run's start and end: UTC times and wall seconds."""

    def __init__(self):
        self.started_utc, self._started = _utc_now(), time.perf_counter()
        self.finished_utc, self.seconds = None, None

    def stop(self) -> None:
        self.finished_utc, self.seconds = _utc_now(), time.perf_counter() - self._started


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _versions(names) -> dict[str, str | None]:
    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _run_manifest(request: _Request, model: Model, data: dict, records: dict,
                  timing: _Timing) -> dict:
    """The run manifest: ``data`` holds the input, output and chunking
    sections (``_data_sections``); ``records`` what each process did."""
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
            "versions": _versions(_PACKAGES), "started_utc": timing.started_utc,
            "finished_utc": timing.finished_utc, "wall_seconds": round(timing.seconds, 3)}


def _data_sections(request: _Request, model: Model, ds, template, out, source: dict) -> dict:
    """The run id, input (path, checksum, variables), output and chunking."""
    record = json.loads(out.attrs[MANIFEST])
    return {"run": record["run"],
            "input": {"path": os.path.abspath(request.input_path), "checksum": source,
                      "variables": _input_variables(ds, model, request)},
            "output": {"path": os.path.abspath(request.output), "attribute": record,
                       "variables": [_variable(name, a) for name, a in out.data_vars.items()]},
            "chunks": _chunking(template, request.chunks)}


def _input_variables(ds, model: Model, request: _Request) -> list[dict]:
    """Each model input: the variable read, its dims, shape, stored dtype
    and the dtype it was computed in (floats become ``dtype``)."""
    mapping = parse_mapping(list(request.variables), "--var")
    found = []
    for name in model.inputs:
        var = ds[mapping.get(name, name)]
        floating = np.issubdtype(var.dtype, np.floating)
        found.append({"input": name, **_variable(var.name, var),
                      "computed_as": request.dtype if floating else str(var.dtype)})
    return found


def _variable(name, array) -> dict:
    return {"name": str(name), "dims": list(map(str, array.dims)),
            "shape": [int(n) for n in array.shape], "dtype": str(array.dtype)}


def _chunking(template, requested: dict[str, int] | None) -> dict:
    """The chunks that ran: their count, and per dimension runs of
    ``[size, how many]`` (``[[512, 9], [100, 1]]``)."""
    sizes = {str(d): _runs(c) for d, c in zip(template.dims, template.chunks)}
    return {"requested": requested, "count": _chunk_count(template), "sizes": sizes}


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
        tallies = client.run(_tally_of, self.run, on_error="return")
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


def _require_io() -> None:
    try:
        import dask  # noqa: F401
        import xarray  # noqa: F401
    except ImportError:
        raise ImportError(_IO_MISSING) from None


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
    _check_chunk_sizes(chunks)
    _at_least_one("--workers", workers)
    _require_io()
    model = resolve_model(target)
    request = _Request(target, input_path, output_path, tuple(variables), chunks, dask_address,
                       workers, dtype, strategy, overwrite)
    timing = _Timing()
    _check_input(input_path)
    output = prepare_output(output_path, overwrite, echo, input_path)
    _check_run_manifest(run_manifest_path(output))
    strategies, template, results = _run_into(output, request, model, timing, progress, echo)
    return _summary(output, results, template, strategies, timing.seconds, echo)


def _run_into(output: str, request: _Request, model: Model, timing: _Timing, progress: bool,
              echo):
    """Compute, write the output and its run manifest under temporary names,
    move both in; returns the strategies, the template and the results."""
    run_id = uuid.uuid4().hex
    ds = _open(request.input_path)
    try:
        template, results = _results(ds, model, request.variables, request.chunks,
                                     request.dtype, request.input_path, echo,
                                     request.strategy, run_id)
        out = _dataset(results, model, dict(ds.attrs),
                       manifest(model.name, request.input_path, results, run_id))
        source = _in_background(checksum, request.input_path)  # while the chunks run
        watch = _Progress(run_id, _chunk_count(template)) if progress else None
        with _pair(output) as (temporary, side):
            strategies, records = _write_on_cluster(out, temporary, request.dask_address,
                                                    request.workers, watch,
                                                    request.strategy, run_id)
            data = _data_sections(request, model, ds, template, out, source.result())
            timing.stop()
            record = _run_manifest(request, model, data, records, timing)
            _place_pair(temporary, side, output, request.overwrite, record)
    finally:
        ds.close()
    return strategies, template, results


def _place_pair(temporary: str, side: str, output: str, overwrite: bool, record: dict) -> None:
    """Write the run manifest into ``side``, move the output in, then the
    manifest (``_pair`` settles an interruption between the two)."""
    _written(_write_json, side, side, record)
    _check_run_manifest(run_manifest_path(output))  # again: it may have appeared meanwhile
    _place(temporary, output, overwrite)
    _follow(side, run_manifest_path(output))


def _results(ds, model: Model, variables, chunks, dtype: str, input_path: str, echo,
             strategy: str, run: str = ""):
    """The broadcast template of the inputs and the model's lazy outputs."""
    import xarray as xr
    arrays = _inputs(ds, model, parse_mapping(list(variables), "--var"), np.dtype(dtype))
    _check_template(arrays, chunks, input_path, echo)
    arrays = _chunked(arrays, chunks)
    template = xr.broadcast(*arrays)[0]
    names = tuple(o.name for o in model.outputs)
    return template, _compute(arrays, model, names, template, strategy, run)


def _chunk_count(template) -> int:
    return math.prod(len(c) for c in template.chunks)


def _summary(output: str, results: dict, template, strategies: dict, seconds: float,
             echo) -> dict:
    n_chunks = _chunk_count(template)
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


SCENE = "synthetic scene"  # the manifest's model of a scene written by write_scene


def write_scene(path: str, scene: dict, grid, echo=print) -> None:
    """Write a scene as NetCDF (``.nc``) or Zarr (``.zarr``), under a
    temporary name renamed on success. A scene isokernel wrote is replaced
    (``make demo`` reruns this); anything else at ``path`` is refused."""
    _require_io()
    output = prepare_output(path, True, echo, model=SCENE)
    ds = scene_dataset(scene, grid)
    ds.attrs[MANIFEST] = manifest(SCENE, None, ds.data_vars)
    with _temporary(output) as temporary:
        _written(_write_now, temporary, ds, temporary)
        _place(temporary, output, True, SCENE)


def _write_now(ds, path: str) -> None:
    if _is_zarr(path):
        ds.to_zarr(path, mode="w", consolidated=False)
    else:
        ds.to_netcdf(path)


def scene_dataset(scene: dict, grid, names=None):
    """A synthetic scene (``soil_moisture.generate_scene``) as an xarray
    Dataset on (y, x) with CF attributes; the last row's padding is NaN
    (the land-cover class there is -1)."""
    import xarray as xr
    names = names or ("tbv", "tbh", "sigma0_hh", "ndvi", "ndvi_max", "ndvi_min", "ts", "clay",
                      "bulk_density", "landcover", "mv", "vwc")
    ds = xr.Dataset(coords={"y": np.arange(grid.height), "x": np.arange(grid.width)})
    for name in names:
        values = scene[name]
        fill = -1 if values.dtype.kind == "i" else np.nan
        padded = np.full(grid.height * grid.width, fill, values.dtype)
        padded[: values.size] = values
        ds[name] = (("y", "x"), padded.reshape(grid.height, grid.width), SCENE_ATTRS[name])
    ds.attrs = {"Conventions": "CF-1.8", "title": "isokernel synthetic SMAP-NISAR scene"}
    return ds


SCENE_ATTRS = {
    "tbv": {"units": "K", "long_name": "V-pol brightness temperature at 40 deg, 1 K noise",
            "standard_name": "brightness_temperature"},
    "tbh": {"units": "K", "long_name": "H-pol brightness temperature at 40 deg, 1 K noise",
            "standard_name": "brightness_temperature"},
    "sigma0_hh": {"units": "dB", "long_name": "HH backscatter coefficient, 0.5 dB noise"},
    "ndvi": {"units": "1", "long_name": "normalized difference vegetation index"},
    "ndvi_max": {"units": "1", "long_name": "annual maximum NDVI"},
    "ndvi_min": {"units": "1", "long_name": "annual minimum NDVI"},
    "ts": {"units": "K", "long_name": "effective soil (= canopy) temperature",
           "standard_name": "soil_temperature"},
    "clay": {"units": "1", "long_name": "clay mass fraction"},
    "bulk_density": {"units": "g cm-3", "long_name": "soil bulk density"},
    "landcover": {"units": "1", "long_name": "land-cover class index",
                  "flag_values": np.arange(6, dtype=np.int32),
                  "flag_meanings": "barren grassland cropland shrubland savanna forest"},
    "mv": {"units": "m3 m-3", "long_name": "true volumetric soil moisture",
           "standard_name": "volume_fraction_of_condensed_water_in_soil"},
    "vwc": {"units": "kg m-2", "long_name": "true vegetation water content"},
}
