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

Needs the ``io`` extra (xarray, netCDF4 or h5netcdf, zarr, dask[distributed]).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..backends import choose, jit
from ..backends.devices import Device
from ..backends.platform import cpu_budget
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
        return {k: int(v) for k, v in parse_mapping(spec.split(","), "--chunks").items()}
    except ValueError:
        raise ValueError(f"bad --chunks {spec!r}; write DIM=SIZE,..., e.g. y=512,x=512"
                         ) from None


def _is_zarr(path: str) -> bool:
    return path.rstrip("/").endswith(".zarr")


def _open(path: str):
    import xarray as xr
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such input data set: {path}")
    if _is_zarr(path):
        return xr.open_zarr(path, consolidated=False)
    return xr.open_dataset(path, chunks={})


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


# ------------------------------------------------------------------ writing


def _temporary(output: str) -> str:
    """A hidden sibling of ``output`` with the same suffix (which selects
    the format): ``dir/.name.partial-PID.nc``."""
    head, tail = os.path.split(os.path.abspath(output.rstrip("/")))
    stem, suffix = os.path.splitext(tail)
    return os.path.join(head, f".{stem}.partial-{os.getpid()}{suffix}")


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def _dataset(results: dict, model: Model, source_attrs: dict):
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
                **{k: v for k, v in source_attrs.items() if k in ("title", "institution")}}
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


# ------------------------------------------------------------------ clusters


def open_client(address: str | None, workers: int | None = None):
    """A distributed client: ``local`` starts a LocalCluster of worker
    processes (one thread each: the strategy inside a worker owns its
    cores); anything else is a scheduler address."""
    if address is None:
        return None
    from distributed import Client, LocalCluster
    if address == "local":
        n = workers or max(1, cpu_budget().value)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster)
    return Client(address)


def _close(client) -> None:
    if client is None:
        return
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def run(target: str, input_path: str, output_path: str, variables: list[str] = (),
        chunks: dict[str, int] | None = None, dask_address: str | None = None,
        workers: int | None = None, dtype: str = "float64", progress: bool = True,
        echo=print, strategy: str = "auto") -> dict:
    """Run ``target`` over ``input_path`` and write ``output_path``; returns
    a summary (outputs, chunks, seconds, strategies used). ``strategy``
    (default ``auto``: each process's fastest) names the CPU strategy every
    chunk runs on."""
    local_strategy(strategy)  # an unknown or unavailable strategy fails before any work
    try:
        import dask  # noqa: F401
        import xarray  # noqa: F401
    except ImportError:
        raise ImportError(_IO_MISSING) from None
    model = resolve_model(target)
    started = time.perf_counter()
    ds = _open(input_path)
    arrays = _chunked(_inputs(ds, model, parse_mapping(list(variables), "--var"),
                              np.dtype(dtype)), chunks)
    import xarray as xr
    template = xr.broadcast(*arrays)[0]
    results = _compute(arrays, model, tuple(o.name for o in model.outputs), template, strategy)
    out = _dataset(results, model, dict(ds.attrs))
    temporary = _temporary(output_path)
    client = open_client(dask_address, workers)
    try:
        strategies = _strategies(client, strategy)
        _write(out, temporary, client, progress)
        if os.path.isdir(output_path):
            shutil.rmtree(output_path)  # a Zarr store: os.replace cannot overwrite a folder
        os.replace(temporary, output_path)
    except BaseException:
        _remove(temporary)
        raise
    finally:
        _close(client)
        ds.close()
    n_chunks = math.prod(len(c) for c in template.chunks)
    seconds = time.perf_counter() - started
    echo(f"wrote {output_path}: {', '.join(results)} over {dict(template.sizes)} in "
         f"{n_chunks} chunks, {seconds:.1f} s; strategy per process: "
         f"{', '.join(sorted(set(strategies.values())))}")
    return {"outputs": list(results), "chunks": n_chunks, "seconds": seconds,
            "strategies": strategies}


def _strategies(client, strategy: str) -> dict[str, str]:
    if client is None:
        return {"this process": local_strategy(strategy)}
    return client.run(local_strategy, strategy)


def write_scene(path: str, scene: dict, grid) -> None:
    """Write a scene as NetCDF (``.nc``) or Zarr (``.zarr``), under a
    temporary name renamed on success."""
    try:
        import xarray  # noqa: F401
    except ImportError:
        raise ImportError(_IO_MISSING) from None
    ds = scene_dataset(scene, grid)
    temporary = _temporary(path)
    try:
        if _is_zarr(path):
            ds.to_zarr(temporary, mode="w", consolidated=False)
        else:
            ds.to_netcdf(temporary)
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise


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
