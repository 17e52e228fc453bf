"""NVRTC: compile CUDA C++ to PTX or a cubin, with an on-disk cache.

NVRTC needs no GPU and no driver, so every kernel isokernel generates can be
compiled (and its PTX read) on any machine. Two bindings are used, the first
that loads: CuPy's own (``cupy.cuda.nvrtc``, the NVRTC the GPU strategies
run with) and NVIDIA's ``cuda-bindings`` (pip ``cuda-bindings`` plus
``nvidia-cuda-nvrtc``: the ``gpu-test`` extra, for machines without CuPy).

Outputs are cached under ``ISOKERNEL_CUDA_CACHE_DIR`` (default
``$ISOKERNEL_CACHE_DIR/cuda``, else ``~/.cache/isokernel/cuda``), keyed by
the SHA-256 of the source, the target architecture, the NVRTC version and
the options, through the one cache mechanism of the C compiler (``cache``):
a private directory of the user's, entries written 0600 under a temporary
name and renamed into place with a digest beside them, used only when the
bytes read match it. Where the directory cannot be made or written, or is
not private, this process uses a private temporary cache (a new random
name, never a fixed one) and warns.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from . import cache

NO_NVRTC = ("NVRTC is not available: neither CuPy's binding (cupy.cuda.nvrtc) nor "
            "cuda-bindings could load libnvrtc (pip install 'isokernel[cuda]' for the GPU "
            "strategies, or 'isokernel[gpu-test]' to compile without a GPU)")


class NvrtcError(RuntimeError):
    """NVRTC rejected generated CUDA source: a bug in isokernel's emitter."""


@dataclass(frozen=True)
class Nvrtc:
    binding: str  # "cupy" or "cuda-bindings"
    version: tuple[int, int]
    archs: tuple[int, ...]  # supported sm_XY, as XY
    _compile: object  # (source, name, options, cubin) -> (bytes, log)

    @property
    def name(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]} ({self.binding})"

    def compile(self, source: str, options, cubin: bool) -> tuple[bytes, str]:
        return self._compile(source, "isokernel.cu", list(options), cubin)


def _cupy_nvrtc() -> Nvrtc:
    from cupy.cuda import nvrtc

    def compile_(source, name, options, cubin):
        prog = nvrtc.createProgram(source, name, [], [])
        try:
            try:
                nvrtc.compileProgram(prog, options)
            except nvrtc.NVRTCError as err:
                raise NvrtcError(f"{err}\n{nvrtc.getProgramLog(prog)}") from None
            out = nvrtc.getCUBIN(prog) if cubin else nvrtc.getPTX(prog)
            return bytes(out), nvrtc.getProgramLog(prog)
        finally:
            nvrtc.destroyProgram(prog)
    version = tuple(nvrtc.getVersion())
    return Nvrtc("cupy", version, tuple(nvrtc.getSupportedArchs()), compile_)


