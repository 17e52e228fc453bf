"""``isokernel.scipy.sparse.linalg``: Krylov solvers with JAX's call forms
(``jax.scipy.sparse.linalg``), derivatives by the implicit function theorem."""

from ...linalg.krylov import bicgstab, cg, gmres

__all__ = ["bicgstab", "cg", "gmres"]
