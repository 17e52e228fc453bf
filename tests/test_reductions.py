"""Deterministic reductions over the pixel axis: the documented order, the
same bits for 1, 2, 3 and 8 workers on threads and native (and the
reference), the default order, the switch (jit option and environment
variable) and the report."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import reductions
from isokernel.backends.parity import bit_identical
from isokernel.ir import Op
from isokernel.ir.errors import BackendUnavailableError
from isokernel.pipeline import CallKey

from .conftest import OWN_ORDER, assert_contract, folds_in_own_order

PIXELS = 3 * reductions.REDUCTION_BLOCK + 1234  # several blocks and a short last one


def _documented(combine, values, block):
    """The order of ``backends.reductions`` written out one element at a
    time: halving tree per block, then over the block partials."""
    def halve(items):
        items = list(items)
        n = len(items)
        while n > 1:
            h = (n + 1) // 2
            for i in range(n - h):
                items[i] = combine(items[i], items[i + h])
            n = h
        return items[0]
    partials = [halve(values[k:k + block]) for k in range(0, len(values), block)]
    return halve(partials)


@pytest.mark.parametrize("op, combine", [(Op.REDUCE_SUM, np.add), (Op.REDUCE_PROD, np.multiply),
                                         (Op.REDUCE_MAX, np.maximum)])
@pytest.mark.parametrize("length", [1, 2, 3, 63, 64, 65, 1000, 1029])
def test_tree_is_the_documented_order(op, combine, length):
    rng = np.random.default_rng(length)
    x = (1.0 + rng.standard_normal(length) * 1e-3 if op is Op.REDUCE_PROD
         else rng.standard_normal(length) * 10.0 ** rng.integers(-3, 4, length)).astype(np.float32)
    got = reductions.tree_reduce(op, x, (0,), block=64)
    want = _documented(combine, [np.float32(v) for v in x], 64)
    assert np.asarray(got).tobytes() == np.asarray(want, np.float32).tobytes()


def test_any_split_of_the_blocks_over_workers_gives_the_same_bits():
    x = np.random.default_rng(0).standard_normal((10_000, 3)).astype(np.float32)
    want = reductions.tree_reduce(Op.REDUCE_SUM, x, (0,), block=100)

    def backwards(work, count):
        for k in reversed(range(count)):
            work(k)
    got = reductions.tree_reduce(Op.REDUCE_SUM, x, (0,), run_tasks=backwards, block=100)
    assert got.tobytes() == want.tobytes() and got.shape == (3,)


def _model(x, w):
    """Pixel-axis reductions of several kinds, with and without other axes."""
    return (inp.sum(x * w[:, None], axis=0), inp.sum(x), inp.mean(w), inp.max(x, axis=0),
            inp.min(w), inp.prod(1.0 + 1e-4 * w), inp.sum(x, axis=1) * inp.sum(w))


def _workers(strategy, workers: int) -> dict:
    """The worker option, for the strategies that take one (CPU pools)."""
    return {"workers": workers} if "workers" in strategy.options else {}


def _refuses_the_tree(strategy) -> bool:
    """A strategy without the tree order refuses it, naming the fix."""
    if "reductions" in strategy.options:
        return False
    with pytest.raises(BackendUnavailableError, match="does not implement deterministic"):
        ik.jit(_model, strategy=strategy.name, deterministic_reductions=True)(*_inputs())
    return True


def _inputs(dtype=np.float32):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((PIXELS, 3)) * 10.0 ** rng.integers(-2, 3, (PIXELS, 3)))
    return x.astype(dtype), rng.uniform(-1, 1, PIXELS).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deterministic_reductions_do_not_depend_on_the_worker_count(strategy, dtype):
    if _refuses_the_tree(strategy):
        return
    args = _inputs(dtype)
    want = ik.jit(_model, strategy="reference", deterministic_reductions=True)(*args)
    options = _workers(strategy, 1)
    for workers in (1, 2, 3, 8):
        if "workers" in options:
            options["workers"] = workers
        f = ik.jit(_model, strategy=strategy.name, deterministic_reductions=True, **options)
        assert_contract(strategy.name, f(*args), want)


def test_default_order_is_the_reference_for_every_worker_count(strategy):
    """The reference's bits for every worker count; a strategy folding in
    its own fixed order (``native`` on a graph it compiles whole) the same
    bits for every worker count, within n·eps of the reference's."""
    if strategy.name in OWN_ORDER:
        pytest.skip(f"{strategy.name} sums in its own order (test_native_whole.py checks it)")
    args = _inputs()
    want = ik.jit(_model, strategy="reference")(*args)
    own = folds_in_own_order(strategy.name, ik.jit(_model).lower(*args).graph)
    first, sizes = None, ik.jit(_model, strategy="reference")(*map(np.abs, args))
    for workers in (1, 2, 3, 8):
        options = _workers(strategy, workers)
        got = ik.jit(_model, strategy=strategy.name, **options)(*args)
        if not own:
            assert_contract(strategy.name, got, want)
            continue
        first = got if first is None else first
        for g, f, w, size in zip(got, first, want, sizes):  # n·eps·Σ|terms|
            assert g.tobytes() == f.tobytes()
            bound = 2 * PIXELS * np.finfo(w.dtype).eps * np.abs(size).astype(np.float64)
            assert np.all(np.abs(g.astype(np.float64) - w) <= bound)


