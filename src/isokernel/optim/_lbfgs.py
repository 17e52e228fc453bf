"""L-BFGS (optax's ``scale_by_lbfgs``) and its zoom line search for the
strong Wolfe conditions (optax's ``scale_by_zoom_linesearch``), with optax's
call form: ``opt.update(grads, state, params, value=value, grad=grads,
value_fn=f)``. The memory is indexed by the step count through one-hot
selections (isokernel has no data-dependent indexing), which select exactly;
inner products are sums in isokernel's order, not XLA's, so iterates agree
with optax's to rounding rather than bit for bit."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .. import numpy as inp
from ..control import cond, while_loop
from ..ir.pytree import tree_flatten
from ..transforms import value_and_grad
from ._base import GradientTransformation, array, safe_increment, tree_map, zero_count, zeros_like


class ScaleByLBFGSState(NamedTuple):
    count: Any
    params: Any
    updates: Any
    diff_params_memory: Any
    diff_updates_memory: Any
    weights_memory: Any


def tree_vdot(x, y):
    """Sum over leaves (in order, from 0) of each leaf's ``sum(a * b)``."""
    total = 0.0
    for a, b in zip(tree_flatten(x)[0], tree_flatten(y)[0]):
        total = inp.add(total, inp.sum(inp.multiply(a, b)))
    return total


def _select_row(memory, onehot):
    """``memory[idx]`` for a one-hot mask over axis 0 (an exact selection)."""
    mask = inp.reshape(onehot, (-1,) + (1,) * (inp.ndim(memory) - 1))
    return inp.sum(inp.where(mask, memory, 0.0), axis=0)


def _set_row(memory, onehot, value):
    """``memory.at[idx].set(value)`` for a one-hot mask over axis 0."""
    mask = inp.reshape(onehot, (-1,) + (1,) * (inp.ndim(memory) - 1))
    return inp.where(mask, inp.expand_dims(value, 0), memory)


def scale_by_lbfgs(memory_size: int = 10, scale_init_precond: bool = True
                   ) -> GradientTransformation:
    """The L-BFGS direction ``P_k g_k`` from the last ``memory_size`` differences."""
    if memory_size < 1:
        raise ValueError("optim.scale_by_lbfgs: memory_size must be >= 1")
    slots = np.arange(memory_size, dtype=np.int32)

    def init(params):
        stacked = tree_map(lambda x: np.zeros((memory_size, *np.shape(x)), x.dtype), params)
        return ScaleByLBFGSState(zero_count(), zeros_like(params), zeros_like(params), stacked,
                                 stacked, np.zeros(memory_size))

    def update(updates, state, params=None):
        # 1 / 0 and 0 / 0 at the first step are computed and then not selected (optax's)
        with np.errstate(invalid="ignore", divide="ignore"):
            return _lbfgs_update(updates, state, params)

    def _lbfgs_update(updates, state, params):
        count = state.count
        onehot = inp.equal(slots, inp.remainder(inp.subtract(count, np.int32(1)),
                                                np.int32(memory_size)))
        started = inp.greater(count, np.int32(0))
        dp = tree_map(inp.subtract, params, state.params)
        du = tree_map(inp.subtract, updates, state.updates)
        vdot = tree_vdot(du, dp)
        weight = inp.where(inp.equal(vdot, 0.0), 0.0, inp.divide(1.0, vdot))
        dp, du = (tree_map(lambda x: inp.where(started, x, 0.0), t) for t in (dp, du))
        weight = inp.where(started, weight, 0.0)
        mem_p = tree_map(lambda m, x: _set_row(m, onehot, x), state.diff_params_memory, dp)
        mem_u = tree_map(lambda m, x: _set_row(m, onehot, x), state.diff_updates_memory, du)
        rhos = _set_row(state.weights_memory, onehot, weight)
        scale_ = _identity_scale(updates, dp, du, started) if scale_init_precond else 1.0
        out = _precondition(updates, mem_p, mem_u, rhos, scale_, count, slots)
        return out, ScaleByLBFGSState(safe_increment(count), params, updates, mem_p, mem_u,
                                      array(rhos))
    return GradientTransformation(init, update)


