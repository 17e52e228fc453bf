"""A run's input data set (NetCDF or Zarr): opened, its variables mapped to
the model's inputs and chunked, and the model's outputs over them as lazy
``xarray.apply_ufunc`` arrays, one ``run_chunk`` per chunk."""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from . import smap
from .catalog import Model
from .chunks import as_dict, run_chunk
from .input_units import convert_block, in_model_units

# xarray and dask (the optional io extra) are imported in the functions that use them

CHUNK_PIXELS = 1 << 20  # default chunk size when the input is not chunked
_IO_MISSING = ("isokernel run needs xarray and dask: pip install 'isokernel[io]' "
               "(xarray, netCDF4, h5netcdf, zarr, dask[distributed])")


def require_io() -> None:
    try:
        import dask  # noqa: F401
        import xarray  # noqa: F401
    except ImportError:
        raise ImportError(_IO_MISSING) from None


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
    check_chunk_sizes(chunks)
    return chunks


def check_chunk_sizes(chunks: dict[str, int] | None) -> None:
    for dim, size in (chunks or {}).items():
        if size <= 0:
            raise ValueError(f"bad --chunks {dim}={size}: a chunk size must be greater than 0, "
                             f"e.g. {dim}=512")


def is_zarr(path: str) -> bool:
    return path.rstrip("/").endswith(".zarr")


def check_input(path: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such input data set: {path}")


def open_input(path: str, ancillary=None):
    """The input data set: a SMAP granule (``smap``: its cells that pass the
    quality mask, with model inputs from ``ancillary``), else NetCDF or Zarr."""
    import xarray as xr
    if smap.product_of(path) is not None:
        return smap.granule_cells(path, ancillary)
    try:
        if is_zarr(path):
            return xr.open_zarr(path, consolidated=False)
        return xr.open_dataset(path, chunks={})
    except Exception as err:  # every reader's own error class: say which file and format
        kind = "a Zarr store" if is_zarr(path) else "NetCDF (any other suffix than .zarr)"
        first = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"cannot read input {path} as {kind}: {type(err).__name__}: "
                         f"{first}") from err


def _inputs(ds, model: Model, mapping: dict[str, str], dtype, echo=print):
    """The model's inputs from ``ds``, in its units and ``dtype`` (floats),
    and per input how a block of it is made from the data set's variable
    (``Recipe``)."""
    unknown = set(mapping) - set(model.inputs)
    if unknown:
        raise ValueError(f"--var names {sorted(unknown)} are not inputs of {model.name}; its "
                         f"inputs are {', '.join(model.inputs)}")
    arrays, recipes = [], []
    for name in model.inputs:
        var = mapping.get(name, name)
        if var not in ds.variables:
            raise ValueError(f"input {name!r} of {model.name}: the data set has no variable "
                             f"{var!r}; map it with --var {name}=VARIABLE (variables: "
                             f"{', '.join(map(str, ds.data_vars))})")
        array, conversion = ds[var], None
        if model.input_units is not None:  # the file's CF units to the model's
            array, conversion = in_model_units(array, name, var, model.input_units.get(name),
                                               model.name, echo)
        cast = np.issubdtype(array.dtype, np.floating) and array.dtype != dtype
        if cast:
            array = array.astype(dtype)
        arrays.append(array)
        recipes.append(Recipe(var, conversion, dtype if cast else None))
    return arrays, recipes


@dataclass(frozen=True)
class Recipe:
    """How a block of a model input is made from the data set's variable:
    read (decoded by xarray), converted to the model's unit
    (``convert_block``'s arguments, or None) and cast (a dtype, or None):
    what the lazy inputs do, on one block."""
    variable: str
    conversion: dict | None
    dtype: np.dtype | None

    def block(self, ds, where: dict, dims: tuple) -> np.ndarray:
        """The block of region ``where`` with its dims in ``dims`` order."""
        var = ds[self.variable]
        data = var.isel({d: where[d] for d in var.dims if d in where}).transpose(*dims).values
        if self.conversion is not None:
            data = convert_block(data, **self.conversion)
        return data.astype(self.dtype) if self.dtype is not None else data


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


def _coordinates(template) -> list[tuple[str, np.ndarray]]:
    """The trailing arguments of ``run_chunk``: per dim, its index and its
    coordinate values (the index again for a dim without coordinates)."""
    out = []
    for dim in template.dims:
        n = template.sizes[dim]
        values = template[dim].values if dim in template.coords else np.arange(n)
        out += [(dim, np.arange(n)), (dim, values)]
    return out


def _coordinate_blocks(template):
    """``_coordinates`` as arrays chunked like ``template``."""
    import xarray as xr
    sizes = dict(zip(template.dims, template.chunks))
    return [xr.DataArray(data, dims=dim).chunk({dim: sizes[dim]})
            for dim, data in _coordinates(template)]


