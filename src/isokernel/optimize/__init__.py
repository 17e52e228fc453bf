"""``isokernel.optimize``: root finding with implicit-function-theorem
derivatives (SciPy's ``optimize`` names)."""

from .root import RootResults, root

__all__ = ["RootResults", "root"]
