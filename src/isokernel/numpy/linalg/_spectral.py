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

from typing import Any, NamedTuple

import numpy as np

from ...ir import Op, ShapeError, TracerError
from ...ir.source import user_where
from ...record import Tracer, bind
from ...record import frontend as F
from ...transforms import custom_jvp
from ...typing import Array, ArrayLike
from ._dense import as_float, as_square, check_same_dtype


class QRResult(NamedTuple):
    Q: Array
    R: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


class LstsqResult(NamedTuple):
    x: Array
    residuals: Array
    rank: Array
    s: Array


def _matrices(a, name: str):
    a = as_float(a, name, "a")
    if a.ndim < 2:
        raise ShapeError(f"{name} at {user_where()}: a must hold matrices in its last two "
                         f"axes, got shape {tuple(a.shape)}; pass (..., m, n)")
    return a


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """NumPy's ``linalg.qr``: modes 'reduced' (default), 'complete', 'r'."""
    a = _matrices(a, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr at {user_where()}: mode {mode!r} is not supported; use "
                         f"'reduced', 'complete' or 'r' ('raw' is LAPACK's internal form)")
    q, r = bind(Op.QR, a, mode="complete" if mode == "complete" else "reduced")
    return r if mode == "r" else QRResult(q, r)


def eigh(a: ArrayLike, UPLO: str = "L") -> EighResult:  # noqa: N803 - NumPy's name
    """NumPy's ``linalg.eigh``: eigenvalues ascending and eigenvectors (as
    columns) of symmetric matrices, from the triangle ``UPLO`` names."""
    a = as_square(a, "eigh")
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh at {user_where()}: UPLO={UPLO!r} is not 'L' or 'U'")
    return EighResult(*bind(Op.EIGH, a, lower=UPLO == "L"))


def eigvalsh(a: ArrayLike, UPLO: str = "L") -> Array:  # noqa: N803 - NumPy's name
    return eigh(a, UPLO).eigenvalues


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Any:
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


def pinv(a: ArrayLike, rcond: ArrayLike = None, hermitian: bool = False, *,
         rtol: ArrayLike = _NO_VALUE) -> Array:
    """NumPy's ``linalg.pinv``: V diag(1/s) Uᵀ over the singular values above
    ``rcond`` times the largest (an m x 0 or 0 x n matrix gives n x m zeros)."""
    a = _matrices(a, "pinv")
    rcond = _pinv_cutoff(a, rcond, rtol)
    if 0 in a.shape[-2:]:
        return F.zeros((*a.shape[:-2], a.shape[-1], a.shape[-2]), a.dtype)
    return _pinv(a, F.asarray(rcond, dtype=a.dtype))


@custom_jvp
def _pinv(a, rcond):
    u, s, vh, cutoff = _pinv_parts(a, rcond)
    scaled = F.swapaxes(u, -1, -2) * F.expand_dims(_inverse_above(s, cutoff), -1)
    return F.matmul(F.swapaxes(vh, -1, -2), scaled)


@_pinv.defjvp
def _pinv_jvp(primals, tangents):
    """Golub and Pereyra's derivative of the pseudo-inverse (SIAM J. Numer.
    Anal. 10, 1973; JAX's rule), from p = pinv(a) alone: d p = -p d a p +
    p pᵀ d aᵀ (I - a p) + (I - p a) d aᵀ pᵀ p, exact while the rank holds. It
    needs no singular vectors, whose derivative is undefined where singular
    values repeat (the identity). ``rcond`` is not differentiated."""
    (a, rcond), (da, _) = primals, tangents
    p = _pinv(a, rcond)
    pt, dat = F.swapaxes(p, -1, -2), F.swapaxes(da, -1, -2)
    mm = F.matmul
    if a.shape[-2] >= a.shape[-1]:  # the cheaper association (JAX's)
        s, t = mm(mm(p, pt), dat), mm(mm(dat, pt), p)
        dp = -mm(mm(p, da), p) + s - mm(mm(s, a), p) + t - mm(mm(p, a), t)
    else:
        s, t = mm(p, mm(pt, dat)), mm(dat, mm(pt, p))
        dp = -mm(p, mm(da, p)) + s - mm(s, mm(a, p)) + t - mm(p, mm(a, t))
    return p, dp


NUMPY_RESID = ("lstsq at {where}: numpy_resid=True gives residuals whose shape depends on the "
               "rank of a (empty when it is below n), which a recording (jit, vmap, grad) "
               "cannot know; call lstsq outside it, or use numpy_resid=False (the default: "
               "the squared residual norms whenever m > n)")


def lstsq(a: ArrayLike, b: ArrayLike, rcond: ArrayLike = None, *,
          numpy_resid: bool = False) -> LstsqResult:
    """NumPy's ``linalg.lstsq`` by the SVD (as gelsd): ``(x, residuals,
    rank, s)``, singular values at or below ``rcond`` (default eps · max(m,
    n); negative: eps, as LAPACK) times the largest treated as zero.

    ``residuals`` (squared 2-norms of ``b - a x`` per column) has a static
    shape, so ``jit`` and ``vmap`` give what an eager call gives: computed
    whenever m > n, the rank whatever it is (NumPy returns an empty array
    for a rank-deficient ``a``, a shape that depends on the data), empty
    otherwise. ``numpy_resid=True`` (JAX's keyword) is NumPy's rule exactly,
    outside a recording only."""
    a = _matrices(a, "lstsq")
    b = as_float(b, "lstsq", "b")
    check_same_dtype(a, b, "lstsq")
    m, n = a.shape[-2:]
    if b.shape[0 if b.ndim == 1 else -2] != m:
        raise ShapeError(f"lstsq at {user_where()}: b of shape {tuple(b.shape)} does not fit "
                         f"a of shape {tuple(a.shape)}; b needs {m} rows")
    column = b if b.ndim > 1 else F.reshape(b, (m, 1))
    if m == 0 or n == 0:
        x, rank, s = F.zeros((n, column.shape[-1]), a.dtype), np.int64(0), F.zeros((0,), a.dtype)
    else:
        x, rank, s = _lstsq_by_svd(a, column, _lstsq_cutoff(a, rcond))
    residuals = F.zeros((0,), a.dtype)
    if m > n:
        residuals = F.sum(F.square(column - F.matmul(a, x)), axis=-2)
    if numpy_resid:
        if isinstance(rank, Tracer):
            raise TracerError(NUMPY_RESID.format(where=user_where()))
        if m <= n or np.any(np.asarray(rank) < n):
            residuals = F.zeros((0,), a.dtype)
    return LstsqResult(x if b.ndim > 1 else F.reshape(x, (n,)), residuals, rank, s)


def _lstsq_cutoff(a, rcond):
    eps = float(np.finfo(a.dtype).eps)
    if rcond is None:
        return max(a.shape[-2:]) * eps
    return eps if not isinstance(rcond, Tracer) and rcond < 0 else rcond


def _lstsq_by_svd(a, column, rcond):
    """(x, rank, s): V diag(1/s) Uᵀ b over the singular values above the cutoff."""
    u, s, vh, cutoff = _pinv_parts(a, rcond)
    coeffs = F.matmul(F.swapaxes(u, -1, -2), column) * F.expand_dims(
        _inverse_above(s, cutoff), -1)
    x = F.matmul(F.swapaxes(vh, -1, -2), coeffs)
    return x, F.sum(F.astype(s > cutoff, np.int64), axis=-1), s
