"""Structured control flow: ``cond``, ``switch``, ``fori_loop``, ``scan``,
``while_loop`` and ``checkpoint``.

The NumPy meaning, eagerly and jitted, against plain Python loops and
branches; errors that name the user's line and the fix; every CPU strategy
against the reference under its contract; derivatives against central
differences and against the same loop unrolled in Python; lane-wise loops
under ``vmap``; and the memory of reverse mode through a ``while_loop``.
Generated programs are in test_control_properties.py.

Every program here is run in float64 (float32 where a test says so). The
reference of a program is the same computation written with NumPy and
Python ``for``/``while``/``if``: a body written once takes the namespace
``ns`` (``inp`` inside isokernel's loops, ``np`` in the Python version)."""

from __future__ import annotations

import inspect
import math
import os
import tracemalloc
from typing import Any, NamedTuple

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends.cpu.native import ULP_BOUND
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.ir import DifferentiationError, Op, ShapeError, walk
from isokernel.ir.ops import CONTROL, TRANSCENDENTAL

HERE = os.path.basename(__file__)
CPU = ["reference", "threads", "native"]

X = np.array([0.3, -0.7, 1.1, 0.05])
W = np.array([0.5, -0.25, 0.8, 0.1])
A = np.array([1.0, 0.5, -0.5, 2.0])  # an outer NumPy array that bodies close over
T = 5
US = np.linspace(-1.0, 1.2, T * 4).reshape(T, 4)  # row sums -3.3 ... 4.1, none near 0
VS = np.linspace(0.5, 2.0, T * 4).reshape(T, 4)


class State(NamedTuple):
    pos: Any
    vel: Any


# --- helpers ------------------------------------------------------------------------------

def where_of(fn, text: str) -> str:
    """``file:line`` of the first line of ``fn``'s source that holds ``text``:
    the user's line an error must name."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return f"{HERE}:{first + k}"
    raise AssertionError(f"{text!r} is not in the source of {fn.__name__}")


def assert_same_bits(got, want, what: str = "") -> None:
    """Same pytree structure, and every leaf with the same shape, dtype and bytes."""
    got_leaves, got_tree = ik.tree_flatten(got)
    want_leaves, want_tree = ik.tree_flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree} != {want_tree}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        assert bit_identical(g, w), f"{what}: leaf {k}: {np.asarray(g)!r} != {np.asarray(w)!r}"


def assert_to_rounding(got, want, rtol: float, what: str = "") -> None:
    """Every leaf within ``rtol`` of the largest magnitude of the expected leaf."""
    got_leaves, got_tree = ik.tree_flatten(got)
    want_leaves, want_tree = ik.tree_flatten(want)
    assert got_tree == want_tree, f"{what}: structure {got_tree} != {want_tree}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        g, w = np.asarray(g), np.asarray(w)
        scale = 1.0 + float(np.max(np.abs(w), initial=0.0))
        err = float(np.max(np.abs(g - w), initial=0.0))
        assert g.shape == w.shape and err <= rtol * scale, \
            f"{what}: leaf {k} differs by {err:.3g} (allowed {rtol * scale:.3g}): {g} vs {w}"


def stack_trees(trees):
    """Per-step pytrees stacked leaf by leaf on a new axis 0 (what scan's ys are)."""
    rows = [ik.tree_flatten(t)[0] for t in trees]
    tree = ik.tree_flatten(trees[0])[1]
    return ik.tree_unflatten(tree, [np.stack([r[k] for r in rows]) for k in range(len(rows[0]))])


def all_ops(graph) -> set:
    """Every op of ``graph`` and of every body inside it."""
    return {node.op for node in walk(graph)}


# --- 1. programs and their Python meaning --------------------------------------------------

def _kick(ns, c, xs, w):
    pos = c.pos + 0.1 * c.vel
    vel = (c.vel * 0.9 - 0.05 * pos * w + xs["u"] * A * 0.01) / xs["v"][0]
    return State(pos, vel), {"e": pos * vel, "p": (ns.sqrt(pos * pos + 1.0),)}


def scan_pytree(x, w):
    """NamedTuple carry, dict-of-tuple xs and ys, a traced capture (w) and an
    outer array (A)."""
    return ik.scan(lambda c, xs: _kick(inp, c, xs, w), State(x, x * 0.5),
                   {"u": US, "v": (VS,)})


def scan_pytree_py(x, w):
    c, ys = State(x, x * 0.5), []
    for t in range(T):
        c, y = _kick(np, c, {"u": US[t], "v": (VS[t],)}, w)
        ys.append(y)
    return c, stack_trees(ys)


def scan_reverse(x, w):
    return ik.scan(lambda acc, u: (acc * 0.5 + u * w, acc * u), x, US, reverse=True)


def scan_reverse_py(x, w):
    acc, ys = x, [None] * T
    for t in reversed(range(T)):
        acc, ys[t] = acc * 0.5 + US[t] * w, acc * US[t]
    return acc, np.stack(ys)


def scan_length(x, w):
    """``length=`` without xs, ys None, an int32 leaf in the carry."""
    return ik.scan(lambda c, _: ((c[0] * 0.75 + w, c[1] + 1), None), (x, np.int32(0)),
                   length=6)


def scan_length_py(x, w):
    c = (x, np.int32(0))
    for _ in range(6):
        c = (c[0] * 0.75 + w, c[1] + 1)
    return c, None


def fori_static(x, w):
    return ik.fori_loop(1, 8, lambda i, c: c * 0.5 + inp.astype(i, np.float64) * w, x)


def fori_static_py(x, w):
    c = x
    for i in range(1, 8):
        c = c * 0.5 + np.float64(i) * w
    return c


def fori_bounded(x, w, n):
    """Traced ``n`` (under jit): a while_loop; a concrete one: a scan."""
    return ik.fori_loop(0, n, lambda i, c: (c[0] * 0.5 + inp.astype(i, np.float64) * w,
                                            c[1] + c[0]), (x, w))


def fori_bounded_py(x, w, n):
    c = (x, w)
    for i in range(int(n)):
        c = (c[0] * 0.5 + np.float64(i) * w, c[1] + c[0])
    return c


BRANCHES = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - 2.0 * b]


def switch_clamped(x, w, k):
    return ik.switch(k, BRANCHES, x, w)


def switch_clamped_py(x, w, k):
    return BRANCHES[min(max(int(k), 0), len(BRANCHES) - 1)](x, w)


def _positive(a, d):
    return {"s": a + d["w"], "d": a * 2.0}


def _negative(a, d):
    return {"s": a - d["w"], "d": d["w"] * 3.0}


def cond_traced(x, w):
    """A scalar predicate computed from the inputs; a tuple of operands."""
    return ik.cond(inp.sum(x * w) > 0.0, _positive, _negative, x, {"w": w})


def cond_traced_py(x, w):
    return (_positive if np.sum(x * w) > 0.0 else _negative)(x, {"w": w})


def loop_in_loop(x, w):
    def outer(c, u):
        inner = ik.fori_loop(0, 3, lambda i, v: v * 0.5 + u * w, c)  # captures u and w
        return inner + 0.1, inp.sum(inner)
    return ik.scan(outer, x, US)


def loop_in_loop_py(x, w):
    c, ys = x, []
    for t in range(T):
        v = c
        for _ in range(3):
            v = v * 0.5 + US[t] * w
        c, y = v + 0.1, np.sum(v)
        ys.append(y)
    return c, np.stack(ys)


def cond_in_scan(x, w):
    def body(c, u):
        c = ik.cond(inp.sum(u) > 0.0, lambda v: v * 0.5 + u, lambda v: v - u * w, c)
        return c, c * 2.0
    return ik.scan(body, x, US)


def cond_in_scan_py(x, w):
    c, ys = x, []
    for t in range(T):
        u = US[t]
        c = c * 0.5 + u if np.sum(u) > 0.0 else c - u * w
        ys.append(c * 2.0)
    return c, np.stack(ys)


