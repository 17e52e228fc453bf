"""Complex arithmetic on (real, imaginary) pairs of real arrays.

isokernel's vocabulary is real: every op is an IEEE operation on float32 or
float64, so a complex number is carried as two arrays. These helpers are the
textbook formulas, written branch-free so that every strategy computes them
the same way; each returns a ``(re, im)`` tuple.
"""

from __future__ import annotations

from ... import numpy as inp


def cmul(a_re, a_im, b_re, b_im):
    """(a·b): (a_re·b_re − a_im·b_im) + i(a_re·b_im + a_im·b_re)."""
    return a_re * b_re - a_im * b_im, a_re * b_im + a_im * b_re


def cabs2(re, im):
    """|z|² = re² + im² (no square root: reflectivities need only this)."""
    return re * re + im * im


def cdiv(a_re, a_im, b_re, b_im):
    """a / b = a·conj(b) / |b|². Plain (unscaled) form: the operands here
    are permittivities and reflection amplitudes of order 1 to 100, far from
    overflow."""
    denom = cabs2(b_re, b_im)
    return (a_re * b_re + a_im * b_im) / denom, (a_im * b_re - a_re * b_im) / denom


def csqrt(re, im):
    """Principal square root √z, real part ≥ 0, branch cut on the negative
    real axis (a zero imaginary part counts as +0, so √−4 = +2i).

    With t = √((|re| + |z|)/2): for re ≥ 0, √z = t + i·im/(2t); for re < 0,
    √z = |im|/(2t) + i·sign(im)·t. Both forms avoid the cancellation of
    √((|z| − re)/2) (Kahan, "Branch cuts for complex elementary functions",
    1987). ``t`` is zero only at z = 0, where the result is 0.
    """
    modulus = inp.hypot(re, im)
    t = inp.sqrt((inp.abs(re) + modulus) * 0.5)
    safe = inp.where(t == 0.0, 1.0, t)
    other = inp.where(t == 0.0, 0.0, inp.abs(im) / (2.0 * safe))
    right = re >= 0.0
    out_re = inp.where(right, t, other)
    signed_t = inp.where(im < 0.0, -t, t)
    out_im = inp.where(right, inp.where(t == 0.0, 0.0, im / (2.0 * safe)), signed_t)
    return out_re, out_im
