"""JAX's ``jax.ops`` and ``lax`` indexing functions: segment reductions and
dynamic slices (``record.indexing``; the NumPy names are in
``isokernel.numpy``)."""

from .record.indexing import (
    dynamic_slice,
    dynamic_update_slice,
    segment_max,
    segment_min,
    segment_sum,
)

__all__ = ["dynamic_slice", "dynamic_update_slice", "segment_max", "segment_min",
           "segment_sum"]