def _grow(v, g):
    """One lane: grows until it passes 3.0, counting its steps (int32)."""
    return ik.while_loop(lambda c: c[0] < 3.0, lambda c: (c[0] * 1.5 + g, c[1] + 1),
                         (v, np.int32(0)))


def while_in_vmap(x, w):
    return ik.vmap(_grow)(x * x + 0.1, w * w + 0.05)


def while_in_vmap_py(x, w):
    values, counts = [], []
    for v, g in zip(x * x + 0.1, w * w + 0.05):
        k = np.int32(0)
        while v < 3.0:
            v, k = v * 1.5 + g, k + 1
        values.append(v), counts.append(k)
    return np.array(values), np.array(counts, dtype=np.int32)


def while_data(x, w):
    """A data-dependent scalar predicate (the trip count is known only at run time)."""
    return ik.while_loop(lambda c: inp.sum(c * c) < 50.0, lambda c: c * 1.3 + w, x)


def while_data_py(x, w):
    c = x
    while np.sum(c * c) < 50.0:
        c = c * 1.3 + w
    return c


def _cell(a, b):
    return a * b + inp.sqrt(a * a + 1.0), b - 0.1 * a


def checkpoint_in_loop(x, w):
    cell = ik.checkpoint(_cell)
    return ik.fori_loop(0, 4, lambda i, c: cell(*c), (x, w))


def checkpoint_in_loop_py(x, w):
    c = (x, w)
    for _ in range(4):
        c = (c[0] * c[1] + np.sqrt(c[0] * c[0] + 1.0), c[1] - 0.1 * c[0])
    return c


N3 = np.int64(3)
PROGRAMS = {
    "scan_pytree": (scan_pytree, scan_pytree_py, (X, W)),
    "scan_reverse": (scan_reverse, scan_reverse_py, (X, W)),
    "scan_length": (scan_length, scan_length_py, (X, W)),
    "fori_static": (fori_static, fori_static_py, (X, W)),
    "fori_bounded_3": (fori_bounded, fori_bounded_py, (X, W, N3)),
    "fori_bounded_0": (fori_bounded, fori_bounded_py, (X, W, np.int64(0))),
    "switch_low": (switch_clamped, switch_clamped_py, (X, W, np.int32(-3))),
    "switch_0": (switch_clamped, switch_clamped_py, (X, W, np.int32(0))),
    "switch_1": (switch_clamped, switch_clamped_py, (X, W, np.int32(1))),
    "switch_2": (switch_clamped, switch_clamped_py, (X, W, np.int32(2))),
    "switch_high": (switch_clamped, switch_clamped_py, (X, W, np.int32(7))),
    "cond_true": (cond_traced, cond_traced_py, (X, W)),
    "cond_false": (cond_traced, cond_traced_py, (X, -W)),
    "loop_in_loop": (loop_in_loop, loop_in_loop_py, (X, W)),
    "cond_in_scan": (cond_in_scan, cond_in_scan_py, (X, W)),
    "while_in_vmap": (while_in_vmap, while_in_vmap_py, (X, W)),
    "while_data": (while_data, while_data_py, (X, W)),
    "checkpoint_in_loop": (checkpoint_in_loop, checkpoint_in_loop_py, (X, W)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eager_call_has_the_numpy_meaning(name):
    fn, py, args = PROGRAMS[name]
    assert_same_bits(fn(*args), py(*args), f"{name} eager")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jitted_call_has_the_numpy_meaning(name):
    fn, py, args = PROGRAMS[name]
    assert_same_bits(ik.jit(fn, strategy="reference")(*args), py(*args), f"{name} jitted")


def test_the_cases_reach_every_control_primitive_they_name():
    """The jitted programs record what their names say: a traced predicate
    is a cond node, a traced bound a while, a static one a scan."""
    found = {name: all_ops(ik.trace(fn, *args)) for name, (fn, _, args) in PROGRAMS.items()}
    assert Op.COND in found["cond_true"] and Op.COND in found["switch_low"]
    assert Op.WHILE in found["fori_bounded_3"] and Op.SCAN not in found["fori_bounded_3"]
    assert Op.SCAN in found["fori_static"] and Op.WHILE not in found["fori_static"]
    assert {Op.SCAN, Op.COND} <= found["cond_in_scan"]
    assert found["loop_in_loop"] >= {Op.SCAN} and Op.WHILE in found["while_in_vmap"]
    assert {Op.SCAN, Op.CHECKPOINT} <= found["checkpoint_in_loop"]


def test_a_traced_predicate_picks_each_branch():
    jitted = ik.jit(cond_traced, strategy="reference")
    assert_same_bits(jitted(X, W), _positive(X, {"w": W}))
    assert_same_bits(jitted(X, -W), _negative(X, {"w": -W}))


@pytest.mark.parametrize("k", [-100, -1, 0, 1, 2, 3, 100])
def test_switch_clamps_its_index_eagerly_and_jitted(k):
    want = BRANCHES[min(max(k, 0), 2)](X, W)
    assert_same_bits(switch_clamped(X, W, np.int32(k)), want, "eager")
    assert_same_bits(ik.jit(switch_clamped, strategy="reference")(X, W, np.int32(k)), want,
                     "jitted")


def test_a_loop_that_runs_no_step_returns_its_init_as_a_fresh_array():
    got = ik.jit(fori_bounded, strategy="reference")(X, W, np.int64(-4))
    assert_same_bits(got, (X, W))
    assert not np.shares_memory(got[0], X) and not np.shares_memory(got[1], W)
    carry, ys = ik.jit(lambda x: ik.scan(lambda c, u: (c + u, c), x, US[:0]),
                       strategy="reference")(X)
    assert_same_bits(carry, X)
    assert ys.shape == (0, 4) and ys.dtype == np.float64


def test_float32_carries_stay_float32_with_python_scalars_in_the_body():
    x32 = X.astype(np.float32)

    def f(x):
        return ik.fori_loop(0, 4, lambda i, c: c * 0.5 + 1.25, x)
    want = x32
    for _ in range(4):
        want = want * np.float32(0.5) + np.float32(1.25)
    assert_same_bits(f(x32), want, "eager")
    assert_same_bits(ik.jit(f, strategy="reference")(x32), want, "jitted")


def _node_count(fn, *args) -> int:
    return len(list(walk(ik.trace(fn, *args))))


def _fori_of(steps: int):
    return lambda x: ik.fori_loop(0, steps, lambda i, c: c * 0.5 + 1.0, x)


def _scan_of(steps: int):
    return lambda x: ik.scan(lambda c, _: (c * 0.5 + 1.0, c), x, length=steps)


def _while_of(steps: int):
    return lambda x: ik.while_loop(lambda c: c[0] < steps,
                                   lambda c: (c[0] + 1, c[1] * 0.5 + 1.0), (0, x))[1]


@pytest.mark.parametrize("make", [_fori_of, _scan_of, _while_of], ids=["fori", "scan", "while"])
def test_recording_size_does_not_grow_with_the_trip_count(make):
    short, long = make(10), make(10_000)
    assert _node_count(short, X) == _node_count(long, X)
    loss_short = ik.grad(lambda x: inp.sum(ik.tree_flatten(short(x))[0][0]))
    loss_long = ik.grad(lambda x: inp.sum(ik.tree_flatten(long(x))[0][0]))
    assert _node_count(loss_short, X) == _node_count(loss_long, X)


# --- 2. errors name the user's line and the fix --------------------------------------------

def _while_grows_shape(x):
    return ik.while_loop(lambda c: inp.sum(c) < 9.0, lambda c: inp.concatenate([c, c]), x)


def _while_changes_dtype(x):
    return ik.while_loop(lambda c: inp.sum(c) < 9.0, lambda c: inp.astype(c, np.float32), x)


def _while_changes_structure(x):
    return ik.while_loop(lambda c: inp.sum(c[0]) < 9.0, lambda c: c[0] + c[1], (x, x))


def _while_vector_predicate(x):
    return ik.while_loop(lambda c: c < 9.0, lambda c: c + 1.0, x)


def _scan_grows_shape(x):
    return ik.scan(lambda c, u: (c[:2], u), x, US)


def _scan_changes_dtype(x):
    return ik.scan(lambda c, u: (inp.astype(c, np.float32), u), x, US)


def _scan_not_a_pair(x):
    return ik.scan(lambda c, u: c + u, x, US)


def _scan_three_outputs(x):
    return ik.scan(lambda c, u: (c + u, u, u), x, US)


def _scan_lengths_differ(x):
    return ik.scan(lambda c, xs: (c + xs[0] + xs[1], None), x, (US, VS[:3]))


def _scan_length_disagrees(x):
    return ik.scan(lambda c, u: (c + u, None), x, US, length=7)


def _fori_changes_dtype(x):
    return ik.fori_loop(0, 3, lambda i, c: inp.astype(c, np.float32), x)


def _cond_vector_predicate(x):
    return ik.cond(x > 0.0, lambda v: v, lambda v: -v, x)


def _cond_structures_differ(x):
    return ik.cond(x[0] > 0.0, lambda v: v, lambda v: (v, v), x)


def _cond_shapes_differ(x):
    return ik.cond(x[0] > 0.0, lambda v: v, lambda v: v[:2], x)


def _cond_dtypes_differ(x):
    return ik.cond(x[0] > 0.0, lambda v: v, lambda v: inp.astype(v, np.float32), x)


def _switch_shapes_differ(x):
    return ik.switch(inp.astype(x[0], np.int32), [lambda v: v, lambda v: v[1:]], x)


def _every_zero(x):
    return ik.while_loop(lambda c: inp.sum(c) < 9.0, lambda c: c + 1.0, x, checkpoint_every=0)


def _every_negative(x):
    return ik.while_loop(lambda c: inp.sum(c) < 9.0, lambda c: c + 1.0, x, checkpoint_every=-3)


# (function, the call its error must point at, error type, words of the fix);
# eager: whether the eager call checks too (a concrete cond predicate picks its
# branch without recording the other one, as documented in cond.py)
ERRORS = {
    "while_shape": (_while_grows_shape, "ik.while_loop", ShapeError, "same structure, shapes"),
    "while_dtype": (_while_changes_dtype, "ik.while_loop", ShapeError, "astype"),
    "while_structure": (_while_changes_structure, "ik.while_loop", ShapeError, "structure"),
    "while_predicate": (_while_vector_predicate, "ik.while_loop", ShapeError, "inp.any"),
    "scan_shape": (_scan_grows_shape, "ik.scan", ShapeError, "same structure, shapes"),
    "scan_dtype": (_scan_changes_dtype, "ik.scan", ShapeError, "astype"),
    "scan_not_a_pair": (_scan_not_a_pair, "ik.scan", ShapeError, "y=None"),
    "scan_three": (_scan_three_outputs, "ik.scan", ShapeError, "pair (carry, y)"),
    "scan_xs_lengths": (_scan_lengths_differ, "ik.scan", ShapeError, "[3, 5]"),
    "scan_length": (_scan_length_disagrees, "ik.scan", ShapeError, "[5, 7]"),
    "fori_dtype": (_fori_changes_dtype, "ik.fori_loop", ShapeError, "astype"),
    "cond_predicate": (_cond_vector_predicate, "ik.cond", ShapeError, "inp.any"),
    "cond_structure": (_cond_structures_differ, "ik.cond", ShapeError, "same structure"),
    "cond_shape": (_cond_shapes_differ, "ik.cond", ShapeError, "same structure"),
    "cond_dtype": (_cond_dtypes_differ, "ik.cond", ShapeError, "same structure"),
    "switch_shape": (_switch_shapes_differ, "ik.switch", ShapeError, "same structure"),
    "every_zero": (_every_zero, "ik.while_loop", ValueError, "positive number of steps"),
    "every_negative": (_every_negative, "ik.while_loop", ValueError, "positive number"),
}
RECORDED_ONLY = {"cond_structure", "cond_shape", "cond_dtype", "switch_shape"}


def _check_error(err, fn, call: str, fix: str) -> None:
    text = str(err.value)
    assert where_of(fn, call) in text, f"the message does not name the user's line: {text}"
    assert fix in text, f"the message does not give the fix ({fix!r}): {text}"


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_jitted_error_names_the_line_and_the_fix(name):
    fn, call, kind, fix = ERRORS[name]
    with pytest.raises(kind) as err:
        ik.jit(fn, strategy="reference")(X)
    _check_error(err, fn, call, fix)


@pytest.mark.parametrize("name", sorted(set(ERRORS) - RECORDED_ONLY))
def test_eager_error_names_the_line_and_the_fix(name):
    fn, call, kind, fix = ERRORS[name]
    with pytest.raises(kind) as err:
        fn(X)
    _check_error(err, fn, call, fix)


def test_hessian_through_a_while_loop_compiles_on_every_cpu_strategy():
    def loss(x):
        c = ik.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, inp.sin(c[1]) * 1.1),
                          (0, x))
        return inp.sum(c[1])

    def unrolled(x):
        for _ in range(4):
            x = inp.sin(x) * 1.1
        return inp.sum(x)
    want = ik.hessian(loss)(X)
    assert_to_rounding(want, ik.hessian(unrolled)(X), 1e-13, "hessian")
    for strategy in ("reference", "threads", "native"):
        got = ik.jit(ik.hessian(loss), strategy=strategy, numerics="portable")(X)
        assert_to_rounding(got, want, 1e-13, strategy)


