"""The optimizer interface (optax's): a ``GradientTransformation`` is a pair
of pure functions, ``init(params) -> state`` and ``update(updates, state,
params=None, **extra_args) -> (updates, state)``; ``chain`` composes them and
``apply_updates`` adds the result to the parameters.

Every function here is written with ``isokernel.numpy``, so it runs eagerly
on NumPy arrays and records into one graph under ``isokernel.jit``. States
are pytrees of arrays (step counts are int32 arrays, as in optax).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

import numpy as np

from .. import numpy as inp
from ..ir.pytree import tree_map
from ..record.tracer import Tracer
from ..typing import ArrayLike, PyTree

INT32_MAX = np.iinfo(np.int32).max

Schedule: TypeAlias = Callable[[Any], Any]
"""A schedule: the step count (an int32 array) to a scalar."""
ScalarOrSchedule: TypeAlias = float | ArrayLike | Schedule
"""A learning rate (or weight decay): a number, or a ``Schedule``."""


class GradientTransformation(NamedTuple):
    """``init(params) -> state``; ``update(updates, state, params=None,
    **extra_args) -> (updates, new_state)``."""

    init: Callable[[PyTree], PyTree]
    update: Callable[..., tuple[PyTree, PyTree]]
    extra_args: bool = False  # update takes keyword arguments (value, grad, value_fn...)


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


class MaskedNode(NamedTuple):
    """A leaf a masked transformation does not see (a pytree with no leaves)."""


def init_empty_state(params) -> EmptyState:
    del params
    return EmptyState()


def identity() -> GradientTransformation:
    """Updates unchanged."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None,
                                  **extra: (updates, state))


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """The transformations applied in order; the state is a tuple of theirs.
    Extra keyword arguments of ``update`` reach every transformation."""
    for t in transforms:
        if not isinstance(t, GradientTransformation):
            raise TypeError(f"optim.chain: got a {type(t).__name__}; pass "
                            f"GradientTransformation objects (optim.adam(...), "
                            f"optim.clip_by_global_norm(...), ...)")

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None, **extra_args):
        if len(state) != len(transforms):
            raise ValueError(f"optim.chain.update: the state holds {len(state)} entries for "
                             f"{len(transforms)} transformations; build it with this "
                             f"optimizer's init(params)")
        new_state = []
        for s, t in zip(state, transforms):
            updates, s = _call_update(t, updates, s, params, extra_args)
            new_state.append(s)
        return updates, tuple(new_state)
    return GradientTransformation(init, update, extra_args=True)


def _call_update(t: GradientTransformation, updates, state, params, extra_args):
    """Only the transformations that take extra arguments get them (optax's
    ``with_extra_args_support``)."""
    if not t.extra_args:
        return t.update(updates, state, params)
    return t.update(updates, state, params, **extra_args)


def apply_updates(params: PyTree, updates: PyTree) -> PyTree:
    """``params + updates`` leaf by leaf, in each parameter's dtype."""
    return tree_map(lambda p, u: _as_dtype(array(inp.add(p, u)), p), params, updates)


def _as_dtype(x, like):
    dtype = _dtype(like)
    return x if _dtype(x) == dtype else inp.astype(x, dtype)


def array(x):
    """``x`` as an array: eager 0-d results of NumPy are scalars, state keeps arrays."""
    return x if isinstance(x, Tracer) else np.asarray(x)


def safe_increment(count):
    """``count + 1``, saturating at the dtype's largest value (optax's)."""
    return array(inp.where(inp.less(count, np.int32(INT32_MAX)), inp.add(count, np.int32(1)),
                           np.int32(INT32_MAX)))


def zero_count():
    return np.zeros((), np.int32)


def zeros_like(tree):
    return tree_map(lambda x: np.zeros(np.shape(x), _dtype(x)), tree)


def full_like(tree, value):
    return tree_map(lambda x: np.full(np.shape(x), value, _dtype(x)), tree)


def _dtype(x) -> np.dtype:
    return x.dtype if isinstance(x, (Tracer, np.ndarray, np.generic)) else np.asarray(x).dtype
