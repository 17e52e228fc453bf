"""Gradient transformations, each optax's update rule with optax's operation
order (moments ``(1 - b) * g**k + b * m``, bias correction ``m / (1 -
b**count)`` with ``count`` cast to float, ``m / (sqrt(v + eps_root) + eps)``,
``rsqrt`` as ``1 / sqrt``, and XLA's ``t * (1 / s)`` for an array divided by a
scalar), so float64 updates are optax's bits."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import numpy as inp
from ..ir.pytree import tree_flatten, tree_unflatten
from ..record.tracer import Tracer
from ..typing import Array, ArrayLike, PyTree
from ._base import (
    EmptyState,
    GradientTransformation,
    MaskedNode,
    ScalarOrSchedule,
    Schedule,
    array,
    full_like,
    init_empty_state,
    safe_increment,
    tree_map,
    zero_count,
    zeros_like,
)


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByRmsState(NamedTuple):
    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    count: Any
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class TraceState(NamedTuple):
    trace: Any


class ScaleByScheduleState(NamedTuple):
    count: Any


class WeightDecaySchedule(NamedTuple):
    count: Any


class MaskedState(NamedTuple):
    inner_state: Any


def update_moment(updates, moments, decay, order: int):
    """``(1 - decay) * g**order + decay * m`` (optax's ``tree_update_moment``)."""
    def one(g, t):
        power = g if order == 1 else inp.multiply(g, g)  # JAX's integer_pow: g or g * g
        return inp.add(inp.multiply(1 - decay, power), inp.multiply(decay, t))
    if order not in (1, 2):
        raise ValueError(f"optim.update_moment: order {order}; 1 and 2 are supported")
    return tree_map(one, updates, moments)


def bias_correction(moment, decay, count):
    """``m / (1 - decay**count)`` (optax's ``tree_bias_correction``)."""
    correction = inp.subtract(1, integer_power(np.float64(decay), count))
    return tree_map(lambda t: divide_by_scalar(t, inp.astype(correction, t.dtype)), moment)


def integer_power(x, count):
    """``x ** count`` for a non-negative int32 ``count`` by binary powering,
    as JAX's ``integer_pow`` computes ``decay ** count`` when optax runs op by
    op: the product, low bits first, of ``x**(2**k)`` over the set bits ``k``
    (only multiplications, so every strategy gives the same bits). Traced, the
    31 squares are constants and the product is one sequential reduction over
    ``where(bit_k, x**(2**k), 1.0)`` (a factor 1.0 changes no bit)."""
    if not isinstance(count, Tracer):  # eager: the same products on the set bits only
        return _python_integer_power(float(x), int(count))
    squares, base = [], float(x)
    for _ in range(31):
        squares.append(base)
        base = base * base
    shifts = np.array([[1 << k for k in range(31)]], np.int32)  # (1, 31): axis 0 is no pixel axis
    bits = inp.equal(inp.remainder(inp.floor_divide(count, shifts), np.int32(2)), np.int32(1))
    factors = inp.where(bits, np.array([squares]), 1.0)
    return inp.reshape(inp.prod(factors, axis=1), ())


def _python_integer_power(x: float, n: int) -> np.float64:
    acc = 1.0
    while n > 0:
        if n & 1:
            acc = acc * x
        n >>= 1
        x = x * x
    return np.float64(acc)


def divide_by_scalar(t, s):
    """``t / s`` for a 0-d ``s`` as XLA computes it: an array divided by a
    broadcast scalar is ``t * (1 / s)`` there (its algebraic simplifier, from
    jaxlib 0.10.1 on), a 0-d ``t`` is divided."""
    if inp.ndim(t) == 0:
        return inp.divide(t, s)
    return inp.multiply(t, inp.divide(1.0, s))


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's rescaling, optax's ``scale_by_adam``."""
    def init(params):
        return ScaleByAdamState(zero_count(), zeros_like(params), zeros_like(params))

    def update(updates, state, params=None):
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        if nesterov:
            mu_hat = tree_map(lambda m, g: inp.add(inp.multiply(b1, m), inp.multiply(1 - b1, g)),
                              bias_correction(mu, b1, safe_increment(count)),
                              bias_correction(updates, b1, count))
        else:
            mu_hat = bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        out = tree_map(lambda m, v: inp.divide(m, inp.add(inp.sqrt(inp.add(v, eps_root)), eps)),
                       mu_hat, nu_hat)
        return out, ScaleByAdamState(count, mu, nu)
    return GradientTransformation(init, update)


def _rsqrt(x):
    """``1 / sqrt`` (two roundings), XLA's float64 rsqrt on a CPU without
    AVX-512; with AVX-512 XLA refines the hardware estimate by Newton steps
    instead (within 2 ulp of this), which only that hardware computes."""
    return inp.divide(1.0, inp.sqrt(x))


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True,
                 bias_correction_: bool = False) -> GradientTransformation:
    """Rescaling by the root mean square of past gradients (optax's)."""
    def init(params):
        nu = full_like(params, initial_scale)
        if bias_correction_:
            return ScaleByRmsWithCountState(zero_count(), nu)
        return ScaleByRmsState(nu)

    def update(updates, state, params=None):
        nu = update_moment(updates, state.nu, decay, 2)
        nu_hat = nu
        if bias_correction_:
            count = safe_increment(state.count)
            nu_hat = bias_correction(nu, decay, count)
        scaling = tree_map(lambda n: _inv_root(n, eps, eps_in_sqrt), nu_hat)
        out = tree_map(inp.multiply, scaling, updates)
        if bias_correction_:
            return out, ScaleByRmsWithCountState(count, nu)
        return out, ScaleByRmsState(nu)
    return GradientTransformation(init, update)


def _inv_root(n, eps, eps_in_sqrt: bool):
    if eps_in_sqrt:
        return _rsqrt(inp.add(n, eps))
    return inp.divide(1, inp.add(inp.sqrt(n), eps))


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True,
                    bias_correction_: bool = False) -> GradientTransformation:
    """Rescaling by the standard deviation of past gradients (centered RMSProp)."""
    def init(params):
        mu, nu = zeros_like(params), full_like(params, initial_scale)
        if bias_correction_:
            return ScaleByRStdDevWithCountState(zero_count(), mu, nu)
        return ScaleByRStdDevState(mu, nu)

    def update(updates, state, params=None):
        mu = update_moment(updates, state.mu, decay, 1)
        nu = update_moment(updates, state.nu, decay, 2)
        mu_hat, nu_hat = mu, nu
        if bias_correction_:
            count = safe_increment(state.count)
            mu_hat = bias_correction(mu, decay, count)
            nu_hat = bias_correction(nu, decay, count)
        scaling = tree_map(lambda m, n: _inv_root(inp.subtract(n, inp.multiply(m, m)), eps,
                                                  eps_in_sqrt), mu_hat, nu_hat)
        out = tree_map(inp.multiply, scaling, updates)
        if bias_correction_:
            return out, ScaleByRStdDevWithCountState(count, mu, nu)
        return out, ScaleByRStdDevState(mu, nu)
    return GradientTransformation(init, update)


def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Momentum: ``t = g + decay * t``; Nesterov's ``g + decay * t_new``."""
    def init(params):
        return TraceState(zeros_like(params))

    def update(updates, state, params=None):
        new_trace = tree_map(lambda g, t: inp.add(g, inp.multiply(decay, t)), updates,
                             state.trace)
        if nesterov:
            out = tree_map(lambda g, t: inp.add(g, inp.multiply(decay, t)), updates, new_trace)
        else:
            out = new_trace
        return out, TraceState(new_trace)
    return GradientTransformation(init, update)


def scale(step_size: ArrayLike) -> GradientTransformation:
    """Updates times a constant."""
    def update(updates, state, params=None):
        return tree_map(lambda g: inp.multiply(step_size, g), updates), state
    return GradientTransformation(init_empty_state, update)


def scale_by_schedule(step_size_fn: Schedule) -> GradientTransformation:
    """Updates times ``step_size_fn(count)``, cast to each update's dtype."""
    def init(params):
        return ScaleByScheduleState(zero_count())

    def update(updates, state, params=None):
        step_size = step_size_fn(state.count)
        out = tree_map(lambda g: inp.multiply(inp.astype(step_size, g.dtype), g), updates)
        return out, ScaleByScheduleState(safe_increment(state.count))
    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate: ScalarOrSchedule, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """``-learning_rate * updates``; ``learning_rate`` a number or a schedule."""
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: inp.multiply(m, learning_rate(count)))
    return scale(m * learning_rate)