# --- 3. every CPU strategy against the reference --------------------------------------------

def _strategy_check(strategy: str, fn, args, numerics: str = "native") -> None:
    """``fn`` jitted on ``strategy`` meets its contract against the
    reference: bit for bit for IEEE basic ops and under portable numerics;
    within native's per-op ulp bound otherwise (callers pass only programs
    in which no transcendental result is fed back, so no bound is amplified)."""
    want = ik.jit(fn, strategy="reference", numerics=numerics)(*args)
    got = ik.jit(fn, strategy=strategy, numerics=numerics)(*args)
    ops = all_ops(ik.trace(fn, *args)) & TRANSCENDENTAL
    if strategy != "native" or numerics == "portable" or not ops:
        assert_same_bits(got, want, f"{strategy}")
        return
    bound = max(ULP_BOUND[op] for op in ops)
    for g, w in zip(ik.tree_flatten(got)[0], ik.tree_flatten(want)[0]):
        assert max_ulp(g, w) <= bound, f"{strategy}: {max_ulp(g, w)} ulp > {bound}"


@pytest.mark.parametrize("strategy", CPU)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_cpu_strategy_gives_the_reference_bits(strategy, name):
    fn, _, args = PROGRAMS[name]
    assert not all_ops(ik.trace(fn, *args)) & TRANSCENDENTAL  # IEEE basic ops: bits
    _strategy_check(strategy, fn, args)


BIG = np.linspace(-1.0, 1.0, 40_000)  # above the inline threshold: threads and native tile


def tiled_program(x, w):
    """Elementwise work before, between and after loops and a branch, on
    enough pixels for the tiled paths."""
    y = x * 2.0 + w
    y = ik.fori_loop(0, 3, lambda i, c: c * 0.5 + y * 0.25, y)
    y = ik.cond(inp.sum(y) > 0.0, lambda v: v * 3.0, lambda v: v - 1.0, y)
    c, ys = ik.scan(lambda c, u: (c * 0.5 + u, c * u), y, inp.stack([x, w, y * 0.0 + 1.0]))
    return c * 2.0 - y, ys


