"""The CUDA runtime of the GPU strategies: CuPy for arrays, streams and
library calls; isokernel's own NVRTC compile (see ``codegen.nvrtc``) for
every kernel, loaded as a cubin; launch shapes from the compiled kernel;
buffers from ``memory.ReuseCache``.

The kernels are compiled by isokernel rather than through CuPy's
``RawKernel(code=...)`` because CuPy adds ``-ftz=true`` to every program it
compiles, flushing float32 subnormals; isokernel's kernels keep them, as
NumPy does. Everything runs on CuPy's current stream, in order, so a
released buffer can be reused by the next launch without a wait.

The executables talk to a runtime only through the methods below, so the
tests drive them on the CPU with an emulating runtime (``tests/cuda_host.py``)
and the real one is used only where a GPU is present.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ...codegen import cache
from ...codegen import nvrtc as nvrtc_mod
from ...codegen.cuda import (
    CudaModule,
    ElementwiseKernel,
    HalvingKernels,
    ReductionKernels,
    TextureKernel,
    nvrtc_options,
)
from ...ir import IsokernelError
from .memory import ReuseCache, cap_from_environment

DEFAULT_BLOCK = 256
BLOCKS_PER_SM = 32  # grid-stride launches cap the grid at this many blocks per SM


class LaunchError(IsokernelError, RuntimeError):
    """A launch shape the compiled kernel cannot run."""


def launch_shape(count: int, max_threads: int, sm_count: int, kernel: str,
                 block: int | None = None, registers: int | None = None) -> tuple[int, int]:
    """(grid, block) for ``count`` threads of a grid-stride kernel. The
    default block (256) is capped by the compiled kernel's maximum threads
    per block, which cannot change any result; an explicit ``block`` is a
    fixed shape, refused with the limit when the kernel cannot take it."""
    if block is None:
        block = min(DEFAULT_BLOCK, max_threads)
    elif block > max_threads:
        regs = f" ({registers} registers per thread)" if registers is not None else ""
        raise LaunchError(f"kernel {kernel}: a block of {block} threads does not fit; its "
                          f"compiled limit is {max_threads} threads per block{regs}. Pass "
                          f"block_size <= {max_threads}, or leave it to the default")
    elif block < 1:
        raise LaunchError(f"kernel {kernel}: block size {block} must be positive")
    grid = max(1, min(-(-count // block), BLOCKS_PER_SM * max(1, sm_count)))
    return grid, block


class Kernel:
    """A loaded kernel: ``kernel(count, *args)`` launches enough threads for
    ``count`` work items (Python ints become ``int64_t``)."""

    def __init__(self, name: str, function, sm_count: int, block: int | None = None):
        self.name = name
        self._function = function
        self.max_threads_per_block = int(function.max_threads_per_block)
        self.registers = int(function.num_regs)
        self.sm_count = sm_count
        self.grid_block = functools.partial(launch_shape, max_threads=self.max_threads_per_block,
                                            sm_count=sm_count, kernel=name, block=block,
                                            registers=self.registers)

    def __call__(self, count: int, *args) -> None:
        if count <= 0:
            return
        grid, block = self.grid_block(count)
        converted = tuple(np.int64(a) if isinstance(a, (int, np.integer)) else a for a in args)
        self._function((grid,), (block,), converted)


def architecture(cc: int, supported) -> str:
    """``sm_XY`` (a cubin) when NVRTC knows the device, else PTX for the
    newest architecture it knows below it (the driver compiles that)."""
    if cc in supported:
        return f"sm_{cc}"
    below = [a for a in supported if a <= cc]
    if not below:
        raise LaunchError(f"NVRTC knows no architecture at or below sm_{cc} (it supports "
                          f"{', '.join(f'sm_{a}' for a in supported)})")
    return f"compute_{max(below)}"


class _Lease:
    """Owns one block while any array uses it; its release returns the
    block to the cache (CuPy keeps the owner alive through the memory
    object every view of the array shares)."""

    __slots__ = ("cache", "block", "size")

    def __init__(self, cache: ReuseCache, block, size: int):
        self.cache, self.block, self.size = cache, block, size

    def __del__(self):
        self.cache.release(self.block, self.size)


class CudaRuntime:
    """One CUDA device through CuPy."""

    kind = "cuda"

    def __init__(self, index: int = 0):
        import cupy

        self.cp = self.xp = cupy
        self.index = index
        self.device = cupy.cuda.Device(index)
        with self.device:
            props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.cc = int(self.device.compute_capability)
        self.sm_count = int(props["multiProcessorCount"])
        self.nvrtc = nvrtc_mod.require_nvrtc()
        self.arch = architecture(self.cc, self.nvrtc.archs)
        cap, source = cap_from_environment()
        self.memory = ReuseCache(self._raw_alloc, lambda block: None, cap, source)
        self._modules: dict[str, dict] = {}
        self._lock = threading.Lock()

    # --- buffers --------------------------------------------------------------------------

    def _raw_alloc(self, size: int):
        with self.device:
            return self.cp.cuda.Memory(size)  # cudaMalloc; freed when dropped

    def empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return self.cp.empty(shape, dtype)
        block, size = self.memory.acquire(nbytes)
        lease = _Lease(self.memory, block, size)
        memory = self.cp.cuda.UnownedMemory(block.ptr, size, lease, self.index)
        return self.cp.ndarray(shape, dtype, memptr=self.cp.cuda.MemoryPointer(memory, 0))

    def is_device(self, x) -> bool:
        return isinstance(x, self.cp.ndarray)

    def upload(self, x):
        """A host array copied to the device (explicit: the caller passed
        host arrays to a GPU strategy)."""
        host = np.asarray(x)
        if not host.flags.c_contiguous:
            host = host.copy(order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        out = self.empty(host.shape, host.dtype)
        if host.size:
            out.set(host)
        return out

    def contiguous(self, x):
        if x.flags.c_contiguous:
            return x
        out = self.empty(x.shape, x.dtype)
        out[...] = x
        return out

    def to_host(self, x):
        return x.get()

    def synchronize(self) -> None:
        self.device.synchronize()

    def activate(self):
        """A context in which this runtime's device is CuPy's current one."""
        return self.device

    # --- kernels --------------------------------------------------------------------------

    def load(self, source: str, names, options, block: int | None = None) -> dict[str, Kernel]:
        key = (source, tuple(options), block)
        with self._lock:
            found = self._modules.get(key)
            if found is None:
                built = nvrtc_mod.compile_cuda(source, self.arch, options, self.nvrtc)
                # the verified bytes, from a file of this process's private directory
                private = cache.private_copy(built.path.name, built.data)
                try:
                    with self.device:
                        module = self.cp.RawModule(path=str(private))
                        found = {n: Kernel(n, module.get_function(n), self.sm_count, block)
                                 for n in names}
                finally:
                    cache.remove(private)
                found["_built"] = built
                self._modules[key] = found
        return found

    def region_kernels(self, module: CudaModule, block: int | None = None) -> dict:
        return self.load(module.source, [k.name for k in module.kernels], module.options, block)

    def elementwise_kernel(self, kernel: ElementwiseKernel) -> Kernel:
        return self.load(kernel.source, [kernel.name], nvrtc_options(False))[kernel.name]

    def reduction_kernels(self, kernels: ReductionKernels) -> dict:
        names = [kernels.leaf, kernels.combine, kernels.fold, kernels.sequential]
        return self.load(kernels.source, names, nvrtc_options(False))

    def halving_kernel(self, kernels: HalvingKernels) -> Kernel:
        return self.load(kernels.source, [kernels.level], nvrtc_options(False))[kernels.level]

    def texture_kernel(self, kernel: TextureKernel) -> Kernel:
        return self.load(kernel.source, [kernel.name], nvrtc_options(False))[kernel.name]

    def texture(self, values: np.ndarray):
        """A 2-D float32 texture of a (layers, nodes) table: linear
        filtering, clamped addressing, unnormalized coordinates."""
        from cupy.cuda import runtime as rt
        from cupy.cuda import texture

        texels = np.ascontiguousarray(values, dtype=np.float32)
        layers, nodes = texels.shape
        channel = texture.ChannelFormatDescriptor(32, 0, 0, 0, rt.cudaChannelFormatKindFloat)
        with self.device:
            array = texture.CUDAarray(channel, nodes, layers)
            array.copy_from(texels)
            resource = texture.ResourceDescriptor(rt.cudaResourceTypeArray, cuArr=array)
            description = texture.TextureDescriptor(
                (rt.cudaAddressModeClamp, rt.cudaAddressModeClamp), rt.cudaFilterModeLinear,
                rt.cudaReadModeElementType, normalizedCoords=0)
            return texture.TextureObject(resource, description)

    # --- telemetry ------------------------------------------------------------------------

    def memory_stats(self):
        with self.device:
            free, total = self.cp.cuda.runtime.memGetInfo()
        pool = self.cp.get_default_memory_pool()
        return self.memory.stats(device_free=int(free), device_total=int(total),
                                 pool_used=int(pool.used_bytes()),
                                 pool_cached=int(pool.free_bytes()),
                                 device_name=f"cuda:{self.index} {self.name}")

    def describe(self) -> str:
        return (f"cuda:{self.index} {self.name} (sm_{self.cc}, {self.sm_count} SMs); kernels "
                f"for {self.arch} by {self.nvrtc.name}")


_RUNTIMES: dict[int, CudaRuntime] = {}
_RUNTIME_LOCK = threading.Lock()


def runtime(index: int = 0) -> CudaRuntime:
    """The process's runtime of ``cuda:index`` (created on first use)."""
    with _RUNTIME_LOCK:
        found = _RUNTIMES.get(index)
        if found is None:
            found = _RUNTIMES[index] = CudaRuntime(index)
        return found


def device_allocators() -> list[ReuseCache]:
    """The buffer caches of the runtimes created so far (none before a GPU
    strategy has run)."""
    with _RUNTIME_LOCK:
        return [rt.memory for rt in _RUNTIMES.values()]


def allocator_stats(index: int = 0):
    """The allocator report of ``cuda:index``: live and cached bytes, the cap,
    the driver's free/total memory and CuPy's pool."""
    return runtime(index).memory_stats()