def _identity_scale(updates, dp, du, started):
    numerator = tree_vdot(du, dp)
    denominator = tree_vdot(du, du)
    scale_ = inp.where(inp.greater(denominator, 0.0), inp.divide(numerator, denominator), 1.0)
    norm = inp.sqrt(tree_vdot(updates, updates))
    capped = inp.minimum(1.0, inp.divide(1.0, norm))
    return inp.where(started, scale_, capped)


def _precondition(updates, mem_p, mem_u, rhos, identity_scale, count, slots):
    """optax's two loops: newest to oldest, then oldest to newest."""
    m = len(slots)
    start = inp.remainder(count, np.int32(m))
    masks = [inp.equal(slots, inp.remainder(inp.add(start, np.int32(k)), np.int32(m)))
             for k in range(m)]
    vec, alphas = updates, []
    for k in reversed(range(m)):
        dwi = tree_map(lambda x, k=k: _select_row(x, masks[k]), mem_p)
        dui = tree_map(lambda x, k=k: _select_row(x, masks[k]), mem_u)
        alpha = inp.multiply(_select_row(rhos, masks[k]), tree_vdot(dwi, vec))
        vec = tree_map(lambda v, d, a=alpha: inp.add(v, inp.multiply(inp.negative(a), d)), vec,
                       dui)
        alphas.insert(0, alpha)
    vec = tree_map(lambda v: inp.multiply(identity_scale, v), vec)
    for k in range(m):
        dwi = tree_map(lambda x, k=k: _select_row(x, masks[k]), mem_p)
        dui = tree_map(lambda x, k=k: _select_row(x, masks[k]), mem_u)
        beta = inp.multiply(_select_row(rhos, masks[k]), tree_vdot(dui, vec))
        step = inp.subtract(alphas[k], beta)
        vec = tree_map(lambda v, d, s=step: inp.add(v, inp.multiply(s, d)), vec, dwi)
    return vec


class ZoomLinesearchInfo(NamedTuple):
    num_linesearch_steps: Any
    decrease_error: Any
    curvature_error: Any


class ScaleByZoomLinesearchState(NamedTuple):
    learning_rate: Any
    value: Any
    grad: Any
    info: Any


class _Zoom(NamedTuple):
    """optax's ``ZoomLinesearchState``."""
    count: Any
    params: Any
    updates: Any
    stepsize_guess: Any
    stepsize: Any
    value: Any
    grad: Any
    slope: Any
    value_init: Any
    slope_init: Any
    decrease_error: Any
    curvature_error: Any
    error: Any
    interval_found: Any
    done: Any
    failed: Any
    low: Any
    value_low: Any
    slope_low: Any
    high: Any
    value_high: Any
    slope_high: Any
    cubic_ref: Any
    value_cubic_ref: Any
    safe_stepsize: Any
    safe_value: Any
    safe_grad: Any


class _Settings(NamedTuple):
    max_steps: int
    max_stepsize: Any
    tol: float
    increase_factor: float
    slope_rtol: float
    curv_rtol: float
    approx_dec_rtol: Any
    interval_threshold: float


def _f(x):
    return np.asarray(x, np.float64)


def _where(pred, a, b):
    """``optax.tree.where`` over lists of values or trees."""
    return [tree_map(lambda x, y: inp.where(pred, x, y), u, v) for u, v in zip(a, b)]


def _on_line(vg, params, stepsize, updates):
    step = tree_map(lambda p, u: inp.add(p, inp.multiply(stepsize, u)), params, updates)
    value, grad = vg(step)
    return value, grad, tree_vdot(grad, updates)


def _decrease_error(s: _Settings, stepsize, value, slope, value_init, slope_init):
    error = inp.subtract(inp.subtract(value, value_init),
                         inp.multiply(inp.multiply(s.slope_rtol, stepsize), slope_init))
    if s.approx_dec_rtol is not None:
        approx = inp.subtract(slope, inp.multiply(2 * s.slope_rtol - 1.0, slope_init))
        delta = inp.subtract(inp.subtract(value, value_init),
                             inp.multiply(s.approx_dec_rtol, inp.abs(value_init)))
        error = inp.minimum(inp.maximum(approx, delta), error)
    error = inp.maximum(error, 0.0)
    return inp.where(inp.isnan(error), inp.inf, error)


def _curvature_error(s: _Settings, slope, slope_init):
    error = inp.maximum(inp.subtract(inp.abs(slope), inp.multiply(s.curv_rtol,
                                                                  inp.abs(slope_init))), 0.0)
    return inp.where(inp.isnan(error), inp.inf, error)