def _bindings_nvrtc() -> Nvrtc:
    from cuda.bindings import nvrtc

    def check(result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise NvrtcError(f"NVRTC error {err}")
        return rest[0] if len(rest) == 1 else rest

    def read(prog, size_fn, get_fn) -> bytes:
        size = check(size_fn(prog))
        buffer = b" " * size
        check(get_fn(prog, buffer))
        return buffer

    def compile_(source, name, options, cubin):
        prog = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
        try:
            opts = [o.encode() for o in options]
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            log = read(prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog)
            log = log.rstrip(b"\0").decode(errors="replace")
            if int(err) != 0:
                raise NvrtcError(f"{err}\n{log}")
            if cubin:
                out = read(prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
            else:
                out = read(prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX).rstrip(b"\0")
            return out, log
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
    version = tuple(check(nvrtc.nvrtcVersion()))
    count = check(nvrtc.nvrtcGetNumSupportedArchs())
    archs = check(nvrtc.nvrtcGetSupportedArchs())
    return Nvrtc("cuda-bindings", version, tuple(archs[:count]), compile_)


LOADERS = {"cupy": _cupy_nvrtc, "cuda-bindings": _bindings_nvrtc}


@functools.cache
def _find(order: tuple[str, ...]) -> tuple[Nvrtc | None, str]:
    reasons = []
    for binding in order:
        try:
            return LOADERS[binding](), ""
        except Exception as err:  # ImportError, or a binding without its library
            reasons.append(f"{binding}: {type(err).__name__}: {err}")
    return None, "; ".join(reasons)


def find_nvrtc(order: tuple[str, ...] = ("cupy", "cuda-bindings")) -> Nvrtc | None:
    """The first NVRTC binding of ``order`` that loads, or None."""
    return _find(tuple(order))[0]


def unavailable_reason(order: tuple[str, ...] = ("cupy", "cuda-bindings")) -> str | None:
    found, why = _find(tuple(order))
    return None if found is not None else f"{NO_NVRTC} ({why})"


def require_nvrtc(order: tuple[str, ...] = ("cupy", "cuda-bindings")) -> Nvrtc:
    found = find_nvrtc(order)
    if found is None:
        raise NvrtcError(unavailable_reason(order))
    return found


# --- cache --------------------------------------------------------------------------------

def location() -> cache.Location:
    """Where the CUDA cache is configured to be (no file is touched)."""
    chosen = os.environ.get("ISOKERNEL_CUDA_CACHE_DIR")
    root = os.environ.get("ISOKERNEL_CACHE_DIR")
    if chosen:
        return cache.Location(Path(chosen), Path(chosen), "ISOKERNEL_CUDA_CACHE_DIR")
    if root:
        return cache.Location(Path(root) / "cuda", Path(root), "ISOKERNEL_CACHE_DIR")
    base = Path.home() / ".cache" / "isokernel"
    return cache.Location(base / "cuda", base, None)


def cache_dir() -> Path:
    """The CUDA cache directory (``cache.directory``); where it cannot be
    made or written (a read-only home), this process's private temporary
    cache, with a warning: a GPU strategy does not stop for its cache."""
    where = location()
    try:
        return cache.directory(where)
    except cache.CacheUnusable as err:
        return cache.private(where, str(err))


def cache_key(source: str, arch: str, nvrtc: Nvrtc, options) -> str:
    """Source, architecture, NVRTC version and options: what the output
    depends on (the binding does not: both call the same library)."""
    h = hashlib.sha256()
    for part in (source, arch, f"{nvrtc.version[0]}.{nvrtc.version[1]}", " ".join(options)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Compiled:
    key: str
    arch: str  # "sm_90" (cubin) or "compute_90" (PTX)
    data: bytes
    path: Path
    options: tuple[str, ...]
    nvrtc: str
    cached: bool

    @property
    def ptx(self) -> str:
        return self.data.decode()


def compile_cuda(source: str, arch: str, options, nvrtc: Nvrtc | None = None) -> Compiled:
    """``source`` compiled for ``arch``: ``sm_XY`` gives a cubin (NVRTC and
    ptxas both run), ``compute_XY`` PTX. From the cache when an intact entry
    exists."""
    nvrtc = nvrtc or require_nvrtc()
    options = (f"--gpu-architecture={arch}", *options)
    key = cache_key(source, arch, nvrtc, options)
    suffix = ".cubin" if arch.startswith("sm_") else ".ptx"
    directory = cache_dir()
    path = directory / f"{key}{suffix}"
    data = cache.read(directory, key, suffix)
    if data is not None:
        return Compiled(key, arch, data, path, options, nvrtc.name, True)
    try:
        data, _ = nvrtc.compile(source, options, cubin=suffix == ".cubin")
    except NvrtcError as err:
        kept = cache.keep(directory, f"rejected-{key}.cu", source.encode())
        raise NvrtcError(f"{nvrtc.name} rejected generated CUDA source ({kept}); this is a "
                         f"bug in isokernel's CUDA emitter, please report it:\n{err}") from None
    cache.sweep(directory)
    path = cache.store(directory, key, suffix, data, (".cu", source.encode()))
    return Compiled(key, arch, data, path, options, nvrtc.name, False)
