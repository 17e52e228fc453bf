"""Fused forms: each fires on its shape, is bit-identical to the composition
it replaces in both dtypes and on every strategy, inlines back, and is
reported."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import all_strategies, get_strategy
from isokernel.ir import Op
from isokernel.pipeline.blocks import pixel_rows, resize_rows
from isokernel.transforms.fusion import FORM_NAMES, fired, fuse, report_lines, unfuse

from .conftest import assert_contract, calls_libm
from .test_random_programs import make_inputs, programs, run_program

# form -> (model, number of array arguments); each model is the form's shape
# as a user writes it.
MODELS = {
    "scaled_product_exp": (lambda x, y: inp.exp(-2.0 * x * y), 2),
    "affine_exp": (lambda a, x: inp.exp(a - 0.75 * x), 2),
    "gaussian": (lambda x: inp.exp(-1.5 * x ** 2), 1),
    "rsqrt": (lambda x: 1.0 / inp.sqrt(x), 1),
    "logsumexp": (lambda x: inp.logsumexp(x * 30.0, axis=-1), 1),
}


FUSES = ("cuda-fused",)  # the strategies with kernels for the fused forms


def _inputs(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.01, 3.0, (4, 33)).astype(dtype) for _ in range(n)]


def _run(graph, args, strategy="reference"):
    chosen = get_strategy(strategy)
    return chosen.build(chosen.plan(chosen.prepare(graph), {}), {})(*args)


def test_every_form_has_a_model():
    assert set(MODELS) == set(FORM_NAMES)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", sorted(MODELS))
def test_form_fires_and_is_bit_identical(form, dtype):
    model, n = MODELS[form]
    args = _inputs(n, dtype)
    graph = ik.trace(model, *args)
    fused = ik.verify(fuse(graph))
    assert [f.form for f in fired(fused)] == [form]
    body = next(n.attrs["body"].graph for n in fused.nodes if n.op is Op.FUSED)
    ik.verify(body)
    want = ik.replay(graph, *args)[0]
    assert_contract("reference", _run(fused, args)[0], want)
    for name in FUSES:  # the fusing strategies' contract: the eager composition's bits
        if get_strategy(name).unavailable_reason() is None:
            assert_contract(name, _run(graph, args, name)[0],
                            _run(graph, args, "cuda-eager")[0])


def test_only_a_strategy_with_kernels_for_the_forms_fuses_and_the_report_says_where(strategy):
    def model(x, y):
        return inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y)
    args = _inputs(2, np.float64)
    graph = ik.trace(model, *args)
    with np.errstate(all="ignore"):
        compiled = ik.jit(model, strategy=strategy.name).lower(*args).compile()
        composed = _run(graph, args, strategy.name)[0]
    lines = dict(compiled.report().extra)
    if strategy.name in FUSES:
        assert sorted(f.form for f in fired(compiled.graph)) == ["rsqrt", "scaled_product_exp"]
        assert "scaled_product_exp x1 (test_fusion.py:" in lines["fused"]
        assert "rsqrt x1" in lines["fused"] and strategy.name in lines["fused"]
    else:  # the strategy runs the composition as recorded: nothing fused, nothing unfused
        assert not fired(compiled.graph) and not any(n.op is Op.FUSED
                                                     for n in compiled.graph.nodes)
        assert lines["fused"] == "no fused form fired"
    want = ik.replay(graph, *args)[0]
    if not calls_libm(strategy.name):  # libm's/libdevice's exp
        assert_contract(strategy.name, compiled(*args), want)
    assert compiled(*args).tobytes() == composed.tobytes()


def test_every_strategy_but_the_fusing_ones_prepares_the_graph_as_recorded():
    graph = ik.trace(lambda x, y: inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y),
                     *_inputs(2, np.float64))
    for spec in all_strategies():
        prepared = spec.prepare(graph)
        assert (prepared is graph) == (spec.name not in FUSES), spec.name
        assert bool(fired(prepared)) == (spec.name in FUSES), spec.name


@pytest.mark.parametrize("form", sorted(MODELS))
def test_body_is_the_replaced_composition(form):
    """Same operations, same association: the body's ops are exactly the
    ops that left the graph."""
    model, n = MODELS[form]
    graph = ik.trace(model, *_inputs(n, np.float64))
    fused = fuse(graph)
    body = next(n.attrs["body"].graph for n in fused.nodes if n.op is Op.FUSED)

    def computing(nodes):
        return Counter(n.op for n in nodes if n.op not in (Op.INPUT, Op.CONST, Op.BROADCAST))
    removed = computing(graph.nodes) - computing(fused.nodes)
    assert computing(body.nodes) == removed


def test_unfuse_restores_the_composition():
    def model(x, y):
        return (inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y) + inp.exp(-0.5 * (x * x)),
                inp.logsumexp(x, axis=0))
    args = _inputs(2, np.float64)
    graph = ik.trace(model, *args)
    fused = fuse(graph)
    back = ik.verify(unfuse(fused))
    assert len(fired(fused)) == 4 and not fired(back)
    assert Counter(n.op for n in back.nodes) == Counter(n.op for n in graph.nodes)
    for got, want in zip(ik.replay(back, *args), ik.replay(graph, *args)):
        assert got.tobytes() == want.tobytes()


def test_shared_intermediate_blocks_fusion():
    """x·y is used elsewhere: fusing would compute it twice, so the form does
    not fire (a fused kernel never duplicates work)."""
    def model(x, y):
        p = -2.0 * x * y
        return inp.exp(p) + p
    graph = ik.trace(model, *_inputs(2, np.float64))
    assert fuse(graph) is graph


def test_two_constant_factors_are_not_a_scaled_product():
    graph = ik.trace(lambda x: inp.exp(2.0 * x * 3.0), *_inputs(1, np.float64))
    assert [f.form for f in fired(fuse(graph))] == []


def test_report_lines_say_which_forms_fired_where():
    def model(x):
        return inp.exp(-1.5 * x ** 2) + 1.0 / inp.sqrt(x) + 1.0 / inp.sqrt(x + 1.0)
    fused = fuse(ik.trace(model, *_inputs(1, np.float64)))
    (key, text), = report_lines(fused)
    assert key == "fused" and "gaussian x1 (test_fusion.py:" in text and "rsqrt x2" in text
    assert report_lines(ik.trace(lambda x: x + 1.0, np.ones(2))) == [
        ("fused", "no fused form fired")]


def test_fusion_is_refinement_on_random_programs():
    @settings(max_examples=80)
    @given(programs())
    def check(program):
        dtype, shapes, steps, seed = program
        inputs = make_inputs(dtype, shapes, seed)
        with np.errstate(all="ignore"):
            graph = ik.trace(lambda *xs: run_program(inp, steps, xs), *inputs)
            fused = ik.verify(fuse(graph))
            want = ik.replay(graph, *inputs)
            for got, w in zip(_run(fused, inputs), want):
                assert np.asarray(got).tobytes() == np.asarray(w).tobytes()
    check()


def test_forms_match_the_tau_omega_attenuation_shape():
    """exp(-2 b ndvi): the scaled product exponential of the soil-moisture model."""
    b, ndvi = _inputs(2, np.float32)
    fused = fuse(ik.trace(lambda b, ndvi: inp.exp(-2 * b * ndvi), b, ndvi))
    assert [f.form for f in fired(fused)] == ["scaled_product_exp"]


def test_fused_graphs_run_block_by_block_with_the_same_bits(strategy):
    """jit(block=...) resizes a fused node's body with the graph."""
    def model(x, y):
        return inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y) + inp.exp(-1.5 * x ** 2)
    x = np.random.default_rng(0).uniform(0.1, 2.0, 1000)
    y = x[::-1].copy()
    blocked = ik.jit(model, strategy=strategy.name, block=300)
    assert len(fired(blocked.lower(x, y).graph)) == (3 if strategy.name in FUSES else 0)
    whole = ik.jit(model, strategy=strategy.name)(x, y)
    assert blocked(x, y).tobytes() == whole.tobytes()
    assert blocked.lower(x, y).compile().blocks is not None


def test_a_fused_body_is_resized_with_its_graph():
    """Blocks of a fused graph (``cuda-fused``'s) run the same bits: the fused
    nodes' bodies are resized with the graph, replayed here by the reference."""
    def model(x, y):
        return inp.exp(-2.0 * x * y) + 1.0 / inp.sqrt(y) + inp.exp(-1.5 * x ** 2)
    x = np.random.default_rng(0).uniform(0.1, 2.0, 1000)
    y = x[::-1].copy()
    fused = fuse(ik.trace(model, x, y))
    assert len(fired(fused)) == 3
    block = resize_rows(fused, pixel_rows(fused, 1000), 300)
    assert len(fired(block)) == 3
    whole = ik.replay(fused, x, y)[0]
    assert ik.replay(block, x[300:600], y[300:600])[0].tobytes() == whole[300:600].tobytes()
