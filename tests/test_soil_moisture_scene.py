"""The counter-based RNG and the synthetic scene: statistics, exactness of
the integer arithmetic, and regeneration from the pixel index alone."""

from __future__ import annotations

import numpy as np
import pytest

import isokernel
from isokernel.backends.parity import bit_identical
from isokernel.models.soil_moisture import CLASSES, Grid, generate_scene, scene_model
from isokernel.models.soil_moisture import rng as R
from isokernel.models.soil_moisture.scene import NOISE_SIGMA0_DB, NOISE_TB_K

N = 200_000


def _python_hash(index: int, stream: int, seed: int) -> int:
    """The Feistel network in Python integers (unbounded: no overflow)."""
    p = R.PRIME
    left, right = index % p, (index // p * 1024 + stream) % p
    for key in R.round_keys(seed):
        x = (right + key) % p
        left, right = right, (left + x ** 3 % p) % p
    return right


def test_hash_matches_unbounded_integer_arithmetic():
    index = np.array([0, 1, 2, 12345, R.PRIME - 1, R.PRIME, 3 * R.PRIME + 7, 2**40 + 3],
                     dtype=np.int64)
    for seed in (0, 1, R.PRIME - 1):
        got = R.hash_index(index, 17, seed)
        assert got.dtype == np.int64
        assert [int(v) for v in got] == [_python_hash(int(i), 17, seed) for i in index]


def test_uniform_statistics():
    index = np.arange(N, dtype=np.int64)
    u = R.uniform(index, 0, 42)
    v = R.uniform(index, 1, 42)
    assert 0.0 < u.min() and u.max() < 1.0
    sigma = 1.0 / np.sqrt(N)
    assert abs(u.mean() - 0.5) < 4 * sigma * np.sqrt(1 / 12)
    assert abs(12 * u.var() - 1.0) < 4 * sigma * np.sqrt(0.8)
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 4 * sigma
    assert abs(np.corrcoef(u, v)[0, 1]) < 4 * sigma
    counts = np.histogram(u, 100, (0, 1))[0]
    chi2 = np.sum((counts - N / 100) ** 2 / (N / 100))
    assert chi2 < 99 + 4 * np.sqrt(2 * 99)
    pairs = np.histogram2d(u[:-1], u[1:], 30, [[0, 1], [0, 1]])[0]
    expected = (N - 1) / 900
    assert np.sum((pairs - expected) ** 2 / expected) < 899 + 4 * np.sqrt(2 * 899)


def test_normals_have_unit_variance():
    z1, z2 = R.normal_pair(np.arange(N, dtype=np.int64), 0, 7)
    for z in (z1, z2):
        assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert abs(np.corrcoef(z1, z2)[0, 1]) < 0.01


def test_seed_out_of_range_is_refused():
    with pytest.raises(ValueError, match="seed"):
        R.round_keys(-1)


def test_scene_regenerates_from_any_subset_of_pixel_indices():
    grid = Grid.square(10_000)
    full = scene_model(np.arange(10_000, dtype=np.int64), grid, seed=9)
    part = scene_model(np.arange(2_500, 2_600, dtype=np.int64), grid, seed=9)
    for name, values in part.items():
        assert bit_identical(values, full[name][2_500:2_600]), name


def test_scene_under_jit_reference_equals_eager():
    eager = generate_scene(3_000, seed=11)
    jitted = generate_scene(3_000, seed=11,
                            jitted=lambda f: isokernel.jit(f, strategy="reference"))
    for name, values in eager.items():
        assert bit_identical(values, jitted[name]), name


@pytest.fixture(scope="module")
def scene_pair():
    return generate_scene(N, seed=1), generate_scene(N, seed=1, noise=False)


def test_scene_noise_levels(scene_pair):
    noisy, clean = scene_pair
    for name, sigma in (("tbv", NOISE_TB_K), ("tbh", NOISE_TB_K),
                        ("sigma0_hh", NOISE_SIGMA0_DB)):
        diff = noisy[name] - clean[name]
        assert abs(diff.std() / sigma - 1.0) < 0.02 and abs(diff.mean()) < 0.01 * sigma
    for name in ("mv", "clay", "ts", "ndvi", "vwc", "eps_re"):
        assert bit_identical(noisy[name], clean[name])


def test_scene_fields_are_physical_and_smooth(scene_pair):
    s, _ = scene_pair
    porosity = 1 - s["bulk_density"] / 2.65
    assert np.all(s["mv"] > 0.0) and np.all(s["mv"] < porosity)
    assert np.all((s["clay"] >= 0.05) & (s["clay"] <= 0.55))
    assert np.all((s["ndvi_min"] <= s["ndvi"]) & (s["ndvi"] <= s["ndvi_max"]))
    assert np.all(s["vwc"] >= 0.0) and s["landcover"].dtype == np.int32
    counts = np.bincount(s["landcover"], minlength=len(CLASSES))
    assert np.all(counts > 0)  # every class is present
    grid = Grid.square(N)
    mv = s["mv"][: grid.width * (N // grid.width)].reshape(-1, grid.width)
    assert np.max(np.abs(np.diff(mv, axis=1))) < 0.02  # smooth, not white noise
    assert 180 < s["tbv"].mean() < 290 and s["tbh"].mean() < s["tbv"].mean()


def test_the_hash_is_the_same_integers_on_every_strategy(strategy):
    index = np.arange(50_000, dtype=np.int64) * 7919

    def hashed(index):
        return R.hash_index(index, 3, 12345)
    got = isokernel.jit(hashed, strategy=strategy.name)(index)
    assert bit_identical(got, hashed(index))
