"""``jit(..., block=...)``: block-by-block runs give the unchunked bits,
graphs that are not row-independent are refused, ``block="auto"`` sizes
blocks to the budget, and the planner hook's error path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel import deploy
from isokernel.backends.platform import Figure
from isokernel.deploy import HostBudget
from isokernel.ir import verify
from isokernel.models.tau_omega import synthetic_inputs, tau_omega
from isokernel.pipeline.blocks import BlockError, pixel_rows, resize_rows

from .test_random_programs import make_inputs, programs, run_program


def same_bits(got, want) -> bool:
    got, want = ik.tree_flatten(got)[0], ik.tree_flatten(want)[0]
    return len(got) == len(want) and all(
        np.asarray(g).dtype == np.asarray(w).dtype and np.asarray(g).shape == np.asarray(w).shape
        and np.asarray(g).tobytes() == np.asarray(w).tobytes() for g, w in zip(got, want))


def unchunked(fn, *args, **kwargs):
    return ik.jit(fn, strategy="reference", **kwargs)(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block", [1, 7, 1000, 4096, 10007, 50000])
def test_tau_omega_blocks_are_bit_identical(dtype, block):
    args = synthetic_inputs(10007, dtype, seed=3)
    chunked = ik.jit(tau_omega, strategy="reference", block=block)
    assert same_bits(chunked(*args), unchunked(tau_omega, *args))


def _mixed(x, table, w, scale):
    """Pixel rows [P,3] with a per-row reduction, a parameter vector, a
    per-pixel 3x3 product, a weak scalar, and an output without a pixel axis."""
    y = inp.sum(x * w, axis=1, keepdims=True) * scale
    z = inp.matmul(table, x[:, :, None])[:, :, 0]
    return {"rows": inp.concatenate([y, z, inp.flip(x, axis=1)], axis=1),
            "maxes": inp.max(x, axis=1), "param": w * 2.0, "t": z[:, 1]}


def test_mixed_graph_blocks_are_bit_identical():
    rng = np.random.default_rng(1)
    x, table = rng.normal(size=(1001, 3)), rng.normal(size=(1001, 3, 3))
    w = np.array([0.25, -1.5, 3.0])
    want = unchunked(_mixed, x, table, w, 2.5)
    for block in (1, 2, 333, 1000):
        assert same_bits(ik.jit(_mixed, strategy="reference", block=block)(x, table, w, 2.5),
                         want)


def test_a_model_using_the_pixel_count_keeps_the_unchunked_meaning():
    def normalised(x):
        return x / x.shape[0] + inp.exp(x)
    x = np.linspace(0, 1, 999)
    chunked = ik.jit(normalised, strategy="reference", block=100)
    assert same_bits(chunked(x), unchunked(normalised, x))


@pytest.mark.parametrize("strategy", ["threads", "native"])
def test_compiled_strategies_chunk_to_their_own_unchunked_bits(strategy):
    if ik.backends.get_strategy(strategy).unavailable_reason():
        pytest.skip(ik.backends.get_strategy(strategy).unavailable_reason())
    args = synthetic_inputs(10007, np.float32, seed=5)
    whole = ik.jit(tau_omega, strategy=strategy)(*args)
    assert same_bits(ik.jit(tau_omega, strategy=strategy, block=999)(*args), whole)


CHUNKED: list[bool] = []


@given(programs(), st.integers(1, 2))
def test_random_programs_chunk_exactly_or_are_refused(program, block):
    dtype, in_shapes, steps, seed = program
    inputs = make_inputs(dtype, in_shapes, seed)

    def model(*xs):
        return run_program(inp, steps, xs)
    with np.errstate(all="ignore"):
        want = unchunked(model, *inputs)
        try:
            got = ik.jit(model, strategy="reference", block=block)(*inputs)
        except BlockError as err:
            CHUNKED.append(False)
            assert "cannot run block by block" in str(err)
            return
    CHUNKED.append(inputs[0].shape[0] > block)  # more than one block actually ran
    assert same_bits(got, want)


def test_random_programs_mostly_chunk():
    """The property above is not vacuous: many generated programs really run
    in several blocks."""
    if not CHUNKED:
        test_random_programs_chunk_exactly_or_are_refused()
    assert len(CHUNKED) >= 50 and sum(CHUNKED) > len(CHUNKED) / 3


def test_resized_graphs_verify():
    graph = ik.jit(_mixed).lower(np.ones((10, 3)), np.ones((10, 3, 3)), np.ones(3), 1.0).graph
    rows = pixel_rows(graph, 10)
    for n in (1, 4, 10):
        resized = verify(resize_rows(graph, rows, n))
        assert resized.inputs[0].aval.shape == (n, 3) and resized.inputs[2] is graph.inputs[2]


REFUSED = [
    (lambda x: x - inp.sum(x, axis=0), "reduce_sum", "works along the pixel axis"),
    (lambda x: x - inp.mean(x), "reduce_sum", "works along the pixel axis"),
    (lambda x: inp.concatenate([x, x]), "concatenate", "concatenates along the pixel axis"),
    (lambda x: x + inp.arange(x.shape[0]).astype(inp.float64), "add",
     "a constant array of length P"),
    (lambda x: x[1:] - x[:-1], "slice", "slices the pixel axis"),
    (lambda x: inp.flip(x), "rev", "works along the pixel axis"),
    (lambda x: inp.transpose(inp.stack([x, x], axis=1))[0], "transpose",
     "moves the pixel axis away from axis 0"),
]


@pytest.mark.parametrize("fn,op,problem", REFUSED)
def test_not_row_independent_graphs_are_refused(fn, op, problem):
    x = np.linspace(0.0, 1.0, 64)
    with pytest.raises(BlockError) as err:
        ik.jit(fn, block=8)(x)
    message = str(err.value)
    assert message.startswith(op) and problem in message and "test_deploy_blocks.py" in message
    assert "without block=" in message


def test_blas_products_over_the_pixel_rows_are_refused():
    x, m = np.ones((64, 3)), np.ones((3, 3))
    with pytest.raises(BlockError, match="BLAS, whose blocking depends on the row count"):
        ik.jit(lambda a, b: a @ b, block=8)(x, m)


def test_graphs_without_a_pixel_axis_run_whole():
    jf = ik.jit(lambda s: s * 2.0, block=1)
    assert jf(3.0) == 6.0


def test_block_values_are_checked():
    for bad in (0, -4, 2.5, True, "big"):
        with pytest.raises(ValueError, match="block must be None, 'auto' or a positive"):
            ik.jit(tau_omega, block=bad)


def test_an_explicit_block_is_recorded_beside_the_budget_decision():
    args = synthetic_inputs(100, np.float32)
    compiled = ik.jit(tau_omega, strategy="reference", block=30).lower(*args).compile()
    assert compiled.block_choice.block == 30
    assert "operator override" in compiled.block_choice.line
    assert same_bits(compiled(*args), unchunked(tau_omega, *args))


def _tight(memory: int):
    return lambda *a, **k: HostBudget(Figure(2, "affinity"), Figure(memory, "cgroup v2 test"))


def test_auto_chunks_when_the_call_does_not_fit(monkeypatch):
    args = synthetic_inputs(20000, np.float32)
    # reference tau-omega: 36 B + 40 B/row; a block holds 28 B/row beside the caller's inputs,
    # and the two float32 outputs (8 B/row) are allocated once for the call.
    monkeypatch.setattr(deploy.decisions, "host_budget", _tight(400_000))
    compiled = ik.jit(tau_omega, strategy="reference", block="auto").lower(*args).compile()
    expected = (int(400_000 * deploy.BUDGET_FRACTION) - 8 * 20000 - 36) // 28
    assert compiled.block_choice.block == expected == 5713
    assert "cgroup v2 test" in compiled.block_choice.line
    assert "outputs allocated once" in compiled.block_choice.line
    assert same_bits(compiled(*args), unchunked(tau_omega, *args))


def test_auto_runs_whole_when_it_fits(monkeypatch):
    monkeypatch.setattr(deploy.decisions, "host_budget", _tight(1 << 30))
    args = synthetic_inputs(20000, np.float32)
    compiled = ik.jit(tau_omega, block="auto").lower(*args).compile()
    assert compiled.block_choice.block is None and compiled.blocks is None
    assert "whole call" in compiled.block_choice.line


def test_auto_when_nothing_fits_raises_with_the_terms(monkeypatch):
    monkeypatch.setattr(deploy.decisions, "host_budget", _tight(100_000))
    args = synthetic_inputs(20000, np.float32)
    with pytest.raises(deploy.BudgetError, match=r"nothing fits: .*cgroup v2 test.*fewer pixels"):
        ik.jit(tau_omega, block="auto")(*args)


def test_explicit_block_is_recorded_beside_the_budget():
    args = synthetic_inputs(1000, np.float32)
    compiled = ik.jit(tau_omega, block=256).lower(*args).compile()
    assert compiled.block_choice.block == 256
    assert "operator override, wins verbatim" in compiled.block_choice.line
