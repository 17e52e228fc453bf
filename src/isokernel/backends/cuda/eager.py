"""The ``cuda-eager`` strategy: one device operation per node, in tape
order, every buffer on the GPU and released after its last use (the rules
are ``executor.CUPY``). IEEE basic operations give NumPy's bits,
transcendentals call CUDA's libdevice. Nothing goes through the host: inputs
given as NumPy arrays are uploaded once per call, and the report says so.

Contract: ulp-bounded against ``reference`` (IEEE basic operations, casts,
comparisons, selects and sums of C-contiguous operands bit-identical;
transcendentals within the bound in each capsule); bit-identical under
portable numerics, which uses basic operations only.
"""

from __future__ import annotations

from ...codegen import nvrtc
from ...transforms.complex_pairs import pairs
from ..planning import NodePlan, Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .capsules import CUDA_TRUST, PROVIDERS
from .executor import OpByOpExecutable, node_plan

CONTRACT = "ulp-bounded vs reference; bit-identical in portable numerics"


class CudaEagerExecutable(OpByOpExecutable):
    fused_kernels = False
    forms_run = "cuda-eager runs each form as its body, one kernel per op (the composition)"


def plan_eager(graph, profile: Profile, options: dict) -> NodePlan:
    """Every node under the eager kernel's capsule of its op (a hardware
    look-up under the texture's)."""
    return node_plan(graph, profile)


SPEC = register_strategy(StrategySpec(
    name="cuda-eager", device="cuda", contract=CONTRACT,
    profile=Profile("cuda-eager", "cuda", PROVIDERS, CUDA_TRUST,
                    probe=nvrtc.unavailable_reason),
    memory=MemoryModel("eager", "eager"),
    compiler=CudaEagerExecutable, auto_priority=10,
    options=frozenset({"device", "reductions"}), prepare=pairs, planner=plan_eager))
