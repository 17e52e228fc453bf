"""``isokernel.random``: counter-based keys and samplers in ``jax.random``'s
call forms, built on Threefry-2x32 written in integer arithmetic, so every
strategy computes the same bits (docs/random.md)."""

from ._distributions import (
    beta,
    dirichlet,
    gamma,
    loggamma,
    multivariate_normal,
    orthogonal,
    poisson,
    truncated_normal,
)
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

__all__ = ["bernoulli", "beta", "categorical", "choice", "dirichlet", "erfinv", "exponential",
           "fold_in", "gamma", "glorot_normal", "glorot_uniform", "gumbel", "he_normal", "key",
           "laplace", "lecun_normal", "loggamma", "logistic", "multivariate_normal", "normal",
           "orthogonal", "permutation", "poisson", "randint", "split", "truncated_normal",
           "uniform"]
