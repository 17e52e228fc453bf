"""isokernel.random: Threefry-2x32 in integer arithmetic, JAX's bits where claimed, the same
bits on every CPU strategy, vmap over keys, and the distributions' moments."""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
import isokernel.random as rnd
from isokernel.ir import DTypeError, Op, ShapeError
from isokernel.random import _words as words
from isokernel.random._erfinv import _erfinv32
from isokernel.random._samplers import scaled
from isokernel.random._special import fma32, fma32_twice

STRATEGIES = ("reference", "threads", "native")
EDGES = np.array([0, 1, 2, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=np.int64)


def _uint32_pairs(n: int = 200):
    rng = np.random.default_rng(5)
    a = np.concatenate([EDGES, np.repeat(EDGES, EDGES.size), rng.integers(0, 2**32, n)])
    b = np.concatenate([EDGES[::-1], np.tile(EDGES, EDGES.size), rng.integers(0, 2**32, n)])
    return a.astype(np.int64), b.astype(np.int64)


def _word_ops(a, b):
    return (words.xor(a, b), words.add(a, b), words.mul(a, b), words.rotl_xor(a, 13, b),
            words.rotl_xor(a, 31, b), words.mul(a, 2**9), a // 2**12)


def _expected_word_ops(a, b):
    ua, ub = a.astype(np.uint32), b.astype(np.uint32)
    with np.errstate(over="ignore"):
        expected = (ua ^ ub, ua + ub, ua * ub, ((ua << 13) | (ua >> 19)) ^ ub,
                    ((ua << 31) | (ua >> 1)) ^ ub, ua << np.uint32(9), ua >> np.uint32(12))
    return [e.astype(np.int64) for e in expected]


@pytest.mark.parametrize("strategy", (None,) + STRATEGIES)
def test_word_identities_match_uint32_bit_ops(strategy):
    """xor, rotations, wrapping add/mul and shifts from + - * // % and comparisons equal
    NumPy's uint32 bit operations, eagerly and in every strategy's code (native: C)."""
    a, b = _uint32_pairs()
    fn = _word_ops if strategy is None else ik.jit(_word_ops, strategy=strategy)
    for got, want in zip(fn(a, b), _expected_word_ops(a, b)):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)


def test_native_computes_the_word_identities_in_c():
    a, b = _uint32_pairs()
    compiled = ik.jit(_word_ops, strategy="native").lower(a, b).compile()
    source = compiled.source()
    assert "isk_rem_i64" in source and "(uint64_t)" in source


def test_and_or_are_logical_on_bools_and_bitwise_on_integers():
    a = np.array([6], dtype=np.int64)
    with pytest.raises(DTypeError, match="bool operands"):
        inp.logical_and(a, a)
    b = np.array([3], dtype=np.int64)
    assert inp.bitwise_and(a, b)[0] == 2 and inp.bitwise_xor(a, b)[0] == 5


def test_threefry_rounds_are_recorded_as_bit_ops():
    """Rotations, xor and the wrapping add are the IR's bit ops: no bit planes (no
    concatenated or summed planes, no comparisons per bit)."""
    graph = ik.trace(lambda key: rnd.normal(key, (2,)), rnd.key(0))
    ops = graph.ops()
    assert {Op.XOR, Op.SHIFT_LEFT, Op.SHIFT_RIGHT, Op.AND, Op.OR} <= ops
    assert not ops & {Op.CONCATENATE, Op.REDUCE_SUM, Op.NE, Op.GE}
    assert len(graph.nodes) < 500  # 597 with 32 bit planes per xor


# --- JAX's bits -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax_random():
    jax = pytest.importorskip("jax", reason="jax is not installed: no bit comparison")
    jax.config.update("jax_enable_x64", True)
    return jax


def _key_data(jax, key):
    return np.asarray(jax.random.key_data(key)).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 42, 2**31 - 1, 2**32 + 7, 2**40 + 5, -1, -(2**35)])
def test_key_matches_jax(jax_random, seed):
    np.testing.assert_array_equal(rnd.key(seed), _key_data(jax_random, jax_random.random.key(seed)))


