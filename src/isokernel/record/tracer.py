"""The recorder: tracers, the hash-consing graph builder, ``bind``, ``trace``
and ``replay``.

Which interpreter runs an op comes from context (a ``ContextVar`` holding the
active builder): with none, ``bind`` evaluates by the EVAL rules; with one, it
records a node. Recording is hash-consed: structurally equal nodes are one
node, so a value reused k times is one node and an unrolled loop records in
time linear in its length.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..ir import (
    EVAL,
    SHAPE,
    Attrs,
    Aval,
    Graph,
    IsokernelError,
    Literal,
    Node,
    Op,
    ShapeError,
    TracerError,
    dtypes,
)
from ..ir.pytree import leaf_paths, tree_flatten, tree_unflatten
from ..ir.source import user_where

_BUILDER: ContextVar[Builder | None] = ContextVar("isokernel_builder", default=None)

# Constant subexpressions are folded at record time unless the folded value
# would be larger than this (a broadcast of a scalar to a scene stays a node).
FOLD_LIMIT = 1 << 16

_ESCAPED = ("a value traced inside another function was used here; pass it to the "
            "traced function as an argument (or return it) instead of keeping it")


class Builder:
    """Collects the nodes of one recording."""

    def __init__(self, parent: Builder | None = None):
        self.parent = parent
        self.inputs: list[Node] = []
        self.captures: list[tuple[Tracer, Node]] = []
        self._cse: dict = {}
        self._captured: dict[int, Node] = {}

    def new_input(self, aval: Aval) -> Node:
        node = Node(Op.INPUT, (), Attrs({"aval": aval, "index": len(self.inputs)}), aval)
        self.inputs.append(node)
        return node

    def const(self, value) -> Node:
        literal = Literal(value)
        return self.node(Op.CONST, (), Attrs({"value": literal}), None, "")

    def node(self, op: Op, inputs: tuple[Node, ...], attrs: Attrs, aval, where: str) -> Node:
        key = (op, tuple(map(id, inputs)), attrs)
        found = self._cse.get(key)
        if found is not None:
            return found
        if aval is None:
            aval = SHAPE[op](*(x.aval for x in inputs), **attrs)
        node = Node(op, inputs, attrs, aval, where)
        self._cse[key] = node
        return node

    def recorded(self) -> list[Node]:
        """Every node recorded so far, in tape order."""
        return list(self._cse.values())

    def lift(self, x) -> Node:
        """The node of ``x`` in this recording: its own tracer's node, a
        capture of an enclosing recording's tracer, or a constant."""
        if isinstance(x, Tracer):
            if x.builder is self:
                return x.node
            return self._capture(x)
        return self.const(x)

    def _capture(self, x: Tracer) -> Node:
        outer = self.parent
        while outer is not None and outer is not x.builder:
            outer = outer.parent
        if outer is None:
            raise TracerError(_ESCAPED)
        found = self._captured.get(id(x))
        if found is None:
            found = self.new_input(x.aval)
            self._captured[id(x)] = found
            self.captures.append((x, found))
        return found

    @contextlib.contextmanager
    def active(self):
        token = _BUILDER.set(self)
        try:
            yield self
        finally:
            _BUILDER.reset(token)


def current_builder() -> Builder | None:
    return _BUILDER.get()


