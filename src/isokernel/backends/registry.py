"""The strategies of this version, with their contracts and profiles."""

from __future__ import annotations

from .. import codegen
from ..codegen import nvrtc
from .cuda_eager import PROVIDERS as CUDA_EAGER
from .cuda_eager import CudaEagerExecutable
from .cuda_fused import PROFILE_PROVIDERS as CUDA_FUSED
from .cuda_fused import CudaFusedExecutable
from .cuda_megakernel import PROFILE_PROVIDERS as CUDA_MEGAKERNEL
from .cuda_megakernel import CudaMegakernelExecutable
from .native import PROVIDER as NATIVE
from .native import NativeExecutable
from .planning import Profile
from .reference import PROVIDER as NUMPY
from .reference import ReferenceExecutable
from .strategies import Strategy, register_strategy
from .threads import PROVIDERS as TILES
from .threads import ThreadsExecutable

REFERENCE_PROFILE = Profile("reference-cpu", "cpu", (NUMPY,), frozenset({"reference"}))
THREADS_PROFILE = Profile("threads-cpu", "cpu", (*TILES, NUMPY),
                          frozenset({"checked", "reference"}))
NATIVE_PROFILE = Profile("native-cpu", "cpu", (NATIVE, NUMPY), frozenset({"checked", "reference"}),
                         probe=codegen.unavailable_reason)
# GPU profiles accept "trusted" for the one vendor library they call (cuBLAS)
CUDA_TRUST = frozenset({"checked", "trusted"})
CUDA_EAGER_PROFILE = Profile("cuda-eager", "cuda", CUDA_EAGER, CUDA_TRUST,
                             probe=nvrtc.unavailable_reason)
CUDA_FUSED_PROFILE = Profile("cuda-fused", "cuda", CUDA_FUSED, CUDA_TRUST,
                             probe=nvrtc.unavailable_reason)
CUDA_MEGAKERNEL_PROFILE = Profile("cuda-megakernel", "cuda", CUDA_MEGAKERNEL, CUDA_TRUST,
                                  probe=nvrtc.unavailable_reason)

CONTRACTS = {
    "reference": "the oracle: NumPy, node by node, buffers freed after last use",
    "threads": "bit-identical to reference",
    "native": "bit-identical to reference for IEEE basic ops; transcendentals ulp-bounded",
    "cuda-eager": "ulp-bounded vs reference; bit-identical in portable numerics",
    "cuda-fused": "bit-identical to cuda-eager",
    "cuda-megakernel": "bit-identical to cuda-eager (FMA contraction off)",
}


def _register() -> None:
    register_strategy(Strategy("reference", "cpu", CONTRACTS["reference"], REFERENCE_PROFILE,
                               ReferenceExecutable, frozenset({"reductions"})))
    register_strategy(Strategy("threads", "cpu", CONTRACTS["threads"], THREADS_PROFILE,
                               ThreadsExecutable,
                               frozenset({"workers", "tile_rows", "reductions"})))
    register_strategy(Strategy("native", "cpu", CONTRACTS["native"], NATIVE_PROFILE,
                               NativeExecutable, frozenset({"workers", "contract", "reductions"})))
    register_strategy(Strategy("cuda-eager", "cuda", CONTRACTS["cuda-eager"],
                               CUDA_EAGER_PROFILE, CudaEagerExecutable,
                               frozenset({"device", "reductions"})))
    register_strategy(Strategy("cuda-fused", "cuda", CONTRACTS["cuda-fused"],
                               CUDA_FUSED_PROFILE, CudaFusedExecutable,
                               frozenset({"device", "reductions"})))
    register_strategy(Strategy("cuda-megakernel", "cuda", CONTRACTS["cuda-megakernel"],
                               CUDA_MEGAKERNEL_PROFILE, CudaMegakernelExecutable,
                               frozenset({"contract", "block_size", "device", "reductions"})))


_register()
