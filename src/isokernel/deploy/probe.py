"""The measured probe: run a real block and compare its peak memory with the
static shape.

The static shape is the prior that makes a fresh model sizable before it has
run; a measured peak is the authority that calibrates it. On the host two
figures are taken around one call, both counting the caller's inputs (which
exist before the call) plus everything the call allocates at its peak:

- *tracemalloc*: NumPy reports every array allocation to it, so its peak
  is the allocator-level peak of the run, temporaries inside ufuncs included;
- *RSS*: the kernel's high-water mark (VmHWM, reset through
  /proc/self/clear_refs) minus the resident size before the call — the
  pages actually touched; unavailable where the reset is not permitted.

On a GPU the figure is the peak of bytes in use during the call in CuPy's
memory pool (tracked by wrapping the pool's allocator) plus in isokernel's
own device allocator (``backends.cuda.memory``), where the GPU strategies'
buffers live.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from ..backends.cuda.runtime import device_allocators
from ..backends.liveness import format_bytes


@dataclass(frozen=True)
class Probe:
    rows: int | None  # pixel rows in the probed block
    static: int  # the static shape at that block
    traced: int | None  # tracemalloc: inputs + peak allocated during the call
    rss: int | None  # RSS: inputs + high-water mark growth during the call
    device: int | None = None  # CuPy pool peak (GPU)
    rss_reason: str = ""

    def ratios(self) -> dict[str, float]:
        found = {"tracemalloc": self.traced, "RSS": self.rss, "CuPy pool": self.device}
        return {k: v / self.static for k, v in found.items() if v is not None and self.static}

    def __str__(self) -> str:
        parts = [f"{name} {format_bytes(self.static * ratio)} (ratio {ratio:.2f})"
                 for name, ratio in self.ratios().items()]
        if self.rss is None and self.rss_reason:
            parts.append(f"RSS unavailable ({self.rss_reason})")
        rows = f" for a block of {self.rows} rows" if self.rows else ""
        return (f"measured peak{rows}: {'; '.join(parts)} vs static "
                f"{format_bytes(self.static)}")


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _trim_heap() -> None:
    """Return freed heap pages to the kernel (glibc keeps them by default),
    so the run's own allocations fault in fresh pages and show in the
    high-water mark."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim, or no way to; the figure may read low


def _reset_hwm() -> str:
    """Reset the RSS high-water mark; the reason when that is impossible."""
    _trim_heap()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError as err:
        return f"/proc/self/clear_refs: {err.strerror or err}"
    return "" if _status_kib("VmHWM") is not None else "no VmHWM in /proc/self/status"


def measure_host(run: Callable[[], object], input_bytes: int) -> tuple[int, int | None, str]:
    """(tracemalloc figure, RSS figure or None, reason RSS is missing) of one
    call of ``run``; both include ``input_bytes`` for the caller's inputs."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    reason = _reset_hwm()
    rss_before = _status_kib("VmRSS")
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    try:
        run()
        _, peak = tracemalloc.get_traced_memory()
        hwm = _status_kib("VmHWM")
    finally:
        if started:
            tracemalloc.stop()
    rss = None
    if not reason and hwm is not None and rss_before is not None:
        rss = input_bytes + max(hwm - rss_before, 0)
    return input_bytes + peak - base, rss, reason


def measure_device(run: Callable[[], object]) -> int:
    """Peak bytes in use during ``run()``, above what was in use before: in
    CuPy's default pool (CuPy's own temporaries) plus in isokernel's device
    allocator, which holds the GPU strategies' buffers."""
    import cupy  # the optional cuda extra: imported when a GPU call is measured

    pool = cupy.get_default_memory_pool()
    base = pool.used_bytes()
    peak = [base]
    allocators = device_allocators()
    for cache in allocators:
        cache.reset_peak()
    own = sum(cache.live_bytes for cache in allocators)

    def malloc(size):
        memory = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return memory

    cupy.cuda.set_allocator(malloc)
    try:
        run()
        cupy.cuda.runtime.deviceSynchronize()
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    return peak[0] - base + sum(cache.peak_live_bytes for cache in allocators) - own


def rss_available() -> bool:
    return os.path.exists("/proc/self/clear_refs") and not _reset_hwm()
