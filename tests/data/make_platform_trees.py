"""Writes the captured /proc and /sys trees under tests/data/platform.

Kept beside the trees so a reader sees how each case was built; the trees
themselves are committed and the tests read them, not this script. The
``hybrid`` case is a capture of the CI machine (cgroup v1 controllers plus an
empty cgroup2 ``unified`` mount); the others are shaped after real systems
(systemd user slices on cgroup v2, Docker without a cgroup namespace on v1, a
Kubernetes pod capped at 28 GiB on a 62 GiB host) with their numbers kept.
Run from this directory: ``python make_platform_trees.py``.
"""

import os
import shutil

GIB = 1 << 30
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "platform")

V2_MOUNT = ("35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 "
            "- cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n")
V1_LINE = "{id} 31 0:{id} {root} /sys/fs/cgroup/{dir} rw,nosuid - cgroup cgroup rw,{opts}\n"
MEMINFO = ("MemTotal:       65011712 kB\nMemFree:        30000000 kB\n"
           "MemAvailable:   {avail} kB\nBuffers:          400000 kB\nCached:         20000000 kB\n")
STATUS = "Name:\tpython3\nState:\tR (running)\nCpus_allowed:\t{mask}\nCpus_allowed_list:\t{cpus}\n"
BASE_MOUNTS = ("22 27 0:21 / /proc rw,relatime - proc proc rw\n"
               "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n")


