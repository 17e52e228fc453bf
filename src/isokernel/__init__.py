"""isokernel: write a numerical model once, as a plain Python function over
arrays, and run it as a NumPy oracle, on every CPU core, as compiled native
code or on a GPU — with an audit record of what ran where under which
numerical rules."""

from .backends import (
    STRATEGY_NAMES,
    Capsule,
    NumericalPolicy,
    Profile,
    RetraceWarning,
    jit,
    plan,
)
from .ir import (
    BackendUnavailableError,
    DTypeError,
    Graph,
    GraphError,
    IsokernelError,
    PlanningError,
    ShapeError,
    TracerError,
    verify,
)
from .ir.pytree import register_pytree_node, tree_flatten, tree_map, tree_unflatten
from .record import ShapeDtype, replay, trace
from .record.portable import numerics

__version__ = "0.1.0"

__all__ = [
    "STRATEGY_NAMES", "BackendUnavailableError", "Capsule", "DTypeError", "Graph", "GraphError",
    "IsokernelError", "NumericalPolicy", "PlanningError", "Profile", "RetraceWarning",
    "ShapeDtype", "ShapeError", "TracerError", "jit", "numerics", "plan", "register_pytree_node",
    "replay", "trace", "tree_flatten", "tree_map", "tree_unflatten", "verify",
]
