"""Convolution and pooling in PyTorch's layout: x (N, C, *spatial), w
(O, C, *kernel), 1-D and 2-D (3-D works the same way).

Both gather the kernel's window offsets as strided slices of the padded
input (``_patches``, an im2col), then a convolution is one ``dot_general``
over (channel, window) — NumPy's BLAS matmul on the CPU — and a pooling one
reduction over the window.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

from .. import numpy as inp
from ..ir import ShapeError
from ..ir.source import user_where
from ..typing import Array, ArrayLike

LETTERS = "hijklm"
PADDING = ("padding is an int, one int or one (low, high) pair per spatial axis, or 'SAME' / "
           "'VALID'")


def _per_axis(value, rank: int, name: str, what: str) -> tuple[int, ...]:
    values = (value,) * rank if isinstance(value, int) else tuple(value)
    if len(values) != rank or any(operator.index(v) < 1 for v in values):
        raise ShapeError(f"{name} at {user_where()}: {what} {value!r} needs one positive int "
                         f"or {rank} of them")
    return tuple(operator.index(v) for v in values)


def _pads(padding, sizes, windows, strides, name: str):
    """One (low, high) pair per spatial axis; 'SAME' as JAX and TensorFlow
    (output size ceil(n / stride), the extra element on the high side)."""
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        if padding.upper() == "VALID":
            return [(0, 0)] * len(sizes)
        pads = []
        for n, w, s in zip(sizes, windows, strides):
            total = max((-(-n // s) - 1) * s + w - n, 0)
            pads.append((total // 2, total - total // 2))
        return pads
    if isinstance(padding, int):
        return [(padding, padding)] * len(sizes)
    items = tuple(padding)
    if len(items) != len(sizes) or isinstance(padding, str):
        raise ShapeError(f"{name} at {user_where()}: {PADDING}; got {padding!r}")
    return [(p, p) if isinstance(p, int) else tuple(p) for p in items]


def _patches(x, kernel, strides, dilation):
    """(N, C, prod(kernel), *out) windows of x (N, C, *spatial), already padded."""
    sizes = inp.shape(x)[2:]
    out = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(sizes, kernel, strides, dilation)]
    if any(o < 1 for o in out):
        raise ShapeError(f"conv/pool at {user_where()}: the window {kernel} (dilation "
                         f"{dilation}) is larger than the padded input {sizes}; pad more "
                         f"or use a smaller window")
    slices = []
    for offsets in itertools.product(*[range(k) for k in kernel]):
        index = [slice(None), slice(None)]
        for i, (o, s, d) in enumerate(zip(offsets, strides, dilation)):
            index.append(slice(o * d, o * d + (out[i] - 1) * s + 1, s))
        slices.append(inp.expand_dims(x[tuple(index)], 2))
    return inp.concatenate(slices, 2), out


def _batched(x, rank: int, name: str):
    """x with a batch axis (PyTorch accepts (C, *spatial) unbatched)."""
    ndim = inp.ndim(x)
    if ndim == rank + 1:
        return inp.expand_dims(x, 0), True
    if ndim != rank + 2:
        raise ShapeError(f"{name} at {user_where()}: x has rank {ndim}; expected (N, C, "
                         f"*spatial) or (C, *spatial) with {rank} spatial axes")
    return x, False


def conv(x: ArrayLike, w: ArrayLike, stride: int | Sequence[int] = 1,
         padding: int | str | Sequence[Any] = 0, dilation: int | Sequence[int] = 1,
         groups: int = 1) -> Array:
    """Cross-correlation as PyTorch's ``conv1d``/``conv2d`` (bias-free;
    add ``b[:, None, None]``): x (N, C, *spatial), w (O, C // groups,
    *kernel) -> (N, O, *out). ``padding`` pads with zeros: an int, one per
    axis, (low, high) pairs, or 'SAME'/'VALID'. ``groups``: input and output
    channels split into that many independent groups (``groups=C``: depthwise)."""
    rank = inp.ndim(w) - 2
    x, unbatched = _batched(x, rank, "conv")
    _check_channels(inp.shape(x), inp.shape(w), groups)
    kernel = inp.shape(w)[2:]
    strides = _per_axis(stride, rank, "conv", "stride")
    dilation = _per_axis(dilation, rank, "conv", "dilation")
    windows = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    pads = _pads(padding, inp.shape(x)[2:], windows, strides, "conv")
    x = inp.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
    patches, out = _patches(x, kernel, strides, dilation)
    patches = inp.reshape(patches, inp.shape(patches)[:2] + tuple(kernel) + tuple(out))
    y = _contract(patches, w, groups, rank)
    return y[0] if unbatched else y


def _check_channels(x_shape, w_shape, groups: int) -> None:
    channels, out_channels = x_shape[1], w_shape[0]
    if channels != w_shape[1] * groups or out_channels % groups:
        raise ShapeError(f"conv at {user_where()}: x has {channels} channels, w (O, C // "
                         f"groups, *kernel) expects {w_shape[1]} x {groups} groups and O = "
                         f"{out_channels} divisible by groups")


def _contract(patches, w, groups: int, rank: int):
    """(N, C, *kernel, *out) with (O, C // groups, *kernel) -> (N, O, *out)."""
    if groups == 1:
        window_axes = tuple(range(1, rank + 2))
        return inp.moveaxis(inp.tensordot(patches, w, (window_axes, window_axes)), -1, 1)
    n, c, *rest = inp.shape(patches)
    patches = inp.reshape(patches, (n, groups, c // groups, *rest))
    w = inp.reshape(w, (groups, inp.shape(w)[0] // groups, *inp.shape(w)[1:]))
    kernel, out = "".join(LETTERS[:rank]), "".join(LETTERS[rank:2 * rank])
    y = inp.einsum(f"ngc{kernel}{out},gfc{kernel}->ngf{out}", patches, w)
    return inp.reshape(y, (n, groups * inp.shape(w)[1], *inp.shape(y)[3:]))


def _pool(x, kernel_size, stride, padding, fill, name: str):
    rank = len(kernel_size) if not isinstance(kernel_size, int) else inp.ndim(x) - 2
    x, unbatched = _batched(x, rank, name)
    kernel = _per_axis(kernel_size, rank, name, "kernel_size")
    strides = kernel if stride is None else _per_axis(stride, rank, name, "stride")
    pads = _pads(padding, inp.shape(x)[2:], kernel, strides, name)
    x = inp.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads], constant_values=fill)
    patches, _ = _patches(x, kernel, strides, (1,) * rank)
    return patches, unbatched


def max_pool(x: ArrayLike, kernel_size: int | Sequence[int],
             stride: int | Sequence[int] | None = None,
             padding: int | str | Sequence[Any] = 0) -> Array:
    """PyTorch's ``max_pool1d``/``max_pool2d`` (x (N, C, *spatial); an int
    ``kernel_size`` means every spatial axis of a batched x): padding is
    -inf, ``stride`` defaults to ``kernel_size``. Where a window has tied
    maxima its gradient is shared equally among them (isokernel's max
    convention; PyTorch and JAX give it all to one)."""
    patches, unbatched = _pool(x, kernel_size, stride, padding, -inp.inf, "max_pool")
    y = inp.max(patches, 2)
    return y[0] if unbatched else y


def avg_pool(x: ArrayLike, kernel_size: int | Sequence[int],
             stride: int | Sequence[int] | None = None,
             padding: int | str | Sequence[Any] = 0) -> Array:
    """PyTorch's ``avg_pool1d``/``avg_pool2d`` with ``count_include_pad=True``:
    the window's sum (zero padding included) over the window's size."""
    patches, unbatched = _pool(x, kernel_size, stride, padding, 0.0, "avg_pool")
    y = inp.sum(patches, 2) / float(inp.shape(patches)[2])
    return y[0] if unbatched else y
