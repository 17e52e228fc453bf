"""The intermediate representation: ops, avals, nodes, graphs, and the two
rule tables every layer shares (EVAL and SHAPE). Imports nothing else of
isokernel."""

from . import dtypes
from .errors import (
    BackendUnavailableError,
    DifferentiationError,
    DTypeError,
    GraphError,
    IsokernelError,
    PlanningError,
    ShapeError,
    TracerError,
)
from .eval import EVAL
from .graph import (
    EMPTY,
    Attrs,
    Aval,
    Graph,
    Literal,
    Node,
    SubGraph,
    format_graph,
    subgraphs,
    toposort,
    walk,
)
from .ops import Op
from .region import register_region
from .shapes import SHAPE
from .verify import verify

__all__ = [
    "EMPTY", "EVAL", "SHAPE", "Attrs", "Aval", "BackendUnavailableError",
    "DifferentiationError", "DTypeError",
    "Graph", "GraphError", "IsokernelError", "Literal", "Node", "Op", "PlanningError",
    "ShapeError", "SubGraph", "TracerError", "dtypes", "format_graph", "register_region",
    "subgraphs", "toposort", "verify", "walk",
]
