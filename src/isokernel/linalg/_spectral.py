"""QR, symmetric eigendecomposition and SVD (primitives ``qr``, ``eigh``,
``svd``), and what composes from them: ``eigvalsh``, ``pinv``, ``lstsq``.
NumPy's names, result tuples and defaults, batched over leading axes.

Derivatives (``transforms/jvp.py``): ``qr`` for tall or square matrices in
mode 'reduced'; ``eigh`` and ``svd`` by the standard perturbation formulas,
where the eigenvector (singular vector) tangents divide by the gaps
``w_j - w_i`` (``s_j² - s_i²``). A gap within rounding of zero (at most
n · eps · max|w|: a repeated eigenvalue, which LAPACK returns only to
rounding) is treated as zero and its factor taken as 0, not 1/gap: the
derivatives of the eigenvalues, and of anything invariant to a rotation
inside the repeated eigenspace (its projector, sums over it), are then
right (tested against finite differences, where JAX's 1/gap gives values of
order 1/eps); the derivative of an individual eigenvector there is not
defined and what is returned is one choice among many. ``svd``'s tangent
divides by the singular values for non-square matrices: a zero singular
value gives inf.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..ir import Op, ShapeError
from ..ir.source import user_where
from ..record import bind
from ..record import frontend as F
from ._dense import _float, _same_dtype, _square


class QRResult(NamedTuple):
    Q: object
    R: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class LstsqResult(NamedTuple):
    x: object
    residuals: object
    rank: object
    s: object


def _matrices(a, name: str):
    a = _float(a, name, "a")
    if a.ndim < 2:
        raise ShapeError(f"{name} at {user_where()}: a must hold matrices in its last two "
                         f"axes, got shape {tuple(a.shape)}; pass (..., m, n)")
    return a


def qr(a, mode: str = "reduced"):
    """NumPy's ``linalg.qr``: modes 'reduced' (default), 'complete', 'r'."""
    a = _matrices(a, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr at {user_where()}: mode {mode!r} is not supported; use "
                         f"'reduced', 'complete' or 'r' ('raw' is LAPACK's internal form)")
    q, r = bind(Op.QR, a, mode="complete" if mode == "complete" else "reduced")
    return r if mode == "r" else QRResult(q, r)


def eigh(a, UPLO: str = "L"):  # noqa: N803 - NumPy's name
    """NumPy's ``linalg.eigh``: eigenvalues ascending and eigenvectors (as
    columns) of symmetric matrices, from the triangle ``UPLO`` names."""
    a = _square(a, "eigh")
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh at {user_where()}: UPLO={UPLO!r} is not 'L' or 'U'")
    return EighResult(*bind(Op.EIGH, a, lower=UPLO == "L"))


def eigvalsh(a, UPLO: str = "L"):  # noqa: N803 - NumPy's name
    return eigh(a, UPLO).eigenvalues


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """NumPy's ``linalg.svd`` (``hermitian`` is accepted and computes the
    general decomposition: the same singular values)."""
    a = _matrices(a, "svd")
    u, s, vh = bind(Op.SVD, a, full_matrices=bool(full_matrices and compute_uv))
    return SVDResult(u, s, vh) if compute_uv else s


_NO_VALUE = object()


def _pinv_cutoff(a, rcond, rtol):
    """NumPy 2's rule: rcond 1e-15 unless ``rtol`` is given (None: max(m,
    n) · eps)."""
    if rcond is not None and rtol is not _NO_VALUE:
        raise ValueError(f"pinv at {user_where()}: pass rcond or rtol, not both")
    if rcond is not None:
        return rcond
    if rtol is _NO_VALUE:
        return 1e-15
    return max(a.shape[-2:]) * np.finfo(a.dtype).eps if rtol is None else rtol


def _inverse_above(s, cutoff):
    """1/s where s > cutoff, else 0 (never divides by a small value)."""
    large = s > cutoff
    return F.where(large, 1.0 / F.where(large, s, F.ones_like(s)), F.zeros_like(s))


def _pinv_parts(a, rcond):
    u, s, vh = bind(Op.SVD, a, full_matrices=False)
    cutoff = F.multiply(rcond, F.max(s, axis=-1, keepdims=True))
    return u, s, vh, cutoff


def pinv(a, rcond=None, hermitian: bool = False, *, rtol=_NO_VALUE):
    """NumPy's ``linalg.pinv``: V diag(1/s) Uᵀ over the singular values above
    ``rcond`` times the largest."""
    a = _matrices(a, "pinv")
    u, s, vh, cutoff = _pinv_parts(a, _pinv_cutoff(a, rcond, rtol))
    scaled = F.swapaxes(u, -1, -2) * F.expand_dims(_inverse_above(s, cutoff), -1)
    return F.matmul(F.swapaxes(vh, -1, -2), scaled)


def lstsq(a, b, rcond=None):
    """NumPy's ``linalg.lstsq`` by the SVD (as gelsd): ``(x, residuals,
    rank, s)``, singular values at or below ``rcond`` (default eps · max(m,
    n)) times the largest treated as zero. ``residuals`` (squared 2-norms of
    ``b - a x`` per column) has a static shape: computed whenever m > n
    (NumPy returns an empty array for a rank-deficient ``a``), empty
    otherwise."""
    a = _matrices(a, "lstsq")
    b = _float(b, "lstsq", "b")
    _same_dtype(a, b, "lstsq")
    m, n = a.shape[-2:]
    if b.shape[0 if b.ndim == 1 else -2] != m:
        raise ShapeError(f"lstsq at {user_where()}: b of shape {tuple(b.shape)} does not fit "
                         f"a of shape {tuple(a.shape)}; b needs {m} rows")
    rcond = max(m, n) * np.finfo(a.dtype).eps if rcond is None else rcond
    u, s, vh, cutoff = _pinv_parts(a, rcond)
    column = b if b.ndim > 1 else F.reshape(b, (m, 1))
    coeffs = F.matmul(F.swapaxes(u, -1, -2), column) * F.expand_dims(
        _inverse_above(s, cutoff), -1)
    x = F.matmul(F.swapaxes(vh, -1, -2), coeffs)
    rank = F.sum(F.astype(s > cutoff, np.int64), axis=-1)
    if m > n:
        residuals = F.sum(F.square(column - F.matmul(a, x)), axis=-2)
    else:
        residuals = F.zeros((0,), a.dtype)
    return LstsqResult(x if b.ndim > 1 else F.reshape(x, (n,)), residuals, rank, s)
