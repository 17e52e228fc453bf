"""Graph -> Graph transformations: clean-up passes, forward mode (JVP),
linearization and transposition (reverse mode), batching (vmap), custom
derivative rules, fused-form rewrites, and the user-facing API composed from
them."""

from . import indexing  # noqa: F401  (registers the indexing rules)
from .api import (
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacobian_mode,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)
from .custom import custom_jvp, custom_vjp
from .fusion import fuse, unfuse
from .jvp import JVP, jvp_graph
from .linearize import linearize_graph, vjp_graph
from .simplify import cse, dce, prepare_for_execution, simplify
from .transpose import TRANSPOSE, transpose_graph
from .vmap import BATCH, vmap_graph

__all__ = [
    "BATCH", "JVP", "TRANSPOSE", "cse", "custom_jvp", "custom_vjp", "dce", "fuse", "grad",
    "hessian", "hvp", "jacfwd", "jacobian", "jacobian_mode", "jacrev", "jvp", "jvp_graph",
    "linearize", "linearize_graph", "prepare_for_execution", "simplify", "stop_gradient",
    "transpose_graph", "unfuse", "value_and_grad", "vjp", "vjp_graph", "vmap", "vmap_graph",
]