def _search_interval(s: _Settings, vg, st: _Zoom) -> _Zoom:
    """optax's ``_search_interval``: grow the step until an interval is found."""
    first = inp.equal(st.count, np.int32(0))
    new = inp.where(first, st.stepsize_guess, inp.multiply(s.increase_factor, st.stepsize))
    reached = np.asarray(False)
    if s.max_stepsize is not None:
        reached = inp.greater_equal(new, s.max_stepsize)
        new = inp.minimum(new, s.max_stepsize)
    value, grad, slope = _on_line(vg, st.params, new, st.updates)
    dec = _decrease_error(s, new, value, slope, st.value_init, st.slope_init)
    curv = _curvature_error(s, slope, st.slope_init)
    error = inp.maximum(dec, curv)
    safe = _where(inp.less_equal(dec, s.tol), [new, value, grad],
                  [st.safe_stepsize, st.safe_value, st.safe_grad])
    high_new = inp.logical_or(inp.greater(dec, 0.0), inp.logical_and(
        inp.greater_equal(value, st.value), inp.logical_not(first)))
    low_new = inp.logical_and(inp.greater_equal(slope, 0.0), inp.logical_not(high_new))
    bounds = _where(low_new, [new, value, slope, st.stepsize, st.value, st.slope],
                    [st.stepsize, st.value, st.slope, new, value, slope])
    found = inp.logical_or(inp.logical_or(high_new, low_new), inp.less_equal(error, s.tol))
    done = inp.logical_or(inp.less_equal(error, s.tol),
                          inp.logical_and(reached, inp.logical_not(found)))
    failed = inp.logical_and(inp.greater_equal(inp.add(st.count, np.int32(1)), s.max_steps),
                             inp.logical_not(done))
    return st._replace(count=safe_increment(st.count), stepsize=new, value=value, grad=grad,
                       slope=slope, decrease_error=dec, curvature_error=curv, error=error,
                       interval_found=found, done=done, failed=failed, low=bounds[0],
                       value_low=bounds[1], slope_low=bounds[2], high=bounds[3],
                       value_high=bounds[4], slope_high=bounds[5], cubic_ref=bounds[0],
                       value_cubic_ref=bounds[1], safe_stepsize=safe[0], safe_value=safe[1],
                       safe_grad=safe[2])


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    db, dc = inp.subtract(b, a), inp.subtract(c, a)
    dbdc = inp.multiply(db, dc)
    denom = inp.multiply(inp.multiply(dbdc, dbdc), inp.subtract(db, dc))
    v1 = inp.subtract(inp.subtract(fb, fa), inp.multiply(fpa, db))
    v2 = inp.subtract(inp.subtract(fc, fa), inp.multiply(fpa, dc))
    db2, dc2 = inp.multiply(db, db), inp.multiply(dc, dc)
    a_ = inp.divide(inp.add(inp.multiply(dc2, v1), inp.multiply(inp.negative(db2), v2)), denom)
    b_ = inp.divide(inp.add(inp.multiply(inp.negative(inp.multiply(dc, dc2)), v1),
                            inp.multiply(inp.multiply(db, db2), v2)), denom)
    radical = inp.subtract(inp.multiply(b_, b_), inp.multiply(inp.multiply(3.0, a_), fpa))
    return inp.add(a, inp.divide(inp.add(inp.negative(b_), inp.sqrt(radical)),
                                 inp.multiply(3.0, a_)))


def _quadmin(a, fa, fpa, b, fb):
    db = inp.subtract(b, a)
    b_ = inp.divide(inp.subtract(inp.subtract(fb, fa), inp.multiply(fpa, db)),
                    inp.multiply(db, db))
    return inp.subtract(a, inp.divide(fpa, inp.multiply(2.0, b_)))