def tanh_outputs(x, w):
    """Transcendentals whose results are not fed back: each output element
    goes through one tanh or exp, so native's per-op bound applies as is."""
    def body(c, u):
        c = c * 0.5 + u * w
        return c, inp.tanh(c)
    c, ys = ik.scan(body, x, US)
    return inp.exp(c * 0.1), ys


def sin_feedback(x, w):
    """A transcendental fed back through the carry: bits under portable numerics."""
    return ik.fori_loop(0, 6, lambda i, c: inp.sin(c * 1.3 + w) + inp.exp(-c * c) * 0.5, x)


def _grad_program(x, w):
    def step(c):
        i, v = c
        return i + 1, v * 0.75 + inp.sqrt(v * v + w * w + 1.0) * 0.125
    v = ik.while_loop(lambda c: c[0] < 7, step, (0, x))[1]
    return inp.sum(v * v)


STRATEGY_EXTRAS = {
    "tiled": (tiled_program, (BIG, BIG[::-1] * 0.5), "native"),
    "tanh_outputs": (tanh_outputs, (X, W), "native"),
    "sin_feedback_portable": (sin_feedback, (X, W), "portable"),
    "grad_while": (ik.grad(_grad_program, argnums=(0, 1)), (X, W), "native"),
    "grad_scan_portable": (ik.grad(lambda x, w: inp.sum(scan_pytree(x, w)[1]["p"][0]
                                                        * inp.sin(w)), argnums=(0, 1)),
                           (X, W), "portable"),
    "grad_checkpointed_while_portable": (
        ik.grad(lambda x, w: inp.sum(ik.checkpoint(CHECKPOINTED["while"])(x, w) * inp.exp(x)),
                argnums=(0, 1)), (X, W), "portable"),
    "vmap_grad_while": (ik.vmap(ik.grad(lambda v: _grow(v, 0.25)[0])), (X * X + 0.1,),
                        "native"),
}


@pytest.mark.parametrize("strategy", CPU)
@pytest.mark.parametrize("name", sorted(STRATEGY_EXTRAS))
def test_every_cpu_strategy_meets_its_contract_on_derivatives_and_tiles(strategy, name):
    fn, args, numerics = STRATEGY_EXTRAS[name]
    _strategy_check(strategy, fn, args, numerics)


def test_the_tiled_program_matches_numpy():
    x, w = BIG, BIG[::-1] * 0.5
    y = x * 2.0 + w
    start = y
    for _ in range(3):
        y = y * 0.5 + start * 0.25
    y = y * 3.0 if np.sum(y) > 0.0 else y - 1.0
    c, ys = y, []
    for u in (x, w, y * 0.0 + 1.0):
        c, out = c * 0.5 + u, c * u
        ys.append(out)
    assert_same_bits(ik.jit(tiled_program, strategy="reference")(x, w),
                     (c * 2.0 - y, np.stack(ys)))


# --- 4. derivatives -------------------------------------------------------------------------
#
# Each loss is written twice: with isokernel's control flow, and unrolled as a
# Python loop (branches as Python ``if`` on values known while recording).
# Against central differences with step H: the truncation error is
# H**2 |f'''| / 6 ~ 2e-11 |f'''| and the rounding error eps |f| / H ~ 2e-11 |f|;
# FD_TOL (1e-6, relative to 1 + the largest derivative) leaves four orders of
# magnitude for the sizes these losses have (|f|, |f'''| < 100).

H = 1e-5
FD_TOL = 1e-6
XB = np.stack([X, X[::-1] * 0.8])  # a batch for vmap(grad)


def central_differences(f, args, argnum: int) -> np.ndarray:
    """d f / d args[argnum] by central differences, shape f's + the argument's."""
    x = np.asarray(args[argnum], dtype=np.float64)
    base = np.asarray(f(*args))
    out = np.empty(base.shape + x.shape)
    for j in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[j] = H
        plus, minus = list(args), list(args)
        plus[argnum], minus[argnum] = x + step, x - step
        out[(...,) + j] = (np.asarray(f(*plus)) - np.asarray(f(*minus))) / (2 * H)
    return out


def assert_matches_differences(got, fd, what: str) -> None:
    got, fd = np.asarray(got), np.asarray(fd)
    tol = FD_TOL * (1.0 + float(np.max(np.abs(fd))))
    err = float(np.max(np.abs(got - fd)))
    assert got.shape == fd.shape and err <= tol, \
        f"{what}: {err:.3g} from central differences (H={H}, allowed {tol:.3g})"


def _mixed(ns, i, c, w):
    a, b = c
    return ns.sin(a) * 0.8 + b * w * 0.3 + i * 0.1, b * 0.9 + ns.tanh(a) * w


def d_scan(x, w):
    def body(c, u):
        return _mixed(inp, u, c, w), c[0] * c[1]
    c, ys = ik.scan(body, (x, x * 0.5), US)
    return inp.sum(c[0] * c[1]) + inp.sum(ys * A)


def d_scan_unrolled(x, w):
    c, ys = (x, x * 0.5), []
    for t in range(T):
        c, y = _mixed(inp, US[t], c, w), c[0] * c[1]
        ys.append(y)
    return inp.sum(c[0] * c[1]) + inp.sum(inp.stack(ys) * A)


def d_fori(x, w):
    c = ik.fori_loop(0, T, lambda i, c: _mixed(inp, inp.astype(i, np.float64), c, w),
                     (x, x * 0.5))
    return inp.sum(c[0] * c[1])


def d_fori_unrolled(x, w):
    c = (x, x * 0.5)
    for t in range(T):
        c = _mixed(inp, np.float64(t), c, w)
    return inp.sum(c[0] * c[1])


def d_while(x, w):
    def step(s):
        i, c = s
        return i + 1, _mixed(inp, inp.astype(i, np.float64), c, w)
    c = ik.while_loop(lambda s: s[0] < T, step, (np.int64(0), (x, x * 0.5)))[1]
    return inp.sum(c[0] * c[1])


def _taken(a, w):
    return inp.sin(a) * w + a * a


def _other(a, w):
    return a * a * w - inp.tanh(a)


def d_cond_true(x, w):
    return inp.sum(ik.cond(inp.sum(x) > 0.0, _taken, _other, x, w))  # sum(X) = 0.75


def d_cond_true_unrolled(x, w):
    return inp.sum(_taken(x, w))


def d_cond_false(x, w):
    return inp.sum(ik.cond(inp.sum(x) > 1.0, _taken, _other, x, w))


def d_cond_false_unrolled(x, w):
    return inp.sum(_other(x, w))


def _cell2(a, b):
    return inp.tanh(a * b) + a * 0.5, b * 0.9 + inp.sin(a) * 0.1


def d_checkpoint(x, w):
    cell = ik.checkpoint(_cell2)
    c = ik.fori_loop(0, 4, lambda i, c: cell(*c), (x, w))
    return inp.sum(c[0] * c[1] + c[0])


def d_checkpoint_unrolled(x, w):
    c = (x, w)
    for _ in range(4):
        c = _cell2(*c)
    return inp.sum(c[0] * c[1] + c[0])


def d_nested(x, w):
    """A cond and a fori inside a scan."""
    def body(c, u):
        c = ik.cond(inp.sum(u) > 0.0, lambda v: inp.sin(v) + u, lambda v: v * w - u, c)
        c = ik.fori_loop(0, 2, lambda i, v: v * 0.5 + inp.tanh(v * w), c)
        return c, inp.sum(c * c)
    c, ys = ik.scan(body, x, US)
    return inp.sum(c) + inp.sum(ys)


def d_nested_unrolled(x, w):
    c, ys = x, []
    for t in range(T):
        u = US[t]
        c = inp.sin(c) + u if np.sum(u) > 0.0 else c * w - u
        for _ in range(2):
            c = c * 0.5 + inp.tanh(c * w)
        ys.append(inp.sum(c * c))
    return inp.sum(c) + inp.sum(inp.stack(ys))


