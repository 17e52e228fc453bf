"""The data-parallel tests' problem: a one-hidden-layer MLP whose block loss
is the sum of its rows' squared errors, over 700 rows cut into blocks of 128
(6 blocks, the last one ragged: 60 rows)."""

from __future__ import annotations

import numpy as np

import isokernel.numpy as inp

ROWS, BLOCK = 700, 128


def mlp_loss(params, x, y):
    """The sum over the block's rows of a one-hidden-layer MLP's squared error."""
    w1, b1, w2 = params
    h = inp.tanh(x @ w1 + b1)
    r = h @ w2 - y
    return inp.sum(r * r)


def problem(dtype, rows=ROWS, seed=0):
    rng = np.random.default_rng(seed)
    params = (rng.normal(size=(6, 12)).astype(dtype), rng.normal(size=12).astype(dtype),
              (0.3 * rng.normal(size=(12, 1))).astype(dtype))
    x = rng.normal(size=(rows, 6)).astype(dtype)
    y = rng.normal(size=(rows, 1)).astype(dtype)
    return params, x, y
