"""The ``reference`` strategy: the oracle.

The graph is compiled to one straight-line Python function that calls the
EVAL rule of each node in tape order and drops every buffer after its last
consumer (``del``), so a cached call costs one Python call per node on top
of the NumPy work. The same generator, with ``instrument=True``, adds a
tracker call per allocation and release: that run measures the live-buffer
peak that ``static_liveness`` computes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...codegen.pixel import pixel_count
from ...ir import Graph, Op
from ..executable import ExecutableBase
from ..liveness import VIEW_OPS, Liveness, MeasuringTracker, release_schedule, static_liveness
from ..planning import Plan, Profile
from ..reductions import check_mode
from ..reductions import kernel as reduction_kernel
from ..strategies import MemoryModel, StrategySpec, register_strategy
from .numpy_rules import NUMPY_PROVIDER, eval_kernel

PROVIDER = NUMPY_PROVIDER
CONTRACT = "the oracle: NumPy, node by node, buffers freed after last use"


def generate_python(graph: Graph, instrument: bool = False,
                    kernel_of=None) -> tuple[str, dict]:
    """Source of ``run(<inputs>)`` and the globals it needs; ``kernel_of(node)``
    gives each node's function (default: its EVAL rule)."""
    kernel_of = kernel_of or eval_kernel
    env: dict = {}
    name = {}
    params = [f"v{graph.index(x)}" for x in graph.inputs]
    lines = [f"def run({', '.join(params + (['_t'] if instrument else []))}):"]
    if instrument:
        lines += [f"    _t.alloc({p[1:]}, {p}, -1)" for p in params]
    frees = release_schedule(graph)
    for i, node in enumerate(graph.nodes):
        if node.op is Op.INPUT:
            name[node] = f"v{i}"
            continue
        if node.op is Op.CONST or _is_const_view(node):
            # constants, and views of them (a broadcast scalar), exist before the run
            name[node] = f"_c{i}"
            env[f"_c{i}"] = _constant_value(node)
            if instrument:
                lines.append(f"    _t.const(_c{i})")
            continue
        name[node] = f"v{i}"
        env[f"_f{i}"] = kernel_of(node)
        args = ", ".join(name[x] for x in node.inputs)
        where = f" @ {node.where}" if node.where else ""
        lines.append(f"    v{i} = _f{i}({args})  # {node.op.value}{where}")
        if instrument:
            lines.append(f"    _t.alloc({i}, v{i}, {i})")
        for dead in frees[i]:
            if name[dead].startswith("_c"):
                continue
            k = graph.index(dead)
            lines.append(f"    _t.free({k})" if instrument else f"    del v{k}")
    outs = "".join(f"{name[x]}, " for x in graph.outputs)
    lines.append(f"    return ({outs})")
    return "\n".join(lines) + "\n", env


def _is_const_view(node) -> bool:
    return node.op in VIEW_OPS and all(x.op is Op.CONST or _is_const_view(x)
                                       for x in node.inputs)


def _constant_value(node):
    if node.op is Op.CONST:
        return node.attrs["value"].value
    return eval_kernel(node)(*(_constant_value(x) for x in node.inputs))


def _compile_python(graph: Graph, instrument: bool, kernel_of=None):
    source, env = generate_python(graph, instrument, kernel_of)
    code = compile(source, f"<isokernel reference {graph.name}>", "exec")
    exec(code, env)  # noqa: S102 - source generated from the verified graph above
    return env["run"], source


class ReferenceExecutable(ExecutableBase):
    """Runs a planned graph by the EVAL rules."""

    forms_run = "reference runs each form as its body, op by op (the EVAL rule)"

    def __init__(self, plan: Plan, reductions: str = "reference"):
        super().__init__(plan)
        self.graph = plan.graph
        self.reductions = check_mode(reductions)
        pixels = pixel_count(self.graph)
        self._kernel_of = lambda node: reduction_kernel(node, eval_kernel(node), pixels,
                                                        reductions)
        self._run, self._source = _compile_python(self.graph, False, self._kernel_of)
        self._measuring = None
        self.static_liveness = static_liveness(self.graph)
        self.measured_liveness: Liveness | None = None

    def call_flat(self, arrays: Sequence) -> tuple:
        return self._run(*arrays)

    def measure(self, arrays: Sequence) -> tuple:
        """Run once while tracking every live buffer; returns the outputs and
        stores the measured peak in ``measured_liveness``."""
        if self._measuring is None:
            self._measuring, _ = _compile_python(self.graph, True, self._kernel_of)
        tracker = MeasuringTracker()
        outs = self._measuring(*(np.asarray(a) for a in arrays), tracker)
        self.measured_liveness = tracker.result()
        return outs

    def source(self) -> str:
        return self._source


SPEC = register_strategy(StrategySpec(
    name="reference", device="cpu", contract=CONTRACT,
    profile=Profile("reference-cpu", "cpu", (NUMPY_PROVIDER,), frozenset({"reference"})),
    memory=MemoryModel("eager", "eager"),
    compiler=ReferenceExecutable, auto_priority=10, options=frozenset({"reductions"})))
