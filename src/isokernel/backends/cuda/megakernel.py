"""The ``cuda-megakernel`` strategy: every row region of the graph as one
CUDA kernel around the shared C body, compiled by NVRTC; the ops between
regions (matrix products, reductions along the pixel axis or over more than
7 elements, layout ops across the pixel axis) run as ``cuda-eager`` does.

Each region kernel reads the region's inputs and writes its outputs once;
every intermediate stays in registers. Compiled with contraction off
(``--fmad=false``), a kernel performs exactly the operations ``cuda-eager``
performs node by node, in the same order with the same roundings, so the
results are bit-identical to it: fusion moves values from DRAM to
registers and changes nothing else. ``fma=True`` compiles with
``--fmad=true`` (NVRTC may fuse ``a*b + c`` into FMA): faster, different
bits, recorded in the capsules and the report.

Launches are grid-stride over 64-bit row indices with 256 threads per
block, capped by the compiled kernel's limit (``block_size=`` fixes the
shape; a kernel that cannot take it is refused with its limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...codegen import cuda as cg
from ...codegen import nvrtc
from ...codegen.pixel import Partition, RowRegion
from ...ir import Op
from ...ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE
from ..capsules import Capsule, NumericalPolicy, register
from ..executable import ExecutableBase
from ..liveness import drop, staged_release
from ..numerics import CUDA_ULP_BOUND
from ..planning import NodePlan, Plan, Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .capsules import BASIC, CUDA_TRUST, EXACT, LIBDEVICE, SUBNORMALS
from .capsules import PROVIDERS as EAGER_PROVIDERS
from .executor import DeviceExecutor, device_report_lines, node_plan, run_region

PROVIDER = "cuda-region"
PROVIDER_FMA = "cuda-region-fma"
CONTRACT = "bit-identical to cuda-eager (FMA contraction off)"


@dataclass(frozen=True)
class RegionPlan(NodePlan):
    """``cuda-megakernel``'s plan: the partition into region kernels and the
    ops between them (what the build compiles), and the capsule of every
    node as that partition places it."""

    partition: Partition | None = None


def plan_regions(graph, profile: Profile, options: dict) -> RegionPlan:
    """The planner: the region partition, made once, and each node's capsule:
    inside a region the generated kernel's (``cuda-region-fma`` with
    ``fma=True``), between regions the eager kernel's."""
    part = cg.region_partition(graph)
    inside = frozenset(n for r in part.regions for n in r.nodes)
    provider = PROVIDER_FMA if options.get("fma") else PROVIDER
    bound = node_plan(graph, profile, inside=inside, region_provider=provider)
    return RegionPlan(graph, profile, bound.capsules, bound.by_node, part)


