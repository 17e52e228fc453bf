"""The system C compiler: probe, flags, compile, and its entries in the on-disk
cache (``cache``).

The compiler is the first of ``cc``, ``gcc``, ``clang`` on PATH
(``ISOKERNEL_CC`` names another). Code is compiled at ``-O3`` with FMA
contraction off (``-ffp-contract=off``) and without fast-math; the only
relaxation is ``-fno-math-errno``, which changes no result (libm stops
setting ``errno``, so ``sqrt`` becomes one instruction and loops vectorize).
``contract=True`` compiles with ``-ffp-contract=fast``.

Shared objects are cached under ``ISOKERNEL_CACHE_DIR`` (default
``~/.cache/isokernel/native``), keyed by the SHA-256 of the source, the
compiler and its version, the flags and the CPU (``-march=native``). The
directory must be the user's own and private, an entry is loaded only from
the bytes that matched its digest, and a compile leaves no temporaries
behind (``cache`` says how). ``unavailable_reason`` (the native profile's
probe) proves once per process, compiler and cache directory that the
directory is usable and that the compiler makes a shared object that loads;
otherwise it names the path or ``ISOKERNEL_CC`` and the fix.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ..ir import BackendUnavailableError
from . import cache

CANDIDATES = ("cc", "gcc", "clang")
BASE_FLAGS = ("-O3", "-std=gnu99", "-fPIC", "-shared", "-fno-math-errno", "-fopenmp-simd")
CONTRACT_FLAGS = {False: "-ffp-contract=off", True: "-ffp-contract=fast"}
NO_AVX512 = ("-mno-avx512f",)
"""Beside ``-march=native`` on x86-64: AVX2 and below, no AVX-512. On a
2-core Sapphire Rapids VM (KVM) the code GCC 12 makes with AVX-512 (256-bit
vectors with AVX512VL's mask registers) ran every kernel measured slower:
the soil-moisture retrieval 6x (88 ms against 15 ms for 2·10^5 pixels; with
``-mno-avx512vl`` alone 15.6 ms), a per-pixel Newton loop with ``exp`` 4x
(113 against 28 ms, 2·10^6 pixels), a loop of square roots 2x, a loop-free
``exp``·``sin`` + ``log1p`` 1.25x; libmvec's AVX-512 variants alone were
not slower (a C loop of ``exp``, ``log``, ``sin``, ``pow``). Basic
operations give the same bits either way (no FMA contraction); libmvec's
AVX2 variants stay within the measured ulp bounds."""
PROGRAM_FLAGS_GCC = ("--param", "max-completely-peeled-insns=50")
"""GCC's limit on the loops it unrolls completely, for whole programs
(``codegen.whole``): at its default (200) GCC spent 2.5 s of a PINN training
step's 2.8 s first call unrolling the small loops of its matrix products,
and the bloated code ran slower (0.32 ms a step against 0.14 ms at 50).
Unrolling changes no operation or order: the bits are the same."""
NO_COMPILER = ("no C compiler found (looked for cc, gcc, clang on PATH; set ISOKERNEL_CC to "
               "use another)")
FIX_CC = ("set ISOKERNEL_CC to a working C compiler (gcc or clang), or unset it to use cc, gcc "
          "or clang from PATH")
PROOF_SOURCE = "int isk_probe_answer(void) { return 42; }\n"
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
    no_avx512: bool = False  # accepts -mno-avx512f beside -march=native (x86-64): AVX2 at most

    @property
    def name(self) -> str:
        return f"{os.path.basename(self.path)} ({self.version})"

    def flags(self, contract: bool, program: bool = False) -> tuple[str, ...]:
        """The compile flags; ``program``: for a whole program (GCC limits
        its complete unrolling there, ``PROGRAM_FLAGS_GCC``)."""
        arch = ("-march=native",) if self.native_arch else ()
        if self.no_avx512:
            arch += NO_AVX512
        tuned = PROGRAM_FLAGS_GCC if program and "clang" not in self.version.lower() else ()
        threads = ("-pthread",) if program else ()  # long fused runs split over threads
        return (*BASE_FLAGS, *arch, CONTRACT_FLAGS[bool(contract)], *threads, *tuned)

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


def _no_compiler() -> str:
    chosen = os.environ.get("ISOKERNEL_CC")
    if not chosen:
        return NO_COMPILER
    return (f"no C compiler found: ISOKERNEL_CC={chosen} is not a program that runs and "
            f"answers --version; {FIX_CC}")


def _who(path: str, version: str) -> str:
    chosen = os.environ.get("ISOKERNEL_CC")
    if chosen:
        return f"ISOKERNEL_CC={chosen} ({version})"
    return f"the C compiler {path} ({version})"


# --- the cache directory ------------------------------------------------------------------

def location() -> cache.Location:
    """Where the native cache is configured to be (no file is touched)."""
    root = os.environ.get("ISOKERNEL_CACHE_DIR")
    if root:
        return cache.Location(Path(root), Path(root), "ISOKERNEL_CACHE_DIR")
    base = Path.home() / ".cache" / "isokernel"
    return cache.Location(base / "native", base, None)


def cache_dir() -> Path:
    """The native cache directory in use (``cache.directory``); raises
    ``BackendUnavailableError`` naming the path and the fix where it cannot
    be created or written."""
    try:
        return cache.directory(location())
    except cache.CacheUnusable as err:
        raise BackendUnavailableError(f"strategy 'native' is unavailable: {err}") from None


# --- the probe ----------------------------------------------------------------------------

def unavailable_reason() -> str | None:
    """Why strategy ``native`` cannot run here (no compiler, a compiler that
    makes no loadable shared object, an unusable cache directory), or None."""
    probed = _probe(find_compiler_path(), location())
    return probed if isinstance(probed, str) else None


def current_compiler() -> Compiler:
    """The compiler with its probed abilities; raises ``BackendUnavailableError``
    with ``unavailable_reason``'s text."""
    probed = _probe(find_compiler_path(), location())
    if isinstance(probed, str):
        raise BackendUnavailableError(f"strategy 'native' is unavailable: {probed}")
    return probed


class _Broken(Exception):
    """The compiler cannot make a loadable shared object; the text says why."""


_PROBE_LOCK = threading.Lock()


@functools.cache
def _probe(found: tuple[str, str] | None, where: cache.Location) -> Compiler | str:
    """The compiler, proven to work with this cache, or why not: once per
    process, compiler and cache location. Its abilities are recorded on disk
    (per compiler and CPU) once proven."""
    if found is None:
        return _no_compiler()
    with _PROBE_LOCK:
        try:
            directory = cache.directory(where)
            return _recorded(*found, directory) or _probed(*found, directory)
        except (cache.CacheUnusable, _Broken) as err:
            return str(err)


def _record(path: str, version: str, directory: Path) -> Path:
    return directory / f"probe-{_digest(path, version, cpu_identity(), 'proven')[:24]}.json"


def _recorded(path: str, version: str, directory: Path) -> Compiler | None:
    data = cache.read_file(_record(path, version, directory))
    if data is None:
        return None
    try:
        known = json.loads(data)
        return Compiler(path, version, bool(known["native_arch"]), bool(known["vector_math"]),
                        bool(known["no_avx512"]))
    except (ValueError, KeyError, TypeError):  # damaged: probe again
        return None


def _probed(path: str, version: str, directory: Path) -> Compiler:
    native_arch = _compiles(path, ["-march=native"], "void isk_probe(void) {}\n", [], directory)
    no_avx512 = native_arch and _compiles(path, ["-march=native", *NO_AVX512],
                                          "void isk_probe(void) {}\n", [], directory)
    arch = ["-march=native", *NO_AVX512 * no_avx512] if native_arch else []
    vector_math = _compiles(path, arch + ["-O3", "-fno-math-errno"], PROBE_SOURCE,
                            ["-lmvec", "-lm"], directory)
    compiler = Compiler(path, version, native_arch, vector_math, no_avx512)
    _prove(compiler, directory)
    record = json.dumps({"native_arch": native_arch, "vector_math": vector_math,
                         "no_avx512": no_avx512}).encode()
    try:
        cache.write_atomic(_record(path, version, directory), record)
    except OSError:  # a full disk: probed again by the next process
        pass
    return compiler


def _compiles(path: str, flags: list[str], source: str, libs: list[str],
              directory: Path) -> bool:
    try:
        run = _run(path, [*flags, "-fPIC", "-shared", "-Werror"], source, libs, directory,
                   "probe")
        if run.returncode == 0 and run.data is not None:
            cache.load_library(run.data, "probe")
            return True
    except OSError:
        pass
    return False


def _prove(cc: Compiler, directory: Path) -> None:
    """Raise ``_Broken`` unless ``cc`` with the flags of ``build`` makes a
    shared object that loads and answers."""
    who = _who(cc.path, cc.version)
    try:
        run = _run(cc.path, cc.flags(False), PROOF_SOURCE, cc.libraries(), directory, "probe")
    except OSError as err:
        raise _Broken(f"{who} cannot be run in {directory} ({err}); {FIX_CC}") from None
    if run.returncode != 0:
        raise _Broken(f"{who} fails on a one-line program (exit status {run.returncode}: "
                      f"{run.stderr.strip()[-300:]}); {FIX_CC}")
    if run.data is None:
        raise _Broken(f"{who} exits 0 but writes no shared object; {FIX_CC}")
    try:
        answer = cache.load_library(run.data, "probe").isk_probe_answer()
    except (OSError, AttributeError) as err:
        raise _Broken(f"{who} writes a shared object that does not load ({err}); "
                      f"{FIX_CC}") from None
    if answer != 42:
        raise _Broken(f"{who} writes a shared object that answers {answer}, not 42; {FIX_CC}")


@dataclass(frozen=True)
class _Run:
    returncode: int
    stderr: str
    data: bytes | None  # the shared object; None where the compiler wrote none


def _run(path: str, flags, source: str, libs, directory: Path, stem: str) -> _Run:
    """Compile ``source`` through temporaries in ``directory`` (named with
    this pid, so a later compile removes them if this process is killed),
    removed on any exit, Ctrl-C included."""
    src, out = cache.temporary(directory, stem, ".c"), cache.temporary(directory, stem, ".so")
    try:
        cache.write_new(src, source.encode())
        cmd = [path, *flags, "-o", str(out), str(src), *libs]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        return _Run(done.returncode, done.stderr, cache.read_file(out, check_mode=False))
    finally:
        cache.remove(src, out)


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


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


# --- build --------------------------------------------------------------------------------

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


_LOADED: dict[str, tuple[ctypes.CDLL, Built]] = {}
_COMPILED = [0]


def compile_count() -> int:
    """How many shared objects this process compiled (not loaded from the
    cache): what a polymorphic batch axis saves is counted here."""
    return _COMPILED[0]


# an object is loaded once per process: later builds of its key get the same library
_BUILD_LOCK = threading.Lock()


def build(source: str, contract: bool = False, program: bool = False
          ) -> tuple[ctypes.CDLL, Built]:
    """The loaded shared object of ``source``: from the cache when an intact
    entry of this user exists, else compiled now and stored atomically;
    loaded, either way, from the bytes that were verified or compiled.
    ``program``: a whole program's flags (``Compiler.flags``)."""
    cc = current_compiler()
    flags = cc.flags(contract, program)
    key = cache_key(source, cc, flags)
    with _BUILD_LOCK:
        if key in _LOADED:
            library, built = _LOADED[key]
            return library, dataclasses.replace(built, cached=True)
        data, built = _cached_or_compiled(source, key, cc, flags)
        library = cache.load_library(data, key)
        _LOADED[key] = library, built
        return library, built


def _cached_or_compiled(source: str, key: str, cc: Compiler, flags) -> tuple[bytes, Built]:
    directory = cache_dir()
    path = directory / f"{key}.so"
    data = cache.read(directory, key, ".so")
    if data is not None:
        return data, Built(key, path, flags, cc, True)
    data = _compile(source, key, cc, flags, directory)
    _COMPILED[0] += 1
    cache.store(directory, key, ".so", data, (".c", source.encode()))
    return data, Built(key, path, flags, cc, False)


def _compile(source: str, key: str, cc: Compiler, flags, directory: Path) -> bytes:
    cache.sweep(directory)
    who = _who(cc.path, cc.version)
    try:
        run = _run(cc.path, flags, source, cc.libraries(), directory, key)
    except OSError as err:
        raise BackendUnavailableError(f"strategy 'native' is unavailable: {who} could not "
                                      f"compile in {directory} ({err})") from None
    if run.returncode != 0:
        kept = cache.keep(directory, f"rejected-{key}.c", source.encode())
        raise CompileError(f"{cc.name} rejected generated code ({kept}); this is a bug in "
                           f"isokernel's C emitter, please report it:\n{run.stderr}")
    if run.data is None:
        raise BackendUnavailableError(f"strategy 'native' is unavailable: {who} exits 0 but "
                                      f"writes no shared object; {FIX_CC}")
    return run.data
