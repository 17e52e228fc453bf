"""The platform budget read from captured /proc and /sys trees
(tests/data/platform, built by tests/data/make_platform_trees.py): every
figure, its source, and the notes left by missing, unreadable or garbage
files."""

from __future__ import annotations

import os
import shutil

import pytest

from isokernel.backends.platform import Figure, cpu_budget, memory_budget

DATA = os.path.join(os.path.dirname(__file__), "data", "platform")
GIB = 1 << 30
MIB = 1 << 20


def tree(case: str) -> str:
    return os.path.join(DATA, case)


# (case, memory bytes, memory source fragment, CPUs, CPU source fragment)
EXPECTED = [
    ("v2-nested", 3 * GIB, "user-1000.slice/memory.max = 4294967296 minus memory.current",
     1, "user-1000.slice/cpu.max 150000/100000 (below 4"),
    ("v2-container", 27 * GIB, "cgroup v2 /sys/fs/cgroup/memory.max = 30064771072",
     2, "cgroup v2 /sys/fs/cgroup/cpu.max 200000/100000 (below 8"),
    ("v2-max", 40 * GIB, "host /proc/meminfo MemAvailable", 6, "scheduler affinity"),
    ("v2-host-tighter", 10 * GIB, "MemAvailable (below the cgroup v2", 4, "scheduler affinity"),
    ("v1-docker", 2 * GIB - 512 * MIB, "cgroup v1 /sys/fs/cgroup/memory/memory.limit_in_bytes",
     1, "cgroup v1 /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us 50000/100000 (below 16"),
    ("v1-nested", 2 * GIB, "cgroup v1 /sys/fs/cgroup/memory/batch/memory.limit_in_bytes",
     3, "cgroup v1 /sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us 300000/100000"),
    ("hybrid", 23913372 * 1024, "host /proc/meminfo MemAvailable",
     2, "scheduler affinity (Cpus_allowed_list)"),
    ("host-only", 5 * GIB, "host /proc/meminfo MemAvailable", 4, "scheduler affinity"),
    ("host-old-kernel", (1000000 + 100000 + 2000000) * 1024,
     "MemFree + Buffers + Cached (no usable MemAvailable)", 2, "scheduler affinity"),
    ("no-mountinfo", 4 * GIB, "cgroup v2 /sys/fs/cgroup/memory.max = 6442450944",
     2, "cgroup v2 /sys/fs/cgroup/cpu.max 250000/100000"),
]


@pytest.mark.parametrize("case, mem, mem_source, cpus, cpu_source", EXPECTED,
                         ids=[e[0] for e in EXPECTED])
def test_captured_trees(case, mem, mem_source, cpus, cpu_source):
    memory, cpu = memory_budget(tree(case)), cpu_budget(tree(case))
    assert (memory.value, cpu.value) == (mem, cpus)
    assert mem_source in memory.source
    assert cpu_source in cpu.source


def test_tighter_ancestor_wins_over_a_looser_leaf():
    # v2: leaf 8 GiB - 0.5 GiB used, parent 4 GiB - 1 GiB used -> the parent's 3 GiB
    memory = memory_budget(tree("v2-nested"))
    assert memory.value == 3 * GIB and "app.scope" not in memory.source
    # v1: the job itself is unlimited, its parent is not
    assert "batch/memory.limit_in_bytes" in memory_budget(tree("v1-nested")).source


def test_max_means_unlimited_not_garbage():
    memory, cpu = memory_budget(tree("v2-max")), cpu_budget(tree("v2-max"))
    assert memory.notes == () and cpu.notes == ()
    assert "within" not in cpu.source


def test_cpu_quota_below_affinity_rounds_down_but_never_to_zero():
    assert cpu_budget(tree("v2-nested")).value == 1  # 1.5 CPUs of quota, 4 allowed
    assert cpu_budget(tree("v1-docker")).value == 1  # half a CPU
    unreadable = cpu_budget(tree("unreadable"))  # exactly 1.0
    assert unreadable.value == 1 and "100000/100000" in unreadable.source


def test_quota_at_or_above_affinity_keeps_affinity():
    cpu = cpu_budget(tree("v1-nested"))  # 3 CPUs of quota, 4 allowed -> 3
    assert cpu.value == 3
    assert cpu_budget(tree("hybrid")).source == "scheduler affinity (Cpus_allowed_list)"


def test_v1_mount_root_is_stripped_from_the_process_path():
    # Docker without a cgroup namespace: /proc/self/cgroup says /docker/abc123 and the
    # mount shows that cgroup at /sys/fs/cgroup/memory itself.
    memory = memory_budget(tree("v1-docker"))
    assert memory.notes == ()
    assert memory.source.startswith("cgroup v1 /sys/fs/cgroup/memory/memory.limit_in_bytes")


def test_garbage_values_are_ignored_and_noted():
    memory, cpu = memory_budget(tree("garbage")), cpu_budget(tree("garbage"))
    assert memory.value == 3000000 * 1024 and "MemFree" in memory.source
    assert any("memory.max: garbage value 'unlimited-ish'" in n for n in memory.notes)
    assert any("MemAvailable: garbage value" in n for n in memory.notes)
    assert cpu.value == 3 and "online CPUs" in cpu.source
    assert any("Cpus_allowed_list: garbage" in n for n in cpu.notes)
    assert any("cpu.max: garbage value 'fast 100000'" in n for n in cpu.notes)


def test_garbage_usage_takes_the_whole_limit_and_says_so():
    memory = memory_budget(tree("garbage-usage"))
    assert memory.value == 2 * GIB
    assert any("no usage figure" in n for n in memory.notes)
    cpu = cpu_budget(tree("garbage-usage"))  # negative quota is garbage
    assert cpu.value == 4 and any("garbage value '-5 100000'" in n for n in cpu.notes)


def test_missing_files_give_unknown_with_a_reason():
    memory = memory_budget(tree("missing"))
    assert memory.value == 0 and memory.source.startswith("unknown")
    assert any("not visible under /sys/fs/cgroup" in n for n in memory.notes)
    assert cpu_budget(tree("missing")).value == 4


def test_unreadable_files_are_noted_not_raised():
    memory = memory_budget(tree("unreadable"))
    assert memory.source.startswith("unknown")
    assert {n.split(":")[0] for n in memory.notes} == {"/proc/meminfo",
                                                       "/sys/fs/cgroup/memory.max"}
    assert all("unreadable" in n for n in memory.notes)


def test_permission_denied_is_noted(tmp_path, monkeypatch):
    shutil.copytree(tree("v2-container"), tmp_path, dirs_exist_ok=True)
    real_open = open

    def guarded(path, *args, **kwargs):
        if str(path).endswith("memory.max"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr("builtins.open", guarded)
    memory = memory_budget(str(tmp_path))
    assert "MemAvailable" in memory.source
    assert any("memory.max: unreadable (Permission denied)" in n for n in memory.notes)


def test_an_empty_root_still_answers():
    memory, cpu = memory_budget("/nonexistent-root"), cpu_budget("/nonexistent-root")
    assert memory == Figure(0, "unknown: no cgroup limit and no /proc/meminfo")
    assert cpu.value == 1 and cpu.source.startswith("unknown")


def test_this_machine():
    memory, cpu = memory_budget(), cpu_budget()
    assert memory.value > 0 and memory.source
    assert 1 <= cpu.value <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert cpu.value <= len(os.sched_getaffinity(0))


def test_figure_prints_value_and_source():
    assert str(Figure(2, "scheduler affinity")) == "2 (scheduler affinity)"
