"""What the control-flow primitives share: recording a user's body function
as a closed sub-graph, giving several bodies one signature, and the checks
whose errors name the user's line and the fix."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir import Aval, DTypeError, Graph, Op, ShapeError, dtypes
from ..ir.pytree import tree_flatten
from ..record import ShapeDtype, Tracer, bind, replay, trace_flat
from ..record import frontend as F
from ..record.tracer import aval_of_example
from ..transforms.graphs import retrace
from ..transforms.vmap import batched, vmap_graph

WEAK_DEFAULTS = frozenset({dtypes.bool_, dtypes.int64, dtypes.float64})
"""The dtypes of Python scalars (the weakly typed leaves ``settled`` promotes)."""


def strong_aval(x) -> Aval:
    """The aval a carry or operand leaf gets: Python scalars become arrays
    of their default dtype (a loop carry has one dtype for good)."""
    return aval_of_example(x).strong()


def examples(leaves) -> list[ShapeDtype]:
    return [ShapeDtype(a.shape, a.dtype) for a in map(strong_aval, leaves)]


def as_values(leaves) -> list:
    """Leaves as values a recording or NumPy can take: Python scalars as
    arrays of their default dtype, tracers and arrays as they are."""
    return [x if isinstance(x, (Tracer, np.ndarray)) else
            np.asarray(x, dtype=strong_aval(x).dtype) for x in leaves]


def record_carry(leaves, record, trace):
    """``record(avals)`` with the avals of a loop's initial carry as JAX
    types it: each leaf's own, except that a Python scalar (weakly typed)
    takes the dtype the body returns for it when the scalar would promote to
    that dtype (``0`` summing int32 values is an int32 carry, ``0.0``
    accumulating float32 a float32 one). The defaults are tried first (one
    recording, as for every loop whose body keeps them); only where that
    fails does ``trace(examples)`` record the body on the weak scalars to
    find their dtypes, and ``record`` runs again with them. Returns (avals,
    what ``record`` returned)."""
    want = [strong_aval(x) for x in leaves]
    try:
        return want, record(want)
    except (DTypeError, ShapeError):
        settled = _weak_settled(leaves, want, trace)
        if settled is None:
            raise
    return settled, record(settled)


def _weak_settled(leaves, want: list[Aval], trace) -> list[Aval] | None:
    """The carry's avals from a recording of the body on the weak scalars,
    or None when that changes nothing (or fails: the first error stands)."""
    if not any(_is_weak(x) for x in leaves):
        return None
    try:
        graph, _, _, weak = trace([x if _is_weak(x) else ShapeDtype(w.shape, w.dtype)
                                   for x, w in zip(leaves, want)])
    except (DTypeError, ShapeError):
        return None
    settled_avals = [settled(w, out.aval, k) if _is_weak(x) else w
                     for x, w, out, k in zip(leaves, want, graph.outputs, weak)]
    return None if settled_avals == want else settled_avals


def settled(want: Aval, got: Aval, got_weak: bool) -> Aval:
    """The aval of a weak initial leaf given what the body returns for it."""
    if got_weak or got.shape != want.shape or got.dtype == want.dtype:
        return want
    if want.dtype not in WEAK_DEFAULTS or dtypes.promote_weak(got.dtype, [want.dtype]) != got.dtype:
        return want
    return Aval(want.shape, got.dtype)


def settle_eager(init_leaves, want: list[Aval], leaves) -> list[Aval]:
    """``record_carry``'s rule for a loop run eagerly, from the leaves of its first
    step."""
    return [settled(w, aval_of_example(x).strong(), _is_weak(x)) if _is_weak(i) else w
            for i, w, x in zip(init_leaves, want, leaves)]


def carry_values(leaves, avals: Sequence[Aval]) -> list:
    """``as_values`` in the carry's dtypes (a Python scalar as ``record_carry``
    settled it)."""
    return [F.astype(x, a.dtype) if isinstance(x, Tracer) and x.dtype != a.dtype else
            x if isinstance(x, (Tracer, np.ndarray)) else np.asarray(x, dtype=a.dtype)
            for x, a in zip(leaves, avals)]


def trace_body(fn, args: Sequence, name: str):
    """Record ``fn(*args)`` (args: example leaves) as a closed graph:
    (graph, output treedef, captured outer values, weak) where ``weak``
    marks each output leaf that is a Python scalar or weakly typed (it takes
    the dtype required, ``cast_weak``)."""
    weak: list[bool] = []

    def marked(*xs):
        out = fn(*xs)
        weak[:] = [_is_weak(x) for x in tree_flatten(out)[0]]
        return out
    graph, out_tree, caps = trace_flat(marked, tuple(args), name=name)
    return graph, out_tree, caps, tuple(weak)


def _is_weak(x) -> bool:
    if isinstance(x, Tracer):
        return x.weak
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def union(*capture_lists) -> list:
    """The distinct captured values of several bodies, first seen first."""
    found: dict = {}
    for caps in capture_lists:
        for c in caps:
            found.setdefault(c.node, c)
    return list(found.values())


def with_inputs(graph: Graph, n_args: int, caps: Sequence, everything: Sequence) -> Graph:
    """``graph`` (inputs: ``n_args`` arguments, then ``caps``) re-recorded to
    take the arguments, then every value of ``everything``: bodies of one
    primitive share one signature."""
    where = {c.node: i for i, c in enumerate(everything)}
    if [c.node for c in caps] == [c.node for c in everything]:
        return graph
    avals = [x.aval for x in graph.inputs[:n_args]] + [c.aval for c in everything]

    def body(*xs):
        return replay(graph, *xs[:n_args], *(xs[n_args + where[c.node]] for c in caps))
    return retrace(avals, body, [*graph.input_names[:n_args],
                                 *(f"capture{i}" for i in range(len(everything)))], graph.name)


def check_same(where: str, what: str, fix: str, got: Sequence[Aval], want: Sequence[Aval],
               got_tree=None, want_tree=None) -> None:
    """Refuse a body whose outputs differ from what it must return."""
    if got_tree is not None and got_tree != want_tree:
        raise ShapeError(f"{what} at {where}: it returns the structure {got_tree}, but "
                         f"{want_tree} is required; {fix}")
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            raise ShapeError(f"{what} at {where}: leaf {k} is {g} where {w} is required; "
                             f"{fix}")


def cast_weak(graph: Graph, want: Sequence[Aval], weak: Sequence[bool]) -> Graph:
    """Weak outputs (Python scalars; ``trace_body``) cast to the dtype
    required: a body returning ``0.0`` for a float32 carry returns a float32
    zero."""
    outs = graph.outputs
    if not any(k and x.aval.dtype != w.dtype for x, w, k in zip(outs, want, weak)):
        return graph

    def body(*xs):
        values = replay(graph, *xs)
        return [bind(Op.CAST, v, dtype=w.dtype) if k and x.aval.dtype != w.dtype else v
                for v, x, w, k in zip(values, outs, want, weak)]
    return retrace([x.aval for x in graph.inputs], body, graph.input_names, graph.name)


def eager_avals(leaves, want: Sequence[Aval]) -> list[Aval]:
    """The avals of eagerly computed leaves, a Python scalar taking the
    dtype required (as ``cast_weak`` does for a recorded body)."""
    found = []
    for leaf, w in zip(leaves, want):
        a = aval_of_example(leaf)
        found.append(Aval(a.shape, w.dtype) if a.weak else a.strong())
    return found


def carry_dims(body: Graph, n_carry: int, dims: Sequence, size: int) -> tuple:
    """The batch dims of a loop's inputs once its carries are settled: a
    carry is batched when its initial value is or when the body makes it so
    from batched inputs (iterated to a fixed point, as a carry batched now
    may batch another next step); the rest of ``dims`` as given."""
    batched = [d is not None for d in dims[:n_carry]]
    while True:
        settled = tuple(0 if b else None for b in batched) + tuple(dims[n_carry:])
        out_dims = vmap_graph(body, settled, size)[1]
        grown = [b or out_dims[i] is not None for i, b in enumerate(batched)]
        if grown == batched:
            return settled
        batched = grown


def batch_body(body: Graph, dims: Sequence, size: int, batched_out: Sequence[bool]) -> Graph:
    """``body`` batched over ``dims``, the outputs marked in ``batched_out``
    batched at 0 (an output the batch does not reach is broadcast) and the
    others left unbatched."""
    inner, out_dims = vmap_graph(body, dims, size)
    if all(d is not None for d, want in zip(out_dims, batched_out) if want):
        return inner

    def forced(*xs):
        outs = replay(inner, *xs)
        return [batched(o, d, size) if want else o
                for o, d, want in zip(outs, out_dims, batched_out)]
    return retrace([x.aval for x in inner.inputs], forced, inner.input_names, inner.name)


def batch_operands(args, dims, bdims, size: int) -> list:
    """The operands with each one ``dims`` batches and ``bdims`` did not
    broadcast over the batch."""
    return [batched(x, None, size) if d is not None and b is None else x
            for x, d, b in zip(args, dims, bdims)]
