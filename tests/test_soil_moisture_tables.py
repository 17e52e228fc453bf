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
    assert T.inverse_table_error(bins, nodes=1024) <= 1e-4


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
        assert k == round(k) and 0 < k < table.values.shape[1] - 1
    assert inverse.values.shape == (bins.size, T.NODES)


def test_forward_table_values_are_the_direct_model_at_the_nodes(bins):
    eps_re, eps_im = T.mironov_table_values(bins, nodes=64)
    mvt, _ = T.kinks(bins)
    mv = mvt[:, None] + (eps_re.x0 + eps_re.dx * np.arange(64))
    want_re, want_im = mironov(mv, bins[:, None] + np.zeros_like(mv))
    assert bit_identical(eps_re.values, want_re) and bit_identical(eps_im.values, want_im)


def test_lookup_clamps_floors_and_interpolates_linearly():
    table = T.UniformTable(np.array([[0.0, 10.0, 30.0], [1.0, 1.0, 1.0]]), 2.0, 0.5)
    got = T.lookup(table, np.array([0.0, 2.0, 2.25, 2.5, 2.75, 3.0, 9.0, 2.6]),
                   np.array([0, 0, 0, 0, 0, 0, 0, 1]))
    np.testing.assert_array_equal(got, [0.0, 0.0, 5.0, 10.0, 20.0, 30.0, 30.0, 1.0])
