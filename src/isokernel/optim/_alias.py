"""The optimizers, as optax composes them from transformations."""

from __future__ import annotations

from typing import Any

from ._base import GradientTransformation, ScalarOrSchedule, chain, identity
from ._lbfgs import scale_by_lbfgs, scale_by_zoom_linesearch
from ._transform import (
    add_decayed_weights,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rms,
    scale_by_stddev,
    trace,
)


def sgd(learning_rate: ScalarOrSchedule, momentum: float | None = None,
        nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum."""
    first = identity() if momentum is None else trace(momentum, nesterov)
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0, *, nesterov: bool = False) -> GradientTransformation:
    """Adam (Kingma and Ba, Algorithm 1, as optax and PyTorch)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: ScalarOrSchedule = 1e-4, mask: Any = None, *,
          nesterov: bool = False) -> GradientTransformation:
    """Adam with decoupled weight decay (multiplied by the learning rate, as optax)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: ScalarOrSchedule, decay: float = 0.9, eps: float = 1e-8,
            initial_scale: float = 0.0, eps_in_sqrt: bool = True, centered: bool = False,
            momentum: float | None = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (optax's defaults: ``eps`` inside the square root)."""
    scaling = scale_by_stddev if centered else scale_by_rms
    return chain(scaling(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
                 scale_by_learning_rate(learning_rate),
                 identity() if momentum is None else trace(momentum, nesterov))


_DEFAULT = object()


def lbfgs(learning_rate: ScalarOrSchedule | None = None, memory_size: int = 10,
          scale_init_precond: bool = True, linesearch: Any = _DEFAULT) -> GradientTransformation:
    """L-BFGS with optax's default zoom line search (20 steps, first guess 1);
    ``update(grads, state, params, value=value, grad=grads, value_fn=f)``."""
    if linesearch is _DEFAULT:
        linesearch = scale_by_zoom_linesearch(max_linesearch_steps=20,
                                              initial_guess_strategy="one")
    base = scale(-1.0) if learning_rate is None else scale_by_learning_rate(learning_rate)
    return chain(scale_by_lbfgs(memory_size, scale_init_precond), base,
                 identity() if linesearch is None else linesearch)
