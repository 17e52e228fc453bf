"""Frozen IR: abstract values, nodes, graphs and their one text form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes
from .ops import Op


@dataclass(frozen=True)
class Aval:
    """Shape and dtype of a value. ``weak`` marks a value that came from a
    Python scalar and still takes the dtype of the array it meets."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def strong(self) -> Aval:
        return Aval(self.shape, self.dtype) if self.weak else self

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{dtypes.SHORT[self.dtype]}{'~' if self.weak else ''}[{dims}]"


class Literal:
    """A constant array inside a node's attributes, compared by its bits."""

    __slots__ = ("value", "_key", "_hash")

    def __init__(self, value):
        array = np.array(value, copy=True)
        array.flags.writeable = False
        self.value = array
        self._key = (array.dtype.str, array.shape, array.tobytes())
        self._hash = hash(self._key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, Literal) and self._key == other._key

    def __repr__(self) -> str:
        v = self.value
        if v.ndim == 0:
            return _scalar_text(v[()])
        if v.size <= 4:
            return "[" + ", ".join(_scalar_text(x) for x in v.ravel()) + "]"
        return f"<{v.size} values>"


def _scalar_text(x) -> str:
    if isinstance(x, np.floating):
        return repr(float(x))
    if isinstance(x, np.bool_):
        return repr(bool(x))
    return repr(int(x))


class Attrs(Mapping):
    """An immutable, hashable mapping of an op's static parameters."""

    __slots__ = ("_items", "_dict", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None):
        d = dict(items or {})
        self._dict = d
        self._items = tuple(sorted(d.items()))
        self._hash = hash(self._items)

    def __getitem__(self, key):
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, Attrs) and self._items == other._items

    def __repr__(self) -> str:
        return ", ".join(f"{k}={_attr_text(v)}" for k, v in self._items)


def _attr_text(value) -> str:
    if isinstance(value, np.dtype):
        return dtypes.SHORT[value]
    if isinstance(value, Graph):  # the sub-graph of a custom-derivative call
        return f"<graph {value.name}: {len(value.nodes)} nodes>"
    return repr(value)


EMPTY = Attrs()


@dataclass(frozen=True, eq=False)
class Node:
    """One value of a graph. Nodes compare by identity; the recorder
    guarantees that structurally equal nodes are one object."""

    op: Op
    inputs: tuple[Node, ...]
    attrs: Attrs
    aval: Aval
    where: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    def __repr__(self) -> str:
        return f"Node({self.op.value}, {self.aval})"


@dataclass(frozen=True, eq=False)
class Graph:
    """Inputs, every node in topological order (inputs first), and outputs."""

    inputs: tuple[Node, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[Node, ...]
    input_names: tuple[str, ...] = ()
    name: str = "f"
    _index: dict = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(self.nodes)})
        if not self.input_names:
            names = tuple(f"x{i}" for i in range(len(self.inputs)))
            object.__setattr__(self, "input_names", names)

    @staticmethod
    def build(inputs: Iterable[Node], outputs: Iterable[Node], input_names=(), name="f",
              order: Iterable[Node] | None = None):
        """The graph of everything the outputs reach. Nodes keep ``order``
        (the recording's tape order) when given, else a depth-first
        topological order. Unreachable nodes are dropped; unused inputs stay
        inputs."""
        inputs, outputs = tuple(inputs), tuple(outputs)
        reachable = toposort(outputs, set(inputs))
        if order is not None:
            keep = set(reachable)
            reachable = [n for n in order if n in keep]
        return Graph(inputs, (*inputs, *reachable), outputs, tuple(input_names), name)

    def index(self, node: Node) -> int:
        return self._index[node]

    def __contains__(self, node: Node) -> bool:
        return node in self._index

    def consts(self) -> list[Node]:
        return [n for n in self.nodes if n.op is Op.CONST]

    def ops(self) -> set[Op]:
        return {n.op for n in self.nodes}

    def __str__(self) -> str:
        return format_graph(self)


class Body:
    """The graph a ``fused`` node stands for, as a node attribute: compared
    and hashed by identity (a form's body is built once per match), printed
    by its size rather than in full."""

    __slots__ = ("graph",)

    def __init__(self, graph: Graph):
        self.graph = graph

    def __repr__(self) -> str:
        return f"<body of {len(self.graph.nodes) - len(self.graph.inputs)} nodes>"


def toposort(roots: Iterable[Node], seen: set | None = None) -> list[Node]:
    """Nodes reachable from ``roots`` not in ``seen``, inputs before users.
    Iterative, so deep graphs (long unrolled loops) cannot hit the recursion
    limit."""
    seen = set() if seen is None else seen
    order: list[Node] = []
    for root in roots:
        if root in seen:
            continue
        stack = [(root, iter(root.inputs))]
        seen.add(root)
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(child.inputs)))
    return order


def format_graph(graph: Graph) -> str:
    """One line per node: ``%3:f32[P] = exp %2   # model.py:14``."""
    sig = ", ".join(f"{name}: {n.aval}" for name, n in zip(graph.input_names, graph.inputs))
    outs = ", ".join(str(n.aval) for n in graph.outputs)
    lines = [f"graph {graph.name}({sig}) -> ({outs})"]
    names = dict(zip(graph.inputs, graph.input_names))
    for i, node in enumerate(graph.nodes):
        lines.append("  " + _node_line(graph, i, node, names))
    results = " ".join(f"%{graph.index(n)}" for n in graph.outputs)
    lines.append(f"  return {results}")
    return "\n".join(lines)


def _node_line(graph: Graph, i: int, node: Node, names: dict) -> str:
    head = f"%{i}:{node.aval} = {node.op.value}"
    if node.op is Op.INPUT:
        body = f"{head} {names.get(node, '?')}"
    elif node.op is Op.CONST:
        body = f"{head} {node.attrs['value']!r}"
    else:
        args = " ".join(f"%{graph.index(x)}" for x in node.inputs)
        body = f"{head} {args}"
        if node.attrs:
            body += f" {{{node.attrs!r}}}"
    if node.where:
        body = f"{body:<44} # {node.where}"
    return body
