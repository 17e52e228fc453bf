"""Stage 4's tabulated inverse, measured against the exact closed-form
inverse of the Mironov real part, and the forward table values."""

from __future__ import annotations

import numpy as np
import pytest

from isokernel.backends.parity import bit_identical
from isokernel.models.soil_moisture import mironov
from isokernel.models.soil_moisture import tables as T


@pytest.fixture(scope="module")
def bins():
    return T.clay_bins()


def test_inverse_table_error_with_1024_nodes_is_within_1e_4(bins):
    """Against the exact closed-form inverse over mv ∈ [0, 0.6], every
    layer; and the error Table.inverse reports against the sampled inverse."""
    assert T.inverse_table_error(bins, nodes=1024) <= 1e-4
    inverse = T.stage4_inverse(bins, nodes=1024)
    assert inverse.table.nodes == 1024 and inverse.table.name == T.STAGE4_NAME
    assert 0 < inverse.max_error <= 1e-4


def test_stage4_table_is_the_table_extensions_inverse_with_a_node_on_the_kink(bins):
    inverse = T.stage4_inverse(bins, nodes=1024).table
    k = -inverse.x0 / inverse.dx
    assert abs(k - round(k)) < 1e-9
    mvt, _ = T.kinks(bins)  # at ξ = 0 every layer returns its own kink exactly
    at_kink = inverse.lookup(np.zeros(bins.size), np.arange(bins.size))
    np.testing.assert_allclose(at_kink, mvt, rtol=0, atol=1e-12)


def test_inverse_table_error_is_second_order_with_the_node_at_the_kink(bins):
    coarse, fine = T.inverse_table_error(bins, 512), T.inverse_table_error(bins, 1024)
    assert 3.5 < coarse / fine < 4.5


def test_blending_adjacent_clay_layers_stays_within_1e_4(bins):
    assert T.clay_blend_error(bins) <= 1e-4


def test_both_tables_have_a_node_exactly_at_the_kink(bins):
    eps_re, _ = T.mironov_table_values(bins)
    inverse = T.stage4_table(bins)
    for table in (eps_re, inverse):
        k = -table.x0 / table.dx
        assert abs(k - round(k)) < 1e-9 and 0 < k < table.values.shape[1] - 1
    assert inverse.values.shape == (bins.size, T.NODES)


def test_forward_table_values_are_the_direct_model_at_the_nodes(bins):
    eps_re, eps_im = T.mironov_table_values(bins, nodes=64)
    mvt, _ = T.kinks(bins)
    mv = mvt[:, None] + (eps_re.x0 + eps_re.dx * np.arange(64))
    want = mironov(mv, bins[:, None] + np.zeros_like(mv))
    assert bit_identical(eps_re.values, want.real) and bit_identical(eps_im.values, want.imag)


def test_host_lookup_is_the_table_extensions_reference_lookup(bins):
    inverse = T.stage4_table(bins)
    x = np.random.default_rng(0).uniform(-6, 50, 5000)
    layer = np.random.default_rng(1).integers(0, bins.size, 5000)
    want = inverse.table("same").lookup(x, layer)
    assert bit_identical(T.lookup(inverse, x, layer), want)


def test_lookup_clamps_floors_and_interpolates_linearly():
    table = T.UniformTable(np.array([[0.0, 10.0, 30.0], [1.0, 1.0, 1.0]]), 2.0, 0.5)
    got = T.lookup(table, np.array([0.0, 2.0, 2.25, 2.5, 2.75, 3.0, 9.0, 2.6]),
                   np.array([0, 0, 0, 0, 0, 0, 0, 1]))
    np.testing.assert_array_equal(got, [0.0, 0.0, 5.0, 10.0, 20.0, 30.0, 30.0, 1.0])