class Tracer:
    """A value being recorded. Python operators and the array methods users
    expect record ops; anything that needs a concrete value raises."""

    __slots__ = ("node", "builder")
    __array_ufunc__ = None  # make NumPy defer ``ndarray + tracer`` to us
    __hash__ = None

    def __init__(self, node: Node, builder: Builder):
        self.node = node
        self.builder = builder

    aval = property(lambda self: self.node.aval)
    shape = property(lambda self: self.node.aval.shape)
    dtype = property(lambda self: self.node.aval.dtype)
    ndim = property(lambda self: self.node.aval.ndim)
    size = property(lambda self: self.node.aval.size)
    weak = property(lambda self: self.node.aval.weak)

    def __repr__(self) -> str:
        return f"Tracer<{self.node.aval}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def _concrete(self, what: str):
        raise TracerError(
            f"{what} of a traced value at {user_where()}: its value is not known while "
            f"recording. Write branch-free code, e.g. inp.where(cond, a, b) instead of "
            f"if/else, or mark the argument static with jit(..., static_argnames=...)")

    def __bool__(self):
        self._concrete("bool()")

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __index__(self):
        self._concrete("use as an index")

    def __array__(self, *args, **kwargs):
        self._concrete("conversion to a NumPy array")


def _eager(op: Op, args, attrs: dict, where: str | None):
    try:
        SHAPE[op](*(_eager_aval(a) for a in args), **attrs)
    except IsokernelError as e:
        raise type(e)(f"{op.value} at {where or user_where()}: {e}") from None
    value = EVAL[op](*args, **attrs)
    return tuple(value) if isinstance(value, list) else value


def _eager_aval(x) -> Aval:
    x = np.asarray(x)
    return Aval(x.shape, x.dtype)


def bind(op: Op, *args, where: str | None = None, **attrs):
    """Apply ``op``: evaluate now, or record into the active builder. An op
    with several results gives a tuple of values (recorded: one ``get``
    node per result); ``get`` of such a tuple is its element."""
    if op is Op.GET and isinstance(args[0], tuple):
        return args[0][attrs["index"]]
    builder = _BUILDER.get()
    if builder is None or not any(isinstance(a, Tracer) for a in args):
        return _eager(op, args, attrs, where)
    nodes = tuple(builder.lift(a) for a in args)
    frozen = Attrs(attrs)
    try:
        aval = SHAPE[op](*(n.aval for n in nodes), **frozen)
    except IsokernelError as e:
        raise type(e)(f"{op.value} at {where or user_where()}: {e}") from None
    if isinstance(aval, tuple):
        return _several(builder, op, nodes, frozen, aval, where or user_where())
    if all(n.op is Op.CONST for n in nodes) and _foldable(nodes, aval):
        value = EVAL[op](*(n.attrs["value"].value for n in nodes), **frozen)
        return Tracer(builder.const(np.asarray(value, dtype=aval.dtype)), builder)
    if where is None:
        where = user_where()
    return Tracer(builder.node(op, nodes, frozen, aval, where), builder)


def _several(builder: Builder, op: Op, nodes, attrs: Attrs, avals: tuple, where: str):
    """A node with several results, read through one get node each."""
    node = builder.node(op, nodes, attrs, avals, where)
    return tuple(Tracer(builder.node(Op.GET, (node,), Attrs({"index": k}), aval, where),
                        builder) for k, aval in enumerate(avals))


def _foldable(nodes, aval: Aval) -> bool:
    """Fold when the result is no larger than its largest operand (folding
    never grows constants: a broadcast of a scalar stays a node) and small."""
    largest = max([1] + [n.aval.size for n in nodes])
    return aval.size <= min(largest, FOLD_LIMIT)


def as_tracer(x, builder: Builder) -> Tracer:
    return x if isinstance(x, Tracer) and x.builder is builder else Tracer(builder.lift(x), builder)