def add_decayed_weights(weight_decay: ScalarOrSchedule = 0.0,
                        mask: Any = None) -> GradientTransformation:
    """``updates + weight_decay * params`` (a number or a schedule)."""
    def init(params):
        return WeightDecaySchedule(zero_count()) if callable(weight_decay) else EmptyState()

    def update(updates, state, params=None):
        if params is None:
            raise ValueError("optim.add_decayed_weights: update needs the parameters; call "
                             "opt.update(grads, state, params)")
        new_state = WeightDecaySchedule(safe_increment(state.count)) if callable(
            weight_decay) else state
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        s = weight_decay(state.count) if callable(weight_decay) else weight_decay
        return tree_map(lambda g, p: inp.add(g, inp.multiply(_like(s, p), p)), updates,
                        params), new_state
    t = GradientTransformation(init, update)
    return t if mask is None else masked(t, mask)


def _like(s, p):
    """A schedule's value in the parameter's dtype (JAX promotes it so)."""
    if isinstance(s, (int, float)) and not isinstance(s, np.generic):
        return s
    return inp.astype(s, p.dtype)


def masked(inner: GradientTransformation, mask: Any) -> GradientTransformation:
    """``inner`` on the leaves where ``mask`` (a tree of bools of the
    parameters' structure, or a function of the parameters giving one) is
    True; the other updates pass unchanged."""
    def init(params):
        flags = _mask_flags(mask, params)
        return MaskedState(inner.init(_mask_tree(params, flags)))

    def update(updates, state, params=None, **extra_args):
        flags = _mask_flags(mask, updates)
        m_params = None if params is None else _mask_tree(params, flags)
        args = (_mask_tree(updates, flags), state.inner_state, m_params)
        new, inner_state = (inner.update(*args, **extra_args) if inner.extra_args
                            else inner.update(*args))
        kept, td = tree_flatten(updates)
        fresh = iter(tree_flatten(new)[0])
        leaves = [next(fresh) if f else old for f, old in zip(flags, kept)]
        return tree_unflatten(td, leaves), MaskedState(inner_state)
    return GradientTransformation(init, update, extra_args=True)