def _compute(target_arrays, model: Model, output_names, template, strategy: str,
             run: str = ""):
    import dask
    import xarray as xr
    coords = _coordinate_blocks(template)
    corners = [a.isel({d: 0 for d in a.dims}).data for a in target_arrays]
    first = [np.asarray(c).reshape(1) for c in dask.compute(*corners, scheduler="synchronous")]
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


def lazy_results(ds, model: Model, variables, chunks, dtype: str, input_path: str, echo,
                 strategy: str, run: str = ""):
    """The broadcast template of the inputs, the model's lazy outputs and
    the arguments of ``run_chunk`` (``ChunkArguments``), which read a
    chunk's input blocks without the outputs' task graph."""
    import xarray as xr
    arrays, recipes = _inputs(ds, model, parse_mapping(list(variables), "--var"),
                              np.dtype(dtype), echo)
    _check_template(arrays, chunks, input_path, echo)
    arrays = _chunked(arrays, chunks)
    template = xr.broadcast(*arrays)[0]
    names = tuple(o.name for o in model.outputs)
    results = _compute(arrays, model, names, template, strategy, run)
    outputs = tuple(results)
    kwargs = {"target": model.name, "n_inputs": len(arrays), "dims": tuple(template.dims),
              "outputs": outputs, "strategy": strategy, "run": run}
    in_memory = smap.product_of(input_path) is not None  # a granule's cells, made here
    arguments = ChunkArguments(None if in_memory else os.path.abspath(input_path),
                               ds if in_memory else None, recipes, arrays, template, kwargs)
    return template, results, arguments


def open_plain(path: str):
    """The input at ``path`` (NetCDF or Zarr) opened without dask."""
    import xarray as xr
    if is_zarr(path):
        return xr.open_zarr(path, consolidated=False, chunks=None)
    return xr.open_dataset(path)


class ChunkArguments:
    """The blocks ``run_chunk`` gets for a region, as ``xarray.apply_ufunc``
    hands them to it (the inputs, each with its dims in the broadcast order
    and a length-1 axis for a dim it lacks after its first one; then each
    dim's index and coordinate values), read without dask: each input by
    its ``Recipe`` from the input opened without chunks (``open_plain``,
    once per process and run until ``release``) or from a data set in
    memory (a SMAP granule's cells). Without a data set in memory it
    pickles small, so a Dask worker reads its chunks itself (``portable``).
    ``run(blocks)`` calls ``run_chunk`` and returns the outputs in
    ``kwargs["outputs"]`` order."""

    def __init__(self, path: str | None, dataset, recipes: list, arrays, template,
                 kwargs: dict):
        self.path, self.dataset, self.kwargs = path, dataset, kwargs
        dims = tuple(template.dims)
        self.inputs = [(recipe, tuple(d for d in dims if d in array.dims))
                       for recipe, array in zip(recipes, arrays)]
        self.coords = _coordinates(template)
        self.keys = ([_expansion(own, dims) for _, own in self.inputs]
                     + [_expansion((dim,), dims) for dim, _ in self.coords])

    @property
    def portable(self) -> bool:
        """Whether a worker can read the blocks itself (from the input's path)."""
        return self.path is not None

    def read(self, where: dict) -> tuple:
        """The numpy blocks of the region ``where`` (dim -> slice)."""
        ds = self.dataset if self.path is None else _opened(self.path, self.kwargs["run"])
        blocks = [recipe.block(ds, where, own) for recipe, own in self.inputs]
        blocks += [data[where[dim]] for dim, data in self.coords]
        return tuple(block[key] for block, key in zip(blocks, self.keys))

    def run(self, blocks: tuple) -> tuple:
        result = run_chunk(*blocks, **self.kwargs)
        return result if isinstance(result, tuple) else (result,)


_OPENED: dict = {}  # (path, run) -> the input opened without dask, in this process
_OPENED_LOCK = threading.Lock()


def _opened(path: str, run: str):
    with _OPENED_LOCK:
        key = (os.path.abspath(path), run)
        if key not in _OPENED:
            _OPENED[key] = open_plain(path)
        return _OPENED[key]


def release(path: str, run: str) -> None:
    """Close this process's plain handle on ``path`` for ``run`` (at its
    end: another run, here or later, has its own and sees the input as it
    is then)."""
    with _OPENED_LOCK:
        ds = _OPENED.pop((os.path.abspath(path), run), None)
    if ds is not None:
        ds.close()


def _expansion(own: tuple, dims: tuple) -> tuple:
    """The key that adds a length-1 axis for each dim of ``dims`` not in
    ``own`` after the first of ``own`` (leading ones are left to NumPy's
    broadcasting), as ``apply_ufunc`` passes a block."""
    key: list = []
    for dim in dims:
        if dim in own:
            key.append(slice(None))
        elif key:
            key.append(None)
    return tuple(key)


def chunk_count(template) -> int:
    return math.prod(len(c) for c in template.chunks)
