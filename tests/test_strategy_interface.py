"""The declared strategy interface: one ``StrategySpec`` per strategy, the
``Executable`` protocol, and a strategy defined outside isokernel (here, in
this file) registered, run, reported, listed and chosen by ``auto`` like a
built-in one; and the layout rules of ``backends`` that keep it so."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen, deploy
from isokernel.backends import all_strategies, get_strategy, plan
from isokernel.backends.devices import Device
from isokernel.backends.parity import bit_identical
from isokernel.backends.strategies import choose
from isokernel.cli import main
from isokernel.codegen.pixel import pixel_count
from isokernel.ir import EVAL, Op
from isokernel.models.tau_omega import synthetic_inputs, tau_omega
from isokernel.reports import devices_table
from isokernel.transforms import prepare_for_execution

from .cuda_host import HostRuntime

TOY = "toy-numpy"
TOY_CONTRACT = "bit-identical to reference: the same EVAL rules, node by node"
BACKENDS = Path(ik.__file__).parent / "backends"
needs_cc = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                              reason=f"host C compiler: {codegen.unavailable_reason()}")


# --- a strategy defined outside isokernel -------------------------------------------------

class ToyExecutable(ik.ExecutableBase):
    """Evaluates the plan's graph node by node with ``isokernel.ir.EVAL``."""

    forms_run = "toy-numpy runs each form by its EVAL rule"

    def __init__(self, plan):
        super().__init__(plan)
        self.graph = plan.graph
        self.calls = 0

    def call_flat(self, arrays) -> tuple:
        self.calls += 1
        env = dict(zip(self.graph.inputs, arrays))
        for node in self.graph.nodes:
            if node.op is Op.CONST:
                env[node] = node.attrs["value"].value
            elif node.op is not Op.INPUT:
                env[node] = EVAL[node.op](*(env[x] for x in node.inputs), **node.attrs)
        return tuple(env[x] for x in self.graph.outputs)

    def source(self) -> str:
        return "# toy-numpy: isokernel.ir.EVAL, node by node\n"

    def report_lines(self) -> list[tuple[str, str]]:
        return [("toy", f"{self.calls} call(s) so far")]


def toy_spec(priority=None, probe=lambda: None, compiler=ToyExecutable) -> ik.StrategySpec:
    profile = ik.Profile("toy-numpy-cpu", "cpu", ("numpy",), frozenset({"reference"}),
                         probe=probe)
    return ik.StrategySpec(name=TOY, device="cpu", contract=TOY_CONTRACT, profile=profile,
                           memory=ik.MemoryModel("eager", "eager"), compiler=compiler,
                           auto_priority=priority)


@pytest.fixture
def register_toy():
    """Registers the toy strategy (any priority); afterwards it is removed
    and the built-in strategies are exactly as they were."""
    before = all_strategies()

    def register(**kwargs):
        return ik.register_strategy(toy_spec(**kwargs), replace=True)
    yield register
    if TOY in [s.name for s in all_strategies()]:
        ik.unregister_strategy(TOY)
    assert all_strategies() == before
    assert [s.compiler for s in all_strategies()] == [s.compiler for s in before]


def _model(x, y):
    return inp.exp(x) * inp.sin(y) + inp.sum(x * y, axis=1, keepdims=True), inp.tanh(x) - 1.5


def _args():
    rng = np.random.default_rng(7)
    return rng.uniform(-2, 2, (500, 3)), rng.uniform(-2, 2, (500, 3))


def test_jit_runs_an_external_strategy_with_the_references_bits(register_toy):
    register_toy()
    got = ik.jit(_model, strategy=TOY)(*_args())
    want = ik.jit(_model, strategy="reference")(*_args())
    assert all(bit_identical(g, w) for g, w in zip(got, want))
    args = synthetic_inputs(2000, np.float32)
    assert bit_identical(ik.jit(tau_omega, strategy=TOY)(*args),
                         ik.jit(tau_omega, strategy="reference")(*args))


def test_the_report_names_the_external_strategy_and_its_contract(register_toy):
    register_toy()
    compiled = ik.jit(_model, strategy=TOY).lower(*_args()).compile()
    compiled(*_args())
    text = str(compiled.report())
    assert f"strategy   {TOY} on cpu (requested)" in text
    assert f"contract   {TOY_CONTRACT}" in text
    assert "profile    toy-numpy-cpu (providers numpy; accepts trust: reference)" in text
    assert "toy        1 call(s) so far" in text  # the executable's own report lines
    memory = dict(compiled.report().extra)["memory"]
    assert memory.startswith(f"{TOY}: bytes(P) = ") and "eager peak of" in memory
    assert compiled.source() == "# toy-numpy: isokernel.ir.EVAL, node by node\n"


