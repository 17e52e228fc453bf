"""Device buffers of the GPU strategies: an exact-size reuse cache with a
byte cap, and its telemetry (the cuda-runtime chapter's bounded device
reuse cache, ``reference/cuda-runtime-chapter.txt``).

Every buffer a GPU strategy allocates (results, intermediates, contiguous
copies, uploaded inputs) comes from ``ReuseCache.acquire`` and goes back on
release. A released block waits in the cache for a later request of the same
size, so a steady loop does not call ``cudaMalloc`` again; a block that
would lift the cache above its cap is freed instead. The cap only bounds
released blocks: it never limits live buffers.

The cap is read once, when the cache is created, from
``ISOKERNEL_CUDA_CACHE_CAP_BYTES``: a decimal byte count; 0 or unset keeps
the cache unbounded; a malformed value (``512MB``, ``-1``, ``1e9``) or one
beyond 2⁶⁴ − 1 gives a warning and is ignored.

``live_bytes`` counts payloads of live isokernel buffers; ``cache_bytes``
counts released blocks waiting for reuse (not part of ``live_bytes``).
The formatted report adds the driver's free/total memory and CuPy's own pool
(which CuPy's library calls, e.g. cuBLAS workspaces, use).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ..liveness import format_bytes

CAP_VARIABLE = "ISOKERNEL_CUDA_CACHE_CAP_BYTES"
ALIGN = 256  # cudaMalloc's alignment: sizes are rounded up to it
MAX_CAP = 2**64 - 1


class CacheCapWarning(UserWarning):
    """``ISOKERNEL_CUDA_CACHE_CAP_BYTES`` could not be used."""


def parse_cap(text: str | None) -> tuple[int, str | None]:
    """(cap in bytes, 0 = unbounded; the warning to give, or None)."""
    if text is None or text.strip() == "":
        return 0, None
    value = text.strip()
    if not value.isdigit() or not value.isascii():
        return 0, (f"{CAP_VARIABLE}={text!r} is not a decimal byte count (e.g. "
                   f"{512 * 1024 * 1024} for 512 MiB); ignored, the reuse cache is unbounded")
    cap = int(value)
    if cap > MAX_CAP:
        return 0, (f"{CAP_VARIABLE}={text!r} overflows a 64-bit byte count; ignored, the "
                   f"reuse cache is unbounded")
    return cap, None


def cap_from_environment() -> tuple[int, str]:
    """The cap and where it came from; warns about an unusable value."""
    text = os.environ.get(CAP_VARIABLE)
    cap, warning = parse_cap(text)
    if warning is not None:
        warnings.warn(warning, CacheCapWarning, stacklevel=3)
        return 0, f"{CAP_VARIABLE} ignored (malformed)"
    if text is None or text.strip() == "":
        return 0, f"{CAP_VARIABLE} unset"
    return cap, CAP_VARIABLE


@dataclass(frozen=True)
class AllocatorStats:
    live_bytes: int
    live_buffers: int
    peak_live_bytes: int
    cache_bytes: int
    cached_blocks: int
    cap_bytes: int  # 0: unbounded
    cap_source: str
    device_allocations: int  # raw allocations (cudaMalloc)
    reuses: int  # requests served from the cache
    frees: int  # blocks given back to the driver
    device_free: int | None = None  # cudaMemGetInfo
    device_total: int | None = None
    pool_used: int | None = None  # CuPy's own memory pool
    pool_cached: int | None = None
    device_name: str = ""

    def format(self) -> str:
        cap = "unbounded" if self.cap_bytes == 0 else format_bytes(self.cap_bytes)
        lines = [
            f"isokernel CUDA allocator{' (' + self.device_name + ')' if self.device_name else ''}",
            f"  live      {format_bytes(self.live_bytes)} in {self.live_buffers} buffer(s) "
            f"(peak {format_bytes(self.peak_live_bytes)})",
            f"  cached    {format_bytes(self.cache_bytes)} in {self.cached_blocks} block(s) "
            f"for reuse; cap {cap} ({self.cap_source})",
            f"  traffic   {self.device_allocations} device allocation(s), {self.reuses} "
            f"reuse(s), {self.frees} block(s) freed",
        ]
        if self.device_total is not None:
            lines.append(f"  device    {format_bytes(self.device_free)} free of "
                         f"{format_bytes(self.device_total)} (cudaMemGetInfo)")
        if self.pool_used is not None:
            lines.append(f"  cupy pool {format_bytes(self.pool_used)} used, "
                         f"{format_bytes(self.pool_cached)} cached (CuPy's own allocations: "
                         f"library workspaces, CuPy temporaries)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class ReuseCache:
    """Exact-size block cache over a raw allocator.

    ``raw_alloc(nbytes) -> block`` and ``raw_free(block)`` talk to the
    device (``cudaMalloc``/``cudaFree`` through CuPy, or a fake in tests).
    Thread-safe."""

    def __init__(self, raw_alloc: Callable[[int], object], raw_free: Callable[[object], None],
                 cap: int = 0, cap_source: str = "given"):
        self._raw_alloc, self._raw_free = raw_alloc, raw_free
        self.cap, self.cap_source = int(cap), cap_source
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()
        self.live_bytes = self.live_buffers = self.peak_live_bytes = 0
        self.cache_bytes = self.cached_blocks = 0
        self.device_allocations = self.reuses = self.frees = 0

    @staticmethod
    def size_of(nbytes: int) -> int:
        return max(ALIGN, -(-int(nbytes) // ALIGN) * ALIGN)

    def acquire(self, nbytes: int) -> tuple[object, int]:
        """(block, its size): a cached block of exactly that size, else a new one."""
        size = self.size_of(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            if blocks:
                block = blocks.pop()
                self.cache_bytes -= size
                self.cached_blocks -= 1
                self.reuses += 1
            else:
                block = None
        if block is None:
            block = self._raw_alloc(size)
            with self._lock:
                self.device_allocations += 1
        with self._lock:
            self.live_bytes += size
            self.live_buffers += 1
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return block, size

    def release(self, block, size: int) -> None:
        """Back into the cache, or to the driver when the cap would be exceeded."""
        with self._lock:
            self.live_bytes -= size
            self.live_buffers -= 1
            keep = self.cap == 0 or self.cache_bytes + size <= self.cap
            if keep:
                self._free.setdefault(size, []).append(block)
                self.cache_bytes += size
                self.cached_blocks += 1
            else:
                self.frees += 1
        if not keep:
            self._raw_free(block)

    def clear(self) -> int:
        """Free every cached block; returns the bytes given back."""
        with self._lock:
            blocks = [b for bs in self._free.values() for b in bs]
            freed, self._free = self.cache_bytes, {}
            self.cache_bytes = self.cached_blocks = 0
            self.frees += len(blocks)
        for block in blocks:
            self._raw_free(block)
        return freed

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_live_bytes = self.live_bytes

    def stats(self, **device) -> AllocatorStats:
        with self._lock:
            return AllocatorStats(self.live_bytes, self.live_buffers, self.peak_live_bytes,
                                  self.cache_bytes, self.cached_blocks, self.cap,
                                  self.cap_source, self.device_allocations, self.reuses,
                                  self.frees, **device)
