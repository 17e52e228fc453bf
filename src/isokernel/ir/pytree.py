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
_ANNOTATED: dict[type, tuple[Callable, Callable | None]] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable, *,
                         annotation: Callable | None = None,
                         derivative: Callable | None = None) -> None:
    """``flatten(obj) -> (children, aux)``; ``unflatten(aux, children) -> obj``;
    ``aux`` must be hashable.

    ``annotation(aux) -> str`` marks a node that wraps one leaf and says
    something about it (``isokernel.units.Quantity``: its unit): the leaf's
    path is the node's (``leaf_paths``), reports show the text
    (``annotations``). ``derivative(aux_in, aux_out) -> aux`` of such a
    node: the aux of the derivative of a one-leaf output with respect to a
    leaf, each given as its node's aux or None for a bare leaf; None makes
    the derivative a bare leaf (``derivative_tree``)."""
    _REGISTRY[cls] = (flatten, unflatten)
    if annotation is not None:
        _ANNOTATED[cls] = (annotation, derivative)


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
    if kind == "custom" and aux[0] in _ANNOTATED:
        return [""]
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


# --- annotated leaves (registered with ``annotation``): units ----------------------------------

def _annotated(td: TreeDef) -> tuple[type, Any] | None:
    """(class, aux) of an annotated node around one leaf, else None."""
    if td.kind == "custom" and td.aux[0] in _ANNOTATED and td.children == (LEAF,):
        return td.aux
    return None


def is_scalar_tree(td: TreeDef) -> bool:
    """A bare leaf, or an annotated node around one (a quantity): what
    ``grad`` differentiates."""
    return td == LEAF or _annotated(td) is not None


def annotations(td: TreeDef, prefix: str) -> list[tuple[str, str | None]]:
    """(path, annotation or None) of each leaf of the structure ``td``,
    paths as ``leaf_paths`` writes them from ``prefix``."""
    found = _annotated(td)
    if found is not None:
        return [(prefix, _ANNOTATED[found[0]][0](found[1]))]
    if td == LEAF:
        return [(prefix, None)]
    steps = _steps(td.kind, td.aux, len(td.children))
    return [item for step, child in zip(steps, td.children)
            for item in annotations(child, prefix + step)]


def has_annotations(td: TreeDef) -> bool:
    """Whether any leaf of ``td`` is annotated."""
    return _annotated(td) is not None or any(has_annotations(c) for c in td.children)


def derivative_tree(in_tree: TreeDef, out_tree: TreeDef) -> TreeDef:
    """The structure of the derivative of a scalar output of structure
    ``out_tree`` (``is_scalar_tree``) with respect to inputs of structure
    ``in_tree``: ``in_tree``, with each leaf annotated by its class's
    derivative rule (a quantity's unit: output unit / input unit)."""
    if not _ANNOTATED or (out_tree == LEAF and not has_annotations(in_tree)):
        return in_tree
    return _derive(in_tree, _annotated(out_tree))


def _derive(td: TreeDef, out: tuple[type, Any] | None) -> TreeDef:
    found = _annotated(td)
    if found is None and td != LEAF:
        return td._replace(children=tuple(_derive(c, out) for c in td.children))
    cls = found[0] if found is not None else (out[0] if out is not None else None)
    rule = _ANNOTATED[cls][1] if cls is not None else None
    if rule is None:
        return td
    aux = rule(found[1] if found is not None else None,
               out[1] if out is not None and out[0] is cls else None)
    return LEAF if aux is None else TreeDef("custom", (cls, aux), (LEAF,))
