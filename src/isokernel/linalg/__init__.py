"""``isokernel.linalg``: dense linear algebra with NumPy's names and SciPy's
(written in ``isokernel.numpy.linalg``, which ``isokernel.scipy.linalg``
also exposes), batched over leading axes, differentiable and vmappable;
matrices of static size <= 4x4 unroll into the per-pixel C body of the
compiled strategies. The Krylov solvers (``krylov``) are written with
``isokernel.numpy``."""

from ..numpy.linalg import (
    EighResult,
    LstsqResult,
    QRResult,
    SlogdetResult,
    SVDResult,
    cho_factor,
    cho_solve,
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    lstsq,
    lu_factor,
    lu_solve,
    matrix_power,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_triangular,
    svd,
)
from .krylov import bicgstab, cg, gmres

__all__ = [
    "bicgstab", "cg", "gmres",
    "EighResult", "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "cho_factor",
    "cho_solve", "cholesky", "det", "eigh", "eigvalsh", "inv", "lstsq", "lu_factor",
    "lu_solve", "matrix_power", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular",
    "svd",
]