class ShapeDtype:
    """An example argument by shape and dtype alone (no data needed). Axis 0
    may be None: any batch size, which ``jit(...).lower`` accepts (it records
    at a nominal size with the batch axis polymorphic); a recording needs
    the size (``sized``)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Iterable[int | None], dtype: Any) -> None:
        shape = tuple(shape)
        if any(d is None for d in shape[1:]):
            raise ShapeError(f"ShapeDtype{shape}: only axis 0, the batch axis, may be None "
                             f"(any size); give the other axes' sizes")
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = dtypes.canonical(dtype)

    @property
    def polymorphic(self) -> bool:
        """Whether axis 0 is None (any batch size)."""
        return bool(self.shape) and self.shape[0] is None

    def sized(self, rows: int) -> ShapeDtype:
        """This example with ``rows`` on a None axis 0."""
        return ShapeDtype((rows, *self.shape[1:]), self.dtype) if self.polymorphic else self

    def __repr__(self) -> str:
        return f"ShapeDtype({self.shape}, {self.dtype.name})"


def aval_of_example(x) -> Aval:
    """The input aval for an example argument: an array, anything with
    ``shape`` and ``dtype``, or a Python scalar (weakly typed)."""
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return Aval((), dtypes.python_scalar_dtype(x), weak=True)
    if isinstance(x, Tracer):
        return x.aval.strong() if not x.weak else x.aval
    if isinstance(x, ShapeDtype) and x.polymorphic:
        raise ShapeError(f"{x}: a None batch axis (any size) is accepted by "
                         f"jit(f).lower(...), which records at a nominal size and compiles "
                         f"kernels for every batch size; here give the size, e.g. "
                         f"ShapeDtype({(1024, *x.shape[1:])}, {x.dtype.name})")
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return Aval(tuple(int(d) for d in x.shape), dtypes.canonical(x.dtype))
    array = np.asarray(x)
    return Aval(array.shape, dtypes.canonical(array.dtype))


def trace_flat(fn, args: tuple, names: list[str] | None = None, name: str = "f"):
    """Record ``fn(*args)``: returns (graph, output treedef, captures)."""
    leaves, in_tree = tree_flatten(args)
    builder = Builder(parent=_BUILDER.get())
    tracers = [Tracer(builder.new_input(aval_of_example(x)), builder) for x in leaves]
    with builder.active():
        out = fn(*tree_unflatten(in_tree, tracers))
        out_leaves, out_tree = tree_flatten(out)
        out_nodes = [builder.lift(_check_output(x)) for x in out_leaves]
    if names is None:
        params = _param_names(fn, len(args))
        names = [p for n, a in zip(params, args) for p in leaf_paths(a, n)]
    names = list(names) + [f"capture{i}" for i in range(len(builder.captures))]
    graph = Graph.build(builder.inputs, out_nodes, names, name, order=builder.recorded())
    return graph, out_tree, [outer for outer, _ in builder.captures]


def _param_names(fn, n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return (params + [f"arg{i}" for i in range(len(params), n)])[:n]


def _check_output(x):
    if isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float)):
        return x
    raise TypeError(f"traced function returned a {type(x).__name__}; return arrays, "
                    f"scalars, or tuples/lists/dicts/dataclasses of them")


def trace(fn: Callable[..., Any], *example_args: Any) -> Graph:
    """Record ``fn`` on tracers shaped like ``example_args`` (arrays, objects
    with ``shape``/``dtype``, Python scalars, or pytrees of them)."""
    name = getattr(fn, "__name__", "f")
    graph, _, captures = trace_flat(fn, example_args, name=name)
    if captures:
        raise TracerError(_ESCAPED)
    return graph


def replay(graph: Graph, *args: Any) -> list[Any]:
    """Run ``graph`` op by op through ``bind``: evaluates by the EVAL rules
    outside a recording, and records (with CSE against what is already
    there) inside one. Returns the list of output values."""
    if len(args) != len(graph.inputs):
        raise TypeError(f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(args)}")
    env = dict(zip(graph.inputs, args))
    builder = _BUILDER.get()
    for node in graph.nodes:
        if node in env:
            continue
        if node.op is Op.CONST:
            # inside a recording a constant stays a node, so a broadcast of a
            # scalar constant is recorded (not folded to a scene-sized array)
            value = node.attrs["value"].value
            env[node] = value if builder is None else Tracer(builder.const(value), builder)
        else:
            ins = [env[x] for x in node.inputs]
            env[node] = bind(node.op, *ins, where=node.where, **node.attrs)
    return [env[x] for x in graph.outputs]
