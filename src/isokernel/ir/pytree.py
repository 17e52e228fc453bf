"""Pytrees: nested tuples, lists, dicts, NamedTuples and dataclasses whose
leaves are arrays or scalars. A ``TreeDef`` is hashable, so it can key caches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
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


def tree_flatten(tree: Any) -> tuple[list, TreeDef]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves: list) -> TreeDef:
    found = _children(x)
    if found is None:
        leaves.append(x)
        return LEAF
    kind, aux, children = found
    return TreeDef(kind, aux, tuple(_flatten(c, leaves) for c in children))


def tree_unflatten(treedef: TreeDef, leaves: Iterable[Any]) -> Any:
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


def tree_leaves(tree: Any) -> list:
    return tree_flatten(tree)[0]


def tree_map(fn: Callable, tree: Any, *rest: Any) -> Any:
    """``fn`` over the leaves of ``tree`` and the matching leaves of each tree
    in ``rest``, which must have ``tree``'s structure (as
    ``jax.tree_util.tree_map`` requires); the result has ``tree``'s structure."""
    leaves, td = tree_flatten(tree)
    others = []
    for i, other in enumerate(rest, start=2):
        other_leaves, other_td = tree_flatten(other)
        if other_td != td:
            raise ValueError(f"tree_map: tree {i} does not have the first tree's structure; "
                             f"{_first_difference(td, other_td, i)}; pass trees of one "
                             f"structure (the same containers, keys and number of leaves)")
        others.append(other_leaves)
    return tree_unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])


def _first_difference(first: TreeDef, other: TreeDef, i: int, path: str = "") -> str:
    """Where two structures first differ, e.g. ``at ['b']: a list of 2 in the
    first tree, a list of 3 in tree 2``."""
    same_node = (first.kind, first.aux, len(first.children)) == \
        (other.kind, other.aux, len(other.children))
    if not same_node:
        return (f"at {path or 'the root'}: {_describe(first)} in the first tree, "
                f"{_describe(other)} in tree {i}")
    steps = _steps(first.kind, first.aux, len(first.children))
    for step, a, b in zip(steps, first.children, other.children):
        if a != b:
            return _first_difference(a, b, i, path + step)
    return f"at {path or 'the root'}"


def _describe(td: TreeDef) -> str:
    if td.kind in ("tuple", "list"):
        return f"a {td.kind} of {len(td.children)}"
    if td.kind == "dict":
        return f"a dict with keys {list(td.aux)}"
    if td.kind == "namedtuple":
        return f"a {td.aux.__name__}"
    if td.kind in ("dataclass", "custom"):
        return f"a {td.aux[0].__name__}"
    return "None" if td.kind == "none" else "a leaf"


def _steps(kind: str, aux, count: int) -> list[str]:
    """The path step to each child of a container, as ``leaf_paths`` writes it."""
    if kind == "dict":
        return [f"[{k!r}]" for k in aux]
    if kind == "namedtuple":
        return [f".{name}" for name in aux._fields]
    if kind == "dataclass":
        return [f".{name}" for name in aux[1]]
    return [f"[{i}]" for i in range(count)]


def leaf_paths(tree: Any, prefix: str) -> list[str]:
    """A readable name per leaf, e.g. ``params['w']`` or ``state.mv``."""
    found = _children(tree)
    if found is None:
        return [prefix]
    kind, aux, children = found
    steps = _steps(kind, aux, len(children))
    return [p for s, c in zip(steps, children) for p in leaf_paths(c, prefix + s)]
