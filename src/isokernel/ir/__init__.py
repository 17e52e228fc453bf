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
from .graph import EMPTY, Attrs, Aval, Body, Graph, Literal, Node, format_graph, toposort
from .ops import Op
from .shapes import SHAPE
from .verify import verify

__all__ = [
    "EMPTY", "EVAL", "SHAPE", "Attrs", "Aval", "BackendUnavailableError", "Body",
    "DifferentiationError", "DTypeError",
    "Graph", "GraphError", "IsokernelError", "Literal", "Node", "Op", "PlanningError",
    "ShapeError", "TracerError", "dtypes", "format_graph", "toposort", "verify",
]