def _middle(s: _Settings, st: _Zoom):
    delta = inp.abs(inp.subtract(st.high, st.low))
    left, right = inp.minimum(st.high, st.low), inp.maximum(st.high, st.low)
    cubic = _cubicmin(st.low, st.value_low, st.slope_low, st.high, st.value_high, st.cubic_ref,
                      st.value_cubic_ref)
    use_cubic = _inside(cubic, left, right, inp.multiply(0.2, delta))
    quad = _quadmin(st.low, st.value_low, st.slope_low, st.high, st.value_high)
    use_quad = inp.logical_and(inp.logical_not(use_cubic),
                               _inside(quad, left, right, inp.multiply(0.1, delta)))
    bisect = inp.logical_and(inp.logical_not(use_cubic), inp.logical_not(use_quad))
    middle = inp.where(use_cubic, cubic, st.cubic_ref)
    middle = inp.where(use_quad, quad, middle)
    middle = inp.where(bisect, inp.divide(inp.add(st.low, st.high), 2.0), middle)
    return middle, inp.less_equal(delta, s.interval_threshold)


def _inside(x, left, right, margin):
    return inp.logical_and(inp.greater(x, inp.add(left, margin)),
                           inp.less(x, inp.subtract(right, margin)))


def _zoom_into_interval(s: _Settings, vg, st: _Zoom) -> _Zoom:
    """optax's ``_zoom_into_interval``: shrink the interval around a Wolfe point."""
    middle, too_small = _middle(s, st)
    value, grad, slope = _on_line(vg, st.params, middle, st.updates)
    dec = _decrease_error(s, middle, value, slope, st.value_init, st.slope_init)
    curv = _curvature_error(s, slope, st.slope_init)
    error = inp.maximum(dec, curv)
    better = inp.logical_and(inp.less_equal(dec, s.tol), inp.less(value, st.safe_value))
    safe = _where(better, [middle, value, grad], [st.safe_stepsize, st.safe_value,
                                                  st.safe_grad])
    done = inp.less_equal(error, s.tol)
    high_mid = inp.logical_or(inp.greater(dec, 0.0), inp.greater_equal(value, st.value_low))
    high_low = inp.logical_and(inp.greater_equal(inp.multiply(slope, inp.subtract(
        st.high, st.low)), 0.0), inp.logical_not(high_mid))
    low_mid = inp.logical_not(high_mid)
    hi = _where(high_mid, [middle, value, slope], [st.high, st.value_high, st.slope_high])
    hi = _where(high_low, [st.low, st.value_low, st.slope_low], hi)
    lo = _where(low_mid, [middle, value, slope], [st.low, st.value_low, st.slope_low])
    ref = _where(inp.logical_or(high_mid, high_low), [st.high, st.value_high],
                 [st.low, st.value_low])
    reached = inp.greater_equal(inp.add(st.count, np.int32(1)), s.max_steps)
    failed = inp.logical_and(inp.logical_or(reached, inp.logical_and(
        too_small, inp.greater(safe[0], 0.0))), inp.logical_not(done))
    return st._replace(count=safe_increment(st.count), stepsize=middle, value=value, grad=grad,
                       slope=slope, decrease_error=dec, curvature_error=curv, error=error,
                       done=done, failed=failed, low=lo[0], value_low=lo[1], slope_low=lo[2],
                       high=hi[0], value_high=hi[1], slope_high=hi[2], cubic_ref=ref[0],
                       value_cubic_ref=ref[1], safe_stepsize=safe[0], safe_value=safe[1],
                       safe_grad=safe[2])


def _try_safe_step(st: _Zoom) -> _Zoom:
    """On failure: the safe step when there is one (or the domain was left)."""
    use_safe = inp.logical_or(inp.greater(st.safe_stepsize, 0.0), inp.isinf(st.decrease_error))
    stepsize, value, grad = _where(use_safe, [st.safe_stepsize, st.safe_value, st.safe_grad],
                                   [st.stepsize, st.value, st.grad])
    return st._replace(stepsize=stepsize, value=value, grad=grad)


def _zoom_init(updates, params, value, grad, guess) -> _Zoom:
    slope = tree_vdot(updates, grad)
    zero, inf, no = _f(0.0), _f(np.inf), np.asarray(False)
    return _Zoom(zero_count(), params, updates, guess, zero, inp.astype(value, inp.float64),
                 grad, slope, value, slope, inf, inf, inf, no, no, no, zero, value, slope, zero,
                 value, slope, zero, value, zero, value, grad)


def _zoom_step(s: _Settings, vg, st: _Zoom) -> _Zoom:
    new = cond(st.interval_found, lambda x: _zoom_into_interval(s, vg, x),
               lambda x: _search_interval(s, vg, x), st)
    new = _same_dtypes(new, st)
    return _same_dtypes(cond(new.failed, _try_safe_step, lambda x: x, new), st)


