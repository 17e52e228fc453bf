"""What the platform will actually grant this process: CPUs and memory, each
with the source of the figure.

The budget that matters is the one enforcement reads. Memory: cgroup v2
first (this process's cgroup, the minimum over it and its ancestors, ``max``
meaning unlimited), then cgroup v1, then the host's MemAvailable. CPUs: the
scheduler affinity mask intersected with the cgroup CPU quota (v2
``cpu.max``, v1 ``cfs_quota_us``/``cfs_period_us``), never the raw host
count. Every reader takes a ``root`` so tests can point it at captured
``/proc`` and ``/sys`` trees; unreadable, missing or garbage files are
skipped with the reason kept in ``notes``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

_V1_UNLIMITED = 1 << 62  # v1 reports "no limit" as a page-rounded 2**63 - 1


@dataclass(frozen=True)
class Figure:
    """A number and where it came from."""

    value: int
    source: str
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return f"{self.value} ({self.source})"


def _read(root: str, path: str, notes: list[str]) -> str | None:
    full = os.path.join(root, path.lstrip("/"))
    try:
        with open(full) as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        notes.append(f"{path}: unreadable ({err.strerror or err})")
        return None


@dataclass(frozen=True)
class _Mounts:
    v2: str | None  # cgroup2 mount point
    v1: dict[str, str]  # controller -> mount point


def _mounts(root: str, notes: list[str]) -> _Mounts:
    text = _read(root, "/proc/self/mountinfo", notes) or ""
    v2, v1 = None, {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        point, fstype, options = fields[4], rest[0], rest[2].split(",")
        if fstype == "cgroup2":
            v2 = v2 or point
        elif fstype == "cgroup":
            for option in options:
                v1.setdefault(option, point)
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
            paths[controller] = path
    return paths


def _chain(mount: str, path: str, root: str) -> list[str]:
    """The cgroup directory of ``path`` under ``mount`` and its ancestors up to
    the mount, innermost first. A path not visible in this mount namespace
    falls back to the mount itself."""
    directory = os.path.normpath(os.path.join(mount, path.lstrip("/")))
    if not os.path.isdir(os.path.join(root, directory.lstrip("/"))):
        directory = mount
    chain = [directory]
    while directory != mount and directory not in ("/", ""):
        directory = os.path.dirname(directory)
        chain.append(directory)
    return chain


def _parse_int(text: str | None, where: str, notes: list[str]) -> int | None:
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        notes.append(f"{where}: garbage value {text.strip()[:40]!r} ignored")
        return None


def _v2_memory(root, mounts, paths, notes) -> Figure | None:
    if mounts.v2 is None or "" not in paths:
        return None
    best = None
    for directory in _chain(mounts.v2, paths[""], root):
        where = f"{directory}/memory.max"
        text = _read(root, where, notes)
        if text is None or text.strip() == "max":
            continue
        limit = _parse_int(text, where, notes)
        if limit is None:
            continue
        used = _parse_int(_read(root, f"{directory}/memory.current", notes),
                          f"{directory}/memory.current", notes) or 0
        headroom = max(limit - used, 0)
        if best is None or headroom < best.value:
            best = Figure(headroom, f"cgroup v2 {where} = {limit} minus memory.current {used}")
    return best


def _v1_memory(root, mounts, paths, notes) -> Figure | None:
    if "memory" not in mounts.v1 or "memory" not in paths:
        return None
    best = None
    for directory in _chain(mounts.v1["memory"], paths["memory"], root):
        where = f"{directory}/memory.limit_in_bytes"
        limit = _parse_int(_read(root, where, notes), where, notes)
        if limit is None or limit >= _V1_UNLIMITED:
            continue
        used = _parse_int(_read(root, f"{directory}/memory.usage_in_bytes", notes),
                          f"{directory}/memory.usage_in_bytes", notes) or 0
        headroom = max(limit - used, 0)
        if best is None or headroom < best.value:
            best = Figure(headroom, f"cgroup v1 {where} = {limit} minus usage {used}")
    return best


def _host_memory(root, notes) -> Figure | None:
    for line in (_read(root, "/proc/meminfo", notes) or "").splitlines():
        if line.startswith("MemAvailable:"):
            kib = _parse_int(line.split(":", 1)[1], "/proc/meminfo MemAvailable", notes)
            if kib is not None:
                return Figure(kib * 1024, "host /proc/meminfo MemAvailable")
    return None


def memory_budget(root: str = "/") -> Figure:
    """Bytes this process can still allocate before enforcement stops it."""
    notes: list[str] = []
    mounts, paths = _mounts(root, notes), _cgroup_paths(root, notes)
    host = _host_memory(root, notes)
    for found in (_v2_memory(root, mounts, paths, notes), _v1_memory(root, mounts, paths, notes)):
        if found is not None:
            if host is not None and host.value < found.value:
                return Figure(host.value, f"{host.source} (below the {found.source})",
                              tuple(notes))
            return Figure(found.value, found.source, tuple(notes))
    if host is not None:
        return Figure(host.value, host.source, tuple(notes))
    return Figure(0, "unknown: no cgroup limit and no /proc/meminfo", tuple(notes))


def _affinity(root: str, notes: list[str]) -> Figure:
    for line in (_read(root, "/proc/self/status", notes) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            count = _count_cpu_list(line.split(":", 1)[1].strip(), notes)
            if count:
                return Figure(count, "scheduler affinity (Cpus_allowed_list)")
    if root == "/" and hasattr(os, "sched_getaffinity"):
        return Figure(len(os.sched_getaffinity(0)), "scheduler affinity")
    return Figure(os.cpu_count() or 1, "os.cpu_count (no affinity information)")


def _count_cpu_list(text: str, notes: list[str]) -> int:
    total = 0
    try:
        for part in filter(None, text.split(",")):
            first, _, last = part.partition("-")
            total += int(last or first) - int(first) + 1
    except ValueError:
        notes.append(f"Cpus_allowed_list: garbage value {text[:40]!r} ignored")
        return 0
    return total


def _v2_quota(root, mounts, paths, notes) -> tuple[float, str] | None:
    if mounts.v2 is None or "" not in paths:
        return None
    best = None
    for directory in _chain(mounts.v2, paths[""], root):
        where = f"{directory}/cpu.max"
        text = _read(root, where, notes)
        if text is None or text.split()[:1] == ["max"]:
            continue
        try:
            quota, period = (int(v) for v in text.split()[:2])
            cpus = quota / period
        except (ValueError, ZeroDivisionError):
            notes.append(f"{where}: garbage value {text.strip()[:40]!r} ignored")
            continue
        if best is None or cpus < best[0]:
            best = (cpus, f"cgroup v2 {where} {quota}/{period}")
    return best


def _v1_quota(root, mounts, paths, notes) -> tuple[float, str] | None:
    controller = next((c for c in ("cpu", "cpu,cpuacct") if c in mounts.v1), None)
    if controller is None or "cpu" not in paths:
        return None
    best = None
    for directory in _chain(mounts.v1[controller], paths["cpu"], root):
        q_where, p_where = f"{directory}/cpu.cfs_quota_us", f"{directory}/cpu.cfs_period_us"
        quota = _parse_int(_read(root, q_where, notes), q_where, notes)
        period = _parse_int(_read(root, p_where, notes), p_where, notes)
        if quota is None or quota <= 0 or not period:
            continue
        if best is None or quota / period < best[0]:
            best = (quota / period, f"cgroup v1 {q_where} {quota}/{period}")
    return best


def cpu_budget(root: str = "/") -> Figure:
    """CPUs this process may use: affinity ∩ cgroup quota (at least 1)."""
    notes: list[str] = []
    affinity = _affinity(root, notes)
    mounts, paths = _mounts(root, notes), _cgroup_paths(root, notes)
    quota = _v2_quota(root, mounts, paths, notes) or _v1_quota(root, mounts, paths, notes)
    if quota is not None and math.floor(quota[0]) < affinity.value:
        cpus = max(1, math.floor(quota[0]))
        return Figure(cpus, f"{quota[1]} (below {affinity.value} from {affinity.source})",
                      tuple(notes))
    return Figure(affinity.value, affinity.source + ("" if quota is None else
                                                     f", within {quota[1]}"), tuple(notes))
