"""The chunk store of a run: where ``run`` writes its outputs chunk by chunk,
with the record of the chunks done, so that no more than one chunk's
outputs is ever held in memory and a run killed outright can be resumed.

Beside OUTPUT, in its folder, a hidden folder ``.NAME.chunks-PID`` holds

- ``data.zarr``: a Zarr store with every output variable, its chunks those
  of the computation, written one region per chunk;
- ``run.json``: what the run is (``identity``: model, input, options, the
  code that computes), its input's checksum once known, its chunk layout,
  run id and the strategies that compute; written once the store's
  metadata is complete, replaced atomically;
- ``done.log``: one line per chunk whose outputs were written, appended
  (flushed and fsynced) after the chunk's region write returned.

A Zarr output is ``data.zarr`` itself, moved out and in place when every
chunk is done; a NetCDF output is converted from it chunk by chunk. The
folder is adopted by a resumed run with one rename (to its own PID)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
from importlib import metadata
from typing import TYPE_CHECKING

from .catalog import MODELS, Model

if TYPE_CHECKING:
    from .run_manifest import Request

# xarray and dask (the optional io extra) are imported in the functions that use them

DATA, HEADER, DONE = "data.zarr", "run.json", "done.log"
STORE_FORMAT = "isokernel-chunk-store/1"


def store_path(output: str, pid: int | None = None) -> str:
    """``dir/.NAME.chunks-PID`` for OUTPUT ``dir/NAME``."""
    head, tail = os.path.split(os.path.abspath(output))
    return os.path.join(head, f".{tail}.chunks-{os.getpid() if pid is None else pid}")


def stores_of(output: str) -> list[tuple[str, int]]:
    """The chunk stores of ``output`` in its folder, with their PIDs."""
    head, tail = os.path.split(os.path.abspath(output))
    pattern = re.compile(rf"\.{re.escape(tail)}\.chunks-(\d+)")
    found = []
    for name in sorted(os.listdir(head)):
        match = pattern.fullmatch(name)
        if match:
            found.append((os.path.join(head, name), int(match[1])))
    return found


def read_header(store: str) -> dict | None:
    """``run.json`` of a chunk store, or None (absent, unreadable, another format)."""
    try:
        with open(os.path.join(store, HEADER), encoding="utf-8") as f:
            header = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(header, dict) and header.get("format") == STORE_FORMAT
    return header if ok else None


def resumable(store: str) -> bool:
    return read_header(store) is not None and os.path.isdir(os.path.join(store, DATA))


def write_header(store: str, header: dict) -> None:
    """``run.json`` replaced atomically: written beside, fsynced, renamed."""
    path = os.path.join(store, HEADER)
    temporary = path + ".new"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(header, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    _fsync_folder(store)


def _fsync_folder(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_done(store: str) -> set[int]:
    """The chunks ``done.log`` lists; a last line cut short by a kill is not one."""
    try:
        with open(os.path.join(store, DONE), encoding="ascii") as f:
            text = f.read()
    except OSError:
        return set()
    return {int(line) for line in text.split("\n")[:-1] if line.isdigit()}


class DoneLog:
    """``done.log`` opened for appending: one ``INDEX`` line per chunk,
    flushed and fsynced before ``add`` returns."""

    def __init__(self, store: str):
        self.file = open(os.path.join(store, DONE), "a", encoding="ascii")  # noqa: SIM115

    def add(self, index: int) -> None:
        self.file.write(f"{index}\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


# ------------------------------------------------------------------ what a run is

_IDENTITY_FIELDS = ("model", "model_source", "input", "ancillary", "output", "variables",
                    "chunks", "dtype", "strategy", "isokernel", "code", "numpy")


def run_identity(request: Request, model: Model) -> dict:
    """What must be equal for a run to continue another's chunks: the model
    (and the source file of a user's model), input, ancillary and output paths,
    ``--var``, ``--chunks``, ``--dtype``, ``--strategy``, and the code
    (isokernel's version and a digest of its Python sources, NumPy's
    version). The cluster (``--dask``, ``--workers``), ``--progress`` and
    ``--overwrite`` do not change a chunk's bits and may differ."""
    return {"model": request.target, "model_source": _model_source(model),
            "input": os.path.abspath(request.input_path),
            "ancillary": request.ancillary and os.path.abspath(request.ancillary),
            "output": os.path.abspath(request.output).rstrip("/"),
            "variables": list(request.variables),
            "chunks": dict(request.chunks) if request.chunks else None,
            "dtype": request.dtype, "strategy": request.strategy,
            "isokernel": _version("isokernel"), "code": code_digest(),
            "numpy": _version("numpy")}


def identity_difference(recorded: dict, now: dict) -> str | None:
    """The first field in which two identities differ, in words, or None."""
    for name in _IDENTITY_FIELDS:
        if recorded.get(name) != now.get(name):
            return f"{name} {_show(recorded.get(name))} then, {_show(now.get(name))} now"
    return None


def _show(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 40 else "…" + text[-40:] if "/" in text else text[:12] + "…"


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_CODE: list[str] = []  # the digest of isokernel's sources, computed once per process


def code_digest() -> str:
    """SHA-256 over isokernel's Python sources (path and bytes of each
    ``.py`` file, in sorted order): another commit is another code."""
    if not _CODE:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        digest = hashlib.sha256()
        for path in sorted(_python_files(root)):
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        _CODE.append(digest.hexdigest())
    return _CODE[0]


def _python_files(root: str) -> list[str]:
    found = []
    for folder, _, names in os.walk(root):
        found += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return found


def _model_source(model: Model) -> str | None:
    """SHA-256 of the file defining a user's model (a shipped model is
    isokernel's code, in ``code``)."""
    if MODELS.get(model.name) is model:  # a shipped model
        return None
    try:
        path = inspect.getsourcefile(model.fn)  # type: ignore[arg-type]
        with open(path, "rb") as f:  # type: ignore[arg-type]
            return hashlib.sha256(f.read()).hexdigest()
    except (TypeError, OSError):
        return None


# ------------------------------------------------------------------ writing it


def layout(template) -> dict:
    """The chunk layout of a run: dims, shape and per dim its chunk sizes."""
    return {"dims": list(map(str, template.dims)), "shape": [int(n) for n in template.shape],
            "chunks": [[int(c) for c in sizes] for sizes in template.chunks]}


def block_index(chunks: list[list[int]], k: int) -> tuple[int, ...]:
    """Chunk ``k`` (C order over the blocks) as a block index."""
    index = []
    for sizes in reversed(chunks):
        k, i = divmod(k, len(sizes))
        index.append(i)
    return tuple(reversed(index))


def region(dims: list[str], chunks: list[list[int]], index: tuple[int, ...]) -> dict:
    """The slices of block ``index`` per dim."""
    out = {}
    for dim, sizes, i in zip(dims, chunks, index):
        start = sum(sizes[:i])
        out[dim] = slice(start, start + sizes[i])
    return out


def create(store: str, out, header: dict, compressed: bool = True) -> None:
    """The chunk store of ``out`` (its outputs lazy, chunked as computed):
    the Zarr store's metadata, attributes and coordinates, then
    ``run.json``; no output chunk is computed. Not ``compressed``: the
    outputs' chunks stored as raw bytes (a store that only stages a
    NetCDF output is written and read once, compressing it only costs)."""
    import dask
    os.makedirs(store)
    data = os.path.join(store, DATA)
    raw = {} if compressed else {name: {"compressors": None} for name in out.data_vars}
    skeleton = out.copy(deep=False)
    lazy = [name for name, v in out.coords.items() if v.chunks is not None]
    for name in lazy:  # chunked as read, not as the input stored them
        variable = skeleton.variables[name]
        variable.encoding = {k: v for k, v in variable.encoding.items() if k not in _LAYOUT}
    skeleton.to_zarr(data, compute=False, mode="w", consolidated=False, encoding=raw)
    if lazy:  # coordinates read lazily from the input: written now, chunk by chunk
        with dask.config.set(scheduler="synchronous"):
            skeleton.drop_vars(list(out.data_vars)).to_zarr(data, mode="r+",
                                                           consolidated=False)
    write_header(store, header)


_LAYOUT = ("chunks", "preferred_chunks", "shards")  # an input's Zarr chunking


def write_chunk(data: str, where: dict, names: tuple, dims: tuple, *arrays) -> int:
    """One chunk's outputs written into their region of the Zarr store
    ``data``; returns the pixels written. A variable stored as it is
    computed (``_stored_raw``) is assigned to its Zarr array directly; any
    other goes through xarray's region write, which encodes it."""
    import xarray as xr
    targets = _raw_targets(data, names, arrays)
    if targets is None:
        ds = xr.Dataset({name: (dims, array) for name, array in zip(names, arrays)})
        ds.to_zarr(data, region=where, consolidated=False)
    else:
        key = tuple(where[d] for d in dims)
        for target, array in zip(targets, arrays):
            target[key] = array
    return int(arrays[0].size) if arrays else 0


_ENCODED = ("scale_factor", "add_offset", "dtype", "calendar")  # xarray would transform


def _raw_targets(data: str, names: tuple, arrays) -> list | None:
    """The Zarr arrays of ``names`` when every one stores its values as
    computed (the same numeric dtype, no scale, offset or other CF
    encoding, a float's fill value NaN: xarray's encoding leaves such
    values alone); else None."""
    import zarr
    group = zarr.open_group(data, mode="r+")
    targets = [group[name] for name in names]
    return targets if all(map(_stored_raw, targets, arrays)) else None


def _stored_raw(target, array) -> bool:
    import numpy as np
    if target.dtype != array.dtype or array.dtype.kind not in "fiu":
        return False
    attrs = target.attrs
    if any(name in attrs for name in _ENCODED):
        return False
    if array.dtype.kind == "f" and "_FillValue" in attrs:
        return bool(np.isnan(target.fill_value))
    return True


def write_gridded(data: str, regrid, out, path: str, zarr: bool) -> None:
    """The Zarr store ``data`` (outputs over cells) written as ``path`` on
    the grid ``regrid(stored)`` puts them on, a Zarr store (``zarr``) or
    NetCDF, encoded as ``out``'s variables."""
    import dask
    import xarray as xr
    with xr.open_zarr(data, consolidated=False) as stored:
        final = regrid(stored)
        for name, variable in final.data_vars.items():
            if name in out.variables:
                variable.encoding = {**out[name].encoding, **variable.encoding}
        with dask.config.set(scheduler="synchronous"):
            if zarr:
                final.to_zarr(path, mode="w", consolidated=False)
            else:
                final.to_netcdf(path)


def to_netcdf(data: str, out, path: str) -> None:
    """The Zarr store ``data`` as the NetCDF file ``path``, a chunk at a
    time, each variable encoded as ``out``'s (as writing ``out`` would)."""
    import dask
    import xarray as xr
    with xr.open_zarr(data, consolidated=False) as stored:
        for name, variable in stored.variables.items():
            variable.encoding = dict(out[name].encoding) if name in out.variables else {}
        with dask.config.set(scheduler="synchronous"):
            stored.to_netcdf(path)
