"""What runs on whichever process computes a chunk (this one, or a Dask
worker): the compiled model per chunk signature, the chunk itself, and this
process's tally of the chunks, pixels and kernels it ran, which the progress
lines poll and the run manifest collects."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import threading
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np

from ..backends import choose
from ..backends.cpu.pool import resolve_workers
from ..backends.devices import Device
from ..pipeline import jit
from .catalog import resolve_model


class ChunkError(RuntimeError):
    """A chunk failed; the message names its index ranges and coordinates."""


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
    threads: int | None = None  # resolve_workers in a chunk: the pool it ran on
    threads_from: str | None = None


_TALLIES: dict[str, _Tally] = {}
_TALLY_LOCK = threading.Lock()  # never held while compiling: polls must answer at once


def _count(run: str, key: tuple, pixels: int) -> None:
    threads, source = resolve_workers(None)  # in a Dask task: the worker's nthreads
    with _TALLY_LOCK:
        tally = _TALLIES.setdefault(run, _Tally())
        tally.threads, tally.threads_from = threads, source
        tally.chunks += 1
        tally.pixels += pixels
        tally.kernels.add(key)


def tally_of(run: str) -> dict:
    """Chunks and pixels this process finished for ``run`` so far."""
    with _TALLY_LOCK:
        tally = _TALLIES.get(run, _Tally())
        return {"chunks": tally.chunks, "pixels": tally.pixels}


def forget(run: str) -> None:
    """Drop this process's tally of ``run`` (left by a failed run)."""
    with _TALLY_LOCK:
        _TALLIES.pop(run, None)


_WORKER_PACKAGES = ("isokernel", "numpy", "dask", "distributed")


def worker_record(run: str, strategy: str) -> dict:
    """What this process did for ``run`` (its tally is dropped): host, pid,
    strategy, the threads its chunks' compiled model ran on (and why that
    many; None before its first chunk), chunks, pixels, versions and the kernels that ran."""
    with _TALLY_LOCK:
        tally = _TALLIES.pop(run, _Tally())
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "strategy": local_strategy(strategy), "threads": tally.threads,
            "threads_from": tally.threads_from, "chunks": tally.chunks,
            "pixels": tally.pixels, "versions": versions(_WORKER_PACKAGES),
            "kernels": [_kernel_record(key) for key in sorted(tally.kernels)]}


_KERNEL_LINES = ("compiler", "fma", "mathlib")  # report lines that shape the code
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


def versions(names) -> dict[str, str | None]:
    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
