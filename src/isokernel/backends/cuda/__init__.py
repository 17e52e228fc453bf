"""The GPU strategies: ``cuda-eager`` (one kernel per op), ``cuda-fused``
(eager, with one kernel per fused form) and ``cuda-megakernel`` (each row
region one NVRTC kernel). Importing this package registers their specs; CuPy
is imported only when a strategy runs (``runtime``).

Shared by them, with public names: ``capsules`` (the eager kernels' capsules
and providers), ``executor`` (the rule table ``CUPY``, the ``DeviceExecutor``
and ``node_plan``), ``namespace`` (the array namespace the reference's own
rules run in on the device), ``runtime`` (CuPy, NVRTC-compiled kernels,
launch shapes) and ``memory`` (the device allocator's reuse cache)."""

from . import eager, fused, megakernel  # noqa: F401  (each registers its strategy)
