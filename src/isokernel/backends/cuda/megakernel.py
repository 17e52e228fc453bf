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

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from ...codegen import cuda as cg
from ...codegen import nvrtc
from ...codegen.pixel import Partition, RowRegion
from ...ir import Op
from ...ir.ops import ELEMENTWISE, LAYOUT, REDUCE, TABLE
from ...transforms.complex_pairs import pairs
from ..capsules import Capsule, NumericalPolicy, register
from ..executable import ExecutableBase
from ..liveness import drop
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
    inside a region or a run of elementwise ops the generated kernel's (``cuda-region-fma`` with
    ``fma=True``), between regions the eager kernel's."""
    part = cg.region_partition(graph)
    inside = frozenset(n for r in part.regions for n in r.nodes)
    inside |= {n for stage in part.stages if not isinstance(stage, RowRegion)
               for run in cg.elementwise_runs(graph, stage) if isinstance(run, list)
               for n in run}
    provider = PROVIDER_FMA if options.get("fma") else PROVIDER
    bound = node_plan(graph, profile, inside=inside, region_provider=provider)
    return RegionPlan(graph, profile, bound.capsules, bound.by_node, part)


class CudaMegakernelExecutable(ExecutableBase):
    """Runs the module's programs: the graph's, and a control-flow body's
    each time its loop or branch runs it (``DeviceExecutor.bodies``), step
    by step: a region or a run of elementwise ops as one kernel, every
    other node as ``cuda-eager`` runs it. Given a plan without a partition
    (``planning.plan``'s), it partitions the graph itself."""

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
        self._rows = {}
        for program in self.module.programs:
            for step in program.steps:
                if isinstance(step, cg.RegionKernel):
                    self._rows[step.name] = program.partition.pixels
                elif isinstance(step, cg.RunKernel):
                    self._rows[step.kernel.name] = step.size
        for name, rows in self._rows.items():
            self.kernels[name].grid_block(rows)  # a fixed block_size must fit now
        self._release = {id(p.graph): _release(p) for p in self.module.programs}
        self.ex.bodies = {id(p.graph): functools.partial(self._run_body, p)
                          for p in self.module.programs[1:]}
        super().__init__(plan)

    def call_flat(self, arrays: Sequence) -> tuple:
        ex = self.ex
        with ex.rt.activate():
            env = dict(zip(self.graph.inputs, ex.bring(arrays)))
            self._run(self.module.programs[0], env)
            return tuple(ex.value(x, env) for x in self.graph.outputs)

    def _run_body(self, program: cg.GraphProgram, args) -> list:
        env = dict(zip(program.graph.inputs, args))
        self._run(program, env)
        return [self.ex.value(x, env) for x in program.graph.outputs]

    def _run(self, program: cg.GraphProgram, env: dict) -> None:
        ex = self.ex
        value = lambda x: ex.value(x, env)  # noqa: E731
        for step, dead in zip(program.steps, self._release[id(program.graph)]):
            if isinstance(step, cg.RegionKernel):
                outs = run_region(ex, step, self.kernels, value, program.partition.pixels)
                env.update(zip(step.body.outputs, outs))
            elif isinstance(step, cg.RunKernel):
                body = step.kernel.body
                flat = {b: ex.rt.contiguous(value(x)).reshape(-1) for b, x in
                        zip((*body.row_inputs, *body.whole_inputs), step.inputs)}
                outs = run_region(ex, step.kernel, self.kernels, flat.__getitem__, step.size)
                env.update((x, out.reshape(x.shape)) for x, out in zip(step.outputs, outs))
            else:
                env[step] = ex.run_node(step, env)
            drop(env, dead)

    def source(self) -> str:
        return self.module.source

    def report_lines(self) -> list[tuple[str, str]]:
        programs = self.module.programs
        runs = sum(isinstance(s, cg.RunKernel) for p in programs for s in p.steps)
        lines = device_report_lines(self.ex, len(self.module.kernels),
                                    f"region and run ({runs} run(s) of elementwise ops; "
                                    f"{len(programs) - 1} loop or branch bod(ies) with "
                                    f"programs of their own, run between launches)")
        shapes = []
        for name, rows in self._rows.items():
            kernel = self.kernels[name]
            grid, block = kernel.grid_block(rows)
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


def _release(program: cg.GraphProgram) -> list[list]:
    """For each step of ``program``, the values that die once it has run
    (never the graph's inputs or outputs)."""
    last = {}
    for i, step in enumerate(program.steps):
        if isinstance(step, cg.RegionKernel):
            reads = (*step.region.row_inputs, *step.region.whole_inputs)
        else:  # a run's inputs, or a node's operands
            reads = step.inputs
        for x in reads:
            last[x] = i
    keep = {*program.graph.inputs, *program.graph.outputs}
    dead: list[list] = [[] for _ in program.steps]
    for x, i in last.items():
        if x not in keep and x.op is not Op.CONST:
            dead[i].append(x)
    return dead


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
    prepare=pairs, planner=plan_regions))
