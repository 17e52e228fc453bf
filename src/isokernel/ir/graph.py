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
    if isinstance(x, np.complexfloating):
        return repr(complex(x))
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
    return repr(value)


EMPTY = Attrs()


@dataclass(frozen=True, eq=False)
class Node:
    """One operation of a graph. Nodes compare by identity; the recorder
    guarantees that structurally equal nodes are one object.

    A node has one result (``aval`` an ``Aval``) or several (``aval`` a
    tuple of them: a region node such as a custom-derivative call). The
    results of a node with several are read by ``get`` nodes, one per
    result used (``Op.GET``, attribute ``index``); every other node has one
    result and is read directly, as cheaply as before."""

    op: Op
    inputs: tuple[Node, ...]
    attrs: Attrs
    aval: Aval | tuple[Aval, ...]
    where: str = ""

    @property
    def avals(self) -> tuple[Aval, ...]:
        """Every result's aval (one for an ordinary node)."""
        return self.aval if isinstance(self.aval, tuple) else (self.aval,)

    @property
    def nbytes(self) -> int:
        """Bytes of every result."""
        return sum(a.nbytes for a in self.avals)

    @property
    def several(self) -> bool:
        """True for a node with a tuple of results (read through ``get``)."""
        return isinstance(self.aval, tuple)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._single().shape

    @property
    def dtype(self) -> np.dtype:
        return self._single().dtype

    def _single(self) -> Aval:
        if isinstance(self.aval, tuple):
            raise TypeError(f"{self.op.value} has {len(self.aval)} results; read one with a "
                            f"get node (Op.GET, index=k)")
        return self.aval

    def __repr__(self) -> str:
        return f"Node({self.op.value}, {aval_text(self.aval)})"


def aval_text(aval) -> str:
    if isinstance(aval, tuple):
        return "(" + ", ".join(map(str, aval)) + ")"
    return str(aval)


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


class SubGraph:
    """A sub-graph as a node attribute: the body of a region node (a fused
    form, a custom-derivative call and its rules). Closed: every value it
    reads is one of its inputs (what it captures from outside is passed as
    explicit operands of the node), so it is pure data. Compared and hashed
    by structure (ops, wiring, attributes and avals, not source lines), so
    two equal bodies recorded twice are one key for CSE. ``subgraphs(node)``
    finds a node's sub-graphs; ``str(graph)`` prints them indented under
    their node and ``verify`` checks them."""

    __slots__ = ("graph", "_key", "_hash")

    def __init__(self, graph: Graph):
        self.graph = graph
        self._key = None
        self._hash = None

    def key(self) -> tuple:
        """The structure: input avals, each node as (op, operand positions,
        attributes, avals), and the output positions."""
        if self._key is None:
            g = self.graph
            nodes = tuple((n.op, tuple(g.index(x) for x in n.inputs), n.attrs, n.aval)
                          for n in g.nodes)
            outs = tuple(g.index(x) for x in g.outputs)
            self._key = (tuple(x.aval for x in g.inputs), nodes, outs)
        return self._key

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.key())
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, SubGraph) and hash(self) == hash(other)
                                 and self.key() == other.key())

    def __repr__(self) -> str:
        return f"<graph {self.graph.name}: {len(self.graph.nodes)} nodes>"


def subgraphs(node: Node) -> list[tuple[str, SubGraph]]:
    """The sub-graphs a node carries, with their attribute names (a tuple of
    sub-graphs, such as a switch's branches, gives ``name[k]``): the one walk
    that verify, the printer, liveness, cost, fusion, CSE and planning use to
    descend into bodies."""
    found = []
    for name, value in node.attrs.items():
        if isinstance(value, SubGraph):
            found.append((name, value))
        elif isinstance(value, tuple):
            found += [(f"{name}[{k}]", v) for k, v in enumerate(value)
                      if isinstance(v, SubGraph)]
    return found


def walk(graph: Graph):
    """Every node of ``graph`` and, depth first, of every sub-graph its
    nodes carry, each once per place it appears."""
    for node in graph.nodes:
        yield node
        for _, sub in subgraphs(node):
            yield from walk(sub.graph)


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


def format_graph(graph: Graph, indent: str = "") -> str:
    """One line per node: ``%3:f32[P] = exp %2   # model.py:14``; a node's
    sub-graphs follow it, indented, each headed by its attribute name."""
    sig = ", ".join(f"{name}: {n.aval}" for name, n in zip(graph.input_names, graph.inputs))
    outs = ", ".join(str(n.aval) for n in graph.outputs)
    lines = [f"{indent}graph {graph.name}({sig}) -> ({outs})"]
    names = dict(zip(graph.inputs, graph.input_names))
    for i, node in enumerate(graph.nodes):
        lines.append(f"{indent}  " + _node_line(graph, i, node, names))
        for name, sub in subgraphs(node):
            lines.append(f"{indent}    {name} = " + format_graph(sub.graph, indent + "    ")
                         .removeprefix(indent + "    "))
    results = " ".join(f"%{graph.index(n)}" for n in graph.outputs)
    lines.append(f"{indent}  return {results}")
    return "\n".join(lines)


def _node_line(graph: Graph, i: int, node: Node, names: dict) -> str:
    head = f"%{i}:{aval_text(node.aval)} = {node.op.value}"
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
