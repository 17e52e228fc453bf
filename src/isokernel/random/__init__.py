"""``isokernel.random``: counter-based keys and samplers in ``jax.random``'s
call forms, built on Threefry-2x32 written in integer arithmetic, so every
strategy computes the same bits (docs/random.md)."""

from ._erfinv import erfinv
from ._initializers import glorot_normal, glorot_uniform, he_normal, lecun_normal
from ._keys import fold_in, key, split
from ._samplers import (
    bernoulli,
    categorical,
    choice,
    exponential,
    gumbel,
    laplace,
    logistic,
    normal,
    permutation,
    randint,
    uniform,
)

__all__ = ["bernoulli", "categorical", "choice", "erfinv", "exponential", "fold_in",
           "glorot_normal", "glorot_uniform", "gumbel", "he_normal", "key", "laplace",
           "lecun_normal", "logistic", "normal", "permutation", "randint", "split", "uniform"]
