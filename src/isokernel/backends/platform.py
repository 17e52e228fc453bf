"""What the platform will actually grant this process: CPUs and memory, each
with the source of the figure.

The budget that matters is the one enforcement reads. Memory: cgroup v2
first (this process's cgroup, the minimum headroom over it and its
ancestors, ``max`` meaning unlimited), then cgroup v1, then the host's
MemAvailable — and never more than the host has left. CPUs: the scheduler
affinity mask intersected with the cgroup CPU quota (v2 ``cpu.max``, v1
``cfs_quota_us``/``cfs_period_us``, tightest over the ancestors), never the
raw host count.

Every reader takes a ``root`` so tests can point it at captured ``/proc`` and
``/sys`` trees. A missing file is simply absent; an unreadable file, a
garbage value or a path that does not resolve is skipped with the reason kept
in the figure's ``notes``, so a budget is always produced and always says
what it believed.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

_V1_UNLIMITED = 1 << 62  # v1 reports "no limit" as a page-rounded 2**63 - 1
_OCTAL = re.compile(r"\\([0-7]{3})")  # mountinfo escapes space, tab, newline, backslash
_CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class Figure:
    """A number and where it came from."""

    value: int
    source: str
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.value} ({self.source})"


def _read(root: str, path: str, notes: list[str]) -> str | None:
    """The text of ``path`` under ``root``; None when absent or unreadable
    (the latter noted). Bytes that are not UTF-8 are replaced, so a garbage
    file becomes a garbage value, never an exception."""
    full = os.path.join(root, path.lstrip("/"))
    try:
        with open(full, "rb") as fh:
            return fh.read(1 << 20).decode("utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        notes.append(f"{path}: unreadable ({err.strerror or err})")
        return None


def _parse_int(text: str | None, where: str, notes: list[str]) -> int | None:
    """A non-negative integer, the first word of ``text``; garbage noted."""
    if text is None:
        return None
    words = text.split()
    try:
        value = int(words[0])
    except (ValueError, IndexError):
        notes.append(f"{where}: garbage value {text.strip()[:40]!r} ignored")
        return None
    if value < 0:
        notes.append(f"{where}: negative value {value} ignored")
        return None
    return value


# --- where the cgroup hierarchies are, and where this process sits in them ---


@dataclass(frozen=True)
class _Mount:
    point: str  # where the hierarchy is mounted
    root: str  # which cgroup of the hierarchy the mount shows at ``point``


@dataclass(frozen=True)
class _Mounts:
    v2: _Mount | None
    v1: dict[str, _Mount]  # controller -> mount


def _unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def _mounts(root: str, notes: list[str]) -> _Mounts:
    text = _read(root, "/proc/self/mountinfo", notes)
    if text is None:
        return _probe_mounts(root, notes)
    v2, v1 = None, {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        mount = _Mount(_unescape(fields[4]), _unescape(fields[3]))
        if rest[0] == "cgroup2":
            v2 = v2 or mount
        elif rest[0] == "cgroup":
            for option in rest[2].split(","):
                v1.setdefault(option, mount)
    return _Mounts(v2, v1)


def _probe_mounts(root: str, notes: list[str]) -> _Mounts:
    """Without /proc/self/mountinfo, assume the conventional layout if the
    files are there (and say so)."""
    v2, v1 = None, {}
    if os.path.isfile(os.path.join(root, _CGROUP_ROOT.lstrip("/"), "cgroup.controllers")):
        v2 = _Mount(_CGROUP_ROOT, "/")
    for controller in ("memory", "cpu"):
        for name in (controller, "cpu,cpuacct"):
            if os.path.isdir(os.path.join(root, _CGROUP_ROOT.lstrip("/"), name)):
                v1.setdefault(controller, _Mount(f"{_CGROUP_ROOT}/{name}", "/"))
    if v2 is not None or v1:
        notes.append("/proc/self/mountinfo: absent; assumed cgroups under /sys/fs/cgroup")
    return _Mounts(v2, v1)


def _cgroup_paths(root: str, notes: list[str]) -> dict[str, str]:
    """controller -> this process's cgroup path; '' is the v2 hierarchy."""
    paths = {}
    for line in (_read(root, "/proc/self/cgroup", notes) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path.strip()
    return paths


def _chain(mount: _Mount, path: str, root: str, notes: list[str]) -> list[str]:
    """The cgroup directory of ``path`` and its ancestors up to the mount,
    innermost first. ``path`` is relative to the hierarchy's root; the mount
    shows the hierarchy from ``mount.root`` on, so that prefix is dropped.
    A path not visible in this mount namespace falls back to the mount."""
    relative = path
    if mount.root not in ("/", "") and (path + "/").startswith(mount.root.rstrip("/") + "/"):
        relative = path[len(mount.root.rstrip("/")):]
    directory = os.path.normpath(os.path.join(mount.point, relative.lstrip("/")))
    inside = (directory + "/").startswith(mount.point.rstrip("/") + "/")
    if not inside or not os.path.isdir(os.path.join(root, directory.lstrip("/"))):
        notes.append(f"cgroup {path} not visible under {mount.point}; read the mount's own "
                     f"files")
        directory = mount.point
    chain = [directory]
    while directory != mount.point and directory not in ("/", ""):
        directory = os.path.dirname(directory)
        chain.append(directory)
    return chain


# --- memory ---


def _headroom(root, directory, limit_file, usage_file, limit, notes) -> tuple[int, int]:
    where = f"{directory}/{usage_file}"
    used = _parse_int(_read(root, where, notes), where, notes)
    if used is None:
        notes.append(f"{where}: no usage figure; headroom taken as the whole {limit_file}")
        used = 0
    return max(limit - used, 0), used


def _tightest_memory(root, mount, path, files, unlimited, label, notes) -> Figure | None:
    """The smallest headroom over the cgroup and its ancestors."""
    limit_file, usage_file = files
    best = None
    for directory in _chain(mount, path, root, notes):
        where = f"{directory}/{limit_file}"
        text = _read(root, where, notes)
        if text is None or text.strip() == "max":
            continue
        limit = _parse_int(text, where, notes)
        if limit is None or limit >= unlimited:
            continue
        headroom, used = _headroom(root, directory, limit_file, usage_file, limit, notes)
        if best is None or headroom < best.value:
            best = Figure(headroom, f"{label} {where} = {limit} minus {usage_file} {used}")
    return best


def _v2_memory(root, mounts, paths, notes) -> Figure | None:
    if mounts.v2 is None or "" not in paths:
        return None
    return _tightest_memory(root, mounts.v2, paths[""], ("memory.max", "memory.current"),
                            1 << 63, "cgroup v2", notes)


def _v1_memory(root, mounts, paths, notes) -> Figure | None:
    if "memory" not in mounts.v1 or "memory" not in paths:
        return None
    return _tightest_memory(root, mounts.v1["memory"], paths["memory"],
                            ("memory.limit_in_bytes", "memory.usage_in_bytes"),
                            _V1_UNLIMITED, "cgroup v1", notes)


def _meminfo(root, notes) -> dict[str, int]:
    fields = {}
    for line in (_read(root, "/proc/meminfo", notes) or "").splitlines():
        key, sep, rest = line.partition(":")
        if sep and key in ("MemAvailable", "MemFree", "Buffers", "Cached"):
            kib = _parse_int(rest, f"/proc/meminfo {key}", notes)
            if kib is not None:
                fields[key] = kib * 1024
    return fields


def _host_memory(root, notes) -> Figure | None:
    fields = _meminfo(root, notes)
    if "MemAvailable" in fields:
        return Figure(fields["MemAvailable"], "host /proc/meminfo MemAvailable")
    if "MemFree" in fields:  # kernels before 3.14 have no MemAvailable
        parts = [k for k in ("MemFree", "Buffers", "Cached") if k in fields]
        return Figure(sum(fields[k] for k in parts),
                      f"host /proc/meminfo {' + '.join(parts)} (no usable MemAvailable)")
    return None


_RLIMITS = (("RLIMIT_AS", "Max address space", "VmSize"),
            ("RLIMIT_DATA", "Max data size", "VmData"))
"""Per-process limits (``ulimit -v``, ``ulimit -d``): the soft limit, its
line in ``/proc/self/limits``, and the ``/proc/self/status`` field it counts."""


def _soft_limit(limits: str, label: str, notes: list[str]) -> int | None:
    """The soft limit in bytes of ``label``; None when unlimited or absent."""
    for line in limits.splitlines():
        if line.startswith(label):
            soft = line[len(label):].split()[:1]
            if soft == ["unlimited"]:
                return None
            return _parse_int(" ".join(soft), f"/proc/self/limits {label}", notes)
    return None


def _status_bytes(status: str, key: str, notes: list[str]) -> int:
    for line in status.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name == key:
            return (_parse_int(rest, f"/proc/self/status {key}", notes) or 0) * 1024
    return 0


def _rlimit_memory(root, notes) -> Figure | None:
    """The tightest headroom under RLIMIT_AS and RLIMIT_DATA: the soft limit
    less what the process maps now; None when both are unlimited."""
    limits = _read(root, "/proc/self/limits", notes)
    if limits is None:
        return None
    status = _read(root, "/proc/self/status", notes) or ""
    tightest = None
    for name, label, counted in _RLIMITS:
        soft = _soft_limit(limits, label, notes)
        if soft is None:
            continue
        used = _status_bytes(status, counted, notes)
        figure = Figure(max(soft - used, 0), f"{name} soft limit {soft} B less {counted} "
                                             f"{used} B (/proc/self/limits, /proc/self/status)")
        if tightest is None or figure.value < tightest.value:
            tightest = figure
    return tightest


def _system_memory(root, notes) -> Figure:
    """The cgroup limit or the host's available memory, whichever is lower."""
    mounts, paths = _mounts(root, notes), _cgroup_paths(root, notes)
    host = _host_memory(root, notes)
    found = _v2_memory(root, mounts, paths, notes) or _v1_memory(root, mounts, paths, notes)
    if found is not None:
        if host is not None and host.value < found.value:
            return Figure(host.value, f"{host.source} (below the {found.source})")
        return found
    if host is not None:
        return host
    return Figure(0, "unknown: no cgroup limit and no /proc/meminfo")


def memory_budget(root: str = "/") -> Figure:
    """Bytes this process can still allocate before enforcement stops it:
    the cgroup limit, the host's available memory, and the process's own
    RLIMIT_AS / RLIMIT_DATA headroom, the lowest of them."""
    notes: list[str] = []
    system = _system_memory(root, notes)
    limit = _rlimit_memory(root, notes)
    if limit is None:
        return Figure(system.value, system.source, tuple(notes))
    if limit.value < system.value or system.value == 0:
        return Figure(limit.value, f"{limit.source} (below the {system.source})", tuple(notes))
    return Figure(system.value, f"{system.source}; {limit.source} is higher", tuple(notes))


# --- CPUs ---


def _count_cpu_list(text: str, where: str, notes: list[str]) -> int:
    """CPUs in a list such as ``0-3,8,10-11``; 0 (noted) when malformed."""
    total = 0
    try:
        for part in filter(None, text.strip().split(",")):
            first, _, last = part.partition("-")
            count = int(last or first) - int(first) + 1
            if count < 1 or int(first) < 0:
                raise ValueError(part)
            total += count
    except ValueError:
        notes.append(f"{where}: garbage value {text.strip()[:40]!r} ignored")
        return 0
    return total


def _affinity(root: str, notes: list[str]) -> Figure:
    for line in (_read(root, "/proc/self/status", notes) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            count = _count_cpu_list(line.split(":", 1)[1], "Cpus_allowed_list", notes)
            if count:
                return Figure(count, "scheduler affinity (Cpus_allowed_list)")
    if root == "/" and hasattr(os, "sched_getaffinity"):
        return Figure(len(os.sched_getaffinity(0)), "scheduler affinity")
    online = _read(root, "/sys/devices/system/cpu/online", notes)
    if online is not None:
        count = _count_cpu_list(online, "/sys/devices/system/cpu/online", notes)
        if count:
            return Figure(count, "online CPUs (/sys/devices/system/cpu/online; no affinity)")
    if root == "/" and os.cpu_count():
        return Figure(os.cpu_count(), "os.cpu_count (no affinity information)")
    return Figure(1, "unknown: no affinity or CPU list; assumed 1")


def _v2_quota_at(root, directory, notes) -> tuple[float, str] | None:
    where = f"{directory}/cpu.max"
    text = _read(root, where, notes)
    if text is None or text.split()[:1] == ["max"]:
        return None
    try:
        words = text.split()
        quota, period = int(words[0]), int(words[1]) if len(words) > 1 else 100_000
        if quota <= 0 or period <= 0:
            raise ValueError(text)
    except (ValueError, IndexError):
        notes.append(f"{where}: garbage value {text.strip()[:40]!r} ignored")
        return None
    return quota / period, f"cgroup v2 {where} {quota}/{period}"


def _v1_quota_at(root, directory, notes) -> tuple[float, str] | None:
    q_where, p_where = f"{directory}/cpu.cfs_quota_us", f"{directory}/cpu.cfs_period_us"
    q_text = _read(root, q_where, notes)
    if q_text is None or q_text.strip() == "-1":
        return None  # -1: no quota
    quota = _parse_int(q_text, q_where, notes)
    period = _parse_int(_read(root, p_where, notes), p_where, notes)
    if not quota or not period:
        return None
    return quota / period, f"cgroup v1 {q_where} {quota}/{period}"


def _tightest_quota(root, mount, path, reader, notes) -> tuple[float, str] | None:
    found = [reader(root, d, notes) for d in _chain(mount, path, root, notes)]
    found = [q for q in found if q is not None]
    return min(found, key=lambda q: q[0]) if found else None


def _v2_quota(root, mounts, paths, notes) -> tuple[float, str] | None:
    if mounts.v2 is None or "" not in paths:
        return None
    return _tightest_quota(root, mounts.v2, paths[""], _v2_quota_at, notes)


def _v1_quota(root, mounts, paths, notes) -> tuple[float, str] | None:
    if "cpu" not in mounts.v1 or "cpu" not in paths:
        return None
    return _tightest_quota(root, mounts.v1["cpu"], paths["cpu"], _v1_quota_at, notes)


def cpu_budget(root: str = "/") -> Figure:
    """CPUs this process may use: affinity ∩ cgroup quota, at least 1. A
    fractional quota rounds down (1.5 CPUs of quota keeps one worker busy
    without throttling), except below 1, which is 1."""
    notes: list[str] = []
    affinity = _affinity(root, notes)
    mounts, paths = _mounts(root, notes), _cgroup_paths(root, notes)
    quota = _v2_quota(root, mounts, paths, notes) or _v1_quota(root, mounts, paths, notes)
    if quota is not None and math.floor(quota[0]) < affinity.value:
        cpus = max(1, math.floor(quota[0]))
        return Figure(cpus, f"{quota[1]} (below {affinity.value} from {affinity.source})",
                      tuple(notes))
    within = "" if quota is None else f", within {quota[1]}"
    return Figure(affinity.value, affinity.source + within, tuple(notes))


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` exists on this host: True only when the
    kernel says so; False for a live process, another user's, or a number
    that is not a process id (not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False
