"""A polymorphic batch axis: new batch sizes record again but share the
compiled C of a row-local graph (``jit(polymorphic=)``, the automatic rule,
``ShapeDtype`` with a None axis 0), with the reference's bits; graphs that
reduce over the batch say why they compile per size."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.codegen import compiler

pytestmark = pytest.mark.skipif(codegen.unavailable_reason() is not None,
                                reason=f"host C compiler: {codegen.unavailable_reason()}")

W = np.array([0.75, -0.125, 3.0])
SIZES = list(range(700, 20700, 1000))  # 20 batch sizes


def model(x, w):
    """Row-local (w's slices are whole, tiny): basic operations only, so
    every strategy owes the reference's bits."""
    h = x * w[0] + w[1]
    return h * h / (1.0 + inp.abs(h)) - x * w[2]


def loss(x, w):
    return inp.sum(model(x, w))


def _kernel(jitted, x):
    return jitted.lower(x, W).compile().executable


def _calls(jitted, fn):
    keys = []
    for n in SIZES:
        x = np.linspace(-2.0, 2.0, n)
        got = jitted(x, W)
        want = ik.jit(fn, strategy="reference")(x, W)
        assert got.tobytes() == want.tobytes()
        compiled = jitted._cache[next(k for k in reversed(list(jitted._cache))
                                      if k.leaves[0][0] == (n,))]
        keys.append(getattr(compiled.executable, "built", None))
    return keys


def test_twenty_batch_sizes_share_one_compiled_kernel():
    jitted = ik.jit(model, strategy="native", polymorphic=True)
    before = compiler.compile_count()
    built = _calls(jitted, model)
    assert len({b.key for b in built}) == 1
    assert compiler.compile_count() - before <= 1  # 0 when an earlier test built it
    report = str(jitted.lower(np.ones(900), W).compile().report())
    assert "polymorphic batch axis" in report


def test_the_default_turns_it_on_at_the_second_batch_size():
    jitted = ik.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no retrace warning for batch sizes
        built = _calls(jitted, model)
    assert built[0] is None or built[0].key != built[1].key  # the first: one C program
    assert len({b.key for b in built[1:]}) == 1


def test_a_reduction_over_the_batch_compiles_per_size_by_default_and_says_why():
    jitted = ik.jit(loss)
    x = np.linspace(0.0, 1.0, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second and a third size: no warning yet
        for n in (300, 400, 500):
            jitted(np.linspace(0.0, 1.0, n), W)
    with pytest.warns(ik.RetraceWarning, match="reduce_sum at .*test_polymorphic.py.*row by "
                      "row.*polymorphic=True"):
        jitted(np.linspace(0.0, 1.0, 600), W)
    np.testing.assert_allclose(jitted(x, W), np.sum(ik.jit(model, strategy="reference")(x, W)),
                               rtol=1e-12)


def test_asked_for_a_reduction_over_the_batch_shares_one_compile_for_twenty_sizes():
    """A loss (a sum over the batch) under polymorphic=True: its row region
    compiled once for every size, the sum by the reference rules."""
    jitted = ik.jit(loss, strategy="native", polymorphic=True)
    before = compiler.compile_count()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        built = _calls(jitted, loss)
    assert len({b.key for b in built}) == 1
    assert compiler.compile_count() - before <= 1  # 0 when an earlier test built it
    report = str(jitted.lower(np.ones(900), W).compile().report())
    assert "polymorphic batch axis" in report and "by the reference rules" in report


def test_the_flagship_retrieval_compiles_one_kernel_for_twenty_batch_sizes_by_default():
    from isokernel.models import soil_moisture as sm

    sizes = range(1000, 1000 + 20 * 230, 230)
    assert len(sizes) == 20
    inputs = sm.scene_inputs(sm.generate_scene(sizes[-1], seed=2))
    jitted = ik.jit(sm.retrieve)  # the defaults
    keys = set()
    for n in sizes:
        args = tuple(x[:n] for x in inputs)
        want = ik.jit(sm.retrieve, strategy="reference")(*args)
        got = jitted(*args)
        for k in want:  # native's contract: transcendentals ulp-bounded
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=0)
        keys.add(_kernel_key(jitted, args))
    assert len(keys) == 1


def _kernel_key(jitted, args):
    return jitted.lower(*args).compile().executable.built.key


def test_a_shape_dtype_with_a_none_batch_axis():
    jitted = ik.jit(model)
    lowered = jitted.lower(ik.ShapeDtype((None,), np.float64), ik.ShapeDtype((3,), np.float64))
    assert lowered.graph.inputs[0].aval.shape == (1024,) and lowered.polymorphic
    ahead = lowered.compile().executable.built.key
    x = np.linspace(-1.0, 1.0, 5000)
    jitted(x, W)
    assert _kernel(jitted, x).built.key == ahead  # the kernel compiled ahead runs every size
    with pytest.raises(ik.ShapeError, match="only axis 0"):
        ik.ShapeDtype((3, None), np.float64)
    with pytest.raises(ik.ShapeError, match=r"jit\(f\).lower"):
        ik.trace(model, ik.ShapeDtype((None,), np.float64), W)
    with pytest.raises(ValueError, match="polymorphic=False"):
        ik.jit(model, polymorphic=False).lower(ik.ShapeDtype((None,), np.float64), W)
    with pytest.raises(ValueError, match="polymorphic must be"):
        ik.jit(model, polymorphic="yes")


def test_the_megakernel_module_of_a_row_local_graph_has_no_batch_size_in_it():
    """cuda-megakernel's region kernels take the row count at launch: the
    module's source (the key of the NVRTC cache) is the same for every batch
    size, so one compile serves them all."""
    from isokernel.codegen import cuda
    from isokernel.transforms import prepare_for_execution

    sources = {cuda.cuda_module(prepare_for_execution(ik.trace(model, np.ones(n), W))).source
               for n in (700, 1700, 20000)}
    assert len(sources) == 1
