"""``isokernel.distributed``: data-parallel value and gradient, bit-identical
to one process for any number of workers or ranks.

``value_and_grad(fun, client=...)`` cuts the batch into fixed row blocks,
keeps them on the workers of a Dask cluster, and combines the per-block
results in a fixed tree over block index; ``reference_value_and_grad``
computes the same bits in this process. Needs ``dask[distributed]`` (the
``io`` extra).

``collective_value_and_grad(fun, comm=...)`` is the same computation over a
world of ranks, one process per GPU through NCCL (``NcclCommunicator``,
CuPy) or threads on the host (``host_world``, ``run_host_world``): each rank
computes its own blocks, one all-gather gives every rank all the partials,
and every rank combines them in the same tree.
"""

from ._blocks import block_bounds, pairwise
from ._cluster import ClusterError, NoWorkerError, quiet_workers
from ._collective import (
    CollectiveError,
    CollectiveValueAndGrad,
    Communicator,
    HostCommunicator,
    NcclCommunicator,
    collective_value_and_grad,
    host_world,
    nccl_unique_id,
    rank_blocks,
    rank_rows,
    run_host_world,
)
from ._value_and_grad import DistributedValueAndGrad, reference_value_and_grad, value_and_grad

__all__ = ["ClusterError", "CollectiveError", "CollectiveValueAndGrad", "Communicator",
           "DistributedValueAndGrad", "HostCommunicator", "NcclCommunicator", "NoWorkerError",
           "block_bounds", "collective_value_and_grad", "host_world", "nccl_unique_id",
           "pairwise", "quiet_workers", "rank_blocks", "rank_rows", "reference_value_and_grad",
           "run_host_world", "value_and_grad"]