def d_while_in_scan(x, w):
    def body(c, u):
        c = ik.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, inp.sin(s[1]) * w + u),
                          (0, c))[1]
        return c, c * u
    c, ys = ik.scan(body, x, US)
    return inp.sum(c) + inp.sum(ys)


def d_while_in_scan_unrolled(x, w):
    c, ys = x, []
    for t in range(T):
        for _ in range(2):
            c = inp.sin(c) * w + US[t]
        ys.append(c * US[t])
    return inp.sum(c) + inp.sum(inp.stack(ys))


LOSSES = {
    "scan": (d_scan, d_scan_unrolled),
    "fori": (d_fori, d_fori_unrolled),
    "while": (d_while, d_fori_unrolled),
    "cond_true": (d_cond_true, d_cond_true_unrolled),
    "cond_false": (d_cond_false, d_cond_false_unrolled),
    "checkpoint": (d_checkpoint, d_checkpoint_unrolled),
    "nested": (d_nested, d_nested_unrolled),
    "while_in_scan": (d_while_in_scan, d_while_in_scan_unrolled),
}
TRANSFORMS = {
    "grad": lambda f: ik.grad(f, argnums=(0, 1)),
    "jit(grad)": lambda f: ik.jit(ik.grad(f, argnums=(0, 1))),
    "jacfwd": lambda f: ik.jacfwd(f, argnums=(0, 1)),
    "jacrev": lambda f: ik.jacrev(f, argnums=(0, 1)),
}
# How a transform of the loop compares with the same transform of the unrolled
# loop. One JVP (test_jvp_matches_the_unrolled_loop_bit_for_bit) runs the body's
# JVP step by step, the same ops in the same order as the unrolled JVP: the same
# bits. Everything else agrees to rounding, 1e-13 relative (a few ulp of the
# largest term): jacfwd and jacrev batch their directions with vmap, and a
# batched scan stacks its ys step-major and hands them on as a transposed view,
# which NumPy's sum adds up in another order than a fresh array; reverse mode
# sums the cotangent of a captured value (w) over the steps in the loop's carry,
# in another order than the unrolled transpose adds its per-use terms. jit runs
# on the automatic strategy, whose C code calls libm for transcendentals (native
# numerics, ulp-bounded per op): 1e-12 relative.
UNROLLED_RTOL = {"grad": 1e-13, "jit(grad)": 1e-12, "jacfwd": 1e-13, "jacrev": 1e-13}


@pytest.mark.parametrize("strategy", CPU)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_cpu_strategy_gives_the_reference_gradient_in_portable_numerics(strategy, name):
    """The losses feed sin and tanh back through their loops: portable
    numerics, where every strategy promises the reference's bits."""
    _strategy_check(strategy, ik.grad(LOSSES[name][0], argnums=(0, 1)), (X, W), "portable")


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_derivative_matches_central_differences(name, transform):
    loop, _ = LOSSES[name]
    got = TRANSFORMS[transform](loop)(X, W)
    for k in (0, 1):
        assert_matches_differences(got[k], central_differences(loop, (X, W), k),
                                   f"{name} {transform} d/d{'xw'[k]}")


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_derivative_matches_the_unrolled_loop(name, transform):
    loop, unrolled = LOSSES[name]
    got = TRANSFORMS[transform](loop)(X, W)
    want = TRANSFORMS[transform](unrolled)(X, W)
    assert_to_rounding(got, want, UNROLLED_RTOL[transform], f"{name} {transform}")


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_jvp_matches_the_unrolled_loop_bit_for_bit(name):
    loop, unrolled = LOSSES[name]
    tangents = (np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.25, 1.0, -1.5, 2.0]))
    got = ik.jvp(loop, (X, W), tangents)
    assert_same_bits(got, ik.jvp(unrolled, (X, W), tangents), f"{name} jvp")
    fd = sum(central_differences(loop, (X, W), k) @ tangents[k] for k in (0, 1))
    assert_matches_differences(got[1], fd, f"{name} jvp")


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_vmap_of_grad_is_grad_of_each_row(name):
    """Row by row, bit for bit the gradient of that row alone (the batched
    body runs the same elementwise ops); and against differences."""
    loop, unrolled = LOSSES[name]
    got = ik.vmap(ik.grad(loop, argnums=(0, 1)), in_axes=(0, None))(XB, W)
    for r, row in enumerate(XB):
        assert_same_bits((got[0][r], got[1][r]), ik.grad(loop, argnums=(0, 1))(row, W),
                         f"{name} row {r}")
        assert_matches_differences(got[0][r], central_differences(loop, (row, W), 0),
                                   f"{name} vmap(grad) row {r}")
        assert_to_rounding((got[0][r], got[1][r]),
                           ik.grad(unrolled, argnums=(0, 1))(row, W), 1e-13, name)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_hessian_matches_the_unrolled_loop_and_differences_of_the_gradient(name):
    """hessian = jacfwd(grad): forward mode over the reverse pass of a scan,
    a cond, a checkpoint and a while (the reverse sweep of the JVP'd loop);
    compared with the unrolled loop's (to rounding, as jacfwd and jacrev
    above), with central differences of the gradient, and bit for bit with
    jacfwd(jacrev), which it is."""
    loop, unrolled = LOSSES[name]
    got = ik.hessian(loop)(X, W)
    assert_to_rounding(got, ik.hessian(unrolled)(X, W), 1e-13, f"{name} hessian")
    gradient = ik.grad(loop)
    assert_matches_differences(got, central_differences(gradient, (X, W), 0),
                               f"{name} hessian")
    assert_same_bits(got, ik.jacfwd(ik.jacrev(loop))(X, W), f"{name} hessian")


@pytest.mark.parametrize("name", ["while", "while_in_scan"])
def test_forward_over_forward_through_while_equals_the_hessian(name):
    loop, unrolled = LOSSES[name]
    got = ik.jacfwd(ik.jacfwd(loop))(X, W)
    assert_to_rounding(got, ik.jacfwd(ik.jacfwd(unrolled))(X, W), 1e-13, name)
    assert_to_rounding(got, ik.hessian(loop)(X, W), 1e-13, name)


def d_fori_bounded(x, w, n):
    c = ik.fori_loop(0, n, lambda i, c: _mixed(inp, inp.astype(i, np.float64), c, w),
                     (x, x * 0.5))
    return inp.sum(c[0] * c[1])


@pytest.mark.parametrize("transform", ["grad", "jacfwd", "jacrev"])
def test_fori_with_traced_bounds_differentiates_as_a_while(transform):
    """Under jit the bound is traced: the loop is a while_loop, reverse mode
    its checkpointed sweep. Against the unrolled loop and differences."""
    make = {"grad": ik.grad, "jacfwd": ik.jacfwd, "jacrev": ik.jacrev}[transform]
    jitted = ik.jit(make(d_fori_bounded, argnums=(0, 1)), strategy="reference")
    assert Op.WHILE in all_ops(jitted.lower(X, W, np.int64(T)).compile().graph) or \
        Op.WHILE_VJP in all_ops(jitted.lower(X, W, np.int64(T)).compile().graph)
    got = jitted(X, W, np.int64(T))
    assert_to_rounding(got, make(d_fori_unrolled, argnums=(0, 1))(X, W), 1e-13, transform)
    for k in (0, 1):
        assert_matches_differences(got[k], central_differences(d_fori, (X, W), k), transform)


def test_vmap_of_grad_through_while_keeps_one_gradient_per_row_for_a_captured_value():
    """The minimal case of the rows above: the gradient with respect to a
    value the loop body captures (w, the same for every row) is still one
    gradient per row under vmap, as for the unrolled loop."""
    def loop(x, w):
        return inp.sum(ik.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * w),
                                     (0, x))[1])

    def unrolled(x, w):
        return inp.sum(x * w * w * w)
    got = ik.vmap(ik.grad(loop, argnums=1), in_axes=(0, None))(XB, W)
    want = ik.vmap(ik.grad(unrolled, argnums=1), in_axes=(0, None))(XB, W)
    assert np.shape(got) == (2, 4), f"vmap(grad) gave shape {np.shape(got)}, not (2, 4)"
    assert_to_rounding(got, want, 1e-13, "vmap(grad) wrt a capture")


