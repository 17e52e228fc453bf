"""jit: caching, retracing, static arguments, pytrees, strategies, devices,
capsules and planning."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import Capsule, NumericalPolicy, Profile, plan, register

X = np.linspace(0.1, 1.0, 6)


def test_cache_hits_and_retraces():
    calls = []

    def f(x):
        calls.append(1)
        return inp.exp(x)
    jf = ik.jit(f)
    jf(X), jf(X + 1.0)
    assert len(calls) == 1 and jf.retraces == 0
    jf(np.ones(7))
    assert len(calls) == 2 and jf.retraces == 1


def test_repeated_retraces_warn_naming_the_argument():
    """A changing batch size (axis 0) is polymorphic and does not warn
    (tests/test_polymorphic.py); any other axis does."""
    jf = ik.jit(lambda x, y: x * y)
    y = np.ones(2)
    with pytest.warns(ik.RetraceWarning,
                      match=r"argument 'x' changed from f64\[3, ?4\] to f64\[3, ?5\]"):
        for n in range(2, 6):
            jf(np.ones((3, n)), y[:1])


def test_static_arguments_key_the_cache():
    jf = ik.jit(lambda x, n: x * n + n, static_argnames="n")
    assert jf(X, n=2).tolist() == (X * 2 + 2).tolist()
    assert jf(X, n=3).tolist() == (X * 3 + 3).tolist()
    assert jf.retraces == 1
    with pytest.raises(TypeError, match="not hashable"):
        jf(X, n=[1])
    with pytest.raises(ValueError, match="not parameters"):
        ik.jit(lambda x: x, static_argnames="nope")


def test_static_argnums_and_keywords():
    def f(x, scale, offset=0.0):
        return x * scale + offset
    jf = ik.jit(f, static_argnums=1)
    assert jf(X, 2.0, offset=1.0).tolist() == f(X, 2.0, 1.0).tolist()


class Pair(NamedTuple):
    a: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class State:
    mv: np.ndarray
    t: float


def test_pytrees_in_and_out():
    def f(tree):
        pair, state, rest = tree["pair"], tree["state"], tree["rest"]
        return {"sum": pair.a + pair.b, "state": State(state.mv * state.t, state.t),
                "list": [rest[0], (rest[1] * 2.0,)]}
    tree = {"pair": Pair(X, X), "state": State(X, 2.0), "rest": [X, X]}
    out = ik.jit(f)(tree)
    assert isinstance(out["state"], State) and out["state"].mv.tolist() == (X * 2.0).tolist()
    assert out["list"][1][0].tolist() == (X * 2.0).tolist()
    assert ik.jit(f).lower(tree).graph.input_names[0] == "tree['pair'].a"


def test_python_scalar_arguments_are_weak():
    out = ik.jit(lambda x, s: x * s)(X.astype(np.float32), 2.5)
    assert out.dtype == np.float32


def test_dtype_mixing_inside_jit_names_op():
    with pytest.raises(ik.DTypeError, match=r"multiply at test_jit.py:\d+: float32 and float64"):
        ik.jit(lambda x, y: x * y)(X.astype(np.float32), X)


def test_lower_compile_report():
    lowered = ik.jit(lambda x: inp.tanh(x) * 2.0, strategy="reference").lower(X)
    assert "tanh" in lowered.as_text()
    compiled = lowered.compile()
    assert compiled(X).tolist() == (np.tanh(X) * 2.0).tolist()
    text = str(compiled.report())
    assert "strategy   reference on cpu (requested)" in text
    assert "tanh: numpy.tanh" in text and "trust=reference" in text and "mathlib=NumPy" in text
    with pytest.raises(TypeError, match="argument 'x' changed"):
        compiled(np.ones(3))


def test_jit_inside_a_trace_inlines():
    inner = ik.jit(inp.exp)
    graph = ik.trace(lambda x: inner(x) + 1.0, X)
    assert Op_names(graph) >= {"exp", "add"}


def Op_names(graph):
    return {n.op.value for n in graph.nodes}


@pytest.mark.parametrize("device,match", [
    ("metal", "no maintained runtime profile for device 'metal'"),
    ("rocm", "no maintained runtime profile"),
    ("tpu", "no maintained runtime profile"),
    ("trainium", "no maintained runtime profile for device 'trainium'"),
])
def test_devices_without_a_runtime_are_refused(device, match):
    with pytest.raises(ik.BackendUnavailableError, match=match) as err:
        ik.jit(inp.exp, device=device)
    assert isinstance(err.value, RuntimeError)


def test_cuda_without_a_runtime_is_refused_not_run_on_cpu():
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    with pytest.raises(ik.BackendUnavailableError, match="CuPy is not installed"):
        ik.jit(inp.exp, device="cuda:0")


def test_unknown_device_and_strategy():
    with pytest.raises(ValueError, match="unknown device 'gpu7'"):
        ik.jit(inp.exp, device="gpu7")
    with pytest.raises(ValueError, match="unknown strategy 'fastest'"):
        ik.jit(inp.exp, strategy="fastest")
    with pytest.raises(ik.BackendUnavailableError, match="runs on cuda"):
        ik.jit(inp.exp, strategy="cuda-eager", device="cpu")


def test_unknown_strategy_option():
    with pytest.raises(TypeError, match="does not take option"):
        ik.jit(inp.exp, strategy="reference", workers=2)(X)


def test_planning_refuses_a_graph_with_an_op_outside_the_profile():
    policy = NumericalPolicy()
    register(Capsule("test.add", ik.ir.Op.ADD, "test-basic", "cpu", "checked", "none", policy))
    profile = Profile("test-basic-only", "cpu", ("test-basic",), frozenset({"checked"}))
    graph = ik.trace(lambda x: inp.exp(x) + x, X)
    with pytest.raises(ik.PlanningError) as err:
        plan(graph, profile)
    text = str(err.value)
    assert "profile 'test-basic-only'" in text and "exp (test_jit.py:" in text
    assert "add" not in text.split("for:")[1].split(".")[0]
    strict = Profile("test-trusted-only", "cpu", ("test-basic",), frozenset({"trusted"}))
    with pytest.raises(ik.PlanningError, match="add"):
        plan(ik.trace(lambda x: x + x, X), strict)


import isokernel.ir  # noqa: E402  (used as ik.ir above)


def test_jit_of_a_partial_has_a_name_and_runs():
    import functools
    f = ik.jit(functools.partial(lambda a, x: a * x, 2.0))
    assert "lambda" in f.__name__
    np.testing.assert_array_equal(f(np.ones(3)), 2.0 * np.ones(3))


Y0 = np.array([1.0, -2.0])


@pytest.mark.parametrize("strategy", ["reference", "native"])
def test_a_function_with_an_array_default_argument_compiles(strategy):
    """An array default makes the signature unhashable; jit names the
    arguments without hashing it."""
    def f(t, y0=Y0):
        return t * y0
    g = ik.jit(f, strategy=strategy)
    np.testing.assert_array_equal(g(2.0), [2.0, -4.0])
    np.testing.assert_array_equal(g(2.0, np.array([3.0, 4.0])), [6.0, 8.0])
    np.testing.assert_array_equal(g(2.0, y0=np.array([5.0])), [10.0])
    np.testing.assert_array_equal(g(3.0), [3.0, -6.0])
