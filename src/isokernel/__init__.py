"""isokernel: write a numerical model once, as a plain Python function over
arrays, and run it as a NumPy oracle, on every CPU core, as compiled native
code or on a GPU — with an audit record of what ran where under which
numerical rules."""

from . import deploy  # installs the block planner, report lines and probe into jit
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
    DifferentiationError,
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
from .transforms import (
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)

__version__ = "0.1.0"

__all__ = [
    "STRATEGY_NAMES", "BackendUnavailableError", "Capsule", "DTypeError",
    "DifferentiationError", "Graph", "GraphError", "IsokernelError", "NumericalPolicy",
    "PlanningError", "Profile", "RetraceWarning", "ShapeDtype", "ShapeError", "TracerError",
    "custom_jvp", "custom_vjp", "deploy", "grad", "hessian", "hvp", "jacfwd", "jacobian",
    "jacrev", "jit", "jvp", "linearize", "numerics", "plan", "register_pytree_node", "replay",
    "stop_gradient", "trace", "tree_flatten", "tree_map", "tree_unflatten", "value_and_grad",
    "verify", "vjp", "vmap",
]
