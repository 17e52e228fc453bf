"""The reuse cache of the GPU strategies on a fake allocator: the cap parser
(decimal bytes; malformed and overflowing values warned about and ignored),
exact-size reuse, the cap on released blocks, and the formatted report."""

from __future__ import annotations

import pytest

from isokernel.backends.cuda import memory as M


class FakeDevice:
    """cudaMalloc/cudaFree as counters."""

    def __init__(self):
        self.allocated, self.freed, self.next = [], [], 0

    def alloc(self, size):
        self.next += 1
        block = (self.next, size)
        self.allocated.append(block)
        return block

    def free(self, block):
        self.freed.append(block)


@pytest.mark.parametrize("text,cap,warns", [
    (None, 0, False), ("", 0, False), ("  ", 0, False), ("0", 0, False),
    ("536870912", 512 * 2**20, False), (" 4096 ", 4096, False),
    (str(2**64 - 1), 2**64 - 1, False),
    (str(2**64), 0, True), ("99999999999999999999999", 0, True),
    ("512MB", 0, True), ("-1", 0, True), ("1e9", 0, True), ("0x100", 0, True),
    ("12 34", 0, True), ("²", 0, True),
])
def test_cap_parser(text, cap, warns):
    value, warning = M.parse_cap(text)
    assert value == cap and (warning is not None) == warns
    if warns:
        assert M.CAP_VARIABLE in warning and "ignored" in warning


def test_malformed_environment_value_warns_once_and_is_ignored(monkeypatch):
    monkeypatch.setenv(M.CAP_VARIABLE, "512MB")
    with pytest.warns(M.CacheCapWarning, match="not a decimal byte count"):
        cap, source = M.cap_from_environment()
    assert cap == 0 and "ignored" in source
    monkeypatch.setenv(M.CAP_VARIABLE, str(2**70))
    with pytest.warns(M.CacheCapWarning, match="overflows"):
        assert M.cap_from_environment()[0] == 0
    monkeypatch.setenv(M.CAP_VARIABLE, "1024")
    assert M.cap_from_environment() == (1024, M.CAP_VARIABLE)
    monkeypatch.delenv(M.CAP_VARIABLE)
    assert M.cap_from_environment() == (0, f"{M.CAP_VARIABLE} unset")


def test_released_blocks_are_reused_by_exact_size():
    dev = FakeDevice()
    cache = M.ReuseCache(dev.alloc, dev.free)
    a, size = cache.acquire(1000)
    assert size == 1024 and cache.live_bytes == 1024
    cache.release(a, size)
    assert (cache.live_bytes, cache.cache_bytes, cache.cached_blocks) == (0, 1024, 1)
    b, _ = cache.acquire(1000)  # the same size class: reused
    assert b is a and cache.reuses == 1 and len(dev.allocated) == 1
    c, _ = cache.acquire(5000)  # another size: a new device allocation
    assert c is not a and len(dev.allocated) == 2
    assert cache.peak_live_bytes == 1024 + 5120


def test_the_cap_bounds_released_blocks_only():
    dev = FakeDevice()
    cache = M.ReuseCache(dev.alloc, dev.free, cap=2048, cap_source="test")
    blocks = [cache.acquire(1024) for _ in range(4)]
    assert cache.live_bytes == 4096  # live buffers are never limited
    for block, size in blocks:
        cache.release(block, size)
    assert cache.cache_bytes == 2048 and cache.cached_blocks == 2
    assert dev.freed == [blocks[2][0], blocks[3][0]] and cache.frees == 2
    big, size = cache.acquire(4096)  # bigger than the cap: freed on release, never cached
    cache.release(big, size)
    assert cache.cache_bytes == 2048 and dev.freed[-1] is big


def test_unbounded_cache_keeps_everything_and_clear_frees_it():
    dev = FakeDevice()
    cache = M.ReuseCache(dev.alloc, dev.free, cap=0)
    held = [cache.acquire(n) for n in (256, 512, 100_000)]
    for block, size in held:
        cache.release(block, size)
    assert cache.cached_blocks == 3 and not dev.freed
    assert cache.clear() == 256 + 512 + cache.size_of(100_000)
    assert len(dev.freed) == 3 and cache.cache_bytes == 0


def test_report_names_every_figure():
    dev = FakeDevice()
    cache = M.ReuseCache(dev.alloc, dev.free, cap=512 * 2**20, cap_source=M.CAP_VARIABLE)
    block, size = cache.acquire(3 * 2**20)
    text = cache.stats(device_free=10 * 2**30, device_total=80 * 2**30, pool_used=0,
                       pool_cached=2**20, device_name="cuda:0 Fake").format()
    assert "live      3.0 MiB in 1 buffer(s)" in text
    assert "cap 512.0 MiB (ISOKERNEL_CUDA_CACHE_CAP_BYTES)" in text
    assert "10.0 GiB free of 80.0 GiB (cudaMemGetInfo)" in text and "cupy pool" in text
    assert "1 device allocation(s)" in text and str(cache.stats()).startswith("isokernel CUDA")
    cache.release(block, size)
    assert "unbounded" in M.ReuseCache(dev.alloc, dev.free).stats().format()
