"""JAX's ``jax.ops`` and ``lax`` functions for indexing and sorting: segment
reductions, dynamic slices and ``top_k`` (``record.indexing``,
``record.sorting``; the NumPy names are in ``isokernel.numpy``)."""

from .record.indexing import (
    dynamic_slice,
    dynamic_update_slice,
    segment_max,
    segment_min,
    segment_sum,
)
from .record.sorting import top_k

__all__ = ["dynamic_slice", "dynamic_update_slice", "segment_max", "segment_min",
           "segment_sum", "top_k"]
