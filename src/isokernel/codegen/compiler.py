"""The system C compiler: probe, flags, compile, and the on-disk cache.

The compiler is the first of ``cc``, ``gcc``, ``clang`` on PATH
(``ISOKERNEL_CC`` names another). Code is compiled at ``-O3`` with FMA
contraction off (``-ffp-contract=off``) and without fast-math; the only
relaxation is ``-fno-math-errno``, which changes no result (libm stops
setting ``errno``, so ``sqrt`` becomes one instruction and loops vectorize).
``contract=True`` compiles with ``-ffp-contract=fast``.

Shared objects are cached under ``ISOKERNEL_CACHE_DIR`` (default
``~/.cache/isokernel/native``), keyed by the SHA-256 of the source, the
compiler and its version, the flags and the CPU (``-march=native``). An
entry is written to a temporary name and renamed into place, with a digest
beside it; an entry whose digest does not match is rebuilt, never loaded.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..ir import BackendUnavailableError

CANDIDATES = ("cc", "gcc", "clang")
BASE_FLAGS = ("-O3", "-std=gnu99", "-fPIC", "-shared", "-fno-math-errno")
CONTRACT_FLAGS = {False: "-ffp-contract=off", True: "-ffp-contract=fast"}
NO_COMPILER = ("no C compiler found (looked for cc, gcc, clang on PATH; set ISOKERNEL_CC to "
               "use another)")
PROBE_SOURCE = """\
#include <math.h>
__attribute__((simd("notinbranch"))) double exp(double);
void isk_probe(const double *restrict x, double *restrict y)
{
    for (int i = 0; i < 256; i++) y[i] = exp(x[i]);
}
"""


class CompileError(RuntimeError):
    """The compiler rejected generated code: a bug in isokernel's emitter."""


@dataclass(frozen=True)
class Compiler:
    path: str
    version: str  # first line of --version
    native_arch: bool  # accepts -march=native
    vector_math: bool  # simd declarations link against libmvec

    @property
    def name(self) -> str:
        return f"{os.path.basename(self.path)} ({self.version})"

    def flags(self, contract: bool) -> tuple[str, ...]:
        arch = ("-march=native",) if self.native_arch else ()
        return (*BASE_FLAGS, *arch, CONTRACT_FLAGS[bool(contract)])

    def libraries(self) -> tuple[str, ...]:
        return ("-lmvec", "-lm") if self.vector_math else ("-lm",)


def _candidates() -> list[str]:
    chosen = os.environ.get("ISOKERNEL_CC")
    return [chosen] if chosen else list(CANDIDATES)


def _version(path: str) -> str | None:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else None


@functools.cache
def find_compiler_path() -> tuple[str, str] | None:
    """(path, version line) of the first working compiler, without compiling."""
    for name in _candidates():
        path = shutil.which(name)
        version = _version(path) if path else None
        if version:
            return path, version
    return None


def unavailable_reason() -> str | None:
    return None if find_compiler_path() is not None else NO_COMPILER


_PROBE_LOCK = threading.Lock()


@functools.cache
def current_compiler() -> Compiler:
    """The compiler with its probed abilities (cached on disk per compiler and CPU)."""
    found = find_compiler_path()
    if found is None:
        raise BackendUnavailableError(f"strategy 'native' is unavailable: {NO_COMPILER}")
    path, version = found
    record = cache_dir() / f"probe-{_digest(path, version, cpu_identity())[:24]}.json"
    with _PROBE_LOCK:
        try:
            known = json.loads(record.read_text())
            return Compiler(path, version, bool(known["native_arch"]),
                            bool(known["vector_math"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        native_arch = _compiles(path, ["-march=native"], "void isk_probe(void) {}\n", [])
        arch = ["-march=native"] if native_arch else []
        vector_math = _compiles(path, arch + ["-O3", "-fno-math-errno"], PROBE_SOURCE,
                                ["-lmvec", "-lm"])
        _write_atomic(record, json.dumps({"native_arch": native_arch,
                                          "vector_math": vector_math}).encode())
        return Compiler(path, version, native_arch, vector_math)


def _compiles(path: str, flags: list[str], source: str, libs: list[str]) -> bool:
    with tempfile.TemporaryDirectory(prefix="isokernel-probe-") as tmp:
        src, out = Path(tmp, "probe.c"), Path(tmp, "probe.so")
        src.write_text(source)
        cmd = [path, *flags, "-fPIC", "-shared", "-Werror", "-o", str(out), str(src), *libs]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
        if done.returncode != 0:
            return False
        try:
            ctypes.CDLL(str(out))
        except OSError:
            return False
        return True


@functools.cache
def cpu_identity() -> str:
    """What ``-march=native`` depends on: the machine and its CPU flags."""
    text = ""
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
    except OSError:
        pass
    keep = [line for line in text.splitlines()[:40]
            if line.startswith(("model name", "flags", "Features", "CPU part"))]
    return platform.machine() + "\n" + "\n".join(keep)


def cache_dir() -> Path:
    root = os.environ.get("ISOKERNEL_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "isokernel" / "native"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Built:
    key: str
    path: Path
    flags: tuple[str, ...]
    compiler: Compiler
    cached: bool  # loaded from the cache rather than compiled now


def cache_key(source: str, cc: Compiler, flags) -> str:
    """Source, compiler, flags, libraries and CPU: everything the object depends on."""
    return _digest(source, cc.path, cc.version, " ".join(flags), " ".join(cc.libraries()),
                   cpu_identity())[:32]


_LOADED: dict[str, ctypes.CDLL] = {}
# a path once loaded stays loaded (dlopen matches by name): entries are loaded once per process
_BUILD_LOCK = threading.Lock()


def build(source: str, contract: bool = False) -> tuple[ctypes.CDLL, Built]:
    """The loaded shared object of ``source``: from the cache when an intact
    entry exists, else compiled now and stored atomically."""
    cc = current_compiler()
    flags = cc.flags(contract)
    key = cache_key(source, cc, flags)
    with _BUILD_LOCK:
        if key in _LOADED:
            return _LOADED[key], Built(key, cache_dir() / f"{key}.so", flags, cc, True)
        path, cached = _cached_or_compiled(source, key, cc, flags)
        library = ctypes.CDLL(str(path))
        _LOADED[key] = library
        return library, Built(key, path, flags, cc, cached)


def _cached_or_compiled(source: str, key: str, cc: Compiler, flags) -> tuple[Path, bool]:
    directory = cache_dir()
    path, digest = directory / f"{key}.so", directory / f"{key}.sha256"
    if _intact(path, digest):
        return path, True
    tmp = directory / f".{key}.{os.getpid()}.{uuid.uuid4().hex}"
    src = tmp.with_suffix(".c")
    src.write_text(source)
    cmd = [cc.path, *flags, "-o", str(tmp.with_suffix(".so")), str(src), *cc.libraries()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise CompileError(f"{cc.name} rejected generated code (kept in {src}); this is a "
                           f"bug in isokernel's C emitter, please report it:\n{done.stderr}")
    src.unlink()
    data = tmp.with_suffix(".so").read_bytes()
    _write_atomic(digest, hashlib.sha256(data).hexdigest().encode())
    os.replace(tmp.with_suffix(".so"), path)
    _write_atomic(directory / f"{key}.c", source.encode())
    return path, False


def _intact(path: Path, digest: Path) -> bool:
    try:
        want = digest.read_text().strip()
        return hashlib.sha256(path.read_bytes()).hexdigest() == want
    except OSError:
        return False
