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

Needs the ``io`` extra (xarray, netCDF4 or h5netcdf, zarr, dask[distributed]).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..backends import choose, jit
from ..backends.devices import Device
from ..backends.hooks import cpu_budget
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


_JITTED: dict = {}


def _jitted(target: str, signature: tuple, strategy: str):
    """One jitted model per process, strategy and chunk signature (length,
    dtypes): chunks of different sizes are expected here, not retraces to
    warn about."""
    key = (target, signature, strategy)
    if key not in _JITTED:
        _JITTED[key] = jit(resolve_model(target).fn, strategy=strategy)
    return _JITTED[key]


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
              strategy: str = "auto"):
    """One chunk: the model over the flattened, broadcast input blocks;
    the trailing blocks are each dim's index and coordinate values."""
    data, coords = blocks[:n_inputs], blocks[n_inputs:]
    shape = np.broadcast_shapes(*(b.shape for b in data))
    flat = [np.ascontiguousarray(np.broadcast_to(b, shape)).reshape(-1) for b in data]
    try:
        signature = (flat[0].size, *(a.dtype.str for a in flat))
        result = as_dict(_jitted(target, signature, strategy)(*flat))
        arrays = [np.asarray(result[name]) for name in outputs]
    except Exception as err:
        raise ChunkError(f"chunk {_describe(dims, coords)} failed: "
                         f"{type(err).__name__}: {err}") from err
    shaped = tuple(a.reshape(shape) for a in arrays)
    return shaped if len(shaped) > 1 else shaped[0]  # apply_ufunc: one output, no tuple


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


def _compute(target_arrays, model: Model, output_names, template, strategy: str):
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
                "strategy": strategy})
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


def manifest(model: str, input_path: str | None, variables) -> str:
    """The ``isokernel_manifest`` attribute: a small JSON record of who wrote
    the data set, from what, when, and which variables."""
    from importlib.metadata import version
    source = None if input_path is None else os.path.abspath(input_path)
    return json.dumps({"model": model, "input": source, "isokernel": version("isokernel"),
                       "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "variables": sorted(map(str, variables))})


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
    """A stale ``partial`` is removed; a stale ``replaced`` store is removed
    when its replacement is in place, else renamed back."""
    output = os.path.join(os.path.dirname(path), match["stem"] + (match["suffix"] or ""))
    if match["kind"] == "replaced" and not os.path.lexists(output):
        os.rename(path, output)
        echo(f"restored {output} from {path}: process {match['pid']} was stopped while "
             f"replacing it")
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


def _write(ds, path: str, client, progress: bool) -> None:
    delayed = (ds.to_zarr(path, compute=False, mode="w", consolidated=False) if _is_zarr(path)
               else ds.to_netcdf(path, compute=False))
    if client is not None:
        future = client.compute(delayed)
        if progress:
            from distributed import progress as show
            show(future)
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


def _write_on_cluster(ds, temporary: str, address, workers, progress: bool,
                      strategy: str) -> dict[str, str]:
    client = open_client(address, workers)
    try:
        strategies = _strategies(client, strategy)
        _written(_write, temporary, ds, temporary, client, progress)
    finally:
        _close(client)  # stops what still runs on the cluster before the temporary goes
    return strategies


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
    """Run ``target`` over ``input_path`` and write ``output_path``; returns
    a summary (outputs, chunks, seconds, strategies used). ``strategy``
    (default ``auto``: each process's fastest) names the CPU strategy every
    chunk runs on. An existing ``output_path`` is replaced only with
    ``overwrite`` and only when isokernel wrote it (``prepare_output``)."""
    local_strategy(strategy)  # an unknown or unavailable strategy fails before any work
    _check_chunk_sizes(chunks)
    _at_least_one("--workers", workers)
    _require_io()
    model = resolve_model(target)
    started = time.perf_counter()
    _check_input(input_path)
    output = prepare_output(output_path, overwrite, echo, input_path)
    ds = _open(input_path)
    try:
        template, results = _results(ds, model, variables, chunks, dtype, input_path, echo,
                                     strategy)
        record = manifest(model.name, input_path, results)
        out = _dataset(results, model, dict(ds.attrs), record)
        with _temporary(output) as temporary:
            strategies = _write_on_cluster(out, temporary, dask_address, workers, progress,
                                           strategy)
            _place(temporary, output, overwrite)
    finally:
        ds.close()
    return _summary(output, results, template, strategies, time.perf_counter() - started, echo)


def _results(ds, model: Model, variables, chunks, dtype: str, input_path: str, echo,
             strategy: str):
    """The broadcast template of the inputs and the model's lazy outputs."""
    import xarray as xr
    arrays = _inputs(ds, model, parse_mapping(list(variables), "--var"), np.dtype(dtype))
    _check_template(arrays, chunks, input_path, echo)
    arrays = _chunked(arrays, chunks)
    template = xr.broadcast(*arrays)[0]
    names = tuple(o.name for o in model.outputs)
    return template, _compute(arrays, model, names, template, strategy)


def _summary(output: str, results: dict, template, strategies: dict, seconds: float,
             echo) -> dict:
    n_chunks = math.prod(len(c) for c in template.chunks)
    echo(f"wrote {output}: {', '.join(results)} over {dict(template.sizes)} in "
         f"{n_chunks} chunks, {seconds:.1f} s; strategy per process: "
         f"{', '.join(sorted(set(strategies.values())))}")
    return {"outputs": list(results), "chunks": n_chunks, "seconds": seconds,
            "strategies": strategies}


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
