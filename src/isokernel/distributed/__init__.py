"""``isokernel.distributed``: data-parallel value and gradient on a Dask
cluster, bit-identical to one process for any number of workers.

``value_and_grad(fun, client=...)`` cuts the batch into fixed row blocks,
keeps them on the workers, and combines the per-block results in a fixed
tree over block index; ``reference_value_and_grad`` computes the same bits
in this process. Needs ``dask[distributed]`` (the ``io`` extra).
"""

from ._blocks import block_bounds, pairwise
from ._cluster import NoWorkerError, quiet_workers
from ._value_and_grad import DistributedValueAndGrad, reference_value_and_grad, value_and_grad

__all__ = ["DistributedValueAndGrad", "NoWorkerError", "block_bounds", "pairwise",
           "quiet_workers", "reference_value_and_grad", "value_and_grad"]
