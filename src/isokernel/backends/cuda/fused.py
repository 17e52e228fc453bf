"""The ``cuda-fused`` strategy: ``cuda-eager`` with a kernel per fused form.

The only strategy that fuses: its ``prepare`` is ``transforms.fusion.fuse``,
and the named forms it finds (scaled product exponential, affine
exponential, Gaussian, logsumexp, reciprocal square root) each run as one
elementwise kernel: the form's body graph through the shared C emitter,
wrapped like a megakernel region and compiled with ``--fmad=false``. The
body holds exactly the operations the form stands for, in the same
association, so the kernel performs the composition's roundings with the
intermediates in registers: bit-identical to ``cuda-eager``, which runs
those operations one kernel per op. A form whose body is not one row region
(a logsumexp along the pixel axis) runs as its composition, and the report
counts both.
"""

from __future__ import annotations

from ...codegen import nvrtc
from ...transforms.complex_pairs import pairs
from ...transforms.fusion import fuse
from ..planning import NodePlan, Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .capsules import CUDA_TRUST, FORM_PROVIDER, PROVIDERS
from .executor import OpByOpExecutable, device_report_lines, node_plan

PROFILE_PROVIDERS = (FORM_PROVIDER, *PROVIDERS)
CONTRACT = "bit-identical to cuda-eager"


class CudaFusedExecutable(OpByOpExecutable):
    fused_kernels = True
    forms_run = ("cuda-fused runs each form as one kernel (its body in registers, "
                 "--fmad=false), or as its composition where the body is not one row region")

    def report_lines(self) -> list[tuple[str, str]]:
        ex = self.ex
        lines = device_report_lines(ex, len(ex.elementwise_sources()), "elementwise")
        lines.append(("forms", f"{ex.forms_as_kernels} form call(s) as one kernel, "
                               f"{ex.forms_as_composition} as their composition, so far"))
        return lines


def plan_fused(graph, profile: Profile, options: dict) -> NodePlan:
    """Every fused form under the form-kernel capsule, every other node as
    ``cuda-eager`` plans it."""
    return node_plan(graph, profile, fused_kernels=True)


def fuse_pairs(graph):
    """This strategy's graph: complex values as real parts
    (``transforms.complex_pairs``), then the fused forms found."""
    return fuse(pairs(graph))


SPEC = register_strategy(StrategySpec(
    name="cuda-fused", device="cuda", contract=CONTRACT,
    profile=Profile("cuda-fused", "cuda", PROFILE_PROVIDERS, CUDA_TRUST,
                    probe=nvrtc.unavailable_reason),
    memory=MemoryModel("eager", "eager"),
    compiler=CudaFusedExecutable, auto_priority=20,
    options=frozenset({"device", "reductions"}), prepare=fuse_pairs,
    planner=plan_fused))
