"""Learning-rate schedules: functions of the int32 step count, written with
the dtypes optax computes them in. With float64 enabled JAX still divides an
int32 count in float32 (``int32 / int`` is float32 there), so
``exponential_decay`` and the warm-up of ``warmup_cosine_decay_schedule``
are float32 computations here too; ``piecewise_constant_schedule`` and
``cosine_decay_schedule`` are float64."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import numpy as inp
from ._base import Schedule

f32 = np.float32


def constant_schedule(value: float) -> Schedule:
    """``value`` at every step."""
    return lambda count: value


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Schedule:
    """``init_value * decay_rate ** ((count - transition_begin) / transition_steps)``
    (the exponent floored with ``staircase``), clipped at ``end_value``."""
    if transition_steps <= 0 or decay_rate == 0:
        return lambda count: init_value
    begin = max(transition_begin, 0)
    clip = inp.maximum if decay_rate < 1.0 else inp.minimum

    def schedule(count):
        decreased = inp.subtract(count, np.int32(begin))
        p = inp.divide(inp.astype(decreased, inp.float32), f32(transition_steps))
        if staircase:
            p = inp.floor(p)
        decayed = inp.multiply(f32(init_value), inp.power(f32(decay_rate), p))
        value = inp.where(inp.less_equal(decreased, np.int32(0)), f32(init_value), decayed)
        return value if end_value is None else clip(value, f32(end_value))
    return schedule


def polynomial_schedule(init_value: float, end_value: float, power: float, transition_steps: int,
                        transition_begin: int = 0) -> Schedule:
    """From ``init_value`` to ``end_value`` as ``(1 - t)**power`` (float32, as in optax)."""
    if transition_steps <= 0:
        return lambda count: init_value
    begin = max(transition_begin, 0)

    def schedule(count):
        c = inp.clip(inp.subtract(count, np.int32(begin)), np.int32(0),
                     np.int32(transition_steps))
        frac = inp.subtract(f32(1.0), inp.divide(inp.astype(c, inp.float32),
                                                 f32(transition_steps)))
        return inp.add(inp.multiply(f32(init_value - end_value), inp.power(frac, power)),
                       f32(end_value))
    return schedule


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """From ``init_value`` to ``end_value`` linearly over ``transition_steps``."""
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
    """``init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * t / T)))**exponent + alpha)``."""
    if not decay_steps > 0:
        raise ValueError(f"optim.cosine_decay_schedule: decay_steps={decay_steps!r}; it must be "
                         f"positive")
    steps = float(decay_steps)

    def schedule(count):
        c = inp.minimum(inp.astype(count, inp.float64), steps)
        cosine = inp.multiply(0.5, inp.add(1.0, inp.cos(inp.divide(inp.multiply(np.pi, c),
                                                                  steps))))
        decayed = inp.add(inp.multiply(1 - alpha, inp.power(cosine, exponent)), alpha)
        return inp.multiply(init_value, decayed)
    return schedule


def join_schedules(schedules: Sequence[Callable[[Any], Any]],
                   boundaries: Sequence[int]) -> Schedule:
    """``schedules[i]`` from ``boundaries[i-1]`` on, each counting from its boundary."""
    def schedule(count):
        out = schedules[0](count)
        for boundary, fn in zip(boundaries, schedules[1:]):
            later = fn(inp.subtract(count, np.int32(boundary)))
            out = _where_like(inp.less(count, np.int32(boundary)), out, later)
        return out
    return schedule


def _where_like(pred, out, later):
    """``jnp.where(pred, out, later)``: a float64 ``later`` meets a float32
    ``out`` as JAX's weak float64 does, cast to float32."""
    if _python_float(out) or _python_float(later):
        return inp.where(pred, out, later)
    if out.dtype != later.dtype:
        later = inp.astype(later, out.dtype)
    return inp.where(pred, out, later)


def _python_float(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, np.generic)


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0,
                                 exponent: float = 1.0) -> Schedule:
    """Linear warm-up from ``init_value`` to ``peak_value``, then cosine decay to
    ``end_value`` at ``decay_steps`` (float32 values, as optax's join gives)."""
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps),
                           cosine_decay_schedule(peak_value, decay_steps - warmup_steps,
                                                 alpha, exponent)], [warmup_steps])


def piecewise_constant_schedule(init_value: float,
                                boundaries_and_scales: dict[int, float] | None = None) -> Schedule:
    """``init_value`` times every ``scale`` whose boundary the count has passed."""
    if boundaries_and_scales is not None and any(
            s < 0.0 for s in boundaries_and_scales.values()):
        raise ValueError("optim.piecewise_constant_schedule: scales must be non-negative")
    items = sorted((boundaries_and_scales or {}).items())

    def schedule(count):
        v = init_value
        for threshold, factor in items:
            indicator = inp.maximum(0.0, inp.sign(inp.subtract(np.int32(threshold), count)))
            v = inp.add(inp.multiply(v, indicator),
                        inp.multiply(inp.multiply(inp.subtract(1, indicator), factor), v))
        return v
    return schedule
