"""The device reduction order (``codegen.reduce``): NumPy's own for
C-contiguous operands, pinned bit for bit on the CPU by running the kernels'
plan with NumPy; and the C emitter unrolls small reductions in that order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isokernel as ik
import isokernel.numpy as inp
from isokernel.codegen.reduce import PW_BLOCK, emulate, layout_of, pairwise_tree
from isokernel.ir import Op

NUMPY = {Op.REDUCE_SUM: np.sum, Op.REDUCE_PROD: np.prod, Op.REDUCE_MAX: np.max,
         Op.REDUCE_MIN: np.min}
SHAPES = [(1,), (5,), (8,), (9,), (127,), (128,), (129,), (1000,), (4097,), (3, 200), (200, 3),
          (7, 1, 300), (4, 5, 6), (2, 3, 50), (1, 1000), (1000, 1), (2, 130, 3), (3, 2, 130)]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_order_is_numpys_for_every_axis_set(shape, dtype):
    x = _data(shape, dtype)
    for r in range(1, len(shape) + 1):
        for axes in itertools.combinations(range(len(shape)), r):
            for op, fn in NUMPY.items():
                with np.errstate(all="ignore"):
                    want = fn(x, axis=axes).ravel()
                got = emulate(x, axes, op)
                assert got.tobytes() == want.tobytes(), (op.value, axes, layout_of(shape, axes, op))


@pytest.mark.parametrize("n", [100_003, 1_000_000])
def test_long_sums_follow_the_pairwise_tree(n):
    x = _data(n, np.float32, seed=n)
    assert emulate(x, (0,), Op.REDUCE_SUM).tobytes() == np.sum(x, keepdims=True).tobytes()
    # a plain left fold differs: the order is really what is being matched
    assert np.cumsum(x, dtype=np.float32)[-1] != np.sum(x)


@settings(max_examples=60)
@given(st.integers(1, 20_000))
def test_the_tree_covers_every_element_once(n):
    tree = pairwise_tree(n)
    covered = np.zeros(n, np.int64)
    for off, length in zip(tree.leaf_offset, tree.leaf_length):
        covered[off:off + length] += 1
    assert np.all(covered == 1)
    assert np.all(tree.leaf_length <= PW_BLOCK)
    internal = {int(p) for parent, _, _ in tree.levels for p in parent}
    assert internal.isdisjoint(int(k) for k in tree.leaf_node)
    assert len(internal) + tree.leaves == tree.nodes
    assert (n <= PW_BLOCK) == (tree.leaves == 1)


def test_a_hundred_million_elements_plan_quickly():
    import time
    start = time.process_time()  # this process's CPU time: other jobs on the machine do not count
    tree = pairwise_tree(100_000_000)
    assert time.process_time() - start < 5  # about 0.1 s; a loop over the elements takes minutes
    assert 700_000 < tree.leaves < 1_600_000 and len(tree.levels) < 25


def test_layouts():
    assert layout_of((1000,), (0,), Op.REDUCE_SUM).sequential is False
    assert layout_of((1000, 3), (0,), Op.REDUCE_SUM).sequential  # innermost axis kept: a fold
    mixed = layout_of((2, 130, 3), (0, 2), Op.REDUCE_SUM)
    assert (mixed.outputs, mixed.chunks, mixed.length, mixed.sequential) == (130, 2, 3, False)
    assert layout_of((50, 50), (1,), Op.REDUCE_PROD).sequential  # NumPy's product is a fold
    assert layout_of((4, 5), (1,), Op.REDUCE_MAX).sequential  # up to 7: a fold, like the emitter
    assert layout_of((4, 5), (), Op.REDUCE_SUM).reduced == 1


def test_native_sums_mixed_axes_in_numpys_order():
    """The C emitter used to fold every reduced element left to right; NumPy
    adds the trailing run's sum to an accumulator. Both strategies that
    share the emitter now give NumPy's bits."""
    x = _data((2000, 2, 3, 3), np.float32, seed=3)

    def f(x):
        return inp.sum(x * 1.5, axis=(1, 3))
    want = ik.jit(f, strategy="reference")(x)
    assert ik.jit(f, strategy="native")(x).tobytes() == want.tobytes()