def test_isokernel_devices_lists_the_external_strategy(register_toy, capsys):
    register_toy()
    row = f"{TOY:<17}cpu     available"
    assert row in devices_table()
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert row in out and f"contract: {TOY_CONTRACT}" in out


def test_auto_takes_the_external_strategy_only_when_its_priority_is_highest(register_toy):
    x = np.linspace(0.1, 1.0, 64)
    builtin = choose("auto", Device("cpu")).name
    register_toy(priority=1000)
    compiled = ik.jit(lambda v: v * 2.0 + 1.0).lower(x).compile()
    assert compiled.lowered.strategy.name == TOY
    assert "(auto: fastest available)" in str(compiled.report())
    register_toy(priority=1)  # below every built-in CPU strategy
    compiled = ik.jit(lambda v: v * 2.0 + 1.0).lower(x).compile()
    assert compiled.lowered.strategy.name == builtin != TOY


def test_auto_passes_over_an_unavailable_external_strategy_and_says_why(register_toy):
    register_toy(priority=1000, probe=lambda: "the toy's probe failed (test)")
    compiled = ik.jit(lambda v: v + 1.0).lower(np.ones(8)).compile()
    assert compiled.lowered.strategy.name == choose("auto", Device("cpu")).name != TOY
    assert f"auto: {TOY} unavailable: the toy's probe failed (test)" in str(compiled.report())
    with pytest.raises(ik.BackendUnavailableError, match="the toy's probe failed"):
        ik.jit(lambda v: v + 1.0, strategy=TOY)(np.ones(8))


def test_unregistering_leaves_the_builtins_and_forgets_the_name(register_toy):
    register_toy(priority=1000)
    ik.unregister_strategy(TOY)
    with pytest.raises(ValueError, match=f"unknown strategy '{TOY}'; use one of auto, "):
        ik.jit(_model, strategy=TOY)
    assert TOY not in [s.name for s in all_strategies()]
    assert choose("auto", Device("cpu")).name != TOY


# --- refusals -----------------------------------------------------------------------------

def test_a_registered_name_is_refused_unless_replaced(register_toy):
    register_toy()
    with pytest.raises(ValueError, match="'toy-numpy' is already registered.*replace=True"):
        ik.register_strategy(toy_spec())
    with pytest.raises(ValueError, match="'reference' is already registered"):
        ik.register_strategy(dataclasses.replace(toy_spec(), name="reference"))
    assert ik.register_strategy(toy_spec(priority=5), replace=True).auto_priority == 5


BAD = [
    (dict(name="auto"), "not 'auto'"),
    (dict(name="Toy Numpy"), "lower-case"),
    (dict(device="tpu9"), "device 'tpu9' is not one of"),
    (dict(contract=" "), "the contract must be a sentence"),
    (dict(compiler=None), "compiler must be callable"),
    (dict(options={"workers"}), "options must be a frozenset"),
    (dict(memory=ik.MemoryModel("streamed", "eager")), "memory kind 'streamed'"),
    (dict(memory=ik.MemoryModel("eager", "cached")), "memory traffic 'cached'"),
    (dict(memory=ik.MemoryModel("tiled", "fused")), "needs tile_rows"),
    (dict(memory=None), "memory must be an isokernel.MemoryModel"),
    (dict(profile=ik.Profile("toy-gpu", "cuda", ("numpy",), frozenset({"reference"}))),
     "profile is for another device"),
    (dict(auto_priority=30), "auto_priority 30 is taken by 'native' on cpu"),
    (dict(auto_priority=2.5), "auto_priority must be an integer or None"),
]


@pytest.mark.parametrize("change,problem", BAD)
def test_a_malformed_spec_is_refused_naming_the_problem(change, problem, register_toy):
    with pytest.raises(ValueError, match="strategy '.*' cannot be registered: ") as err:
        ik.register_strategy(dataclasses.replace(toy_spec(), **change))
    assert problem in str(err.value)
    assert TOY not in [s.name for s in all_strategies()]


def test_register_takes_a_spec():
    with pytest.raises(TypeError, match="takes an isokernel.StrategySpec, got dict"):
        ik.register_strategy({"name": TOY})


def test_a_compiler_that_returns_no_executable_is_refused_at_compile(register_toy):
    register_toy(compiler=lambda plan: lambda *arrays: arrays)
    with pytest.raises(TypeError, match="not an isokernel.Executable .*ExecutableBase"):
        ik.jit(_model, strategy=TOY)(*_args())


