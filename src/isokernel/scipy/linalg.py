"""``isokernel.scipy.linalg``: SciPy's dense solvers and factorizations,
batched over leading axes (``isokernel.linalg``)."""

from ..linalg import (
    cho_factor,
    cho_solve,
    det,
    inv,
    lu_factor,
    lu_solve,
    solve,
    solve_triangular,
)

__all__ = ["cho_factor", "cho_solve", "det", "inv", "lu_factor", "lu_solve", "solve",
           "solve_triangular"]