def test_grad_of_a_mapped_loop_sums_a_shared_capture_over_the_rows():
    def loop(x, w):
        return ik.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, inp.sin(s[1]) * w),
                             (0, x))[1]
    got = ik.grad(lambda w: inp.sum(ik.vmap(loop, in_axes=(0, None))(XB, w)))(W)
    rows = sum(ik.grad(lambda w, r=r: inp.sum(loop(r, w)))(W) for r in XB)
    assert_to_rounding(got, rows, 1e-13, "grad of a vmapped while wrt a shared capture")


# --- checkpoint around loops ----------------------------------------------------------------

def _sin_step(c, w):
    return inp.sin(c) * w + c * 0.5


CHECKPOINTED = {
    "fori": lambda x, w: ik.fori_loop(0, 3, lambda i, c: _sin_step(c, w), x),
    "fori_no_step": lambda x, w: ik.fori_loop(0, 0, lambda i, c: _sin_step(c, w), x),
    "scan": lambda x, w: ik.scan(lambda c, u: (_sin_step(c, w) + u, None), x, US[:3])[0],
    "while": lambda x, w: ik.while_loop(lambda s: s[0] < 3,
                                        lambda s: (s[0] + 1, _sin_step(s[1], w)), (0, x))[1],
    "cond": lambda x, w: ik.cond(inp.sum(x) > 0.0, lambda c: _sin_step(c, w), inp.tanh, x),
}
CHECKPOINTED_UNROLLED = {
    "fori": lambda x, w: _sin_step(_sin_step(_sin_step(x, w), w), w),
    "fori_no_step": lambda x, w: x,
    "scan": lambda x, w: _sin_step(_sin_step(_sin_step(x, w) + US[0], w) + US[1], w) + US[2],
    "while": lambda x, w: _sin_step(_sin_step(_sin_step(x, w), w), w),
    "cond": lambda x, w: _sin_step(x, w),  # sum(X) > 0
}


@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "jacrev"])
@pytest.mark.parametrize("name", sorted(CHECKPOINTED))
def test_reverse_mode_through_a_checkpointed_loop(name, transform):
    """checkpoint (remat) around a whole loop: its reverse mode recomputes
    the loop inside the reverse pass, with the loop's own rules."""
    def loss(x, w):
        return inp.sum(ik.checkpoint(CHECKPOINTED[name])(x, w) * A)

    def unrolled(x, w):
        return inp.sum(CHECKPOINTED_UNROLLED[name](x, w) * A)
    got = TRANSFORMS[transform](loss)(X, W)
    assert_to_rounding(got, TRANSFORMS[transform](unrolled)(X, W), UNROLLED_RTOL[transform],
                       f"checkpoint({name}) {transform}")
    for k in (0, 1):
        assert_matches_differences(got[k], central_differences(loss, (X, W), k), name)


# --- custom rules inside loop bodies --------------------------------------------------------

@ik.custom_jvp
def doubled_sin(x):
    """sin, whose rule is deliberately twice its derivative."""
    return inp.sin(x)


@doubled_sin.defjvp
def _doubled_sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return doubled_sin(x), 2.0 * inp.cos(x) * t


@ik.custom_vjp
def tripled_exp(x):
    """exp, whose reverse rule is deliberately three times its derivative."""
    return inp.exp(x)


tripled_exp.defvjp(lambda x: (tripled_exp(x), (x,)),
                   lambda res, ct: (3.0 * inp.exp(res[0]) * ct,))


def _thrice(fn, form: str):
    """``fn`` applied three times (halved each time) by ``form``, summed."""
    def step(c):
        return fn(c) * 0.5

    def python(x):
        for _ in range(3):
            x = step(x)
        return x
    loops = {
        "scan": lambda x: ik.scan(lambda c, _: (step(c), None), x, length=3)[0],
        "fori": lambda x: ik.fori_loop(0, 3, lambda i, c: step(c), x),
        "while": lambda x: ik.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, step(s[1])),
                                         (0, x))[1],
        "cond": lambda x: ik.cond(inp.sum(x) > 0.0, python, lambda v: v, x),
        "checkpoint": ik.checkpoint(python),
        "unrolled": python,
    }
    return lambda x: inp.sum(loops[form](x))


CUSTOM_FORMS = ["scan", "fori", "while", "cond", "checkpoint"]


@pytest.mark.parametrize("form", CUSTOM_FORMS)
@pytest.mark.parametrize("fn", [doubled_sin, tripled_exp], ids=["custom_jvp", "custom_vjp"])
def test_a_custom_rule_in_a_loop_body_is_the_rule_the_gradient_uses(fn, form):
    """The loop's gradient is the unrolled loop's (to rounding), which uses
    the deliberately wrong rule: far from the true derivative."""
    loss = _thrice(fn, form)
    got = ik.grad(loss)(X)
    assert_to_rounding(got, ik.grad(_thrice(fn, "unrolled"))(X), 1e-13, form)
    assert_to_rounding(ik.vmap(ik.grad(loss))(XB), np.stack([ik.grad(loss)(r) for r in XB]),
                       1e-13, f"{form} vmap(grad)")
    true = central_differences(loss, (X,), 0)
    assert np.all(np.abs(got - true) > 0.1 * np.abs(true)), \
        f"{form}: the gradient {got} ignores the custom rule (true derivative {true})"


@pytest.mark.parametrize("form", CUSTOM_FORMS)
def test_a_custom_jvp_rule_in_a_loop_body_is_what_forward_mode_uses(form):
    loss = _thrice(doubled_sin, form)
    got = ik.jacfwd(loss)(X)
    assert_to_rounding(got, ik.jacfwd(_thrice(doubled_sin, "unrolled"))(X), 1e-13, form)
    assert_to_rounding(got, ik.grad(loss)(X), 1e-13, f"{form}: forward against reverse")


@pytest.mark.parametrize("form", ["scan", "while"])
def test_forward_mode_through_a_custom_vjp_in_a_loop_is_refused(form):
    with pytest.raises(DifferentiationError, match="tripled_exp"):
        ik.jacfwd(_thrice(tripled_exp, form))(X)


# --- cond: only the taken branch ------------------------------------------------------------

def safe_sqrt(x):
    return ik.cond(x > 0.0, inp.sqrt, lambda v: v * 2.0, x)


def safe_recip(x):
    return ik.cond(x != 0.0, lambda v: 1.0 / v, lambda v: v * 3.0, x)


SAFE = {
    # function, a point where the untaken branch is NaN or inf (value and
    # derivative), the taken branch there
    "sqrt_of_negative": (safe_sqrt, -4.0, lambda v: v * 2.0),
    "sqrt_of_positive": (safe_sqrt, 9.0, inp.sqrt),
    "recip_of_zero": (safe_recip, 0.0, lambda v: v * 3.0),
    "recip_of_two": (safe_recip, 2.0, lambda v: 1.0 / v),
}
SCALAR_TRANSFORMS = {
    "grad": ik.grad,
    "jit(grad)": lambda f: ik.jit(ik.grad(f)),
    "jit(grad) reference": lambda f: ik.jit(ik.grad(f), strategy="reference"),
    "jacfwd": ik.jacfwd,
    "jacrev": ik.jacrev,
    "hessian": ik.hessian,
}


@pytest.mark.parametrize("transform", sorted(SCALAR_TRANSFORMS))
@pytest.mark.parametrize("case", sorted(SAFE))
def test_only_the_taken_branch_is_computed_and_differentiated(case, transform):
    """Under np.errstate(all="raise") any NaN or inf of the untaken branch
    would raise: none is computed. The derivative is the taken branch's, bit
    for bit."""
    fn, x, taken = SAFE[case]
    make = SCALAR_TRANSFORMS[transform]
    with np.errstate(all="raise"):
        got = make(fn)(np.float64(x))
        want = make(taken)(np.float64(x))
        assert_same_bits(ik.jit(fn, strategy="reference")(np.float64(x)), taken(np.float64(x)))
    assert np.isfinite(got) and bit_identical(got, want), f"{case}: {got} != {want}"


