"""``isokernel.linalg``: dense linear algebra with NumPy's names (exposed as
``isokernel.numpy.linalg``) and SciPy's (``isokernel.scipy.linalg``),
batched over leading axes, differentiable and vmappable; matrices of static
size <= 4x4 unroll into the per-pixel C body of the compiled strategies."""

from ._dense import (
    SlogdetResult,
    cho_factor,
    cho_solve,
    cholesky,
    det,
    inv,
    lu_factor,
    lu_solve,
    slogdet,
    solve,
    solve_triangular,
)
from ._norms import matrix_power, norm
from ._spectral import (
    EighResult,
    LstsqResult,
    QRResult,
    SVDResult,
    eigh,
    eigvalsh,
    lstsq,
    pinv,
    qr,
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