def write(case, path, text):
    full = os.path.join(HERE, case, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as fh:
        fh.write(text)


def proc(case, mountinfo, cgroup, cpus="0-3", avail=62 * GIB // 1024, mask="f"):
    write(case, "/proc/self/mountinfo", BASE_MOUNTS + mountinfo)
    write(case, "/proc/self/cgroup", cgroup)
    write(case, "/proc/self/status", STATUS.format(mask=mask, cpus=cpus))
    write(case, "/proc/meminfo", MEMINFO.format(avail=avail))


def v2_nested():
    """A systemd user slice: the leaf allows 8 GiB, its parent only 4 GiB;
    the leaf's cpu.max is unlimited but the parent allows 1.5 CPUs."""
    case, cg = "v2-nested", "/sys/fs/cgroup/user.slice/user-1000.slice"
    proc(case, V2_MOUNT, "0::/user.slice/user-1000.slice/app.scope\n", cpus="0-3")
    write(case, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
    write(case, "/sys/fs/cgroup/user.slice/memory.max", "max\n")
    write(case, "/sys/fs/cgroup/user.slice/memory.current", f"{6 * GIB}\n")
    write(case, f"{cg}/memory.max", f"{4 * GIB}\n")
    write(case, f"{cg}/memory.current", f"{1 * GIB}\n")
    write(case, f"{cg}/cpu.max", "150000 100000\n")
    write(case, f"{cg}/app.scope/memory.max", f"{8 * GIB}\n")
    write(case, f"{cg}/app.scope/memory.current", f"{512 << 20}\n")
    write(case, f"{cg}/app.scope/cpu.max", "max 100000\n")


def v2_container():
    """A pod capped at 28 GiB and 2 CPUs on a 62 GiB, 8-CPU host, seen
    through a cgroup namespace (its cgroup is '/')."""
    case = "v2-container"
    proc(case, V2_MOUNT, "0::/\n", cpus="0-7", mask="ff")
    write(case, "/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n")
    write(case, "/sys/fs/cgroup/memory.max", f"{28 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory.current", f"{1 * GIB}\n")
    write(case, "/sys/fs/cgroup/cpu.max", "200000 100000\n")


def v2_max():
    """cgroup v2 with no limits anywhere: memory.max and cpu.max say max."""
    case = "v2-max"
    proc(case, V2_MOUNT, "0::/system.slice/job.service\n", cpus="0-5", avail=40 * GIB // 1024)
    write(case, "/sys/fs/cgroup/system.slice/memory.max", "max\n")
    write(case, "/sys/fs/cgroup/system.slice/job.service/memory.max", "max\n")
    write(case, "/sys/fs/cgroup/system.slice/job.service/memory.current", "123456\n")
    write(case, "/sys/fs/cgroup/system.slice/job.service/cpu.max", "max 100000\n")


def v2_host_tighter():
    """A 28 GiB cgroup on a host that has only 10 GiB left."""
    case = "v2-host-tighter"
    proc(case, V2_MOUNT, "0::/\n", avail=10 * GIB // 1024)
    write(case, "/sys/fs/cgroup/memory.max", f"{28 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory.current", "0\n")


def v1_docker():
    """Docker on cgroup v1 without a cgroup namespace: the mounts show the
    container's own cgroup (mount root /docker/abc); 2 GiB, half a CPU."""
    case, root = "v1-docker", "/docker/abc123"
    mounts = (V1_LINE.format(id=32, root=root, dir="memory", opts="memory")
              + V1_LINE.format(id=33, root=root, dir="cpu,cpuacct", opts="cpu,cpuacct"))
    proc(case, mounts, f"5:memory:{root}\n4:cpu,cpuacct:{root}\n0::/\n", cpus="0-15",
         mask="ffff")
    write(case, "/sys/fs/cgroup/memory/memory.limit_in_bytes", f"{2 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory/memory.usage_in_bytes", f"{512 << 20}\n")
    write(case, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n")
    write(case, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")


def v1_nested():
    """cgroup v1 hierarchy seen from the host: the job's own limit is
    unlimited (2**63 rounded to pages) but its parent allows 3 GiB; the
    parent's CPU quota is 3 CPUs of the 4 allowed."""
    case = "v1-nested"
    mounts = (V1_LINE.format(id=32, root="/", dir="memory", opts="memory")
              + V1_LINE.format(id=33, root="/", dir="cpu", opts="cpu"))
    proc(case, mounts, "4:memory:/batch/job7\n3:cpu:/batch/job7\n", cpus="0-3")
    write(case, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    write(case, "/sys/fs/cgroup/memory/batch/memory.limit_in_bytes", f"{3 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory/batch/memory.usage_in_bytes", f"{1 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory/batch/job7/memory.limit_in_bytes",
          "9223372036854771712\n")
    write(case, "/sys/fs/cgroup/memory/batch/job7/memory.usage_in_bytes", f"{256 << 20}\n")
    write(case, "/sys/fs/cgroup/cpu/batch/cpu.cfs_quota_us", "300000\n")
    write(case, "/sys/fs/cgroup/cpu/batch/cpu.cfs_period_us", "100000\n")
    write(case, "/sys/fs/cgroup/cpu/batch/job7/cpu.cfs_quota_us", "-1\n")
    write(case, "/sys/fs/cgroup/cpu/batch/job7/cpu.cfs_period_us", "100000\n")


def hybrid():
    """Captured from the CI machine: v1 controllers, an empty cgroup2
    'unified' mount, no limits; the host figure decides."""
    case = "hybrid"
    dirs = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
    mounts = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    mounts += "".join(f"{32 + i} 31 0:{29 + i} / /sys/fs/cgroup/{d} rw,relatime - cgroup "
                      f"cgroup rw,{d}\n" for i, d in enumerate(dirs))
    mounts += "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    cgroup = ("9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
              "4:memory:/process_api/ea6cabbba491bc44d14074d9c9385578\n3:cpuset:/\n"
              "2:cpuacct:/\n1:cpu:/\n0::/\n")
    proc(case, mounts, cgroup, cpus="0-1", avail=23913372, mask="3")
    mem = "/sys/fs/cgroup/memory/process_api/ea6cabbba491bc44d14074d9c9385578"
    write(case, f"{mem}/memory.limit_in_bytes", "9223372036854771712\n")
    write(case, f"{mem}/memory.usage_in_bytes", "3420160\n")
    write(case, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    write(case, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    write(case, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    write(case, "/sys/fs/cgroup/unified/cgroup.controllers", "")


def host_only():
    """No cgroup mounts at all."""
    proc("host-only", "", "", cpus="0,2,4-5", avail=5 * GIB // 1024, mask="35")


def host_old_kernel():
    """A kernel before 3.14: /proc/meminfo has no MemAvailable."""
    case = "host-old-kernel"
    proc(case, "", "", cpus="0-1")
    write(case, "/proc/meminfo", "MemTotal:  8000000 kB\nMemFree:  1000000 kB\n"
                                 "Buffers:  100000 kB\nCached:  2000000 kB\n")


def garbage():
    """Garbage everywhere: limits, usage, quota, affinity and MemAvailable."""
    case = "garbage"
    proc(case, V2_MOUNT, "0::/\n", cpus="zero-to-three")
    write(case, "/proc/meminfo", "MemTotal: 8000000 kB\nMemAvailable: lots kB\n"
                                 "MemFree: 3000000 kB\n")
    write(case, "/sys/fs/cgroup/memory.max", "unlimited-ish\n")
    write(case, "/sys/fs/cgroup/cpu.max", "fast 100000\n")
    write(case, "/sys/devices/system/cpu/online", "0-2\n")


def garbage_usage():
    """A sound limit with a garbage usage figure: headroom is the whole limit."""
    case = "garbage-usage"
    proc(case, V2_MOUNT, "0::/\n")
    write(case, "/sys/fs/cgroup/memory.max", f"{2 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory.current", "\x00\xff\xfe\n")
    write(case, "/sys/fs/cgroup/cpu.max", "-5 100000\n")


def missing():
    """A cgroup2 mount is declared but the process's cgroup directory is not
    visible and the mount has no limit files; /proc/meminfo is missing too."""
    case = "missing"
    proc(case, V2_MOUNT, "0::/kubepods/pod42/ctr\n", cpus="0-3")
    os.remove(os.path.join(HERE, case, "proc/meminfo"))
    write(case, "/sys/fs/cgroup/cgroup.controllers", "memory\n")


def unreadable():
    """memory.max and /proc/meminfo are directories where files belong, so
    reading them fails even for root; cpu.max reads fine."""
    case = "unreadable"
    proc(case, V2_MOUNT, "0::/\n")
    os.remove(os.path.join(HERE, case, "proc/meminfo"))
    write(case, "/proc/meminfo/.keep", "")
    write(case, "/sys/fs/cgroup/memory.max/.keep", "")
    write(case, "/sys/fs/cgroup/cpu.max", "100000 100000\n")


def no_mountinfo():
    """/proc/self/mountinfo absent; the v2 files sit at /sys/fs/cgroup."""
    case = "no-mountinfo"
    proc(case, "", "0::/\n", cpus="0-3")
    os.remove(os.path.join(HERE, case, "proc/self/mountinfo"))
    write(case, "/sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    write(case, "/sys/fs/cgroup/memory.max", f"{6 * GIB}\n")
    write(case, "/sys/fs/cgroup/memory.current", f"{2 * GIB}\n")
    write(case, "/sys/fs/cgroup/cpu.max", "250000 100000\n")


if __name__ == "__main__":
    shutil.rmtree(HERE, ignore_errors=True)
    for build in (v2_nested, v2_container, v2_max, v2_host_tighter, v1_docker, v1_nested,
                  hybrid, host_only, host_old_kernel, garbage, garbage_usage, missing,
                  unreadable, no_mountinfo):
        build()