def _mask_flags(mask, tree) -> list[bool]:
    mask_tree = mask(tree) if callable(mask) else mask
    flags, mask_def = tree_flatten(mask_tree)
    leaves, treedef = tree_flatten(tree)
    if mask_def != treedef:
        raise ValueError("optim.masked: the mask must have the parameters' structure, one "
                         "bool per leaf (or be a function of the parameters returning one)")
    return [bool(f) for f in flags]


def _mask_tree(tree, flags):
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [x if f else MaskedNode() for x, f in zip(leaves, flags)])


def global_norm(updates: PyTree) -> Array:
    """``sqrt`` of the sum over leaves (in leaf order) of each leaf's sum of
    squares. Each leaf's sum runs in isokernel's reduction order (NumPy's
    pairwise order on the reference); XLA's CPU order is its own."""
    sums = [inp.sum(inp.multiply(x, x)) for x in tree_flatten(updates)[0]]
    total = sums[0]
    for s in sums[1:]:
        total = inp.add(total, s)
    return array(inp.sqrt(total))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Updates scaled by ``max_norm / norm`` where their global norm reaches
    ``max_norm`` (``t / norm * max_norm``, optax's order)."""
    def update(updates, state, params=None):
        g_norm = global_norm(updates)
        trigger = inp.less(g_norm, max_norm)
        out = tree_map(lambda t: inp.where(trigger, t, inp.multiply(
            divide_by_scalar(t, inp.astype(g_norm, t.dtype)), max_norm)), updates)
        return out, state
    return GradientTransformation(init_empty_state, update)
