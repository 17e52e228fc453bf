"""The pipeline's shape: one call walks down the layers (``jit`` in
``pipeline`` calls ``deploy`` and ``backends`` directly, and nothing below
calls up except a function it was handed as an argument), no callbacks are
installed at import time, and only a strategy with kernels for fused forms
fuses (so none unfuses)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp

SRC = pathlib.Path(ik.__file__).parent
_WALK = pathlib.Path(__file__).parents[1] / "benchmarks" / "call_walk.py"
_SPEC = importlib.util.spec_from_file_location("call_walk", _WALK)
call_walk = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(call_walk)

# top to bottom, as the import contract in pyproject.toml orders them
LAYERS = ["cli", "models", "scenes", "reports", "train", "distributed", "pipeline", "deploy",
          "scipy", "linalg", "ode", "optimize", "optim", "nn", "random", "numpy", "backends",
          "codegen", "control", "transforms", "record", "ir"]
SAME = [{"models", "scenes", "reports"}, {"deploy", "scipy"},
        {"linalg", "ode", "optimize", "optim", "nn", "random"}]


CALLBACK = " (a callback argument)"  # how call_walk marks a call of a handed-down function


def _above(callee: str, caller: str) -> bool:
    if any({callee, caller} <= group for group in SAME):
        return False
    return LAYERS.index(callee) < LAYERS.index(caller)


def _walk(call) -> tuple[set[str], list[str]]:
    """The isokernel files a call runs code in, and each call into a higher
    layer that was not a function handed down as an argument (by package)."""
    files, hops = call_walk.walk(call)
    upward = [f"{caller} -> {callee}: {n}" for (caller, callee), n in hops.items()
              if not callee.endswith(CALLBACK) and _above(callee, caller)]
    return files, upward


def test_a_first_native_call_walks_down_the_layers():
    def model(x, y):
        return inp.sin(x) * y + x
    x = np.linspace(0.0, 1.0, 1000)
    files, upward = _walk(lambda: ik.jit(model, strategy="native")(x, x * 2.0))
    assert upward == []
    assert {"pipeline/jit.py", "pipeline/compile.py", "deploy/decisions.py",
            "backends/cpu/native.py"} <= files
    assert not any(f.startswith(("models", "train", "distributed")) for f in files)


def test_a_block_call_and_its_report_walk_down_the_layers():
    def model(x):
        return inp.exp(-x) + 1.0
    x = np.linspace(0.0, 1.0, 1000)
    f = ik.jit(model, strategy="threads", block=300)
    _, upward = _walk(lambda: (f(x), str(f.lower(x).compile().report())))
    assert upward == []


def test_nothing_is_installed_at_import_time():
    assert importlib.util.find_spec("isokernel.backends.hooks") is None
    assert not hasattr(ik.backends, "hooks")


def test_control_flow_has_one_eval_rule_for_every_device():
    """The GPU strategies run the control-flow primitives' own EVAL rules over
    their array namespace; no device copy of the rules exists."""
    assert importlib.util.find_spec("isokernel.backends.cuda.control") is None


def test_only_the_fusion_module_unfuses():
    """No strategy fuses for another and unfuses again: ``unfuse`` is
    defined (a public transform) and called nowhere else in the package."""
    callers = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name == "unfuse":
                    callers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert callers == []


@pytest.mark.parametrize("old, new, name", [
    ("isokernel.models.run", "isokernel.scenes", "run"),
    ("isokernel.deploy.platform", "isokernel.backends.platform", "cpu_budget"),
])
def test_moved_modules_keep_their_old_names_for_one_release_and_warn(old, new, name):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} .*moved to {new}|{old} moved to {new}"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
