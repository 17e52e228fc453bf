"""Activation functions, normalizations and one-hot encoding: jax.nn's
names and semantics, composed from ``isokernel.numpy``.

Each is written so that no intermediate overflows for any finite input (no
overflow warning eagerly, no inf or NaN in a value or a gradient that the
true function does not have): exponentials only ever see ``-|x|`` or a
shifted argument that is at most 0.
"""

from __future__ import annotations

import math

from .. import numpy as inp
from ..transforms import stop_gradient
from ..typing import Array, ArrayLike, Axis, DTypeLike
from ._special import erfc

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
SQRT_HALF = math.sqrt(0.5)
TANH_SATURATED = 1e3


def _float(x):
    x = inp.asarray(x)
    return x if x.dtype in (inp.float32, inp.float64) else inp.astype(x, inp.float64)


def _abs_one_at_zero(x):
    """|x| whose derivative at 0 is 1 (the side that ``x >= 0`` selects)."""
    return inp.where(x >= 0, x, -x)


def relu(x: ArrayLike) -> Array:
    """max(x, 0); NaN stays NaN; the derivative is 0 at 0 (as jax.nn)."""
    x = _float(x)
    return inp.where(x <= 0, 0.0, x)


def sigmoid(x: ArrayLike) -> Array:
    """1 / (1 + exp(-x)), evaluated as 1/(1+z) for x >= 0 and z/(1+z) for
    x < 0 with z = exp(-|x|) <= 1: no overflow for any x, and accurate
    relative values where sigmoid is tiny."""
    x = _float(x)
    z = inp.exp(-_abs_one_at_zero(x))
    return inp.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def softplus(x: ArrayLike) -> Array:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)) (jax.nn's
    ``logaddexp(x, 0)``): no overflow; the derivative is sigmoid(x)."""
    x = _float(x)
    return inp.maximum(x, 0.0) + inp.log1p(inp.exp(-inp.abs(x)))


def silu(x: ArrayLike) -> Array:
    """x * sigmoid(x) (also called swish)."""
    x = _float(x)
    return x * sigmoid(x)


swish = silu


def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """The Gaussian error linear unit. ``approximate=True`` (jax.nn's
    default; PyTorch's ``approximate='tanh'``) is
    ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))``; ``approximate=False``
    (PyTorch's default) is exact, ``x/2 erfc(-x/sqrt(2))``, through
    fdlibm's erfc (accurate also where it is tiny, for very negative x)."""
    x = _float(x)
    if approximate:
        # tanh's argument is beyond 1e7 there, so tanh is exactly ±1: clipping keeps x³ finite
        inner = inp.clip(x, -TANH_SATURATED, TANH_SATURATED)
        cdf = 0.5 * (1.0 + inp.tanh(SQRT_2_OVER_PI * (inner + 0.044715 * (inner * inner * inner))))
        return x * cdf
    return 0.5 * x * erfc(-x * SQRT_HALF)


def elu(x: ArrayLike, alpha: float = 1.0) -> Array:
    """x for x > 0, alpha * expm1(x) otherwise (expm1 only sees x <= 0)."""
    x = _float(x)
    safe = inp.where(x > 0, 0.0, x)
    return inp.where(x > 0, x, alpha * inp.expm1(safe))


def _shift(x, axis):
    """The maximum along ``axis`` as a constant for differentiation (the
    shift cancels in the value; its derivative is exactly zero)."""
    return stop_gradient(inp.max(x, axis, keepdims=True))


def softmax(x: ArrayLike, axis: Axis = -1) -> Array:
    """exp(x - max) / sum(exp(x - max)) along ``axis`` (jax.nn's form)."""
    x = _float(x)
    unnormalized = inp.exp(x - _shift(x, axis))
    return unnormalized / inp.sum(unnormalized, axis, keepdims=True)


def log_softmax(x: ArrayLike, axis: Axis = -1) -> Array:
    """(x - max) - log(sum(exp(x - max))) along ``axis`` (jax.nn's form)."""
    x = _float(x)
    shifted = x - _shift(x, axis)
    return shifted - inp.log(inp.sum(inp.exp(shifted), axis, keepdims=True))


def logsumexp(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """log(sum(exp(x))) along ``axis`` with the max shift (see
    ``isokernel.numpy.logsumexp``: all -inf gives -inf, +inf gives +inf)."""
    return inp.logsumexp(_float(x), axis, keepdims)


def one_hot(x: ArrayLike, num_classes: int, *, dtype: DTypeLike = inp.float64,
            axis: int = -1) -> Array:
    """1 where ``x`` equals the class index along a new ``axis``, else 0;
    an index outside [0, num_classes) gives a row of zeros (as jax.nn)."""
    x = inp.asarray(x)
    rank = x.ndim + 1
    axis = axis % rank
    classes = inp.arange(num_classes, dtype=x.dtype)
    shape = [1] * rank
    shape[axis] = num_classes
    hit = inp.equal(inp.expand_dims(x, axis), inp.reshape(classes, shape))
    return inp.astype(hit, dtype)


def layer_norm(x: ArrayLike, scale: ArrayLike = None, offset: ArrayLike = None, *, axis: Axis = -1,
               epsilon: float = 1e-5) -> Array:
    """(x - mean) / sqrt(var + epsilon) * scale + offset over ``axis`` (an
    int or a tuple; the biased variance of the centred values, PyTorch's
    ``layer_norm`` with ``normalized_shape`` the trailing axes)."""
    x = _float(x)
    centred = x - inp.mean(x, axis, keepdims=True)
    variance = inp.mean(centred * centred, axis, keepdims=True)
    y = centred / inp.sqrt(variance + epsilon)
    if scale is not None:
        y = y * scale
    if offset is not None:
        y = y + offset
    return y


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def log_sigmoid(x: ArrayLike) -> Array:
    """log(sigmoid(x)) = -softplus(-x) (no overflow, as jax.nn)."""
    return -softplus(-_float(x))


def leaky_relu(x: ArrayLike, negative_slope: float = 1e-2) -> Array:
    """x for x >= 0, ``negative_slope * x`` otherwise (jax.nn)."""
    x = _float(x)
    return inp.where(x >= 0, x, negative_slope * x)


def relu6(x: ArrayLike) -> Array:
    """min(max(x, 0), 6); the derivative is 0 at 0 and at 6 (as jax.nn)."""
    x = _float(x)
    return inp.where(x <= 0, 0.0, inp.where(x >= 6.0, 6.0, x))


def hard_tanh(x: ArrayLike) -> Array:
    """x clipped to [-1, 1] (jax.nn)."""
    x = _float(x)
    return inp.where(x > 1.0, 1.0, inp.where(x < -1.0, -1.0, x))


def selu(x: ArrayLike) -> Array:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    return SELU_SCALE * elu(x, SELU_ALPHA)


def celu(x: ArrayLike, alpha: float = 1.0) -> Array:
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha) (jax.nn)."""
    x = _float(x)
    return inp.maximum(x, 0.0) + alpha * inp.expm1(inp.minimum(x, 0.0) / alpha)


def soft_sign(x: ArrayLike) -> Array:
    """x / (|x| + 1)."""
    x = _float(x)
    return x / (inp.abs(x) + 1.0)


def mish(x: ArrayLike) -> Array:
    """x * tanh(softplus(x))."""
    x = _float(x)
    return x * inp.tanh(softplus(x))


def glu(x: ArrayLike, axis: int = -1) -> Array:
    """The gated linear unit: the first half of ``axis`` times the sigmoid
    of the second half."""
    first, second = inp.split(_float(x), 2, axis)
    return first * sigmoid(second)