class CudaMegakernelExecutable(ExecutableBase):
    """Runs the plan's partition: each row region as one kernel, the rest as
    ``cuda-eager`` does. Given a plan without a partition (``planning.plan``'s),
    it partitions the graph itself."""

    def __init__(self, plan: Plan, fma: bool = False, block_size: int | None = None,
                 runtime=None, device: int | None = None, reductions: str = "reference"):
        if block_size is not None and (not isinstance(block_size, int)
                                       or isinstance(block_size, bool) or block_size < 1):
            raise ValueError(f"block_size={block_size!r}: give a positive number of threads, "
                             f"e.g. block_size=256, or leave it to the kernel's limit")
        self.graph = plan.graph
        self.fma = bool(fma)
        self.block_size = block_size
        part = plan.partition if isinstance(plan, RegionPlan) else None
        self.module = cg.cuda_module(self.graph, self.fma, part)
        self.partition = self.module.partition
        self.ex = DeviceExecutor(self.graph, runtime, device, reductions)
        self.kernels = (self.ex.rt.region_kernels(self.module, block_size)
                        if self.module.kernels else {})
        for name, kernel in self.kernels.items():
            if name != "_built":
                kernel.grid_block(self.partition.pixels)  # a fixed block_size must fit now
        self._by_stage = {id(k.region): k for k in self.module.kernels}
        self._release = staged_release(self.partition)
        super().__init__(plan)

    def call_flat(self, arrays: Sequence) -> tuple:
        ex = self.ex
        with ex.rt.activate():
            env = dict(zip(self.graph.inputs, ex.bring(arrays)))
            for stage, release in zip(self.partition.stages, self._release):
                if isinstance(stage, RowRegion):
                    self._run_region(stage, env)
                    drop(env, release[0])
                    continue
                for node, dead in zip(stage.nodes, release):  # each value after its last reader
                    env[node] = ex.run_node(node, env)
                    drop(env, dead)
            return tuple(ex.value(x, env) for x in self.graph.outputs)

    def _run_region(self, region: RowRegion, env: dict) -> None:
        kernel = self._by_stage[id(region)]
        outs = run_region(self.ex, kernel, self.kernels, lambda x: self.ex.value(x, env),
                          self.partition.pixels)
        env.update(zip(kernel.body.outputs, outs))

    def source(self) -> str:
        return self.module.source

    def report_lines(self) -> list[tuple[str, str]]:
        lines = device_report_lines(self.ex, len(self.module.kernels), "region")
        shapes = []
        for name, kernel in self.kernels.items():
            if name == "_built":
                continue
            grid, block = kernel.grid_block(self.partition.pixels)
            shapes.append(f"{name}: {block} threads/block (limit {kernel.max_threads_per_block}"
                          f", {kernel.registers} registers), grid {grid}")
        contraction = ("on: --fmad=true, NVRTC may fuse a*b+c into FMA; bits differ from "
                       "cuda-eager" if self.fma else "off (--fmad=false)")
        built = self.kernels.get("_built")
        cubin = "none" if built is None else (
            f"{built.path.name} for {built.arch} "
            f"({'cache hit' if built.cached else 'compiled'} by {built.nvrtc})")
        lines += [("pixels", self.partition.describe()),
                  ("fma", contraction),
                  ("launch", "; ".join(shapes) or "no region kernel (nothing row-local)"),
                  ("cubin", cubin)]
        return lines


def _policy(op: Op, fma: bool) -> NumericalPolicy:
    contraction = "on (--fmad=true: FMA allowed)" if fma else "off (--fmad=false)"
    if op in CUDA_ULP_BOUND:
        return NumericalPolicy(subnormals=SUBNORMALS, contraction=contraction,
                               math_library=f"{LIBDEVICE}; stated bound "
                                            f"{CUDA_ULP_BOUND[op]} ulp vs reference, the bits "
                                            f"of cuda-eager")
    if op in REDUCE:
        return NumericalPolicy(subnormals=SUBNORMALS, contraction=contraction,
                               reduction_order="NumPy's order, unrolled (<= 7 elements)",
                               math_library=BASIC)
    return NumericalPolicy(subnormals=SUBNORMALS, contraction=contraction,
                           math_library=EXACT.get(op, BASIC))


IN_REGION = {
    Op.WHILE: "a while loop per thread: each pixel stops on its own predicate",
    Op.SCAN: "a for loop of the static step count per thread",
    Op.COND: "an if/else chain on the whole index: only the branch taken runs",
    Op.CHECKPOINT: "its body, inlined",
    Op.GET: "a result of its control-flow node: its variables",
}
"""Control flow inside a region kernel (``codegen.emit``); the bodies' ops
keep their own capsules' policies."""


def _register_capsules() -> None:
    kinds = [(op, "element renaming" if op in LAYOUT else "C expression in a fused region")
             for op in (*ELEMENTWISE, *REDUCE, *LAYOUT, *TABLE)]
    for op, kind in [*kinds, *IN_REGION.items()]:
        for provider, fma in ((PROVIDER, False), (PROVIDER_FMA, True)):
            register(Capsule(f"generated CUDA ({kind})", op, provider, "cuda", "checked",
                             "isokernel-graph", _policy(op, fma)))


_register_capsules()

PROFILE_PROVIDERS = (PROVIDER, *EAGER_PROVIDERS)


SPEC = register_strategy(StrategySpec(
    name="cuda-megakernel", device="cuda", contract=CONTRACT,
    profile=Profile("cuda-megakernel", "cuda", PROFILE_PROVIDERS, CUDA_TRUST,
                    probe=nvrtc.unavailable_reason),
    memory=MemoryModel("fused", "fused"),
    compiler=CudaMegakernelExecutable, auto_priority=30,
    options=frozenset({"fma", "block_size", "device", "reductions"}),
    planner=plan_regions))
