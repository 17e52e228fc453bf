"""Overlays: value types that wrap arrays (``isokernel.units.Quantity``)
and take over the ``isokernel.numpy`` functions and the Python operators of
tracers when one of them is an operand, as NumPy's ``__array_function__``
protocol does.

An overlay type defines ``__isokernel_function__(name, fn, args, kwargs)``,
called with the function's NumPy name, the plain function (which it calls on
the arrays it wraps) and the call's arguments; ``register(cls)`` makes the
frontend look for it. The search is one type test per argument (and per
element of a list or tuple argument), so code without overlays pays a set
lookup per operand. A tracer's binary operator returns ``NotImplemented``
for an overlay operand, so Python asks the overlay's reflected operator
(``tracer * quantity`` is ``quantity.__rmul__(tracer)``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

TYPES: set[type] = set()
"""The registered overlay types."""


def register(cls: type) -> type:
    """Make ``cls`` an overlay: it must define ``__isokernel_function__``."""
    if not callable(getattr(cls, "__isokernel_function__", None)):
        raise TypeError(f"{cls.__name__} defines no __isokernel_function__(name, fn, args, "
                        f"kwargs); an overlay type needs one")
    TYPES.add(cls)
    return cls


def find(args: tuple, kwargs: dict) -> type | None:
    """The overlay type among the arguments (each argument, the elements of
    a list or tuple argument, and keyword values), or None."""
    for a in args:
        t = type(a)
        if t in TYPES:
            return t
        if t is list or t is tuple:
            for b in a:
                if type(b) in TYPES:
                    return type(b)
    for a in kwargs.values():
        if type(a) in TYPES:
            return type(a)
    return None


def dispatching(name: str, fn: Callable[..., Any], module: str) -> Callable[..., Any]:
    """``fn`` as the function ``name`` of ``module`` (an ``isokernel.numpy``
    function), handing a call with an overlay operand to the overlay."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if TYPES:
            cls = find(args, kwargs)
            if cls is not None:
                return cls.__isokernel_function__(name, fn, args, kwargs)
        return fn(*args, **kwargs)
    call.__isokernel_plain__ = fn  # type: ignore[attr-defined]
    # pickled by reference as the module's own name (it is not the plain function)
    call.__module__, call.__qualname__ = module, name
    return call


def dispatch_namespace(namespace: dict, names) -> None:
    """Replace each plain function ``names`` in ``namespace`` (a module's
    globals) by its dispatching form."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and \
                not hasattr(fn, "__isokernel_plain__"):
            namespace[name] = dispatching(name, fn, namespace["__name__"])