XS = np.array([-4.0, 0.0, 4.0, 9.0, -0.5])


@pytest.mark.parametrize("transform", ["vmap(grad)", "jit(vmap(grad))", "grad(sum(vmap))",
                                       "jacfwd(vmap)", "jacrev(vmap)"])
@pytest.mark.parametrize("fn", [safe_sqrt, safe_recip])
def test_a_mapped_predicate_selects_per_element_and_keeps_untaken_nans_out(fn, transform):
    """Under vmap every branch runs on every element (their NaNs are
    computed, hence errstate ignore), and each element keeps its own
    branch's value and derivative, bit for bit as run alone."""
    makes = {
        "vmap(grad)": lambda: ik.vmap(ik.grad(fn))(XS),
        "jit(vmap(grad))": lambda: ik.jit(ik.vmap(ik.grad(fn)))(XS),
        "grad(sum(vmap))": lambda: ik.grad(lambda v: inp.sum(ik.vmap(fn)(v)))(XS),
        "jacfwd(vmap)": lambda: np.diag(ik.jacfwd(ik.vmap(fn))(XS)),
        "jacrev(vmap)": lambda: np.diag(ik.jacrev(ik.vmap(fn))(XS)),
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        values = ik.vmap(fn)(XS)
        got = makes[transform]()
    alone_values = np.array([fn(np.float64(v)) for v in XS])
    alone = np.array([ik.grad(fn)(np.float64(v)) for v in XS])
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(got)), (values, got)
    assert_same_bits(values, alone_values, "values")
    assert_same_bits(np.asarray(got), alone, transform)


def test_a_mapped_predicate_over_rows_selects_whole_rows():
    rows = np.array([[1.0, 2.0, 0.5], [-1.0, -3.0, 0.25], [0.0, 4.0, -9.0]])

    def per_row(r):
        return inp.sum(ik.cond(inp.sum(r) > 0.0, inp.log, lambda v: v * v, r))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = ik.vmap(per_row)(rows)
        grads = ik.vmap(ik.grad(per_row))(rows)
    assert_same_bits(values, np.array([per_row(r) for r in rows]), "values")
    assert_same_bits(grads, np.stack([ik.grad(per_row)(r) for r in rows]), "gradients")
    assert np.all(np.isfinite(grads))


def _halve_or_divide(c):
    """Takes the first branch at X; the other divides by a value it computes."""
    return ik.cond(inp.sum(c) > -5.0, lambda v: v * 0.5, lambda v: v / (1.0 + v * v), c)


BRANCH_IN_LOOP = {
    "fori": lambda x: ik.fori_loop(0, 2, lambda i, c: _halve_or_divide(c), x),
    "scan": lambda x: ik.scan(lambda c, u: (_halve_or_divide(c) + u, None), x, US[:2])[0],
    "while": lambda x: ik.while_loop(lambda s: s[0] < 2,
                                     lambda s: (s[0] + 1, _halve_or_divide(s[1])), (0, x))[1],
}


@pytest.mark.parametrize("name, transform",
                         [(n, t) for n in sorted(BRANCH_IN_LOOP) for t in ("jacfwd", "jacrev")]
                         + [("fori", "hessian"), ("scan", "hessian")])
def test_derivatives_of_a_loop_run_only_the_taken_branch_of_an_unmapped_predicate(name,
                                                                                  transform):
    """jacfwd and jacrev batch their directions with vmap; the predicate
    depends on the primal carry only, which no direction changes, so the
    untaken branch (and its derivative) must not run: under
    np.errstate(all="raise") any division by zero there would raise."""
    def loss(x):
        return inp.sum(BRANCH_IN_LOOP[name](x))
    make = {"jacfwd": ik.jacfwd, "jacrev": ik.jacrev, "hessian": ik.hessian}[transform]
    with np.errstate(all="raise"):
        got = make(loss)(X)
    unrolled = ik.grad(loss)(X) if transform != "hessian" else np.zeros((4, 4))
    assert_to_rounding(got, unrolled, 1e-13, f"{name} {transform}")


# --- lane-wise while under vmap -------------------------------------------------------------

def lanes(v):
    """Basic ops and sqrt only (each correctly rounded), so a lane computes
    the same bits batched or alone."""
    return ik.while_loop(lambda c: c[1] < 4.0,
                         lambda c: (c[0] * 1.5 + inp.sqrt(c[1]), c[1] + c[0] * 0.25 + 0.5),
                         (v, v))


V = np.array([0.1, 1.0, 3.0, 5.0, 3.9, 0.02])  # 5.0 never runs; the others stop at their own step
TV = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 0.75])


def _trips(v: float) -> int:
    a, b, k = v, v, 0
    while b < 4.0:
        a, b, k = a * 1.5 + np.sqrt(b), b + a * 0.25 + 0.5, k + 1
    return k


def test_lanes_run_different_trip_counts():
    trips = [_trips(v) for v in V]
    assert trips[3] == 0 and len(set(trips)) >= 3, trips


@pytest.mark.parametrize("jitted", [False, True])
def test_each_lane_of_a_mapped_while_is_the_loop_run_on_that_element_alone(jitted):
    mapped = ik.vmap(lanes)
    got = (ik.jit(mapped, strategy="reference") if jitted else mapped)(V)
    for i, v in enumerate(V):
        assert_same_bits((got[0][i], got[1][i]), lanes(np.float64(v)), f"lane {i}")
    assert_same_bits((got[0][3], got[1][3]), (V[3], V[3]), "a lane that never ran")


@pytest.mark.parametrize("order", ["jvp(vmap)", "vmap(jvp)"])
def test_a_finished_lane_keeps_its_carry_and_tangent_bit_for_bit(order):
    if order == "jvp(vmap)":
        primal, tangent = ik.jvp(ik.vmap(lanes), (V,), (TV,))
    else:
        primal, tangent = ik.vmap(lambda v, t: ik.jvp(lanes, (v,), (t,)))(V, TV)
    for i in range(len(V)):
        alone = ik.jvp(lanes, (np.float64(V[i]),), (np.float64(TV[i]),))
        assert_same_bits(((primal[0][i], primal[1][i]), (tangent[0][i], tangent[1][i])),
                         alone, f"lane {i}")
    assert_same_bits((tangent[0][3], tangent[1][3]), (TV[3], TV[3]), "a lane that never ran")


@pytest.mark.parametrize("jitted", [False, True])
def test_reverse_mode_of_a_mapped_while_is_each_lanes_own(jitted):
    def loss(v):
        a, b = lanes(v)
        return a * b
    mapped = ik.vmap(ik.grad(loss))
    got = (ik.jit(mapped, strategy="reference") if jitted else mapped)(V)
    for i, v in enumerate(V):
        assert_same_bits(got[i], ik.grad(loss)(np.float64(v)), f"lane {i}")
        fd = central_differences(loss, (np.float64(v),), 0)
        if _trips(v + H) == _trips(v - H) == _trips(v):  # no step boundary within H
            assert_matches_differences(got[i], fd, f"lane {i}")


# --- every control-flow rule is exercised here ----------------------------------------------

def _linearized_while():
    def loop(x):
        return ik.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, inp.sin(c[1]) * 1.2),
                             (0, x))[1]
    return loop, ik.linearize(loop, X)[1]


