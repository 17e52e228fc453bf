"""Writing data sets so that nothing isokernel did not write is deleted or
overwritten: the ``isokernel_manifest`` attribute, the checks made before any
work, temporaries and their placement, the run manifest file that moves in
with its output, and the writer of synthetic scenes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from importlib.metadata import version

from ..backends.platform import process_gone
from .catalog import Model
from .chunk_store import resumable
from .datasets import is_zarr, require_io
from .smap import on_ease_grid
from .synthetic import scene_dataset

# xarray (the optional io extra) is imported in the functions that use it

MANIFEST = "isokernel_manifest"  # global attribute of every data set isokernel writes
_ZARR_METADATA = frozenset({"zarr.json", ".zgroup", ".zattrs", ".zmetadata"})
# ``.out.partial-PID.nc`` (being written), ``.out.replaced-PID.zarr`` (an old
# store set aside while its replacement moves in) and ``.out.nc.chunks-PID`` (the
# chunk store of a run, ``chunk_store``), in the output's folder
_SIBLING = re.compile(r"\.(?P<stem>.+)\.(?P<kind>partial|replaced|chunks)-(?P<pid>\d+)"
                      r"(?P<suffix>\.[^.]*)?")
_NOT_OURS = ("output {path} exists and was not written by isokernel ({why}); isokernel "
             "replaces only its own outputs, even with --overwrite: move it away or choose "
             "another OUTPUT")


def manifest(model: str, input_path: str | None, variables, run: str | None = None) -> str:
    """The ``isokernel_manifest`` attribute: a small JSON record of who wrote
    the data set, from what, when, and which variables; with ``run``, the id
    its run manifest (``OUTPUT.manifest.json``) carries too."""
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
    if not output or (output != path and not is_zarr(output)
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
    if os.path.isdir(path) != is_zarr(path):
        return None, "a folder, not a .zarr store" if os.path.isdir(path) else "not a folder"
    try:
        attrs, data_vars, names = _header(path)
    except Exception as err:  # anything unreadable is, by definition, not ours
        kind = "Zarr" if is_zarr(path) else "NetCDF"
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


def written_run(path: str) -> str | None:
    """The run id in the ``isokernel_manifest`` of the data set isokernel
    wrote at ``path``, else None."""
    record = _record(path)[0] if os.path.lexists(path) else None
    return None if record is None else record.get("run")


def _header(path: str) -> tuple[dict, list[str], set[str]]:
    """Global attributes, data variables and all variable names."""
    import xarray as xr
    opened = (xr.open_zarr(path, consolidated=False) if is_zarr(path)
              else xr.open_dataset(path, decode_cf=False))
    with opened as ds:
        # a CF grid mapping variable (``crs``) is no data variable
        mappings = {str(v.attrs.get("grid_mapping")) for v in ds.variables.values()}
        data_vars = [str(n) for n in ds.data_vars if str(n) not in mappings]
        return dict(ds.attrs), data_vars, set(map(str, ds.variables))


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
    of this user, named by the pattern above, whose process is gone. A
    resumable chunk store stays for a run of its output to resume or
    remove (``runner``)."""
    for name in sorted(os.listdir(folder)):
        match = _SIBLING.fullmatch(name)
        path = os.path.join(folder, name)
        if match and orphaned(path, int(match["pid"])):
            if match["kind"] == "chunks" and resumable(path):
                continue
            _settle(path, match, echo)


def orphaned(path: str, pid: int) -> bool:
    """Whether ``path`` is this user's and process ``pid`` is gone."""
    try:
        if os.lstat(path).st_uid != os.getuid():
            return False
    except OSError:  # gone meanwhile, or not ours to judge
        return False
    return process_gone(pid)


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


def write_temporary(write, temporary: str, *args) -> None:
    """``write(*args)`` into ``temporary``; a file-system error names the
    output folder, not the hidden temporary."""
    try:
        write(*args)
    except OSError as err:
        if err.filename is None or not str(err.filename).startswith(temporary):
            raise
        raise _folder_error(os.path.dirname(temporary), err) from err


def output_dataset(results: dict, model: Model, source_attrs: dict, record: str,
                   grid: bool = True):
    """The output data set of ``results``; ``grid``: a SMAP granule's cells
    put back on its grid (``smap.on_ease_grid``; ``run`` computes and stores
    the cells, and grids them when it writes the output)."""
    import xarray as xr
    if grid:
        results = on_ease_grid(results, source_attrs)
    meta = {o.name: o for o in model.outputs}
    ds = xr.Dataset()
    for name, array in results.items():
        if name in array.dims:
            raise ValueError(f"{model.name}: output {name!r} has the name of a dimension of "
                             f"the data set; return it under another name")
        attrs = meta[name].attrs() if name in meta else {"long_name": f"{model.name}: {name}"}
        ds[name] = array.copy(deep=False)
        ds[name].attrs = dict(attrs)  # only its own: apply_ufunc gave it the first input's
    ds.attrs = {"Conventions": "CF-1.8", "source": f"isokernel run {model.name}",
                "history": f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} isokernel "
                           f"run {model.name}: {model.description}",
                **{k: v for k, v in source_attrs.items() if k in ("title", "institution")},
                MANIFEST: record}
    return ds


# ------------------------------------------------------------------ run manifest file
# ``OUTPUT.manifest.json`` beside every output of ``run``: what ran, on what,
# where and how, to audit and reproduce it. It is written under a temporary
# name and moved in right after the output, whose ``isokernel_manifest``
# attribute carries the same run id.

RUN_MANIFEST_SUFFIX = ".manifest.json"
RUN_MANIFEST_FORMAT = "isokernel-run-manifest/1"


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


def check_run_manifest(path: str) -> None:
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
def output_pair(output: str):
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


def place_pair(temporary: str, side: str, output: str, overwrite: bool, record: dict) -> None:
    """Write the run manifest into ``side``, move the output in, then the
    manifest (``output_pair`` settles an interruption between the two)."""
    write_temporary(_write_json, side, side, record)
    check_run_manifest(run_manifest_path(output))  # again: it may have appeared meanwhile
    _place(temporary, output, overwrite)
    _follow(side, run_manifest_path(output))


# ------------------------------------------------------------------ synthetic scenes

SCENE = "synthetic scene"  # the manifest's model of a scene written by write_scene


def write_scene(path: str, scene: dict, grid, echo=print) -> None:
    """Write a scene as NetCDF (``.nc``) or Zarr (``.zarr``), under a
    temporary name renamed on success. A scene isokernel wrote is replaced
    (``make demo`` reruns this); anything else at ``path`` is refused."""
    require_io()
    output = prepare_output(path, True, echo, model=SCENE)
    ds = scene_dataset(scene, grid)
    ds.attrs[MANIFEST] = manifest(SCENE, None, ds.data_vars)
    with _temporary(output) as temporary:
        write_temporary(_write_now, temporary, ds, temporary)
        _place(temporary, output, True, SCENE)


def _write_now(ds, path: str) -> None:
    if is_zarr(path):
        ds.to_zarr(path, mode="w", consolidated=False)
    else:
        ds.to_netcdf(path)
