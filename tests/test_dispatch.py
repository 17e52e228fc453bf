"""The small-call fast path: a cached call of plain NumPy arrays reaches the
compiled code with little Python; small native and threads calls run on the
calling thread; contractions batched over the pixel axis run in slices."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends.cpu import native, pool, threads
from isokernel.ir import Op

X = np.linspace(-2.0, 2.0, 64)


def model(x, y):
    return inp.sin(x) * 2.0 + y, inp.exp(x) - y


def _report(fn, *args) -> dict:
    return dict(fn.lower(*args).compile().report().extra)


@pytest.mark.parametrize("strategy", ["reference", "threads", "native"])
def test_a_repeated_call_takes_the_fast_path_with_the_same_results(strategy):
    f = ik.jit(model, strategy=strategy)
    first = f(X, X)
    assert len(f._plain) == 1  # the first call registered the fast entry
    again = f(X, X)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.shares_memory(first[0], again[0])  # fresh results every call
    assert f.retraces == 0


def test_the_fast_path_is_keyed_by_shape_dtype_and_modes():
    f = ik.jit(lambda x: inp.sin(x), strategy="reference")
    f(X)
    f(X.astype(np.float32))
    with ik.numerics("portable"):
        f(X)
    assert len(f._plain) == 3 and f.retraces == 2


def test_the_fast_path_leaves_other_arguments_to_the_full_path():
    f = ik.jit(lambda x, c: x * c, strategy="reference")
    f(X, 2.0)  # a Python scalar: no fast entry
    f(X, c=2.0)
    assert f._plain == {}
    g = ik.jit(lambda x: x + 1.0, strategy="reference")
    g(X)
    with pytest.raises(ik.DTypeError, match="masked array"):
        g(np.ma.masked_array(X, mask=X > 0))
    assert np.array_equal(g(X.astype(">f8")), X + 1.0)


def test_a_small_native_call_is_one_kernel_call_on_the_calling_thread(monkeypatch):
    calls = []
    monkeypatch.setattr(pool, "shared_pool", lambda w: calls.append(w))  # never reached
    f = ik.jit(model, strategy="native")
    got = f(X, X)
    want = ik.jit(model, strategy="reference")(X, X)
    assert calls == []
    for a, b in zip(got, want):  # sin and exp: within native's ulp bound, not bit for bit
        np.testing.assert_array_max_ulp(a, b, maxulp=native.ULP_BOUND[Op.SIN])
    assert "this one is, one kernel call" in _report(f, X, X)["small calls"]
    assert f"calls of <= {native.INLINE_ROWS} pixels" in _report(f, X, X)["small calls"]


def test_the_direct_path_copies_read_only_and_strided_arguments():
    f = ik.jit(lambda x, y: x * 3.0 - y, strategy="native")
    base = np.linspace(0.0, 1.0, 128)
    strided = base[::2]
    frozen = np.linspace(0.0, 1.0, 64)
    frozen.flags.writeable = False
    for x in (strided, frozen, np.broadcast_to(np.float64(0.5), (64,))):
        assert np.array_equal(f(x, frozen), x * 3.0 - frozen)


def test_a_small_threads_call_runs_inline_by_the_reference_rules(monkeypatch):
    calls = []
    monkeypatch.setattr(pool, "shared_pool", lambda w: calls.append(w))
    f = ik.jit(model, strategy="threads")
    got = f(X, X)
    want = ik.jit(model, strategy="reference")(X, X)
    assert all(np.array_equal(a, b) for a, b in zip(got, want)) and calls == []
    line = _report(f, X, X)["small calls"]
    assert line.startswith(f"calls of <= {threads.INLINE_ROWS} pixels") and "this one is" in line


def test_native_errstate_holds_on_the_direct_path():
    f = ik.jit(lambda x: 1.0 / x, strategy="native")
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
        f(np.zeros(8))
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide"):
        f(np.zeros(8))


@pytest.mark.parametrize("strategy", ["threads", "native"])
@pytest.mark.parametrize("pixels", [4097, 40000])
def test_a_contraction_batched_over_pixels_runs_in_slices_with_the_reference_bits(
        strategy, pixels):
    if strategy == "native" and pixels <= native.INLINE_ROWS:
        pixels += native.INLINE_ROWS  # below it native compiles this graph as one C program
    rng = np.random.default_rng(pixels)
    a, b = rng.standard_normal((pixels, 3, 4)), rng.standard_normal((pixels, 4, 2))
    f = ik.jit(lambda a, b: inp.matmul(a, b) * 2.0, strategy=strategy)
    want = ik.jit(lambda a, b: inp.matmul(a, b) * 2.0, strategy="reference")(a, b)
    assert np.array_equal(f(a, b), want)
    assert _report(f, a, b)["contractions"].startswith("1 batched over the pixel axis run in "
                                                       "pixel slices")


def test_a_shared_weight_contraction_still_runs_whole():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5000, 8)), rng.standard_normal((8, 4))
    f = ik.jit(lambda x, w: inp.matmul(x, w), strategy="threads")
    assert np.array_equal(f(x, w), ik.jit(lambda x, w: inp.matmul(x, w),
                                          strategy="reference")(x, w))
    assert _report(f, x, w)["contractions"].endswith("1 run whole")