def _exercise_every_rule():
    loop, f_jvp = _linearized_while()
    ik.jvp(f_jvp, (X,), (W,))  # while_lin's JVP: linear in its tangents
    ik.vmap(f_jvp)(np.eye(4))  # while_lin batched
    ik.vmap(ik.grad(lambda v: inp.sum(loop(v))))(XB)  # while_vjp batched
    ik.hessian(lambda v: inp.sum(loop(v)))(X)  # while_vjp's JVP: the JVP'd loop's sweep
    for name in ("cond_true", "scan", "checkpoint", "while", "nested"):
        ik.grad(LOSSES[name][0], argnums=(0, 1))(X, W)
        ik.vmap(LOSSES[name][0], in_axes=(0, None))(XB, W)
    ik.vmap(ik.grad(safe_sqrt))(XS)


def test_every_control_flow_rule_is_exercised_by_these_cases(monkeypatch):
    """test_autodiff_rules.py and test_vmap.py leave the control-flow ops'
    JVP and batching rules to this file."""
    from isokernel.transforms.jvp import JVP
    from isokernel.transforms.linearize import PARTIAL_EVAL
    from isokernel.transforms.transpose import TRANSPOSE
    from isokernel.transforms.vmap import BATCH
    called: dict = {}
    for table_name, table in (("jvp", JVP), ("batch", BATCH), ("transpose", TRANSPOSE),
                              ("partial_eval", PARTIAL_EVAL)):
        for op in CONTROL & set(table):
            def counted(*args, _key=(table_name, op), _rule=table[op], **kwargs):
                called[_key] = called.get(_key, 0) + 1
                return _rule(*args, **kwargs)
            monkeypatch.setitem(table, op, counted)
            called.setdefault((table_name, op), 0)
    _exercise_every_rule()
    missing = sorted(f"{table} {op.value}" for (table, op), n in called.items() if n == 0)
    assert missing == []
    assert {op for (table, op) in called if table == "jvp"} == CONTROL


# --- 6. reverse-mode memory -----------------------------------------------------------------

LONG_T = 10_000
WIDE = 10_000  # float64 elements of the carry: 80 kB, the full tape 800 MB


def _decay(v):
    """IEEE basic ops, elementwise: each element's trajectory is its own."""
    return v * 0.999 + 0.001 * v * v


def long_while(x):
    v = ik.while_loop(lambda c: c[0] < LONG_T, lambda c: (c[0] + 1, _decay(c[1])), (0, x))[1]
    return inp.sum(v)


def long_fori(x):
    return inp.sum(ik.fori_loop(0, LONG_T, lambda i, v: _decay(v), x))


def _peak_of(fn, *args):
    """``fn(*args)`` and the most bytes allocated at once while it ran."""
    tracemalloc.start()
    try:
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def test_reverse_mode_through_a_long_while_keeps_a_small_fraction_of_the_tape():
    """10,000 steps on 10^4 float64: the gradient keeps the carry every
    ceil(sqrt(T)) steps and one segment, not the 10,000 carries of a tape.
    It equals the gradient of the same loop as a fori_loop (a scan, which
    stacks its residuals) bit for bit: the same body VJP applied step by
    step, nothing captured to sum; compared on a slice of the elements,
    each of which runs alone through an elementwise body."""
    x = np.linspace(0.1, 0.9, WIDE)
    tape = LONG_T * x.nbytes
    gradient, peak = _peak_of(ik.grad(long_while), x)
    assert peak < 0.05 * tape, (
        f"peak {peak / 1e6:.1f} MB = {peak / tape:.2%} of the full tape ({tape / 1e6:.0f} MB: "
        f"{LONG_T} carries of {x.nbytes / 1e3:.0f} kB), {peak / x.nbytes:.0f} carries")
    part = slice(0, WIDE, 157)
    assert_same_bits(gradient[part], ik.grad(long_fori)(x[part]), "while against fori")
    assert np.all(np.isfinite(gradient)) and np.all(gradient > 0.0)


MID_T = 400
MID_N = 50_000  # 400 kB a carry: Python's own allocations weigh a few carries at most


def _mid_loss(every):
    def loss(x):
        v = ik.while_loop(lambda c: c[0] < MID_T, lambda c: (c[0] + 1, _decay(c[1])), (0, x),
                          checkpoint_every=every)[1]
        return inp.sum(v)
    return loss


@pytest.fixture(scope="module")
def every_peaks():
    """checkpoint_every -> (gradient, peak in carries) for a 400-step loop."""
    x = np.linspace(0.1, 0.9, MID_N)
    found = {}
    for every in (1, 20, None, 100, MID_T):
        gradient, peak = _peak_of(ik.grad(_mid_loss(every)), x)
        found[every] = (gradient, peak / x.nbytes)
    return found


def test_checkpoint_every_trades_memory_for_recomputation(every_peaks):
    """As documented: the carry kept every K steps and one segment of K
    recomputed: K=1 keeps every carry, K=T recomputes them all as one
    segment (both about the whole tape, T carries); the default,
    ceil(sqrt(T)) = 20, keeps a small fraction; the gradient never changes."""
    figures = {k: round(p, 1) for k, (_, p) in every_peaks.items()}
    for every in (1, MID_T):
        assert every_peaks[every][1] >= 0.9 * MID_T, f"peaks in carries: {figures}"
    for every in (20, None):
        assert every_peaks[every][1] <= 0.25 * MID_T, f"peaks in carries: {figures}"
    assert abs(every_peaks[None][1] - every_peaks[20][1]) <= 2, f"peaks in carries: {figures}"
    for every, (gradient, _) in every_peaks.items():
        assert_same_bits(gradient, every_peaks[1][0], f"checkpoint_every={every}")


@pytest.mark.parametrize("every", [20, 100])
def test_the_reverse_sweep_keeps_one_segment_at_a_time(every_peaks, every):
    """O((T/K + K) carry) with the constant the docstring's account gives:
    ceil(T/K) checkpoints and the K carries of the segment being pulled back,
    plus the temporaries of a step, which K does not change: what K=T keeps
    beyond its one checkpoint and its one segment of T carries."""
    temporaries = every_peaks[MID_T][1] - (1 + MID_T)
    peak = every_peaks[every][1]
    allowed = math.ceil(MID_T / every) + every + temporaries + 1
    assert peak <= allowed, (
        f"checkpoint_every={every}, T={MID_T}: peak {peak:.1f} carries, expected at most "
        f"{allowed:.1f} ({math.ceil(MID_T / every)} checkpoints + one segment of {every} + "
        f"{temporaries:.1f} of a step's temporaries, as K=T shows, + 1)")


def test_reverse_mode_of_a_scan_stacks_only_what_varies_from_step_to_step():
    """Residuals that read neither the carry nor the steps (a captured
    value's negation, broadcast constants) are computed once, not stacked:
    of this step's residuals only x and cos(x) vary."""
    k = np.linspace(0.5, 2.0, 7)

    def energy(k, x0):
        def step(_, s):
            x, v = s
            v = v + 0.01 * (-k * x - 0.1 * v + 0.2 * inp.sin(x))
            return x + 0.01 * v, v
        x, v = ik.fori_loop(0, 50, step, (x0, inp.zeros_like(x0)))
        return inp.sum(0.5 * v * v + 0.5 * k * x * x)
    graph = ik.jit(ik.grad(energy), strategy="reference").lower(k, k - 1.0).compile().graph
    scans = [n for n in graph.nodes if n.op is Op.SCAN]
    stacked = [a for n in scans for a in n.aval if a.shape == (50, 7)]
    assert len(stacked) == 2, [str(a) for a in stacked]
    unrolled = ik.grad(lambda k, x0: _unrolled_energy(k, x0, 50))(k, k - 1.0)
    assert_to_rounding(ik.grad(energy)(k, k - 1.0), unrolled, 1e-13, "invariant residuals")


def _unrolled_energy(k, x, steps):
    v = inp.zeros_like(x)
    for _ in range(steps):
        v = v + 0.01 * (-k * x - 0.1 * v + 0.2 * inp.sin(x))
        x = x + 0.01 * v
    return inp.sum(0.5 * v * v + 0.5 * k * x * x)
