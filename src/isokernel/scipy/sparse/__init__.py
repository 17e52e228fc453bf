"""``isokernel.scipy.sparse.linalg``: Krylov solvers with JAX's call forms."""

from . import linalg

__all__ = ["linalg"]
