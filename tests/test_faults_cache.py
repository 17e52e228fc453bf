"""The kernel cache under attack and under faults.

A shared object planted by another local user never runs, whatever way it
is planted: a world-writable cache, an entry of another uid, the old fixed
CUDA folder in the system temporary directory, a swap between verification
and load, a symbolic link. The cache is 0700 with 0600 files; an unusable
cache directory or a broken compiler makes ``native`` unavailable with a
reason that names the path or ``ISOKERNEL_CC`` while ``auto`` runs threads;
a full disk only warns; Ctrl-C and kill -9 during a compile leave no
temporaries behind once the next compile has run."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import isokernel as ik
from isokernel import codegen
from isokernel.backends import get_strategy, loops
from isokernel.backends.parity import bit_identical
from isokernel.codegen import cache, cuda, nvrtc
from isokernel.codegen import compiler as cc
from isokernel.codegen import driver as drv
from isokernel.ir import BackendUnavailableError, Op
from isokernel.reports import devices_table

from .conftest import nvrtc_or_skip

needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"native: {codegen.unavailable_reason()}")

SOURCE = "#include <stdint.h>\nint64_t isk_answer(void) {{ return {}; }}\n"
PLANTED = r"""
#include <stdint.h>
#include <stdio.h>
__attribute__((constructor)) static void isk_plant(void)
{
    FILE *f = fopen("%s", "w");
    if (f) { fputs("planted code ran", f); fclose(f); }
}
int64_t isk_answer(void) { return 666; }
"""


@dataclass
class Planted:
    data: bytes  # a shared object whose constructor writes ``marker``
    path: Path
    marker: Path


@pytest.fixture
def planted(tmp_path) -> Planted:
    marker = tmp_path / "planted-code-ran"
    source, path = tmp_path / "planted.c", tmp_path / "planted.so"
    source.write_text(PLANTED % marker)
    compiler = cc.current_compiler().path
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    return Planted(path.read_bytes(), path, marker)


@pytest.fixture
def fresh(monkeypatch):
    """A process-like state for this test: no library loaded yet, and the
    per-process probes (compiler, tile driver) cleared before and after."""
    monkeypatch.setattr(cc, "_LOADED", {})
    _clear_probes()
    yield
    _clear_probes()


def _clear_probes() -> None:
    cc.find_compiler_path.cache_clear()
    loops.unavailable_reason.cache_clear()
    drv.load_driver.cache_clear()


def _key(source: str) -> str:
    compiler = cc.current_compiler()
    return cc.cache_key(source, compiler, compiler.flags(False))


def _plant(directory: Path, key: str, data: bytes, suffix: str = ".so") -> None:
    """An entry with a matching digest, as an attacker would write it."""
    (directory / f"{key}{suffix}").write_bytes(data)
    (directory / f"{key}.sha256").write_text(hashlib.sha256(data).hexdigest())


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def _build_warned(source: str):
    """``cc.build(source)`` and the text of the cache's warnings, in that
    order, so that planted code which ran is what a failure shows first."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        library, built = cc.build(source)
    text = " ".join(str(w.message) for w in warned if w.category is cache.CacheWarning)
    return library, built, text


