"""``isokernel.nn``: neural-network functions with jax.nn's names (and
PyTorch's layout for convolution and pooling), composed from
``isokernel.numpy`` — so each has its derivative, batching rule and every
strategy's code generation from theirs. See docs/nn.md."""

from ._activations import (
    celu,
    elu,
    gelu,
    glu,
    hard_tanh,
    layer_norm,
    leaky_relu,
    log_sigmoid,
    log_softmax,
    logsumexp,
    mish,
    one_hot,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    soft_sign,
    softmax,
    softplus,
    swish,
)
from ._attention import dot_product_attention
from ._conv import avg_pool, conv, max_pool
from ._special import erf, erfc
from ._spectral import spectral_conv1d, spectral_conv2d

__all__ = [
    "avg_pool", "celu", "conv", "dot_product_attention", "elu", "erf", "erfc", "gelu", "glu",
    "hard_tanh", "layer_norm", "leaky_relu", "log_sigmoid", "log_softmax", "logsumexp",
    "max_pool", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign",
    "softmax", "softplus", "spectral_conv1d", "spectral_conv2d", "swish",
]
