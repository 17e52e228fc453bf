"""Recording: tracers, the hash-consing builder, and the NumPy-like frontend."""

from .tracer import (
    FOLD_LIMIT,
    Builder,
    ShapeDtype,
    Tracer,
    _install_array_methods,
    bind,
    current_builder,
    replay,
    trace,
    trace_flat,
)

_install_array_methods()

__all__ = ["FOLD_LIMIT", "Builder", "ShapeDtype", "Tracer", "bind", "current_builder", "replay",
           "trace", "trace_flat"]