def _same_dtypes(new, old):
    """optax's ``cast_like``: every carry entry keeps its dtype."""
    return tree_map(lambda x, y: x if inp.asarray(x).dtype == inp.asarray(y).dtype
                    else inp.astype(x, inp.asarray(y).dtype), new, old)


def scale_by_zoom_linesearch(max_linesearch_steps: int, max_learning_rate: float | None = None,
                             tol: float = 0.0, increase_factor: float = 2.0,
                             slope_rtol: float = 1e-4, curv_rtol: float = 0.9,
                             approx_dec_rtol: float = 1e-6, stepsize_precision: float = 1e-5,
                             initial_guess_strategy: str = "keep") -> GradientTransformation:
    """The step size along ``updates`` satisfying the strong Wolfe conditions
    by optax's zoom search; ``update(updates, state, params, *, value, grad,
    value_fn, **value_fn_kwargs)``."""
    if initial_guess_strategy not in ("one", "keep"):
        raise ValueError(f"optim.scale_by_zoom_linesearch: initial_guess_strategy "
                         f"{initial_guess_strategy!r}; use 'one' or 'keep'")
    s = _Settings(max_linesearch_steps, max_learning_rate, tol, increase_factor, slope_rtol,
                  curv_rtol, approx_dec_rtol, stepsize_precision)

    def init(params):
        return ScaleByZoomLinesearchState(_f(1.0), _f(np.inf), zeros_like(params),
                                          ZoomLinesearchInfo(zero_count(), _f(np.inf),
                                                             _f(np.inf)))

    def update(updates, state, params=None, *, value=None, grad=None, value_fn=None,
               **extra_args):
        if value is None or grad is None or value_fn is None:
            raise TypeError(LINESEARCH_ARGS)
        vg = _value_and_grad(value_fn, extra_args)
        guess = _f(1.0) if initial_guess_strategy == "one" else state.learning_rate
        # a degenerate interval makes the cubic and quadratic minimizers NaN, which
        # then fail their checks (optax's semantics); eagerly NumPy would warn
        with np.errstate(invalid="ignore", divide="ignore"):
            final = while_loop(lambda st: inp.logical_not(inp.logical_or(st.done, st.failed)),
                               lambda st: _zoom_step(s, vg, st),
                               _zoom_init(updates, params, value, grad, guess))
        scaled = tree_map(lambda u: inp.multiply(final.stepsize, u), updates)
        info = ZoomLinesearchInfo(final.count, final.decrease_error, final.curvature_error)
        return scaled, ScaleByZoomLinesearchState(final.stepsize, final.value, final.grad, info)
    return GradientTransformation(init, update, extra_args=True)


LINESEARCH_ARGS = ("optim line search: update needs value=, grad= and value_fn= (the loss at "
                   "params, its gradient and the loss function), as optax's: "
                   "opt.update(grads, state, params, value=value, grad=grads, value_fn=f)")


def _value_and_grad(value_fn, extra_args):
    names = set(inspect.signature(value_fn).parameters)
    unknown = sorted(k for k in extra_args if k not in names)
    if unknown:
        raise TypeError(f"optim line search: keyword arguments {unknown} are not parameters "
                        f"of value_fn; pass only what value_fn accepts")
    vg = value_and_grad(value_fn)
    return lambda p: vg(p, **extra_args)


def value_and_grad_from_state(value_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``(value, grad)`` at ``params``: reused from the line search's state
    when it holds them (finite), else computed (optax's)."""
    vg = value_and_grad(value_fn)

    def fn(params, *args, state, **kwargs):
        found = [s for s in _states(state) if isinstance(s, ScaleByZoomLinesearchState)]
        if not found:
            raise ValueError("value_and_grad_from_state: the state holds no line search "
                             "value; use it with optim.lbfgs()")
        value, grad = found[-1].value, found[-1].grad
        return cond(inp.isfinite(value), lambda *_: (value, grad),
                    lambda p, a, k: vg(p, *a, **k), params, args, kwargs)
    return fn


def _states(state):
    if isinstance(state, ScaleByZoomLinesearchState):
        return [state]
    if type(state) is tuple:  # a chain's state
        return [x for s in state for x in _states(s)]
    return []
