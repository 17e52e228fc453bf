"""A CUDA runtime emulated on the host, so the GPU executables run in CI.

It implements the runtime interface of ``isokernel.backends.cuda.runtime``
with NumPy arrays: buffers come from the same ``ReuseCache`` (leases over
uint8 blocks, released when the last view dies); region kernels run the
very C body of the CUDA source, compiled by the host C compiler through the
CPU wrapper; elementwise kernels apply the op's EVAL rule to the arguments
in the kernel's order (vectors, then scalars, then the output); reduction
kernels interpret their arguments as the CUDA code does, one launch at a
time, with ``codegen.reduce``'s NumPy helpers. What it checks is the
plumbing: argument order, contiguity, shapes, the launch sequence, buffer
release. The arithmetic of the CUDA build itself is checked on a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import types

import numpy as np

from isokernel import codegen
from isokernel.backends.cuda.memory import ReuseCache
from isokernel.backends.cuda.runtime import launch_shape
from isokernel.codegen import reduce as R
from isokernel.ir import EVAL


class _Lease:
    """Owns a block while any view of the array lives (NumPy keeps the
    non-array base of every view)."""

    def __init__(self, cache, block, size, shape, dtype):
        self.cache, self.block, self.size = cache, block, size
        self.__array_interface__ = {"data": (block.ctypes.data, False), "shape": tuple(shape),
                                    "typestr": np.dtype(dtype).str, "version": 3}

    def __del__(self):
        self.cache.release(self.block, self.size)


class HostKernel:
    def __init__(self, name, fn, max_threads=1024, registers=32, block=None):
        self.name, self.fn = name, fn
        self.max_threads_per_block, self.registers = max_threads, registers
        self.launches = 0
        self.grid_block = functools.partial(launch_shape, max_threads=max_threads, sm_count=132,
                                            kernel=name, block=block, registers=registers)

    def __call__(self, count, *args):
        if count <= 0:
            return
        self.grid_block(count)
        self.launches += 1
        self.fn(*args)


class HostRuntime:
    kind = "host-emulation"
    xp = np
    name = "host emulation"

    def __init__(self, cap: int = 0, max_threads: int = 1024, compile_elementwise=False):
        self.memory = ReuseCache(lambda n: np.empty(n, np.uint8), lambda b: None, cap, "test")
        self.max_threads = max_threads
        self.compile_elementwise = compile_elementwise  # the kernel's C body, not EVAL
        self.kernels: dict[str, HostKernel] = {}

    def empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        block, size = self.memory.acquire(nbytes)
        return np.asarray(_Lease(self.memory, block, size, shape, dtype))

    def is_device(self, x) -> bool:
        return isinstance(x, np.ndarray) and isinstance(x.base, _Lease)

    def upload(self, x):
        host = np.asarray(x)
        if not host.flags.c_contiguous:
            host = host.copy(order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        out = self.empty(host.shape, host.dtype)
        out[...] = host
        return out

    def contiguous(self, x):
        if x.flags.c_contiguous:
            return x
        out = self.empty(x.shape, x.dtype)
        out[...] = x
        return out

    def to_host(self, x):
        return np.array(x)

    def synchronize(self):
        pass

    def activate(self):
        return contextlib.nullcontext()

    def _kernel(self, name, fn, block=None):
        kernel = HostKernel(name, fn, self.max_threads, block=block)
        self.kernels[name] = kernel
        return kernel

    def region_kernels(self, module, block=None):
        library = _host_library([(k.body, k.name) for k in module.kernels],
                                not self.compile_elementwise)
        return {k.name: self._kernel(k.name, _region_call(getattr(library, k.name)), block)
                for k in module.kernels}

    def elementwise_kernel(self, spec):
        if self.compile_elementwise:
            library = _host_library([(spec.body, spec.name)], vector_math=False)
            return self._kernel(spec.name, _region_call(getattr(library, spec.name)))
        return self._kernel(spec.name, functools.partial(_elementwise, spec))

    def reduction_kernels(self, spec):
        op = spec.op
        parts = {spec.leaf: functools.partial(_leaf, op), spec.combine: functools.partial(
            _combine, op), spec.fold: functools.partial(_fold, op),
            spec.sequential: functools.partial(_sequential, op)}
        return {name: self._kernel(name, fn) for name, fn in parts.items()}

    def halving_kernel(self, spec):
        return self._kernel(spec.level, functools.partial(_halving, spec.op))

    def texture(self, values):
        return np.ascontiguousarray(values, dtype=np.float32)

    def texture_kernel(self, spec):
        return self._kernel(spec.name, _texture)

    def memory_stats(self):
        return self.memory.stats(device_name="host emulation")

    def describe(self):
        return "host emulation of a CUDA device (tests)"


def _host_library(pairs, vector_math=True):
    """The bodies compiled for the host, through the CPU wrapper. With
    compiled elementwise kernels too, scalar libm everywhere: a vectorized
    libmvec call in one kernel and a scalar one in another would differ
    (a host artifact: on the GPU every kernel calls libdevice alike)."""
    cc = codegen.current_compiler()
    vector_math = vector_math and cc.vector_math
    library, _ = codegen.build(codegen.host_source(pairs, "emulated", vector_math))
    return library


def _region_call(fn):
    import ctypes

    def call(*args):
        *arrays, rows = args
        fn.argtypes = [ctypes.c_void_p] * len(arrays) + [ctypes.c_int64, ctypes.c_int64,
                                                         ctypes.c_void_p]  # + a stop flag
        for a in arrays:
            assert a.flags.c_contiguous, "region kernels take contiguous buffers"
        fn(*(a.ctypes.data for a in arrays), 0, rows, None)
    return call


def _elementwise(spec, *args):
    *arrays, out, rows = args
    assert out.flags.c_contiguous and out.size == rows
    operands = [None] * (len(spec.vectors) + len(spec.scalars))
    for k, a in zip(spec.vectors, arrays[:len(spec.vectors)]):
        assert a.flags.c_contiguous and a.size == rows, "vector operands are contiguous"
        operands[k] = a.reshape(-1)
    for k, a in zip(spec.scalars, arrays[len(spec.vectors):]):
        assert a.size == 1, "scalar operands are one element"
        operands[k] = np.broadcast_to(a.reshape(()), (rows,))
    with np.errstate(all="ignore"):
        out.reshape(-1)[...] = EVAL[spec.op](*operands, **spec.attrs)


def _leaf(op, x, vals, offset, length, node, leaves, size, nodes, rows):
    tree = types.SimpleNamespace(leaf_offset=offset, leaf_length=length, leaf_node=node,
                                 nodes=nodes)
    with np.errstate(all="ignore"):
        found = R._leaves(op, x.reshape(-1)[: rows * size].reshape(rows, size), tree)
    vals.reshape(rows, nodes)[:, node] = found[:, node]


def _combine(op, vals, parent, left, right, count, nodes, rows):
    v = vals.reshape(rows, nodes)
    with np.errstate(all="ignore"):
        v[:, parent] = R._combine(op)(v[:, left], v[:, right])


def _fold(op, part, out, outputs, chunks, stride):
    p = part.reshape(-1)[: outputs * chunks * stride].reshape(outputs * chunks, stride)[:, 0]
    with np.errstate(all="ignore"):
        out.reshape(-1)[:] = R._fold(op, p.reshape(outputs, chunks))


def _sequential(op, x, out, outputs, length, nan_first):
    y = x.reshape(outputs, length)
    with np.errstate(all="ignore"):
        found = R._fold(op, y)
        if nan_first:  # NumPy's own NaN when the first element is NaN
            found = np.where(np.isnan(y[:, 0]), np.array(np.nan, y.dtype), found)
        out.reshape(-1)[:] = found


def _halving(op, r, blocks, block, n_full, n_last, cols):
    """One level of the halving tree in every block, as the kernel does it."""
    v = r.reshape(-1, cols)
    with np.errstate(all="ignore"):
        for k in range(blocks):
            n = n_last if k == blocks - 1 else n_full
            h = (n + 1) // 2
            low = v[k * block: k * block + n - h]
            low[...] = R._combine(op)(low, v[k * block + h: k * block + n])


def _texture(x, layer, out, table, x0, spacing, last_node, last_layer, rows):
    """Texture filtering as the hardware does it: the fraction rounded to
    8 bits, float32 texels, clamped addressing (tests only)."""
    with np.errstate(all="ignore"):
        u = (x - x0) / spacing
        bad = np.isnan(u) | np.isnan(layer)
        uc = np.minimum(np.maximum(np.where(bad, 0, u), 0), last_node).astype(np.float32)
        lc = np.minimum(np.maximum(np.trunc(np.where(bad, 0, layer)), 0), last_layer)
        i = np.floor(uc)
        alpha = np.round((uc - i) * 256) / np.float32(256)
        lo = i.astype(np.int64)
        hi = np.minimum(lo + 1, table.shape[1] - 1)
        row = lc.astype(np.int64)
        texel = (1 - alpha) * table[row, lo] + alpha * table[row, hi]
        out[...] = np.where(bad, np.nan, texel).astype(out.dtype)
