"""The ``cuda-megakernel`` strategy: every row region of the graph as one
CUDA kernel around the shared C body, compiled by NVRTC; the ops between
regions (matrix products, reductions along the pixel axis or over more than
7 elements, layout ops across the pixel axis) run as ``cuda-eager`` does.

Each region kernel reads the region's inputs and writes its outputs once;
every intermediate stays in registers. Compiled with contraction off
(``--fmad=false``), a kernel performs exactly the operations ``cuda-eager``
performs node by node, in the same order with the same roundings, so the
results are bit-identical to it: fusion moves values from DRAM to
registers and changes nothing else. ``contract=True`` compiles with
``--fmad=true`` (NVRTC may fuse ``a*b + c`` into FMA): faster, different
bits, recorded in the capsules and the report.

Launches are grid-stride over 64-bit row indices with 256 threads per
block, capped by the compiled kernel's limit (``block_size=`` fixes the
shape; a kernel that cannot take it is refused with its limit).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...codegen import cuda as cg
from ...codegen import nvrtc
from ...codegen.pixel import RowRegion
from ...ir import Op
from ...ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE
from ...transforms.fusion import unfuse
from ..capsules import Capsule, NumericalPolicy, register
from ..executable import ExecutableBase
from ..liveness import drop, staged_release
from ..numerics import CUDA_ULP_BOUND
from ..planning import Plan, Profile
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .capsules import BASIC, CUDA_TRUST, EXACT, LIBDEVICE, SUBNORMALS
from .capsules import PROVIDERS as EAGER_PROVIDERS
from .executor import DeviceExecutor, device_node_plan, device_report_lines, run_region

PROVIDER = "cuda-region"
PROVIDER_FMA = "cuda-region-fma"
CONTRACT = "bit-identical to cuda-eager (FMA contraction off)"


class CudaMegakernelExecutable(ExecutableBase):
    forms_run = ("cuda-megakernel inlines each form's body into the region kernel, where the "
                 "whole row region is one fused loop")

    def __init__(self, plan: Plan, contract: bool = False, block_size: int | None = None,
                 runtime=None, device: int | None = None, reductions: str = "reference"):
        if block_size is not None and (not isinstance(block_size, int)
                                       or isinstance(block_size, bool) or block_size < 1):
            raise ValueError(f"block_size={block_size!r}: give a positive number of threads, "
                             f"e.g. block_size=256, or leave it to the kernel's limit")
        self.graph = unfuse(plan.graph)  # the forms' bodies are fused into the regions
        self.contract = bool(contract)
        self.block_size = block_size
        self.module = cg.cuda_module(self.graph, self.contract)
        self.partition = self.module.partition
        self.ex = DeviceExecutor(self.graph, runtime, device, reductions)
        self.kernels = (self.ex.rt.region_kernels(self.module, block_size)
                        if self.module.kernels else {})
        for name, kernel in self.kernels.items():
            if name != "_built":
                kernel.grid_block(self.partition.pixels)  # a fixed block_size must fit now
        self._by_stage = {id(k.region): k for k in self.module.kernels}
        self._release = staged_release(self.partition)
        inside = {n for r in self.partition.regions for n in r.nodes}
        provider = PROVIDER_FMA if self.contract else PROVIDER
        super().__init__(device_node_plan(plan, self.graph, inside, provider, False))

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
                       "cuda-eager" if self.contract else "off (--fmad=false)")
        built = self.kernels.get("_built")
        cubin = "none" if built is None else (
            f"{built.path.name} for {built.arch} "
            f"({'cache hit' if built.cached else 'compiled'} by {built.nvrtc})")
        lines += [("pixels", self.partition.describe()),
                  ("contract", contraction),
                  ("launch", "; ".join(shapes) or "no region kernel (nothing row-local)"),
                  ("cubin", cubin)]
        return lines


def _policy(op: Op, contract: bool) -> NumericalPolicy:
    contraction = "on (--fmad=true: FMA allowed)" if contract else "off (--fmad=false)"
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
        for provider, contract in ((PROVIDER, False), (PROVIDER_FMA, True)):
            register(Capsule(f"generated CUDA ({kind})", op, provider, "cuda", "checked",
                             "isokernel-graph", _policy(op, contract)))


_register_capsules()

PROFILE_PROVIDERS = (PROVIDER, *EAGER_PROVIDERS)


SPEC = register_strategy(StrategySpec(
    name="cuda-megakernel", device="cuda", contract=CONTRACT,
    profile=Profile("cuda-megakernel", "cuda", PROFILE_PROVIDERS, CUDA_TRUST,
                    probe=nvrtc.unavailable_reason),
    memory=MemoryModel("fused", "fused"),
    compiler=CudaMegakernelExecutable, auto_priority=30,
    options=frozenset({"contract", "block_size", "device", "reductions"})))
