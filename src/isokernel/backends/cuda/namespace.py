"""The array namespace of a device runtime (``ir.eval.ArrayNamespace``): the
functions an op's one meaning (``ir.eval.EVAL_XP``) calls, over the runtime's
arrays (CuPy's, or the host emulation's), every result allocated by
isokernel's allocator (``memory.ReuseCache``: counted, capped, reused), and
bodies run by the executor's device rules.

What a function computes is NumPy's: a copy is element for element, ``where``
copies ``y`` and then ``x`` where the condition holds, the sum is the ufunc's,
the product cuBLAS's through ``matmul``. ``any`` brings its answer to the host
(the one value a loop's step reads there)."""

from __future__ import annotations

import math

import numpy as np


class DeviceNamespace:
    """``ArrayNamespace`` over ``runtime``'s arrays; ``run_graph(graph, args)``
    runs a closed sub-graph on the device (``DeviceExecutor.run_graph``)."""

    def __init__(self, runtime, run_graph):
        self.rt = runtime
        self.run_graph = run_graph

    def empty(self, shape, dtype):
        return self.rt.empty(tuple(shape), dtype)

    def zeros(self, shape, dtype):
        return self.full(shape, 0, dtype)

    def full(self, shape, fill_value, dtype):
        out = self.empty(shape, dtype)
        out[...] = fill_value
        return out

    def copy(self, x):
        return self.full(x.shape, x, x.dtype)

    def reshape(self, x, shape):
        """A view where the layout allows one; otherwise a contiguous copy
        first."""
        if not x.flags.c_contiguous and math.prod(shape) > 1:
            x = self.rt.contiguous(x)
        return x.reshape(tuple(shape))

    def broadcast_to(self, x, shape):
        return self.rt.xp.broadcast_to(x, shape)

    def transpose(self, x, axes):
        return x.transpose(axes)

    def flip(self, x, axis):
        return self.rt.xp.flip(x, axis)

    def concatenate(self, arrays, axis):
        shape = list(arrays[0].shape)
        shape[axis] = sum(x.shape[axis] for x in arrays)
        out = self.empty(shape, arrays[0].dtype)
        self.rt.xp.concatenate(arrays, axis=axis, out=out)
        return out

    def matmul(self, a, b):
        shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
        out = self.empty(shape, np.result_type(a.dtype, b.dtype))
        self.rt.xp.matmul(a, b, out=out)
        return out

    def where(self, condition, x, y):
        shape = np.broadcast_shapes(condition.shape, x.shape, y.shape)
        out = self.full(shape, y, np.result_type(x.dtype, y.dtype))
        self.rt.xp.copyto(out, x, where=condition)
        return out

    def add(self, x, y):
        out = self.empty(np.broadcast_shapes(x.shape, y.shape), np.result_type(x.dtype, y.dtype))
        self.rt.xp.add(x, y, out=out)
        return out

    def any(self, x) -> bool:
        return bool(np.asarray(self.rt.to_host(x)).any())

    def ndim(self, x) -> int:
        return x.ndim

    def shape(self, x) -> tuple:
        return x.shape

    def result_type(self, x):
        return x.dtype
