"""Solvers with quantities: ``odeint`` checks that ``func`` returns each
leaf of dy/dt in the unit of that leaf of y per unit of t, converts what is
compatible (K/h for K/s is a multiply) and runs the solver on magnitudes."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .. import ode
from ..ir.pytree import LEAF, TreeDef, tree_flatten, tree_unflatten
from ..ir.source import user_where
from . import _registry as R
from ._quantity import RULES, Quantity, convert, magnitude_of, units_of
from ._registry import UnitError


def split_units(td: TreeDef) -> tuple[TreeDef, list]:
    """(the structure with each quantity a bare leaf, each leaf's unit or None)."""
    if td.kind == "custom" and td.aux[0] is Quantity:
        return LEAF, [td.aux[1]]
    if td == LEAF:
        return LEAF, [None]
    parts = [split_units(c) for c in td.children]
    return td._replace(children=tuple(p[0] for p in parts)), [u for p in parts for u in p[1]]


def odeint(func: Callable[..., Any], y0: Any, t: Any, *args: Any, **kwargs: Any) -> Any:
    """``isokernel.ode.odeint`` with quantities: ``y0`` a quantity (or a
    pytree holding them), ``t`` a quantity of time (or bare). ``func(y, t,
    *args)`` receives quantities and must return dy/dt in y's unit per t's
    unit (each leaf; a compatible unit is converted, another one is a
    ``UnitError`` naming the leaf, both units and the call's line).
    ``dt0`` may be a quantity of time and ``atol`` one in y's unit. The
    solution has y's units."""
    return solve(ode.odeint, func, y0, t, *args, **kwargs)


def solve(solver: Callable[..., Any], func: Callable[..., Any], y0: Any, t: Any, *args: Any,
          **kwargs: Any) -> Any:
    """``odeint`` with the solver ``solver`` (the plain ``ode.odeint``)."""
    where = user_where()
    leaves, tree = tree_flatten(y0)
    bare_tree, y_units = split_units(tree)
    t_unit = units_of(t)
    rates = [None if u is None and t_unit is None else
             R.quotient(u if u is not None else R.dimensionless(),
                        t_unit if t_unit is not None else R.dimensionless())
             for u in y_units]
    kwargs = _options(kwargs, y_units, t_unit, where)

    def bare_func(y: Any, tt: Any, *a: Any) -> Any:
        y_q = tree_unflatten(tree, tree_flatten(y)[0])
        t_q = tt if t_unit is None else Quantity(tt, t_unit)
        dy = func(y_q, t_q, *a)
        dy_leaves, dy_tree = tree_flatten(dy)
        dy_bare, dy_units = split_units(dy_tree)
        if dy_bare != bare_tree:
            raise ValueError(f"odeint at {where}: {_name(func)} returned {dy_bare} where y0 "
                             f"is {bare_tree}; return dy/dt with the structure of y0")
        return tree_unflatten(bare_tree, [
            _rate(d, du, ru, yu, t_unit, i, func, where)
            for i, (d, du, ru, yu) in enumerate(zip(dy_leaves, dy_units, rates, y_units))])

    out = solver(bare_func, tree_unflatten(bare_tree, leaves), magnitude_of(t), *args, **kwargs)
    ys, info = out if kwargs.get("full_output") else (out, None)
    ys = tree_unflatten(tree, tree_flatten(ys)[0])
    return (ys, info) if kwargs.get("full_output") else ys


def _name(func: Callable[..., Any]) -> str:
    code = getattr(func, "__code__", None)
    name = getattr(func, "__name__", "func")
    if code is None:
        return repr(name)
    return f"{name!r} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _rate(d: Any, du: Any, ru: Any, yu: Any, tu: Any, i: int, func: Callable[..., Any],
          where: str) -> Any:
    """The magnitude of one leaf of dy/dt in the unit the solver steps in."""
    if ru is None and du is None:
        return d
    want = ru if ru is not None else R.dimensionless()
    got = du if du is not None else R.dimensionless()
    y_shown = R.show(yu) if yu is not None else "bare numbers"
    t_shown = R.show(tu) if tu is not None else "bare numbers"
    if R.kind(got) != "linear" or R.dimensionality(got) != R.dimensionality(want):
        shown = R.describe(got) if du is not None else "a bare number (dimensionless)"
        raise UnitError(
            f"odeint at {where}: {_name(func)} returns dy/dt in {shown} for leaf {i} of y; "
            f"y is in {y_shown} and t in {t_shown}, so dy/dt must be in {R.show(want)}; "
            f"return the rate as a quantity of that dimension (e.g. "
            f"Quantity(rate, {R.code(want)})) or check the rate's units")
    return convert(Quantity(d, got), want, "odeint")


def _options(kwargs: dict, y_units: list, t_unit: Any, where: str) -> dict:
    """dt0 in t's unit, atol in y's, rtol dimensionless: as magnitudes."""
    kwargs = dict(kwargs)
    for name, unit in (("dt0", t_unit), ("atol", next((u for u in y_units), None)),
                       ("rtol", None)):
        value = kwargs.get(name)
        if type(value) is not Quantity:
            continue
        target = unit if unit is not None else R.dimensionless()
        if name == "atol" and len({str(u) for u in y_units}) > 1:
            raise UnitError(f"odeint at {where}: atol is a quantity but the leaves of y have "
                            f"different units; give atol as a bare number (in each leaf's "
                            f"unit)")
        if R.dimensionality(value.units) != R.dimensionality(target):
            raise UnitError(f"odeint at {where}: {name} is in {R.describe(value.units)}, it "
                            f"must be in {R.describe(target)}; convert it")
        kwargs[name] = convert(value, target, "odeint")
    return kwargs


def _odeint_rule(op: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``isokernel.ode.odeint`` called with a quantity (its overlay hook)."""
    return solve(fn, *args, **kwargs)


RULES["odeint"] = _odeint_rule