def test_split_and_fold_in_match_jax(jax_random):
    jr = jax_random.random
    key, jkey = rnd.key(7), jr.key(7)
    np.testing.assert_array_equal(rnd.split(key), _key_data(jax_random, jr.split(jkey)))
    np.testing.assert_array_equal(rnd.split(key, 5), _key_data(jax_random, jr.split(jkey, 5)))
    np.testing.assert_array_equal(rnd.split(key, (2, 3)),
                                  _key_data(jax_random, jr.split(jkey, (2, 3))))
    for data in (0, 1, 12345, 2**32 - 1):
        np.testing.assert_array_equal(rnd.fold_in(key, data),
                                      _key_data(jax_random, jr.fold_in(jkey, data)))


def test_a_uint32_key_is_read_as_its_words(jax_random):
    jkey = jax_random.random.key(3)
    raw = np.asarray(jax_random.random.key_data(jkey))
    assert raw.dtype == np.uint32
    np.testing.assert_array_equal(rnd.split(raw, 3), _key_data(jax_random,
                                                                jax_random.random.split(jkey, 3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (3, 5)])
def test_uniform_matches_jax_bit_for_bit(jax_random, dtype, shape):
    for seed in (0, 99):
        got = rnd.uniform(rnd.key(seed), shape, dtype)
        want = np.asarray(jax_random.random.uniform(jax_random.random.key(seed), shape, dtype))
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_normal_float32_is_jax_bit_for_bit(jax_random):
    """XLA's CPU erf_inv, its log1p (a rational approximation, else Cephes's logf on the
    exponent and mantissa bits) and the fused multiply-adds LLVM contracts them into,
    reproduced exactly: 10^6 draws over a few keys and shapes."""
    jr = jax_random.random
    for seed, shape in [(0, (500_000,)), (1, (1000, 300)), (2026, (7, 11, 13, 17, 10))]:
        got = rnd.normal(rnd.key(seed), shape, np.float32)
        want = np.asarray(jr.normal(jr.key(seed), shape, np.float32))
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_normal_float32_is_jax_on_every_word(jax_random):
    """All 2**23 values of the 23 mantissa bits a float32 draw reads: JAX's normal
    arithmetic (bits to [0, 1), the map onto (-1, 1), sqrt(2) * erf_inv), compiled by XLA,
    against isokernel's."""
    jax, jnp = jax_random, jax_random.numpy
    words = np.arange(2**23, dtype=np.uint32) << np.uint32(9)
    lo = np.nextafter(np.float32(-1), np.float32(0))

    def jax_normal(bits):
        floats = jax.lax.bitcast_convert_type(bits >> 9 | np.uint32(0x3F800000), jnp.float32) - 1
        return np.float32(np.sqrt(2)) * jax.lax.erf_inv(jnp.maximum(lo, floats * 2 + lo))

    want = np.asarray(jax.jit(jax_normal)(words))
    assert _normal_of_every_word(fma32_twice).tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype,bound", [(np.float64, 32)])
def test_normal_agrees_with_jax_to_a_few_eps(jax_random, dtype, bound):
    """float64: not bit for bit. XLA's log1p calls libm's log there, and its Horner steps
    are fused multiply-adds. Measured: within 15 eps (absolute, times max(1, |x|)); most
    draws are identical."""
    got = rnd.normal(rnd.key(1), (4000,), dtype)
    want = np.asarray(jax_random.random.normal(jax_random.random.key(1), (4000,), dtype))
    err = np.abs(got.astype(np.float64) - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= bound * np.finfo(dtype).eps
    assert np.mean(got == want) > 0.8


def _normal_of_every_word(fma):
    """float32 normal draws of all 2**23 uniform floats (the unit floats times 2**23 are
    0, 1, ..., 2**23 - 1), its fused multiply-adds computed by ``fma``, compiled."""
    floats = np.arange(2**23, dtype=np.float32) * np.float32(2.0**-23)
    lo = np.nextafter(np.float32(-1), np.float32(0))

    def draws(unit):
        return np.float32(np.sqrt(2)) * _erfinv32(scaled(unit, lo, 1.0, np.float32), fma)

    return ik.jit(draws)(floats)


def test_normal_float32_fused_multiply_adds_round_once_on_every_word():
    """normal's float32 erf_inv rounds each emulated FMA's float64 sum to float32
    (two roundings, the cheaper form); exact single rounding (TwoSum and a midpoint
    nudge) gives the same bits on all 2**23 words, so the cheaper form is the FMA's
    result for every draw."""
    assert _normal_of_every_word(fma32_twice).tobytes() == _normal_of_every_word(fma32).tobytes()


def test_fma32_rounds_once():
    """a * b + c rounded once where the float64 sum rounded again differs: with
    a = 2**-24 (1 + 2**-23), b = 1 - 2**-23, c = 1 + 2**-23 the exact sum is
    1 + 2**-23 + 2**-24 - 2**-70, just below a float32 midpoint (rounds to c); its float64
    rounding is the midpoint itself, which ties to the even 1 + 2**-22."""
    a = np.full(3, 2.0**-24 * (1 + 2.0**-23), np.float32)
    b = np.array([1 - 2.0**-23, 1 + 2.0**-23, 1 - 2.0**-23], np.float32)
    c = np.array([1 + 2.0**-23, 1 + 2.0**-23, -(1 + 2.0**-23)], np.float32)
    want = np.array([1 + 2.0**-23, 1 + 2.0**-22, -(1 + 2.0**-23)], np.float32)
    assert fma32(a, b, c).tobytes() == want.tobytes()
    assert fma32_twice(a, b, c)[0] == np.float32(1 + 2.0**-22)


NORMAL_KEY_2026_SHA256 = "5bf332305eee48ab28e471a99c82631e4c0b7bd1142e33f331101b26d30f1198"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_normal_float32_known_answer_on_every_strategy(strategy):
    """JAX 0.10.2's bits for ``jax.random.normal(key(2026), (10**5,), float32)`` (recorded:
    the SHA-256 of the array's bytes, and a few draws' bits), on every CPU strategy under
    the default numerics: float32 normal uses no transcendental."""
    draws = ik.jit(lambda key: rnd.normal(key, (10**5,), np.float32), strategy=strategy)(
        rnd.key(2026))
    assert draws[:6].view(np.int32).tolist() == [1067786205, 1063299636, 1061289768,
                                                 1046278696, -1087525077, 1068061921]
    assert draws[[68483, 85444]].view(np.int32).tolist() == [1082792363, 928896554]
    assert hashlib.sha256(draws.tobytes()).hexdigest() == NORMAL_KEY_2026_SHA256
    small = rnd.normal(rnd.key(5), (3, 4), np.float32)
    assert small.view(np.int32).tolist() == [
        [-1112749111, 1068801126, 1059153725, -1079529147],
        [1068448038, 1055668015, -1073222380, -1077048007],
        [-1084860640, -1104382051, -1068854641, -1097663865]]


def test_bernoulli_randint_permutation_and_uniform_ranges_match_jax(jax_random):
    jr, jnp = jax_random.random, jax_random.numpy
    key, jkey = rnd.key(11), jr.key(11)
    np.testing.assert_array_equal(rnd.bernoulli(key, 0.3, (300,)),
                                  np.asarray(jr.bernoulli(jkey, 0.3, (300,))))
    for lo, hi in [(-5, 17), (5, 2), (-(2**31), 2**31 - 1)]:
        np.testing.assert_array_equal(
            rnd.randint(key, (300,), lo, hi),
            np.asarray(jr.randint(jkey, (300,), lo, hi, dtype=jnp.int32)))
    for n in (10, 257):
        np.testing.assert_array_equal(rnd.permutation(key, n),
                                      np.asarray(jr.permutation(jkey, n)))
    rows = np.arange(24.0).reshape(6, 4)
    np.testing.assert_array_equal(rnd.permutation(key, rows),
                                  np.asarray(jr.permutation(jkey, rows)))
    # uniform on [-1, 1): floats * 2 - 1 rounds once with or without XLA's fused multiply-add
    want = jr.uniform(jkey, (500,), jnp.float64, -1.0, 1.0)
    assert rnd.uniform(key, (500,), np.float64, -1.0, 1.0).tobytes() == np.asarray(want).tobytes()
    for dtype in (np.float32, np.float64):
        want = jax_random.nn.initializers.glorot_uniform()(jkey, (30, 20), dtype)
        assert rnd.glorot_uniform(key, (30, 20), dtype).tobytes() == np.asarray(want).tobytes()


def test_permutation_with_two_sort_rounds_matches_jax(jax_random):
    """n > 1625 takes two rounds of sorts in JAX (3 log n / log(2**32 - 1) > 1)."""
    got = rnd.permutation(rnd.key(2), 1700)
    want = np.asarray(jax_random.random.permutation(jax_random.random.key(2), 1700))
    np.testing.assert_array_equal(got, want)


# --- strategies, jit, vmap --------------------------------------------------------------------

def _draws(key):
    return (rnd.uniform(key, (3,), np.float32), rnd.uniform(key, (2,), np.float64, -2.0, 3.0),
            rnd.normal(key, (3,), np.float32), rnd.normal(key, (2,), np.float64),
            rnd.randint(key, (3,), -4, 9), rnd.bernoulli(key, 0.25, (3,)),
            rnd.permutation(key, 5), rnd.split(key, 2), rnd.fold_in(key, 3))


def _native_draws(key):
    """One Threefry call (the two samplers share the counters), its 32-bit xor, the float64
    mantissa words and erfinv, at three draws per key: the native code generator loops over
    the 3 x 32 bit planes of a row (rows of at most 64 elements are unrolled, slow to compile)."""
    return rnd.normal(key, (3,), np.float32), rnd.uniform(key, (3,), np.float64)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_gives_the_same_bits_under_jit(strategy):
    """A batch of keys is the pixel axis: native runs the generator in generated C. normal's
    log1p is a transcendental, so native is held to the reference's bits under portable
    numerics (its contract); threads runs NumPy's loops and matches under either."""
    keys = rnd.split(rnd.key(2026), 33)
    mode = "portable" if strategy == "native" else "native"
    batched = ik.vmap(_native_draws if strategy == "native" else _draws)
    compiled = ik.jit(batched, strategy=strategy, numerics=mode).lower(keys).compile()
    with ik.numerics(mode):
        eager = batched(keys)
    for got, want in zip(compiled(keys), eager):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    if strategy == "native":  # the rounds' rotations run in C
        assert "isk_shl_i64(" in compiled.source()


def test_vmap_over_keys_equals_the_loop_over_keys():
    keys = rnd.split(rnd.key(5), 3)
    batched = ik.vmap(_draws)(keys)
    for i, key in enumerate(keys):
        for b, one in zip(batched, _draws(key)):
            assert b[i].tobytes() == np.asarray(one).tobytes()


def test_jit_records_one_deterministic_graph():
    key = rnd.key(0)
    first, second = ik.trace(_native_draws, key), ik.trace(_native_draws, key)
    assert str(first) == str(second)
    assert len(first.inputs) == 1
    jitted = ik.jit(_native_draws, strategy="reference")
    for a, b, c in zip(jitted(key), jitted(key), _native_draws(key)):
        assert a.tobytes() == b.tobytes() == np.asarray(c).tobytes()


def test_keys_are_deterministic_and_distinct():
    key = rnd.key(3)
    assert rnd.uniform(key, (4,)).tobytes() == rnd.uniform(rnd.key(3), (4,)).tobytes()
    assert not np.array_equal(rnd.uniform(key, (4,)), rnd.uniform(rnd.key(4), (4,)))
    keys = rnd.split(key, 64)
    assert len({tuple(k) for k in keys}) == 64 and keys.dtype == np.int64
    assert ((keys >= 0) & (keys < 2**32)).all()
    folded = {tuple(rnd.fold_in(key, d)) for d in range(16)}
    assert len(folded) == 16


def test_traced_seed_and_fold_in_data():
    seeds = np.array([0, 42, 2**33 + 1], dtype=np.int64)
    keys = ik.jit(ik.vmap(rnd.key), strategy="reference")(seeds)
    np.testing.assert_array_equal(keys, np.stack([rnd.key(int(s)) for s in seeds]))
    data = np.array([0, 7, 2**32 + 3], dtype=np.int64)
    folded = ik.vmap(lambda d: rnd.fold_in(rnd.key(1), d))(data)
    np.testing.assert_array_equal(folded, np.stack([rnd.fold_in(rnd.key(1), int(d) % 2**32)
                                                    for d in data]))


# --- distributions ----------------------------------------------------------------------------

N = 100_000


def _within(value, mean, sigma):
    assert abs(value - mean) <= 5 * sigma, (value, mean, sigma)


def test_uniform_moments_and_chi_square():
    u = rnd.uniform(rnd.key(123), (N,), np.float32)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    _within(u.mean(dtype=np.float64), 0.5, math.sqrt(1 / 12 / N))
    _within(u.var(dtype=np.float64), 1 / 12, math.sqrt(1 / 180 / N))  # Var of (u-1/2)^2
    counts = np.bincount((u * 100).astype(np.int64), minlength=100)
    expected = N / 100
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 171.0  # chi-square with 99 degrees of freedom: P(chi2 > 171) < 1e-6


def test_normal_moments():
    x = rnd.normal(rnd.key(321), (N,), np.float64)
    _within(x.mean(), 0.0, math.sqrt(1 / N))
    _within(x.var(), 1.0, math.sqrt(2 / N))
    _within(np.mean(np.abs(x) < 1.0), 0.6826894921370859, math.sqrt(0.22 / N))


def test_bernoulli_randint_and_permutation():
    b = rnd.bernoulli(rnd.key(8), 0.3, (20_000,))
    assert b.dtype == np.bool_
    _within(b.mean(), 0.3, math.sqrt(0.21 / 20_000))
    r = rnd.randint(rnd.key(9), (20_000,), -3, 7)
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    assert np.bincount(r + 3).min() > 20_000 / 10 * 0.9
    assert rnd.randint(rnd.key(9), (4,), 0, 5, dtype=np.int64).dtype == np.int64
    for seed in range(5):
        p = rnd.permutation(rnd.key(seed), 50)
        np.testing.assert_array_equal(np.sort(p), np.arange(50))
    rows = rnd.permutation(rnd.key(1), np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(np.sort(rows[:, 0]), [0.0, 3.0, 6.0, 9.0])
    np.testing.assert_array_equal(rows[:, 1] - rows[:, 0], np.ones(4))


@pytest.mark.parametrize("name,variance", [
    ("glorot_uniform", 2 / (200 + 100)), ("glorot_normal", 2 / (200 + 100)),
    ("he_normal", 2 / 200), ("lecun_normal", 1 / 200)])
def test_initializer_variances(name, variance):
    w = getattr(rnd, name)(rnd.key(17), (200, 100), np.float32)
    assert w.shape == (200, 100) and w.dtype == np.float32
    n = w.size
    _within(w.astype(np.float64).mean(), 0.0, math.sqrt(variance / n))
    _within(w.astype(np.float64).var(), variance, variance * math.sqrt(2 / n))
    if name != "glorot_uniform":
        assert np.abs(w).max() < 2 * math.sqrt(variance) / 0.87962566103423978


def test_errors_name_the_problem_and_the_fix():
    with pytest.raises(ShapeError, match=r"shape \(3, 2\).*vmap"):
        rnd.uniform(rnd.split(rnd.key(0), 3), (2,))
    with pytest.raises(DTypeError, match="not a float dtype.*float32"):
        rnd.uniform(rnd.key(0), (2,), np.int32)
    with pytest.raises(DTypeError, match="not an integer dtype"):
        rnd.randint(rnd.key(0), (2,), 0, 3, dtype=np.float64)
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        rnd.glorot_uniform(rnd.key(0), (5,))


# --- nonsense arguments are refused, not turned into empty or wrapped draws -------------------

@pytest.mark.parametrize("call,where", [
    (lambda k: rnd.uniform(k, (-1,)), r"random\.uniform: shape \(-1,\)"),
    (lambda k: rnd.normal(k, -3), r"random\.normal: shape -3"),
    (lambda k: rnd.bernoulli(k, 0.5, (3, -2)), r"random\.bernoulli: shape \(3, -2\)"),
    (lambda k: rnd.randint(k, (-4,), 0, 5), r"random\.randint: shape \(-4,\)"),
    (lambda k: rnd.glorot_uniform(k, (3, -2)), r"random\.glorot_uniform: shape \(3, -2\)"),
])
def test_a_negative_shape_is_refused_naming_the_sampler(call, where):
    """JAX refuses a negative dimension; an empty result would hide the mistake."""
    with pytest.raises(ValueError, match=where + ".*negative.*0 or more"):
        call(rnd.key(0))


def test_split_into_a_negative_number_of_keys_is_refused():
    with pytest.raises(ValueError, match=r"random\.split: num -1 .*negative.*0 or more"):
        rnd.split(rnd.key(0), -1)
    with pytest.raises(ValueError, match=r"random\.split: num \(2, -1\)"):
        rnd.split(rnd.key(0), (2, -1))
    assert rnd.split(rnd.key(0), 0).shape == (0, 2)  # no keys is a valid request, as in JAX


def test_permutation_of_a_negative_count_is_refused():
    with pytest.raises(ValueError, match=r"random\.permutation: x -3 .*negative.*range\(n\)"):
        rnd.permutation(rnd.key(0), -3)
    with pytest.raises(TypeError, match=r"random\.permutation: x .*float64 scalar.*range\(n\)"):
        rnd.permutation(rnd.key(0), np.float64(3.0))
    assert rnd.permutation(rnd.key(0), 0).shape == (0,)
    np.testing.assert_array_equal(rnd.permutation(rnd.key(4), np.int64(7)),
                                  rnd.permutation(rnd.key(4), 7))


def test_randint_beyond_the_int32_range_clips_to_it_as_jax_does():
    """JAX clips the bounds to the dtype's range; a maxval above it draws up to the largest
    value inclusive. Before: the span wrapped to 0 and every draw was 0 with a warning."""
    key = rnd.key(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wide = rnd.randint(key, (4000,), 0, 2**40)
        full = rnd.randint(key, (4000,), -(2**40), 2**40)
    assert wide.dtype == np.int32 and wide.min() >= 0 and wide.max() > 2**30
    assert len(np.unique(wide)) > 3990
    np.testing.assert_array_equal(wide, rnd.randint(key, (4000,), 0, 2**31))
    assert (full < 0).mean() == pytest.approx(0.5, abs=0.05)
    np.testing.assert_array_equal(rnd.randint(key, (8,), 2**40, 2**41),
                                  np.full(8, 2**31 - 1, np.int32))
    traced = ik.jit(lambda hi: rnd.randint(key, (4000,), 0, hi), strategy="reference")
    np.testing.assert_array_equal(traced(np.int64(2**40)), wide)


def test_randint_int64_beyond_the_32_bit_algorithm_is_refused():
    """int64 draws use the same 32-bit algorithm: a range it cannot reach is refused."""
    with pytest.raises(ValueError, match=r"random\.randint: maxval 1099511627776 .*int32 "
                                         r"range.*dtype=int32"):
        rnd.randint(rnd.key(0), (3,), 0, 2**40, dtype=np.int64)
    with pytest.raises(ValueError, match=r"random\.randint: minval -4294967296"):
        rnd.randint(rnd.key(0), (3,), -(2**32), 0, dtype=np.int64)
    got = rnd.randint(rnd.key(0), (3,), 0, 2**31, dtype=np.int64)
    np.testing.assert_array_equal(got, rnd.randint(rnd.key(0), (3,), 0, 2**31))


def test_randint_clipping_matches_jax(jax_random):
    jr, jnp = jax_random.random, jax_random.numpy
    for lo, hi in [(0, 2**40), (-(2**40), 2**40), (-(2**31), 2**31), (2**40, 2**41), (7, 2**33)]:
        np.testing.assert_array_equal(
            rnd.randint(rnd.key(5), (500,), lo, hi),
            np.asarray(jr.randint(jr.key(5), (500,), lo, hi, dtype=jnp.int32)))


@pytest.mark.parametrize("raw", [[2**40, 2**33], [2**32, 0], [-1, 5]])
def test_key_words_outside_32_bits_are_refused(raw):
    """A key [2**40, 2**33] used to draw what key(0) draws (the words were wrapped)."""
    raw = np.array(raw, dtype=np.int64)
    for call in (lambda: rnd.uniform(raw, (3,)), lambda: rnd.split(raw),
                 lambda: rnd.fold_in(raw, 1), lambda: rnd.randint(raw, (2,), 0, 9)):
        with pytest.raises(ValueError, match=r"random\.\w+: key words .* not 32-bit words.*"
                                             r"\[0, 2\*\*32\).*key\(seed\)"):
            call()


@pytest.mark.parametrize("seed", [2**64, 2**70, -(2**63) - 1])
def test_a_seed_beyond_64_bits_is_refused(seed):
    with pytest.raises(ValueError, match=rf"random\.key: seed {seed} .*64 bits.*% 2\*\*64"):
        rnd.key(seed)


def test_64_bit_seeds_signed_or_unsigned_are_read_as_their_bits():
    np.testing.assert_array_equal(rnd.key(2**64 - 1), rnd.key(-1))
    np.testing.assert_array_equal(rnd.key(np.uint64(2**63)), rnd.key(-(2**63)))
    np.testing.assert_array_equal(rnd.key(-(2**63)), [2**31, 0])


@pytest.mark.parametrize("name,cdf", [("exponential", "expon"), ("logistic", "logistic"),
                                      ("laplace", "laplace"), ("gumbel", "gumbel_r")])
def test_continuous_samplers_follow_their_distribution_and_jaxs_formula(name, cdf):
    """10^5 draws pass Kolmogorov-Smirnov (p > 1e-3) against SciPy's
    distribution, in float64 and float32; with JAX installed, the draws are
    JAX's within 1e-11 relative (the same uniform bits and formula; the
    logs are libm's here, XLA's there)."""
    stats = pytest.importorskip("scipy.stats")
    k = rnd.key(42)
    for dtype in (np.float64, np.float32):
        draws = ik.jit(lambda k, dtype=dtype: getattr(rnd, name)(k, (100_000,), dtype))(k)
        assert draws.dtype == dtype and np.all(np.isfinite(draws))
        assert stats.kstest(draws.astype(np.float64), getattr(stats, cdf).cdf).pvalue > 1e-3
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    theirs = np.asarray(getattr(jax.random, name)(jax.random.PRNGKey(42), (100_000,),
                                                  dtype=np.float64))
    ours = getattr(rnd, name)(k, (100_000,))
    np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-300)


def test_categorical_is_the_gumbel_max_trick():
    """Frequencies match softmax(logits) within 4 standard errors on 10^5
    draws, batch shapes prefix the logits' batch, and with JAX installed the
    indices are JAX's."""
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
    k = rnd.key(3)
    draws = ik.jit(lambda k: rnd.categorical(k, logits, shape=(50_000, 2)))(k)
    assert draws.shape == (50_000, 2) and draws.dtype == np.int64
    for row in range(2):
        freq = np.bincount(draws[:, row], minlength=3) / 50_000
        p = np.exp(logits[row])
        assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 50_000))
    with pytest.raises(ik.ShapeError, match="batch shape"):
        rnd.categorical(k, logits, shape=(5, 3))
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    theirs = jax.random.categorical(jax.random.PRNGKey(3), logits, shape=(50_000, 2))
    np.testing.assert_array_equal(draws, np.asarray(theirs))


@pytest.mark.parametrize("weighted", [False, True])
def test_choice_draws_with_and_without_replacement(weighted):
    """With replacement the frequencies follow p (uniform without it) within
    4 standard errors on 40,000 draws; without, every index at most once and
    each first place taken with probability p; arrays are drawn along axis."""
    p = np.array([0.1, 0.2, 0.3, 0.4]) if weighted else None
    want = p if weighted else np.full(4, 0.25)
    k = rnd.key(5)
    draws = ik.jit(lambda k: rnd.choice(k, 4, (40_000,), p=p))(k)
    assert draws.dtype == np.int64
    freq = np.bincount(draws, minlength=4) / draws.size
    assert np.all(np.abs(freq - want) < 4 * np.sqrt(want * (1 - want) / draws.size))
    keys = rnd.split(k, 4000)
    firsts = ik.jit(ik.vmap(lambda k: rnd.choice(k, 4, (3,), replace=False, p=p)))(keys)
    assert all(len(set(row)) == 3 for row in firsts.tolist())
    freq = np.bincount(firsts[:, 0], minlength=4) / len(firsts)
    assert np.all(np.abs(freq - want) < 4 * np.sqrt(want * (1 - want) / len(firsts)))
    a = np.arange(12.0).reshape(4, 3)
    picked = ik.jit(lambda k: rnd.choice(k, a, (2,), replace=False, p=None, axis=1))(k)
    assert picked.shape == (4, 2) and set(picked[0].tolist()) <= {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="without replacement"):
        rnd.choice(k, 3, (4,), replace=False)
