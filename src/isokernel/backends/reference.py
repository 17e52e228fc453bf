"""The ``reference`` strategy: the oracle.

The graph is compiled to one straight-line Python function that calls the
EVAL rule of each node in tape order and drops every buffer after its last
consumer (``del``), so a cached call costs one Python call per node on top
of the NumPy work. The same generator, with ``instrument=True``, adds a
tracker call per allocation and release: that run measures the live-buffer
peak that ``static_liveness`` computes.
"""

from __future__ import annotations

import functools

import numpy as np

from ..codegen.pixel import pixel_count
from ..ir import EVAL, Graph, Op
from ..ir.ops import TRANSCENDENTAL, TRANSFORM_ONLY
from .capsules import Capsule, NumericalPolicy, register
from .liveness import VIEW_OPS, Liveness, MeasuringTracker, release_schedule, static_liveness
from .planning import Plan
from .reductions import check_mode
from .reductions import kernel as reduction_kernel

PROVIDER = "numpy"


def generate_python(graph: Graph, instrument: bool = False,
                    kernel_of=None) -> tuple[str, dict]:
    """Source of ``run(<inputs>)`` and the globals it needs; ``kernel_of(node)``
    gives each node's function (default: its EVAL rule)."""
    kernel_of = kernel_of or _kernel
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
    return _kernel(node)(*(_constant_value(x) for x in node.inputs))


def _kernel(node):
    rule = EVAL[node.op]
    return functools.partial(rule, **node.attrs) if node.attrs else rule


def _compile_python(graph: Graph, instrument: bool, kernel_of=None):
    source, env = generate_python(graph, instrument, kernel_of)
    code = compile(source, f"<isokernel reference {graph.name}>", "exec")
    exec(code, env)  # noqa: S102 - source generated from the verified graph above
    return env["run"], source


class ReferenceExecutable:
    """Runs a planned graph by the EVAL rules."""

    strategy = "reference"
    forms_run = "reference runs each form as its body, op by op (the EVAL rule)"

    def __init__(self, plan: Plan, reductions: str = "reference"):
        self.plan = plan
        self.graph = plan.graph
        self.reductions = check_mode(reductions)
        pixels = pixel_count(self.graph)
        self._kernel_of = lambda node: reduction_kernel(node, _kernel(node), pixels, reductions)
        self._run, self._source = _compile_python(self.graph, False, self._kernel_of)
        self._measuring = None
        self.static_liveness = static_liveness(self.graph)
        self.measured_liveness: Liveness | None = None

    def __call__(self, *arrays):
        return self._run(*arrays)

    def measure(self, *arrays):
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


_BASIC = NumericalPolicy()
_PAIRWISE = NumericalPolicy(reduction_order="numpy add.reduce: pairwise along a contiguous "
                                            "axis, sequential across others")
_EXACT_ORDER = NumericalPolicy(reduction_order="order-independent (exact)")
_BLAS = NumericalPolicy(contraction="implementation-defined (BLAS kernels may use FMA)",
                        reduction_order="implementation-defined (BLAS blocking)",
                        math_library=f"NumPy matmul over {np.__name__} BLAS")


def _mathlib() -> NumericalPolicy:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
        simd = "+".join(k for k in ("AVX512F", "AVX2", "FMA3", "NEON") if features.get(k))
    except ImportError:  # pragma: no cover - older NumPy layout
        simd = "unknown"
    return NumericalPolicy(math_library=f"NumPy {np.__version__} ufunc loops "
                                        f"(SIMD dispatch on this CPU: {simd or 'none'})")


def _policy(op: Op) -> NumericalPolicy:
    if op in TRANSCENDENTAL:
        return _mathlib()
    if op in (Op.REDUCE_SUM, Op.REDUCE_PROD):
        return _PAIRWISE
    if op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        return _EXACT_ORDER
    if op is Op.DOT_GENERAL:
        return _BLAS
    return _BASIC


_NAMES = {
    Op.REDUCE_SUM: "numpy.sum", Op.REDUCE_PROD: "numpy.prod", Op.REDUCE_MAX: "numpy.max",
    Op.REDUCE_MIN: "numpy.min", Op.RESHAPE: "numpy.reshape", Op.BROADCAST: "numpy.broadcast_to",
    Op.TRANSPOSE: "numpy.transpose", Op.SLICE: "numpy.ndarray.__getitem__",
    Op.PAD: "numpy.full+__setitem__", Op.REV: "numpy.flip", Op.CONCATENATE: "numpy.concatenate",
    Op.DOT_GENERAL: "numpy.matmul", Op.CAST: "numpy.ndarray.astype",
    Op.LDEXP: "numpy.ldexp", Op.LOGB: "numpy.frexp (exponent - 1)",
    Op.TABLE_LOOKUP: "isokernel table_lookup (clamp, floor, lerp)",
    Op.FUSED: "isokernel fused form (its body, op by op)",
}


def _register_capsules() -> None:
    for op, rule in EVAL.items():
        if op is Op.CONST or op in TRANSFORM_ONLY:  # jit strips those before planning
            continue
        name = _NAMES.get(op) or f"numpy.{rule.__name__}"
        register(Capsule(name=name, op=op, provider=PROVIDER, device="cpu",
                         trust="reference", vjp_mode="isokernel-graph",
                         numerical_policy=_policy(op)))


_register_capsules()
