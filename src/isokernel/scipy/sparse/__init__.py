"""``isokernel.scipy.sparse.linalg``: Krylov solvers with JAX's call forms."""
