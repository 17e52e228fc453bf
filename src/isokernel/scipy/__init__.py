"""SciPy's names for isokernel's solvers: ``isokernel.scipy.linalg`` (dense
factorizations) and ``isokernel.scipy.sparse.linalg`` (Krylov solvers), with
SciPy's and JAX's call forms."""

from . import linalg, sparse

__all__ = ["linalg", "sparse"]
