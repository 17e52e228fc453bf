"""JAX's ``jax.ops`` and ``lax`` functions: segment reductions, dynamic
slices, ``top_k`` and ``complex`` (a complex value from its parts, exactly)
(``record.indexing``, ``record.sorting``, ``record.frontend``; the NumPy
names are in ``isokernel.numpy``)."""

from .record.frontend import complex_from as complex  # noqa: A004  (JAX's lax.complex)
from .record.indexing import (
    dynamic_slice,
    dynamic_update_slice,
    segment_max,
    segment_min,
    segment_sum,
)
from .record.sorting import top_k

__all__ = ["complex", "dynamic_slice", "dynamic_update_slice", "segment_max", "segment_min",
           "segment_sum", "top_k"]
