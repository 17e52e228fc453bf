"""Fourier layers (the spectral convolution of Fourier neural operators,
Li et al. 2021): the input's low frequencies mixed across channels by
complex weights, the rest dropped, transformed back. Composed from
``inp.fft`` and complex ``einsum``, so the derivatives and batching come
from theirs."""

from __future__ import annotations

from .. import numpy as inp
from ..ops import complex as _complex
from ..typing import Array, ArrayLike


def spectral_conv1d(x: ArrayLike, w_real: ArrayLike, w_imag: ArrayLike, modes: int) -> Array:
    """x (N, C, L) real -> (N, O, L): ``irfft`` of the first ``modes``
    frequencies of ``rfft(x)`` times the complex weights ``w_real + i
    w_imag`` (C, O, modes), the others zero. The weights come as two real
    arrays, so optimizers see real parameters."""
    n = inp.shape(x)[-1]
    if not 1 <= modes <= n // 2 + 1:
        raise ValueError(f"spectral_conv1d: modes={modes} for a length of {n} (at most "
                         f"{n // 2 + 1})")
    spectrum = inp.fft.rfft(x)[..., :modes]  # (N, C, modes)
    w = _complex(w_real, w_imag)
    mixed = inp.einsum("ncm,com->nom", spectrum, w)
    full = inp.pad(mixed, ((0, 0), (0, 0), (0, n // 2 + 1 - modes)))
    return inp.fft.irfft(full, n=n)


def spectral_conv2d(x: ArrayLike, w_real: ArrayLike, w_imag: ArrayLike,
                    modes: tuple[int, int]) -> Array:
    """x (N, C, H, W) real -> (N, O, H, W): the 2-D layer. The kept
    frequencies are the first ``modes[0]`` and last ``modes[0]`` rows (the
    positive and negative ones along H) by the first ``modes[1]`` columns of
    ``rfft2(x)``; the weights (2, C, O, modes[0], modes[1]) as real and
    imaginary parts, one block for each of the two row ranges."""
    h, wdt = inp.shape(x)[-2:]
    m1, m2 = modes
    if not (1 <= m2 <= wdt // 2 + 1 and 1 <= m1 and 2 * m1 <= h):
        raise ValueError(f"spectral_conv2d: modes={modes} for {h}x{wdt} (at most "
                         f"{h // 2} rows and {wdt // 2 + 1} columns)")
    spectrum = inp.fft.rfft2(x)  # (N, C, H, W // 2 + 1)
    w = _complex(w_real, w_imag)
    top = inp.einsum("nchw,cohw->nohw", spectrum[:, :, :m1, :m2], w[0])
    bottom = inp.einsum("nchw,cohw->nohw", spectrum[:, :, h - m1:, :m2], w[1])
    cols = ((0, 0), (0, 0), (0, 0), (0, wdt // 2 + 1 - m2))
    middle = inp.zeros((inp.shape(top)[0], inp.shape(top)[1], h - 2 * m1, wdt // 2 + 1),
                       top.dtype)
    full = inp.concatenate([inp.pad(top, cols), middle, inp.pad(bottom, cols)], axis=2)
    return inp.fft.irfft2(full, s=(h, wdt))
