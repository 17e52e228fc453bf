"""Initializers as ``jax.nn.initializers`` builds them (variance scaling):
each is ``init(key, shape, dtype=float64) -> array``, like the function
``jax.nn.initializers.glorot_uniform()`` returns. Fans are JAX's for the
default axes: ``fan_in = shape[-2] * receptive``, ``fan_out = shape[-1] *
receptive`` with ``receptive`` the product of the leading axes."""

from __future__ import annotations

import math

import numpy as np

from .. import numpy as inp
from ..ir import ShapeError
from ..typing import Array, ArrayLike, DTypeLike, Shape
from ._erfinv import erfinv
from ._keys import as_shape
from ._samplers import float_dtype, uniform

_TRUNCATED_STD = 0.87962566103423978  # stddev of a standard normal truncated to (-2, 2)


def _fans(shape, name: str) -> tuple[float, float]:
    if len(shape) < 2:
        raise ShapeError(f"random.{name}: shape {shape} has no (in, out) axes; weights "
                         f"need at least 2 dimensions, e.g. (fan_in, fan_out)")
    receptive = math.prod(shape) / shape[-2] / shape[-1]
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated_normal(key, shape, dtype):
    """``jax.random.truncated_normal(key, -2, 2)``: erfinv of a uniform
    between erf(-sqrt 2) and erf(sqrt 2), clipped inside (-2, 2)."""
    sqrt2 = np.asarray(np.sqrt(2), dtype)
    edge = np.asarray(math.erf(float(np.asarray(2.0, dtype) / sqrt2)), dtype)
    u = uniform(key, shape, dtype, -edge, edge)
    lower = np.nextafter(np.asarray(-2.0, dtype), np.asarray(np.inf, dtype))
    upper = np.nextafter(np.asarray(2.0, dtype), np.asarray(-np.inf, dtype))
    return inp.clip(sqrt2 * erfinv(u), lower, upper)


def _scaled_truncated_normal(key, shape, dtype, variance, name: str):
    dtype = float_dtype(dtype, name)
    stddev = np.sqrt(np.asarray(variance, dtype)) / np.asarray(_TRUNCATED_STD, dtype)
    return _truncated_normal(key, as_shape(shape, name), dtype) * stddev


def glorot_uniform(key: ArrayLike, shape: Shape, dtype: DTypeLike = np.float64) -> Array:
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    dtype = float_dtype(dtype, "glorot_uniform")
    shape = as_shape(shape, "glorot_uniform")
    fan_in, fan_out = _fans(shape, "glorot_uniform")
    variance = np.asarray(1.0 / ((fan_in + fan_out) / 2), dtype)
    return uniform(key, shape, dtype, -1.0) * np.sqrt(3 * variance)


def glorot_normal(key: ArrayLike, shape: Shape, dtype: DTypeLike = np.float64) -> Array:
    """Truncated normal of variance 2 / (fan_in + fan_out)."""
    fan_in, fan_out = _fans(as_shape(shape, "glorot_normal"), "glorot_normal")
    return _scaled_truncated_normal(key, shape, dtype, 1.0 / ((fan_in + fan_out) / 2),
                                    "glorot_normal")


def he_normal(key: ArrayLike, shape: Shape, dtype: DTypeLike = np.float64) -> Array:
    """Truncated normal of variance 2 / fan_in (He et al., 2015)."""
    fan_in, _ = _fans(as_shape(shape, "he_normal"), "he_normal")
    return _scaled_truncated_normal(key, shape, dtype, 2.0 / fan_in, "he_normal")


def lecun_normal(key: ArrayLike, shape: Shape, dtype: DTypeLike = np.float64) -> Array:
    """Truncated normal of variance 1 / fan_in (LeCun et al., 1998)."""
    fan_in, _ = _fans(as_shape(shape, "lecun_normal"), "lecun_normal")
    return _scaled_truncated_normal(key, shape, dtype, 1.0 / fan_in, "lecun_normal")