def _temporaries(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- planted code never runs --------------------------------------------------------------

@needs_cc
def test_a_world_writable_cache_is_refused_and_its_planted_entry_never_runs(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(101)
    key = _key(source)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    _plant(shared, key, planted.data)
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(shared))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 101 and not planted.marker.exists()
    assert not built.cached and shared not in built.path.parents
    assert f"{shared} is writable by group or others (mode 777)" in text
    assert f"chmod 700 {shared}" in text and "ISOKERNEL_CACHE_DIR" in text


@needs_cc
def test_b_an_entry_of_another_user_in_a_private_cache_is_not_loaded(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(102)
    key = _key(source)
    directory = _private_dir(tmp_path / "cache")
    _plant(directory, key, planted.data)
    for name in (f"{key}.so", f"{key}.sha256"):
        os.chown(directory / name, 12345, 12345)
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 102 and not planted.marker.exists() and not built.cached
    assert f"{directory / key}.so is owned by uid 12345" in text
    assert os.stat(directory / f"{key}.so").st_uid == os.geteuid()  # replaced by ours


def test_c_the_cuda_cache_never_falls_back_to_a_fixed_temporary_folder(tmp_path, monkeypatch):
    """With HOME unusable, the CUDA cache used ``$TMP/isokernel-cuda-<uid>``,
    a name another user could create first and fill; now it is a private
    directory of a new random name, one per process."""
    compiler = nvrtc_or_skip()
    system_tmp = _private_dir(tmp_path / "tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    monkeypatch.setattr(cache, "_PRIVATE", {})
    fixed = system_tmp / f"isokernel-cuda-{os.getuid()}"
    fixed.mkdir()
    os.chmod(fixed, 0o777)
    source = cuda.elementwise_kernel(Op.MUL, {}, (np.float32,) * 2, np.float32, "vv").source
    options = cuda.nvrtc_options()
    key = nvrtc.cache_key(source, "compute_80", compiler,
                          ("--gpu-architecture=compute_80", *options))
    _plant(fixed, key, b"// planted PTX\n", ".ptx")
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    monkeypatch.delenv("ISOKERNEL_CUDA_CACHE_DIR", raising=False)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        compiled = nvrtc.compile_cuda(source, "compute_80", options, compiler)
    assert not compiled.cached and b".entry" in compiled.data and b"planted" not in compiled.data
    assert [w for w in warned if f"{tmp_path / 'a-file'} is a file" in str(w.message)]
    private = compiled.path.parent.parent
    assert private.parent == system_tmp and private != fixed
    assert private.name.startswith("isokernel-") and _mode(private) == 0o700
    assert sorted(os.listdir(fixed)) == [f"{key}.ptx", f"{key}.sha256"]  # never read
    assert fixed not in _private_roots(system_tmp, 2)


def _private_roots(system_tmp: Path, count: int) -> list[Path]:
    """The private temporary cache of ``count`` new processes."""
    code = "from isokernel.codegen import cache; print(cache._private_root())"
    env = dict(os.environ, TMPDIR=str(system_tmp))
    roots = [Path(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip())
             for _ in range(count)]
    assert len(set(roots)) == count and all(r.name.startswith("isokernel-") for r in roots)
    return roots


@needs_cc
def test_d_a_swap_after_verification_is_never_loaded(tmp_path, monkeypatch, planted, fresh):
    """The shared object is loaded from the bytes that were verified, not
    opened again by path: replacing the file right after it was read and
    checked changes nothing, and the next process rebuilds the entry."""
    source = SOURCE.format(104)
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    _, first = cc.build(source)
    monkeypatch.setattr(cc, "_LOADED", {})
    verified = cache.read

    def read_then_swap(where: Path, key: str, suffix: str):
        data = verified(where, key, suffix)
        swapped = where / "swapped.so"
        swapped.write_bytes(planted.data)
        os.replace(swapped, where / f"{key}{suffix}")
        return data

    monkeypatch.setattr(cache, "read", read_then_swap)
    library, built = cc.build(source)
    assert built.cached and library.isk_answer() == 104 and not planted.marker.exists()
    assert (directory / f"{first.key}.so").read_bytes() == planted.data
    monkeypatch.setattr(cache, "read", verified)
    monkeypatch.setattr(cc, "_LOADED", {})
    library, rebuilt = cc.build(source)
    assert not rebuilt.cached and library.isk_answer() == 104 and not planted.marker.exists()


@needs_cc
def test_e_a_symbolic_link_planted_as_the_entry_is_not_followed(
        tmp_path, monkeypatch, planted, fresh):
    source = SOURCE.format(105)
    key = _key(source)
    directory = _private_dir(tmp_path / "cache")
    os.symlink(planted.path, directory / f"{key}.so")
    (directory / f"{key}.sha256").write_text(hashlib.sha256(planted.data).hexdigest())
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built, text = _build_warned(source)
    assert library.isk_answer() == 105 and not planted.marker.exists() and not built.cached
    assert f"{directory / key}.so is a symbolic link" in text
    assert not (directory / f"{key}.so").is_symlink()


# --- modes --------------------------------------------------------------------------------

@needs_cc
def test_the_cache_is_created_0700_with_0600_files(tmp_path, monkeypatch, fresh):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    _, built = cc.build(SOURCE.format(106))
    assert built.path.parent == home / ".cache" / "isokernel" / "native"
    for directory in (home / ".cache", home / ".cache" / "isokernel", built.path.parent):
        assert _mode(directory) == 0o700, directory
    names = os.listdir(built.path.parent)
    assert {f"{built.key}.so", f"{built.key}.sha256", f"{built.key}.c"} <= set(names)
    assert {n: _mode(built.path.parent / n) for n in names} == {n: 0o600 for n in names}


# --- failures that explain themselves -----------------------------------------------------

def _under_a_file(tmp_path, monkeypatch) -> list[str]:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("HOME", str(tmp_path / "a-file" / "home"))
    monkeypatch.delenv("ISOKERNEL_CACHE_DIR", raising=False)
    return [f"{tmp_path / 'a-file'} is a file", f"HOME={tmp_path / 'a-file' / 'home'}",
            "set ISOKERNEL_CACHE_DIR"]


def _cache_is_a_file(tmp_path, monkeypatch) -> list[str]:
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path / "a-file"))
    return [f"ISOKERNEL_CACHE_DIR={tmp_path / 'a-file'}", "is a file, not a directory",
            "set ISOKERNEL_CACHE_DIR"]


def _cannot_be_written(tmp_path, monkeypatch) -> list[str]:
    target = _private_dir(tmp_path / "read-only")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(target))
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw:
                        Path(path) != target and real(path, mode, **kw))
    return [f"{target} (ISOKERNEL_CACHE_DIR={target}) cannot be written",
            "set ISOKERNEL_CACHE_DIR"]


def _compiler_writes_nothing(tmp_path, monkeypatch) -> list[str]:
    monkeypatch.setenv("ISOKERNEL_CC", "/bin/true")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    return ["ISOKERNEL_CC=/bin/true", "writes no shared object", "set ISOKERNEL_CC"]


