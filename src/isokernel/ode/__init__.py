"""ODE integration: ``odeint`` with JAX's call form, built on
``isokernel.numpy`` and the control-flow primitives (``docs/solvers.md``).
Every method's coefficients are a table in ``tableaux``."""

from .odeint import odeint
from .solution import ODESolution
from .tableaux import TABLES, ButcherTableau, ESDIRKTableau, RodasTableau, RosenbrockTableau

__all__ = ["TABLES", "ButcherTableau", "ESDIRKTableau", "ODESolution", "RodasTableau",
           "RosenbrockTableau", "odeint"]
