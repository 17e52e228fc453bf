"""isokernel: write a numerical model once, as a plain Python function over
arrays, and run it as a NumPy oracle, on every CPU core, as compiled native
code or on a GPU — with an audit record of what ran where under which
numerical rules."""

from . import deploy, nn, ode, ops, optim, optimize, random, scipy, units
from .backends import (
    Capsule,
    Executable,
    ExecutableBase,
    MemoryModel,
    NumericalPolicy,
    Profile,
    StrategySpec,
    plan,
    register_strategy,
    unregister_strategy,
)
from .control import checkpoint, cond, fori_loop, remat, scan, switch, while_loop
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
from .pipeline import RetraceWarning, jit
from .record import ShapeDtype, replay, trace
from .record.portable import numerics
from .train import CheckpointError, Trainer, load, save
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
    "BackendUnavailableError", "Capsule", "DTypeError", "DifferentiationError", "Executable",
    "ExecutableBase", "Graph", "GraphError", "IsokernelError", "MemoryModel",
    "NumericalPolicy", "PlanningError", "Profile", "RetraceWarning", "ShapeDtype", "ShapeError",
    "StrategySpec", "TracerError", "checkpoint", "cond", "custom_jvp", "custom_vjp", "deploy",
    "fori_loop", "grad", "hessian", "remat", "scan", "switch", "while_loop",
    "hvp", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "linearize", "numerics", "plan",
    "register_pytree_node", "register_strategy", "replay", "stop_gradient", "trace",
    "tree_flatten", "tree_map", "tree_unflatten", "unregister_strategy", "value_and_grad",
    "verify", "vjp", "vmap", "nn", "ode", "ops", "optim", "optimize", "random", "scipy", "units",
    "Trainer",
    "save",
    "load", "CheckpointError",
]
