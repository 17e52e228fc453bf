"""``inp.fft``: NumPy's discrete Fourier transforms, on the one ``fft``
primitive (``ops.SPECTRAL``: NumPy's pocketfft over trailing axes, NumPy's
default normalization).

Every function takes NumPy's arguments: ``n``/``s`` crop or zero-pad the
input along the transformed axes first, ``axis``/``axes`` are moved to the
end and back, and ``norm`` is ``"backward"`` (the default: the inverse
divides by the number of points), ``"ortho"`` (both by its square root) or
``"forward"``. The other norms scale the primitive's result afterwards
(NumPy scales inside the transform: the last bit may differ, within the
stated bound). Real inputs of ``fft`` become complex in their precision
(float32 to complex64), as NumPy 2 does; integer inputs complex128.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir import Op
from ..ir import dtypes as _dt
from ..ir.source import user_where
from ..record import bind
from ..record import frontend as F
from ..typing import Array, ArrayLike, Axis

NORMS = (None, "backward", "ortho", "forward")


def _norm(norm, name: str) -> str:
    if norm not in NORMS:
        raise ValueError(f"fft.{name} at {user_where()}: norm={norm!r}; one of "
                         f"'backward', 'ortho', 'forward'")
    return norm or "backward"


def _complex(x):
    dtype = F.dtype_of(x, "fft")[0]
    if dtype in _dt.COMPLEX:
        return x
    return F.astype(x, _dt.COMPLEX_OF[_dt.float_of(dtype)])


def _real(x):
    dtype = F.dtype_of(x, "fft")[0]
    if dtype in _dt.COMPLEX:
        raise TypeError(f"rfft at {user_where()}: expects a real input, got {dtype}; take "
                        f"inp.real first or use fft")
    return F.astype(x, _dt.float_of(dtype))


def _fit(x, axes, sizes):
    """``x`` cropped or zero-padded to ``sizes`` along ``axes`` (NumPy's n/s)."""
    shape = list(F.shape(x))
    for axis, size in zip(axes, sizes):
        n = shape[axis]
        if size < 1:
            raise ValueError(f"fft at {user_where()}: invalid number of points {size}")
        if size < n:
            key = [slice(None)] * len(shape)
            key[axis] = slice(0, size)
            x = F.getitem(x, tuple(key))
        elif size > n:
            widths = [(0, 0)] * len(shape)
            widths[axis] = (0, size - n)
            x = F.pad(x, widths)
        shape[axis] = size
    return x


def _axes(x, s, axes, name: str):
    rank = len(F.shape(x))
    if axes is None:
        axes = list(range(rank - len(s), rank)) if s is not None else list(range(rank))
    axes = [int(a) % rank if rank else int(a) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"fft.{name} at {user_where()}: repeated axes {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"fft.{name} at {user_where()}: s and axes of different lengths")
    return axes


def _transform(x, kind: str, axes, sizes, norm: str, inverse: bool):
    """The primitive over ``axes`` (moved to the end), its input fitted to
    ``sizes`` (the real lengths for irfft: the input takes size // 2 + 1
    along the last axis), then the norm's scale."""
    rank = len(F.shape(x))
    if any(n < 1 for n in sizes):
        raise ValueError(f"fft at {user_where()}: invalid number of points {tuple(sizes)} "
                         f"(an irfft of one point has 2 * (1 - 1) = 0: give n=)")
    fitted = list(sizes)
    if kind == "irfft":
        fitted[-1] = sizes[-1] // 2 + 1
    x = _fit(x, axes, fitted)
    order = [a for a in range(rank) if a not in axes] + list(axes)
    moved = F.transpose(x, order) if order != list(range(rank)) else x
    out = bind(Op.FFT, moved, kind=kind, lengths=tuple(int(n) for n in sizes))
    back = list(np.argsort(order))
    out = F.transpose(out, back) if order != list(range(rank)) else out
    points = math.prod(sizes)
    factor = {"backward": 1.0, "ortho": math.sqrt(points) if inverse else 1 / math.sqrt(points),
              "forward": float(points) if inverse else 1.0 / points}[norm]
    return out if factor == 1.0 else F.multiply(out, factor)


def _one(a, n, axis, norm, kind, name):
    x = _real(a) if kind == "rfft" else _complex(a) if kind != "irfft" else _complex(a)
    rank = len(F.shape(x))
    axis = int(axis) % rank
    length = F.shape(x)[axis]
    if n is None:
        n = 2 * (length - 1) if kind == "irfft" else length
    return _transform(x, kind, [axis], [int(n)], _norm(norm, name), kind in ("ifft", "irfft"))


def _many(a, s, axes, norm, kind, name):
    x = _real(a) if kind == "rfft" else _complex(a)
    axes = _axes(x, s, axes, name)
    shape = F.shape(x)
    if s is None:
        s = [shape[a] for a in axes]
        if kind == "irfft":
            s[-1] = 2 * (shape[axes[-1]] - 1)
    return _transform(x, kind, axes, [int(n) for n in s], _norm(norm, name),
                      kind in ("ifft", "irfft"))


def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    return _one(a, n, axis, norm, "fft", "fft")


def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    return _one(a, n, axis, norm, "ifft", "ifft")


def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    return _one(a, n, axis, norm, "rfft", "rfft")


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    return _one(a, n, axis, norm, "irfft", "irfft")


def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "fft", "fftn")


def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "ifft", "ifftn")


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "rfft", "rfftn")


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "irfft", "irfftn")


def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = (-2, -1),
         norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "fft", "fft2")


def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = (-2, -1),
          norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "ifft", "ifft2")


def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = (-2, -1),
          norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "rfft", "rfft2")


def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = (-2, -1),
           norm: str | None = None) -> Array:
    return _many(a, s, axes, norm, "irfft", "irfft2")


_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """NumPy ``hfft``: the real spectrum of a Hermitian signal,
    ``irfft(conj(a), n)`` with the norm's direction swapped."""
    _norm(norm, "hfft")
    return irfft(F.conj(_complex(a)), n, axis, _SWAP[norm])


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """NumPy ``ihfft``: ``conj(rfft(a, n))`` with the norm's direction
    swapped."""
    _norm(norm, "ihfft")
    return F.conj(rfft(a, n, axis, _SWAP[norm]))


def fftfreq(n: int, d: float = 1.0) -> Array:
    """NumPy ``fftfreq`` (a constant: ``n`` and ``d`` are static)."""
    return np.fft.fftfreq(int(n), d)


def rfftfreq(n: int, d: float = 1.0) -> Array:
    return np.fft.rfftfreq(int(n), d)


def fftshift(x: ArrayLike, axes: Axis = None) -> Array:
    """NumPy ``fftshift``: each axis rolled by half its length."""
    rank = len(F.shape(x))
    axes = list(range(rank)) if axes is None else (
        [axes] if isinstance(axes, int) else list(axes))
    shifts = [F.shape(x)[a] // 2 for a in axes]
    return F.roll(x, shifts, axes)


def ifftshift(x: ArrayLike, axes: Axis = None) -> Array:
    rank = len(F.shape(x))
    axes = list(range(rank)) if axes is None else (
        [axes] if isinstance(axes, int) else list(axes))
    shifts = [-(F.shape(x)[a] // 2) for a in axes]
    return F.roll(x, shifts, axes)


__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn"]