# --- the built-in strategies through the same interface -----------------------------------

def test_every_builtin_strategy_is_one_spec():
    for spec in all_strategies():
        assert isinstance(spec, ik.StrategySpec) and get_strategy(spec.name) is spec
        assert spec.profile.device == spec.device and spec.contract
        assert isinstance(spec.memory, ik.MemoryModel)
    cpu = sorted((s for s in all_strategies() if s.device == "cpu" and s.auto_priority),
                 key=lambda s: -s.auto_priority)
    assert [s.name for s in cpu] == ["native", "threads", "reference"]
    assert get_strategy("native-whole").auto_priority is None  # by name only, never auto


@pytest.mark.parametrize("name", [s.name for s in all_strategies() if s.device == "cpu"])
def test_every_cpu_executable_satisfies_the_protocol(name):
    if get_strategy(name).unavailable_reason():
        pytest.skip(get_strategy(name).unavailable_reason())
    compiled = ik.jit(_model, strategy=name).lower(*_args()).compile()
    assert isinstance(compiled.executable, ik.Executable)
    outs = compiled.executable.call_flat(list(_args()))
    assert isinstance(outs, tuple) and len(outs) == 2
    assert isinstance(compiled.executable.measure(list(_args())), tuple)
    assert isinstance(compiled.executable.source(), str)
    assert all(len(line) == 2 for line in compiled.executable.report_lines())


@needs_cc
@pytest.mark.parametrize("name", [s.name for s in all_strategies() if s.device == "cuda"])
def test_every_gpu_executable_satisfies_the_protocol(name):
    graph = prepare_for_execution(ik.trace(_model, *_args()))
    spec = get_strategy(name)
    executable = spec.compiler(plan(graph, spec.profile), runtime=HostRuntime())
    assert isinstance(executable, ik.Executable)
    assert len(executable.call_flat(list(_args()))) == 2
    assert isinstance(executable.source(), str) and executable.report_lines()


# --- one name per idea --------------------------------------------------------------------

def test_one_pixel_count_for_the_partition_the_blocks_and_deploy():
    """P is the inputs' longest axis 0 (an output longer than every input does
    not change it); a graph without array inputs takes its outputs'; 0 means
    no pixel axis, which the block runner and deploy read as "runs whole"."""
    x = np.linspace(0.0, 1.0, 64)
    assert pixel_count(ik.jit(lambda v: inp.concatenate([v, v])).lower(x).graph) == 64
    assert pixel_count(ik.jit(lambda s: inp.broadcast_to(s, (10,)) * 2.0).lower(2.0).graph) == 10
    scalar = ik.jit(lambda s: s * 2.0).lower(3.0).graph
    assert pixel_count(scalar) == 0
    assert deploy.memory_shape(scalar, "reference").pixels is None
    assert ik.jit(lambda s: s * 2.0, block=1)(3.0) == 6.0


# --- the layout rules of backends ---------------------------------------------------------

def _modules():
    return {path: ast.parse(path.read_text()) for path in BACKENDS.rglob("*.py")}


def _imported_from(path: Path, node: ast.ImportFrom) -> str:
    """The dotted module an import names, relative to ``isokernel``."""
    package = list(path.relative_to(BACKENDS.parent).with_suffix("").parts)[:-1]
    base = package[:len(package) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def test_no_getattr_probing_in_backends():
    found = [f"{path.name}:{call.lineno}" for path, tree in _modules().items()
             for call in ast.walk(tree) if isinstance(call, ast.Call)
             and isinstance(call.func, ast.Name) and call.func.id == "getattr"
             and len(call.args) == 3]
    assert found == []


# What two strategies (or a strategy and the core) share has a public name in a shared
# module: tests/test_imports.py checks that for every module of isokernel, backends included.


def test_the_core_imports_no_strategy_and_cpu_and_cuda_not_each_other():
    """Core modules (``backends/*.py``, the package's ``__init__`` aside,
    which registers the built-ins) import neither ``cpu`` nor ``cuda``; a
    CPU strategy module imports nothing of ``cuda`` and the reverse."""
    found = []
    for path, tree in _modules().items():
        where = path.relative_to(BACKENDS).parts
        if where == ("__init__.py",):
            continue
        forbidden = {"backends.cpu", "backends.cuda"} - {f"backends.{where[0]}"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _imported_from(path, node)
                names = [f"{target}.{a.name}" for a in node.names]
                if any(n.startswith(f) for n in [target, *names] for f in forbidden):
                    found.append(f"{'/'.join(where)}: from {target} import ...")
    assert found == []
