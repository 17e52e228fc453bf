"""Bit operations: ``and``, ``or``, ``xor``, ``not`` and the shifts are NumPy's ``&``, ``|``,
``^``, ``~``, ``<<`` and ``>>`` on int32, int64 and bool edge values, bit for bit, eagerly and
under jit on every CPU strategy (native: in generated C, counts outside [0, bits) included),
with zero tangents, batched like a loop, refused on floats, and their CUDA kernels compile."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import codegen
from isokernel.codegen import cuda
from isokernel.ir import DTypeError, Op, dtypes

from .conftest import compile_everywhere, nvrtc_or_skip

STRATEGIES = ("reference", "threads", "native")
INTS = (np.int32, np.int64)
COUNTS = (0, 1, 2, 31, 32, 33, 63, 64, 65, -1, -64)


def _edges(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([0, 1, -1, 2, -2, 5, -6, 0x5A5A5A5A, info.min, info.max, info.min + 1,
                     info.max - 1], dtype=dtype)


def _int_pairs(dtype):
    """Every edge value with every edge value, and with every shift count."""
    edges = _edges(dtype)
    counts = np.array(COUNTS, dtype=dtype)
    x = np.concatenate([np.repeat(edges, edges.size), np.repeat(edges, counts.size)])
    y = np.concatenate([np.tile(edges, edges.size), np.tile(counts, edges.size)])
    return x, y


def _bool_pairs():
    return np.array([False, False, True, True]), np.array([False, True, False, True])


def _int_model(x, y):
    return (inp.bitwise_and(x, y), inp.bitwise_or(x, y), inp.bitwise_xor(x, y), inp.invert(x),
            inp.left_shift(x, y), inp.right_shift(x, y), inp.bitwise_not(y))


def _int_expected(x, y):
    return (x & y, x | y, x ^ y, ~x, np.left_shift(x, y), np.right_shift(x, y), ~y)


def _bool_model(x, y):
    return inp.bitwise_and(x, y), inp.bitwise_or(x, y), inp.bitwise_xor(x, y), inp.invert(x)


def _bool_expected(x, y):
    return x & y, x | y, x ^ y, ~x


def _same_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes(), (g, w)


def test_numpy_defines_the_shift_counts_outside_the_width():
    """The meaning the C code restates: 0 for ``<<``, the sign fill for ``>>``."""
    for dtype in INTS:
        x = np.array([5, -5, np.iinfo(dtype).min], dtype=dtype)
        for count in (np.iinfo(dtype).bits, 64, 65, -1):
            if np.iinfo(dtype).min <= count <= np.iinfo(dtype).max:
                n = np.array(count, dtype=dtype)
                assert np.left_shift(x, n).tolist() == [0, 0, 0]
                assert np.right_shift(x, n).tolist() == [0, -1, -1]


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("strategy", (None,) + STRATEGIES)
def test_integer_bit_ops_equal_numpy(dtype, strategy):
    x, y = _int_pairs(dtype)
    fn = _int_model if strategy is None else ik.jit(_int_model, strategy=strategy)
    _same_bits(fn(x, y), _int_expected(x, y))


@pytest.mark.parametrize("strategy", (None,) + STRATEGIES)
def test_bool_bit_ops_are_the_logical_ops(strategy):
    x, y = _bool_pairs()
    fn = _bool_model if strategy is None else ik.jit(_bool_model, strategy=strategy)
    got = fn(x, y)
    _same_bits(got, _bool_expected(x, y))
    _same_bits(got, (np.logical_and(x, y), np.logical_or(x, y), np.logical_xor(x, y),
                     np.logical_not(x)))


@pytest.mark.parametrize("strategy", ("threads", "native"))
def test_pooled_tiles_equal_numpy(strategy):
    """Beyond ``INLINE_ROWS`` pixels the threads strategy runs NumPy's loops on
    row tiles in its pool (and native its C on slices)."""
    x, y = (np.tile(v, 150) for v in _int_pairs(np.int64))
    assert x.size > (1 << 15)
    _same_bits(ik.jit(_int_model, strategy=strategy)(x, y), _int_expected(x, y))


@pytest.mark.parametrize("dtype", INTS)
def test_native_computes_the_shifts_in_c(dtype):
    x, y = _int_pairs(dtype)
    compiled = ik.jit(_int_model, strategy="native").lower(x, y).compile()
    source = compiled.source()
    short = dtypes.SHORT[np.dtype(dtype)]
    assert f"isk_shl_{short}(" in source and f"isk_shr_{short}(" in source
    assert " ^ " in source and "(~" in source
    _same_bits(compiled(x, y), _int_expected(x, y))


def test_shift_helpers_never_shift_by_the_width_or_more():
    """The C shifts in the unsigned type by a count masked into [0, bits)."""
    text = codegen.c_expr.HELPERS["isk_shl_i32"]
    assert "(uint32_t)a << (n & 31u)" in text and "n < 32u ? n : 31u" in text
    text = codegen.c_expr.HELPERS["isk_shl_i64"]
    assert "(uint64_t)a << (n & 63u)" in text and "n < 64u ? n : 63u" in text


def test_python_scalars_take_the_array_dtype_and_stay_weak():
    x = np.array([1, -8, 2**30], dtype=np.int32)
    for got, want in ((inp.left_shift(x, 1), x << 1), (inp.right_shift(x, 3), x >> 3),
                      (inp.bitwise_xor(x, 0xFF), x ^ 0xFF), (inp.bitwise_and(7, x), 7 & x)):
        assert got.dtype == np.int32 and got.tobytes() == want.tobytes()
    assert inp.left_shift(1, 40) == 1 << 40 and inp.invert(5) == ~5
    assert inp.bitwise_or(True, False) is True
    traced = ik.jit(lambda v: inp.right_shift(v, 31), strategy="native")(x)
    assert traced.dtype == np.int32 and traced.tobytes() == (x >> 31).tobytes()


def test_words_of_32_bits_in_int64():
    """The Threefry idiom: a 32-bit rotation of int64 words in [0, 2**32)."""
    def rotl(v, r):
        return inp.bitwise_and(inp.bitwise_or(inp.left_shift(v, r), inp.right_shift(v, 32 - r)),
                               0xFFFFFFFF)
    v = np.array([0, 1, 2**31, 2**32 - 1, 0x12345678, 0x9ABCDEF0], dtype=np.int64)
    u = v.astype(np.uint32)
    for r in (1, 13, 31):
        want = ((u << np.uint32(r)) | (u >> np.uint32(32 - r))).astype(np.int64)
        for strategy in STRATEGIES:
            got = ik.jit(lambda a, r=r: rotl(a, r), strategy=strategy)(v)
            assert got.tobytes() == want.tobytes(), (strategy, r)


def test_the_ops_are_recorded_as_bit_ops():
    x, y = _int_pairs(np.int64)
    ops = ik.trace(_int_model, x, y).ops()
    assert {Op.AND, Op.OR, Op.XOR, Op.NOT, Op.SHIFT_LEFT, Op.SHIFT_RIGHT} <= ops


def test_floats_are_refused_with_the_op_the_line_and_the_fix():
    x = np.array([1.5])
    for fn, op in ((inp.bitwise_xor, "xor"), (inp.left_shift, "shift_left"),
                   (inp.bitwise_and, "and")):
        with pytest.raises(DTypeError, match=rf"^{op} at .*test_bitwise.py:\d+: .*integer.*"
                                             r"got f64.*x\.astype\(inp\.int64\)"):
            fn(x, x)
        with pytest.raises(DTypeError, match=rf"^{op} at .*test_bitwise.py:\d+: "):
            ik.jit(lambda a, fn=fn: fn(a, a))(x)
    with pytest.raises(DTypeError, match=r"^not at .*integer or bool.*got f32"):
        inp.invert(np.float32(1.0))


def test_bools_are_refused_by_the_shifts():
    b = np.array([True])
    with pytest.raises(DTypeError, match=r"^shift_right at .*expects integer operands.*bool"):
        inp.right_shift(b, b)


def test_logical_functions_still_refuse_integers():
    a = np.array([6], dtype=np.int64)
    with pytest.raises(DTypeError, match="bool operands"):
        inp.logical_and(a, a)


def _bit_factor(x):
    bits = inp.astype(x * 16.0, inp.int64)
    mixed = inp.bitwise_xor(inp.left_shift(bits, 2), inp.right_shift(bits, 1))
    return inp.astype(inp.invert(inp.bitwise_or(mixed, 1)), inp.float64)


def test_bit_ops_have_zero_tangents():
    x, t = np.array([0.3, 1.7, -2.2]), np.array([1.0, -0.5, 2.0])
    primal, tangent = ik.jvp(lambda v: v * _bit_factor(v), (x,), (t,))
    np.testing.assert_array_equal(primal, x * _bit_factor(x))
    np.testing.assert_array_equal(tangent, t * _bit_factor(x))
    assert np.all(_bit_factor(x) != 0)


def test_vmap_batches_bit_ops_like_a_loop():
    xs = np.arange(-12, 12, dtype=np.int64).reshape(4, 6) * 0x1234567
    y = np.array([0, 1, 5, 31, 63, 64], dtype=np.int64)
    got = ik.vmap(_int_model, in_axes=(0, None))(xs, y)
    for i in range(4):
        _same_bits([g[i] for g in got], _int_expected(xs[i], y))


# --- CUDA source, compiled by NVRTC -------------------------------------------------------

@pytest.fixture(scope="module")
def compiler():
    return nvrtc_or_skip()


def _kernels():
    found = []
    for op in (Op.AND, Op.OR, Op.XOR, Op.NOT, Op.SHIFT_LEFT, Op.SHIFT_RIGHT):
        arity = 1 if op is Op.NOT else 2
        takes_bool = op not in (Op.SHIFT_LEFT, Op.SHIFT_RIGHT)
        for dtype in (dtypes.int32, dtypes.int64) + ((dtypes.bool_,) if takes_bool else ()):
            kinds = ["v" * arity] + (["vs"] if arity == 2 else [])
            found += [cuda.elementwise_kernel(op, {}, (dtype,) * arity, dtype, k).source
                      for k in kinds]
    return found


def test_every_bit_op_kernel_compiles_with_nvrtc(compiler):
    sources = _kernels()
    assert len(sources) == 3 * 3 * 2 + 3 + 2 * 2 * 2  # and or xor, not, the shifts
    assert all("isk_shl_" in s for s in sources if "isk_shr_" in s)
    assert compile_everywhere(sources, compiler) == []


@pytest.mark.parametrize("dtype", INTS)
def test_the_cuda_source_of_a_bit_model_compiles(dtype, compiler):
    x, y = _int_pairs(dtype)
    source = codegen.cuda_source(ik.trace(_int_model, x, y))
    assert "isk_shl_" in source and "isk_shr_" in source
    assert compile_everywhere([source], compiler) == []


def test_python_operators_on_traced_integers_are_numpys():
    """``& | ^ ~ << >>`` on traced integers (and ``& ~`` on bools) record the bit
    ops: under jit on every CPU strategy the same dtypes and bits as NumPy."""
    def f(x, y):
        return (x & y, x | y, x ^ y, ~x, x << y, x >> y, 3 << y, 7 & x,
                (x > 0) & (y > 0), ~(x > 0), (x > 0) ^ (y > 0))
    for dt in (np.int32, np.int64):
        x = np.array([0, 1, -1, np.iinfo(dt).min, np.iinfo(dt).max, 5], dt)
        y = np.array([0, 1, 31, 32, 63, 64], dt)
        want = f(x, y)
        for strategy in ("reference", "threads", "native"):
            got = ik.jit(f, strategy=strategy)(x, y)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (strategy, dt)
