"""Scenes: files in, files out. ``isokernel run MODEL INPUT OUTPUT``: a
pointwise model over a NetCDF or Zarr data set, chunk by chunk, in this
process or on a Dask cluster.

Variables are mapped to the model's inputs by name (``--var tbv=TB_V``);
every chunk goes through ``xarray.apply_ufunc(..., dask="parallelized")``
and, on whichever process runs it, through ``jit(model, strategy="auto")``:
the best strategy of that machine. Chunks are flattened to one dimension
before the call (the models are pointwise), so chunks of one size share one
compiled executable.

Failure is explicit: a chunk that raises is reported with its index ranges
and coordinates, and the output is written under a temporary name in the
destination folder and renamed only when every chunk succeeded, so no
partial file ever carries the requested name. The outputs are written chunk
by chunk into a chunk store beside the output (``chunk_store``), so memory
does not grow with the scene, and a run killed outright is continued from
the chunks it recorded done by ``run(..., resume=True)`` (``--resume``),
into the bits of a run that was never stopped.

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
an interrupted run leaves the old pair as it was. Progress is one line per
second on stderr with each process's (or worker's) chunks and pixels/s.

Needs the ``io`` extra (xarray, netCDF4 or h5netcdf, zarr, dask[distributed]).

The modules: ``catalog`` (the models known by name), ``datasets`` (opening
the input, mapping and chunking its variables, the lazy outputs),
``chunks`` (what runs on each process: compile, run and tally a chunk),
``chunk_store`` (the chunk store: its files, a run's identity, region
writes and the final NetCDF conversion),
``outputs`` (placing data sets and their run manifest files safely, and
writing synthetic scenes), ``run_manifest`` (what the run manifest
records), ``runner`` (``run``, clusters and progress) and ``synthetic``
(a synthetic scene as a data set). The settings ``HASH_BLOCK``,
``CONNECT_SECONDS`` and ``PROGRESS_SECONDS`` are read from the module that
defines them.
"""

from __future__ import annotations

from .catalog import MODELS, Model, Output, resolve_model, stage5_model
from .chunks import ChunkError, as_dict, local_strategy, run_chunk
from .datasets import CHUNK_PIXELS, parse_chunks, parse_mapping
from .outputs import (
    MANIFEST,
    RUN_MANIFEST_FORMAT,
    RUN_MANIFEST_SUFFIX,
    SCENE,
    manifest,
    prepare_output,
    read_run_manifest,
    remove_stale,
    run_manifest_path,
    write_scene,
)
from .run_manifest import HASH_BLOCK, checksum
from .runner import CONNECT_SECONDS, PROGRESS_SECONDS, open_client, run
from .synthetic import SCENE_ATTRS, scene_dataset

__all__ = [
    "CHUNK_PIXELS",
    "CONNECT_SECONDS",
    "ChunkError",
    "HASH_BLOCK",
    "MANIFEST",
    "MODELS",
    "Model",
    "Output",
    "PROGRESS_SECONDS",
    "RUN_MANIFEST_FORMAT",
    "RUN_MANIFEST_SUFFIX",
    "SCENE",
    "SCENE_ATTRS",
    "as_dict",
    "checksum",
    "local_strategy",
    "manifest",
    "open_client",
    "parse_chunks",
    "parse_mapping",
    "prepare_output",
    "read_run_manifest",
    "remove_stale",
    "resolve_model",
    "run",
    "run_chunk",
    "run_manifest_path",
    "scene_dataset",
    "stage5_model",
    "write_scene",
]