def test_the_tree_is_really_another_order_and_as_accurate():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(1_000_003) * 10.0 ** rng.integers(-3, 4, 1_000_003))
    x = x.astype(np.float32)
    tree = ik.jit(inp.sum, strategy="reference", deterministic_reductions=True)(x)
    numpy = ik.jit(inp.sum, strategy="reference")(x)
    exact, size = np.sum(x.astype(np.float64)), np.sum(np.abs(x.astype(np.float64)))
    assert not bit_identical(tree, numpy)
    # a balanced tree: error ~ log2(P) ulp of the magnitude sum, like pairwise
    assert abs(float(tree) - exact) <= 20 * np.finfo(np.float32).eps * size


def test_mode_appears_in_the_report_with_its_source(monkeypatch):
    monkeypatch.delenv(reductions.ENV, raising=False)
    args = _inputs()
    default = dict(ik.jit(_model, strategy="threads").lower(*args).compile().report().extra)
    assert default["reductions"].startswith("reference order") and "[default; 6" in \
        default["reductions"]
    monkeypatch.setenv(reductions.ENV, "1")
    lines = dict(ik.jit(_model, strategy="native").lower(*args).compile().report().extra)
    assert lines["reductions"].startswith("deterministic tree")
    assert f"{reductions.ENV}=1" in lines["reductions"]
    forced = ik.jit(_model, strategy="native", deterministic_reductions=False)
    assert "option" in dict(forced.lower(*args).compile().report().extra)["reductions"]


def test_environment_variable_switches_and_bad_values_are_warned_and_ignored(monkeypatch):
    args = _inputs()
    f = ik.jit(_model, strategy="threads", workers=2)
    monkeypatch.setenv(reductions.ENV, "yes")
    tree = f(*args)
    assert bit_identical(tree[0], ik.jit(_model, strategy="reference",
                                         deterministic_reductions=True)(*args)[0])
    monkeypatch.setenv(reductions.ENV, "perhaps")
    with pytest.warns(UserWarning, match="ISOKERNEL_DETERMINISTIC_REDUCTIONS='perhaps'"):
        default = f(*args)
    assert bit_identical(default[0], ik.jit(_model, strategy="reference")(*args)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per value, not per call
        f(*args)
    monkeypatch.setenv(reductions.ENV, "0")
    assert bit_identical(f(*args)[0], default[0])


def test_bad_option_values_are_refused():
    with pytest.raises(TypeError, match="True or False"):
        ik.jit(_model, deterministic_reductions="tree")
    with pytest.raises(TypeError, match="deterministic_reductions=True"):
        ik.jit(_model, strategy="threads", reductions="tree")(*_inputs())


def test_the_mode_is_part_of_the_cache_key(monkeypatch):
    monkeypatch.delenv(reductions.ENV, raising=False)
    f = ik.jit(_model, strategy="reference")
    args = _inputs()
    f(*args)
    monkeypatch.setenv(reductions.ENV, "1")
    f(*args)
    monkeypatch.setenv(reductions.ENV, "on")  # the same mode: no new recording
    f(*args)
    assert len(f._cache) == 2
    key = CallKey((), None, (), (), "reference", "native")
    assert "reductions changed from reference to tree" in dataclasses.replace(
        key, reductions="tree").changed_from(key, [])


_REDUCERS = {"sum": inp.sum, "max": inp.max, "min": inp.min, "mean": inp.mean,
             "prod": lambda v, axis=None: inp.prod(1.0 + 1e-3 * v, axis=axis)}


@st.composite
def reduction_programs(draw):
    """A pointwise expression of two pixel arrays, reduced over the pixel
    axis by one or two reducers (with or without the row axis)."""
    pixels = draw(st.sampled_from([2, 3, 17, 4096, 4097, 9000, 3 * 4096 + 5]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    names = draw(st.lists(st.sampled_from(sorted(_REDUCERS)), min_size=1, max_size=2))
    whole = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    seed = draw(st.integers(0, 2**16))
    return pixels, dtype, list(zip(names, whole)), seed


def _program(steps):
    def model(x, y):
        v = x * y - 0.5 * x
        return tuple(_REDUCERS[name](v, axis=None if whole else 0) for name, whole in steps)
    return model


@settings(max_examples=12)
@given(reduction_programs())
def _worker_count_invariance(strategy, program):
    pixels, dtype, steps, seed = program
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((pixels, 3)) * 10.0 ** rng.integers(-2, 3, (pixels, 3)))
    args = (x.astype(dtype), rng.uniform(-1, 1, (pixels, 3)).astype(dtype))
    model = _program(steps)
    want = ik.jit(model, strategy="reference", deterministic_reductions=True)(*args)
    for workers in (1, 2, 3, 8):
        options = _workers(strategy, workers)
        got = ik.jit(model, strategy=strategy.name, deterministic_reductions=True,
                     **options)(*args)
        assert_contract(strategy.name, got, want)


def test_generated_reductions_give_the_same_bits_for_any_worker_count(strategy):
    if not _refuses_the_tree(strategy):
        _worker_count_invariance(strategy)