BROKEN = {"home under a file": _under_a_file, "cache dir is a file": _cache_is_a_file,
          "cache dir cannot be written": _cannot_be_written,
          "compiler writes nothing": _compiler_writes_nothing}


@pytest.mark.skipif(not Path("/bin/true").exists(), reason="no /bin/true")
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_cache_or_compiler_makes_native_unavailable_and_auto_runs_threads(
        case, tmp_path, monkeypatch, fresh):
    expected = BROKEN[case](tmp_path, monkeypatch)
    reason = get_strategy("native").unavailable_reason()
    assert reason is not None and all(part in reason for part in expected), reason
    assert f"unavailable: {reason}" in devices_table()
    with pytest.raises(BackendUnavailableError, match=re.escape(reason)):
        cc.current_compiler()
    assert reason in loops.unavailable_reason()  # threads keeps to its Python tiles
    x = np.linspace(-2.0, 2.0, 1001)
    compiled = ik.jit(lambda v: v * 3.0 + 1.0).lower(x).compile()
    assert "strategy   threads on cpu (auto" in str(compiled.report())
    assert bit_identical(compiled(x), x * 3.0 + 1.0)


# --- a full disk, Ctrl-C, kill -9 ---------------------------------------------------------

def _full_disk(real):
    """``write_new`` that fills the disk on an entry's temporary (``.tmp``)."""
    def write_new(path: Path, data: bytes) -> None:
        if path.suffix != ".tmp":
            return real(path, data)
        real(path, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return write_new


@needs_cc
def test_a_full_disk_warns_and_the_compiled_kernel_still_runs(tmp_path, monkeypatch, fresh):
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    cc.current_compiler()
    monkeypatch.setattr(cache, "write_new", _full_disk(cache.write_new))
    with pytest.warns(cache.CacheWarning, match="could not store .*No space left on device"):
        library, built = cc.build(SOURCE.format(107))
    assert library.isk_answer() == 107 and not built.cached
    assert not built.path.exists() and _temporaries(directory) == []


def test_a_full_disk_leaves_a_readable_cuda_kernel(tmp_path, monkeypatch):
    compiler = nvrtc_or_skip()
    directory = _private_dir(tmp_path / "cuda")
    monkeypatch.setenv("ISOKERNEL_CUDA_CACHE_DIR", str(directory))
    monkeypatch.setattr(cache, "write_new", _full_disk(cache.write_new))
    source = cuda.elementwise_kernel(Op.SUB, {}, (np.float32,) * 2, np.float32, "vv").source
    with pytest.warns(cache.CacheWarning, match="could not store .*No space left on device"):
        compiled = nvrtc.compile_cuda(source, "compute_80", cuda.nvrtc_options(), compiler)
    assert b".entry" in compiled.data and compiled.path.read_bytes() == compiled.data
    assert directory not in compiled.path.parents and _temporaries(directory) == []


@needs_cc
def test_ctrl_c_during_the_compiler_leaves_no_temporaries(tmp_path, monkeypatch, fresh):
    directory = _private_dir(tmp_path / "cache")
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    cc.current_compiler()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cc.subprocess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cc.build(SOURCE.format(108))
    assert _temporaries(directory) == []


SLOW_CC = """#!/bin/sh
for arg in "$@"; do
    case "$arg" in *.c) grep -q isk_slow_marker "$arg" 2>/dev/null && sleep 120;; esac
done
exec {compiler} "$@"
"""


@needs_cc
def test_a_compile_killed_with_sigkill_leaves_nothing_after_the_next_compile(
        tmp_path, monkeypatch, fresh):
    slow = tmp_path / "slow-cc"
    slow.write_text(SLOW_CC.format(compiler=cc.current_compiler().path))
    slow.chmod(0o755)
    directory = tmp_path / "cache"
    env = dict(os.environ, ISOKERNEL_CC=str(slow), ISOKERNEL_CACHE_DIR=str(directory))
    code = ("from isokernel.codegen import compiler\n"
            "compiler.build('/* isk_slow_marker */ int isk_slow(void) { return 1; }\\n')\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        _wait_for_a_compile(child, directory)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the process, its shell script and the sleep
        child.wait()
    assert _temporaries(directory)  # what the killed compile left behind
    monkeypatch.setenv("ISOKERNEL_CACHE_DIR", str(directory))
    library, built = cc.build(SOURCE.format(109))
    assert library.isk_answer() == 109 and not built.cached
    assert _temporaries(directory) == []


def _wait_for_a_compile(child: subprocess.Popen, directory: Path) -> None:
    """Until the child's compile of the marked source is under way."""
    deadline = time.monotonic() + 120
    while True:
        names = os.listdir(directory) if directory.is_dir() else []
        if [n for n in names if n.endswith(".c") and not n.startswith((".probe.", "probe"))
                and n.startswith(".")]:
            return
        assert child.poll() is None, "the compiling process ended before it was killed"
        assert time.monotonic() < deadline, "the compile never started"
        time.sleep(0.05)
