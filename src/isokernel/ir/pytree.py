"""Pytrees: nested tuples, lists, dicts, NamedTuples and dataclasses whose
leaves are arrays or scalars. A ``TreeDef`` is hashable, so it can key caches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple


class TreeDef(NamedTuple):
    kind: str
    aux: Any
    children: tuple

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf", None, ())
_REGISTRY: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """``flatten(obj) -> (children, aux)``; ``unflatten(aux, children) -> obj``;
    ``aux`` must be hashable."""
    _REGISTRY[cls] = (flatten, unflatten)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(x) -> tuple[str, Any, list] | None:
    """(kind, aux, children) for a container, None for a leaf."""
    t = type(x)
    if t in _REGISTRY:
        children, aux = _REGISTRY[t][0](x)
        return "custom", (t, aux), list(children)
    if _is_namedtuple(x):
        return "namedtuple", t, list(x)
    if isinstance(x, tuple):
        return "tuple", None, list(x)
    if isinstance(x, list):
        return "list", None, list(x)
    if isinstance(x, dict):
        keys = tuple(sorted(x, key=repr))
        return "dict", keys, [x[k] for k in keys]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = tuple(f.name for f in dataclasses.fields(x) if f.init)
        return "dataclass", (t, names), [getattr(x, n) for n in names]
    if x is None:
        return "none", None, []
    return None


def tree_flatten(tree) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves: list) -> TreeDef:
    found = _children(x)
    if found is None:
        leaves.append(x)
        return LEAF
    kind, aux, children = found
    return TreeDef(kind, aux, tuple(_flatten(c, leaves) for c in children))


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)
    return _build(treedef, it)


def _build(td: TreeDef, it) -> Any:
    if td.kind == "leaf":
        return next(it)
    children = [_build(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(children)
    if td.kind == "list":
        return children
    if td.kind == "dict":
        return dict(zip(td.aux, children))
    if td.kind == "namedtuple":
        return td.aux(*children)
    if td.kind == "dataclass":
        cls, names = td.aux
        return cls(**dict(zip(names, children)))
    if td.kind == "custom":
        cls, aux = td.aux
        return _REGISTRY[cls][1](aux, children)
    return None


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_map(fn: Callable, tree, *rest) -> Any:
    leaves, td = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])


def leaf_paths(tree, prefix: str) -> list[str]:
    """A readable name per leaf, e.g. ``params['w']`` or ``state.mv``."""
    found = _children(tree)
    if found is None:
        return [prefix]
    kind, aux, children = found
    if kind == "dict":
        steps = [f"[{k!r}]" for k in aux]
    elif kind == "namedtuple":
        steps = [f".{name}" for name in aux._fields]
    elif kind == "dataclass":
        steps = [f".{name}" for name in aux[1]]
    else:
        steps = [f"[{i}]" for i in range(len(children))]
    return [p for s, c in zip(steps, children) for p in leaf_paths(c, prefix + s)]
