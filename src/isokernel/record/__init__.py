"""Recording: tracers, the hash-consing builder, and the NumPy-like frontend."""

from . import (
    frontend,  # noqa: F401  (sets the Python operators and methods of Tracer)
    indexing,  # noqa: F401  (sets Tracer.at)
)
from .tracer import (
    FOLD_LIMIT,
    Builder,
    ShapeDtype,
    Tracer,
    bind,
    current_builder,
    replay,
    trace,
    trace_flat,
)

__all__ = ["FOLD_LIMIT", "Builder", "ShapeDtype", "Tracer", "bind", "current_builder", "replay",
           "trace", "trace_flat"]
