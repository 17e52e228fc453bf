"""The on-disk kernel cache of the C compiler (``compiler``) and NVRTC
(``nvrtc``): where it lives, whom it trusts, and how an entry is stored,
verified and loaded.

A cache directory is created 0700. It is used only while it, and every
component isokernel creates on the way to it, belongs to the current
(effective) user and is writable by nobody else; otherwise it is refused
with a ``CacheWarning`` that names the path and the fix, and the process
uses a private temporary cache (``tempfile.mkdtemp(prefix="isokernel-")``,
0700, its own) instead. A directory that cannot be created or written
raises ``CacheUnusable``, whose text names the path, the variable that
chose it and the fix.

Files are written 0600 under a new temporary name (``O_EXCL``) that holds
the writer's pid, then renamed into place; temporaries whose process is
gone (a compile killed with ``kill -9``) are removed by the next compile.
An entry ``KEY.EXT`` has its SHA-256 in ``KEY.sha256``. It is used only
when both are regular files (a link is never followed) of the current user
that nobody else can write, read through one descriptor each, and the bytes
read match the digest. A shared object is then loaded from those very
bytes (``load_library``), never from its path again: a file swapped after
verification is never loaded.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
TEMPORARY = re.compile(r"^\..+\.(\d{1,10})(?:-([0-9a-f]{8}))?\.[0-9a-f]{32}(\.[A-Za-z0-9]+)?$")
"""``.STEM.PID-HOST.UUID[.EXT]``: a temporary of process PID on the machine
whose name hashes to HOST (``temporary``; without HOST: an older isokernel's)."""
MEMFD = hasattr(os, "memfd_create")  # Linux
EFFECTIVE_IDS = os.access in os.supports_effective_ids


class CacheWarning(UserWarning):
    """The kernel cache refused a directory or an entry, or could not store one."""


class CacheUnusable(RuntimeError):
    """The cache directory cannot be created or written; the text says why and the fix."""


@dataclass(frozen=True)
class Location:
    """A cache directory as configured: its ``path``, the first component of
    it that isokernel owns (created by isokernel, or named by the user), and
    the variable that chose it (None: the default under HOME)."""

    path: Path
    owned: Path
    variable: str | None

    def origin(self) -> str:
        if self.variable is None:
            return f"the default, under HOME={Path.home()}"
        return f"{self.variable}={os.environ.get(self.variable, '')}"

    def fix(self) -> str:
        return f"set {self.variable or 'ISOKERNEL_CACHE_DIR'} to a directory of yours"

    def unusable(self, problem: str) -> CacheUnusable:
        return CacheUnusable(f"the kernel cache directory {self.path} ({self.origin()}) "
                             f"{problem}; {self.fix()}, one you can write to")


# --- the directory ------------------------------------------------------------------------

def directory(location: Location) -> Path:
    """``location``'s directory, created 0700 where missing, if it is private
    to the current user; else this process's private temporary cache, with
    a warning. Raises ``CacheUnusable`` where it cannot be made or written."""
    _make(location)
    problem = _first_problem(location)
    if problem is None:
        return location.path
    return private(location, problem)


def private(location: Location, why: str) -> Path:
    """This process's private temporary cache for ``location``, with a
    warning (once per process and reason) that says why it is used."""
    path = private_dir(location.path.name)
    warn_once(f"isokernel: {why}. This process uses the private temporary cache {path} "
              f"instead (removed at exit)")
    return path


def _make(location: Location) -> None:
    """Create the missing components of ``location.path``, each 0700."""
    missing, existing = [], location.path
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise location.unusable(f"cannot be created: {existing} is a file, not a directory")
    for component in reversed(missing):
        try:
            os.mkdir(component, DIR_MODE)
        except FileExistsError:
            pass
        except OSError as err:
            raise location.unusable(f"cannot be created ({err.strerror}: {component})") from None


def _first_problem(location: Location) -> str | None:
    """Why a component isokernel owns could hold another user's code, with
    the fix; None when every one is private. Raises ``CacheUnusable`` where
    the directory is not one that can be written."""
    path = location.path
    if not path.is_dir():
        raise location.unusable("is a file, not a directory")
    if not os.access(path, os.W_OK | os.X_OK, effective_ids=EFFECTIVE_IDS):
        raise location.unusable("cannot be written")
    owned = [path, *(p for p in path.parents if p.is_relative_to(location.owned))]
    for component in reversed(owned):
        st = os.stat(component)
        owner, mode = not_owned(component, st), shared_write(component, st)
        if owner is not None:
            return f"{owner}, so it could hold another user's code: it is not used; " \
                   f"remove it, or {location.fix()}"
        if mode is not None:
            return f"{mode}, so another user could plant code in it: it is not used; run " \
                   f"`chmod 700 {component}` if it is yours, or {location.fix()}"
    return None


def not_owned(path: Path, st: os.stat_result) -> str | None:
    if st.st_uid != os.geteuid():
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    return None


def shared_write(path: Path, st: os.stat_result) -> str | None:
    if st.st_mode & OTHERS_WRITE:
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


_PRIVATE: dict[int, Path] = {}
_PRIVATE_LOCK = threading.Lock()


def private_dir(name: str) -> Path:
    """Directory ``name`` of this process's private temporary directory."""
    path = _private_root() / name
    path.mkdir(mode=DIR_MODE, exist_ok=True)
    return path


def _private_root() -> Path:
    """A directory of this process alone: made by ``mkdtemp`` (0700, a new
    random name, never a fixed one), removed when the process exits."""
    pid = os.getpid()
    with _PRIVATE_LOCK:
        if pid not in _PRIVATE:
            try:
                _PRIVATE[pid] = Path(tempfile.mkdtemp(prefix="isokernel-"))
            except OSError as err:
                raise CacheUnusable(f"no private temporary cache can be made in "
                                    f"{tempfile.gettempdir()} ({err}); set TMPDIR or "
                                    f"ISOKERNEL_CACHE_DIR to a directory of yours") from None
            atexit.register(_remove_private, pid, _PRIVATE[pid])
        return _PRIVATE[pid]


def _remove_private(pid: int, path: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that exits normally
        shutil.rmtree(path, ignore_errors=True)


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, CacheWarning, stacklevel=3)


# --- reading ------------------------------------------------------------------------------

def read(directory: Path, key: str, suffix: str) -> bytes | None:
    """The verified bytes of entry ``key + suffix``, or None when it is
    missing, refused (see ``read_file``) or does not match its digest."""
    data = read_file(directory / f"{key}{suffix}")
    digest = read_file(directory / f"{key}.sha256")
    if data is None or digest is None:
        return None
    if hashlib.sha256(data).hexdigest() != digest.decode(errors="replace").strip():
        return None
    return data


def read_file(path: Path, check_mode: bool = True) -> bytes | None:
    """The bytes of ``path``, read through the one descriptor that was
    checked: a regular file (never a followed link) owned by the current
    user and, with ``check_mode``, writable by nobody else. None when it is
    missing; refused with a warning when it is not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        _refuse(path, "is a symbolic link" if err.errno == errno.ELOOP else err.strerror)
        return None
    with open(fd, "rb") as fh:
        problem = _file_problem(path, os.fstat(fd), check_mode)
        if problem is not None:
            _refuse(path, problem)
            return None
        return fh.read()


def _file_problem(path: Path, st: os.stat_result, check_mode: bool) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    owner = not_owned(path, st)
    if owner is not None or not check_mode:
        return owner
    return shared_write(path, st)


def _refuse(path: Path, problem: str) -> None:
    problem = problem.removeprefix(f"{path} ")
    warn_once(f"isokernel: the cache entry {path} {problem}: it is not used (compiled again "
              f"instead); remove it if you did not put it there")


# --- writing ------------------------------------------------------------------------------

def temporary(directory: Path, stem: str, suffix: str) -> Path:
    """A new temporary name in ``directory`` that holds this process's pid and
    machine (a cache on a shared home may serve several machines at once)."""
    return directory / f".{stem}.{os.getpid()}-{HOST}.{uuid.uuid4().hex}{suffix}"


def write_new(path: Path, data: bytes) -> None:
    """``data`` in a file created now (``O_EXCL``, never through a link), 0600."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(path, flags, FILE_MODE), "wb") as fh:
        fh.write(data)


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` at ``path``, 0600: written under a temporary name, renamed into place."""
    tmp = temporary(path.parent, path.name, ".tmp")
    try:
        write_new(tmp, data)
        os.replace(tmp, path)
    finally:
        remove(tmp)


def store(directory: Path, key: str, suffix: str, data: bytes,
          source: tuple[str, bytes]) -> Path:
    """Write entry ``key + suffix`` with its digest and its source
    (``(suffix, bytes)``); returns where ``data`` can be read. A failure (a
    full disk, a read-only directory) only warns: the caller goes on with
    the bytes it has, and the path returned is then a copy in this
    process's private temporary directory."""
    path = directory / f"{key}{suffix}"
    try:
        write_atomic(directory / f"{key}{source[0]}", source[1])
        write_atomic(path, data)
        write_atomic(directory / f"{key}.sha256", hashlib.sha256(data).hexdigest().encode())
        return path
    except OSError as err:
        warnings.warn(f"isokernel: the kernel cache could not store {path} ({err}); the kernel "
                      f"is used without it and compiled again next time: free space in "
                      f"{directory}, or set ISOKERNEL_CACHE_DIR to another directory",
                      CacheWarning, stacklevel=3)
    return private_copy(path.name, data)


def private_copy(name: str, data: bytes) -> Path:
    """``data`` in a new file of this process's private temporary directory
    (no other user can replace it between writing and reading)."""
    copy = temporary(private_dir("entries"), name, "")
    try:
        write_new(copy, data)
    except OSError:  # nowhere to write at all: there is no file to read
        pass
    return copy


def keep(directory: Path, name: str, data: bytes) -> str:
    """Keep a rejected source for a bug report; says where, or why not."""
    try:
        write_atomic(directory / name, data)
    except OSError as err:
        return f"could not be kept in {directory}: {err}"
    return f"kept in {directory / name}"


def remove(*paths: Path) -> None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def sweep(directory: Path) -> None:
    """Remove the temporaries in ``directory`` of processes of this machine
    that are gone (a compile killed with ``kill -9``)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        found = TEMPORARY.match(name)
        if found and found[2] in (None, HOST) and not _alive(int(found[1])):
            remove(directory / name)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process id: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process, or no pid at all
        return True
    return True


# --- loading ------------------------------------------------------------------------------

_HELD: list[int] = []
"""Descriptors of the memfds loaded so far, open for the life of the process:
dlopen hands back the object already loaded under the same name, so a
``/proc/self/fd/N`` name must never come back with other bytes."""


def load_library(data: bytes, name: str) -> ctypes.CDLL:
    """``data`` loaded as a shared object: from an anonymous memory file
    where the platform has one, else from a new file of this process's
    private temporary directory, removed once loaded."""
    if MEMFD:
        try:
            return _load_memfd(data, name)
        except OSError:  # no memfd (a policy, the descriptor limit): a private file
            pass
    path = temporary(private_dir("loaded"), name, ".so")
    try:
        write_new(path, data)
        return ctypes.CDLL(str(path))
    finally:
        remove(path)


def _load_memfd(data: bytes, name: str) -> ctypes.CDLL:
    fd = os.memfd_create(f"isokernel-{name}", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as fh:
            fh.write(data)
        library = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except BaseException:
        os.close(fd)
        raise
    _HELD.append(fd)
    return library
