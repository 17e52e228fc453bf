"""``isokernel.numpy.linalg`` (``inp.linalg``): NumPy's dense linear algebra,
and the dense factorizations SciPy names (``lu_factor``, ``cho_factor``,
...), batched over leading axes, differentiable and vmappable; matrices of
static size <= 4x4 unroll into the per-pixel C body of the compiled
strategies. It sits below ``isokernel.numpy``'s users: ``isokernel.linalg``
and ``isokernel.scipy.linalg`` re-export it, beside the Krylov solvers
(``isokernel.linalg.krylov``), which are written with ``isokernel.numpy``."""

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

__all__ = [
    "EighResult", "LstsqResult", "QRResult", "SVDResult", "SlogdetResult", "cho_factor",
    "cho_solve", "cholesky", "det", "eigh", "eigvalsh", "inv", "lstsq", "lu_factor",
    "lu_solve", "matrix_power", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular",
    "svd",
]
