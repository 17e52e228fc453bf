"""Batching: the BATCH rule of every op, and ``vmap_graph``.

Inside a batched graph a value is either unbatched (the same for every
example) or carries the batch as its leading axis 0; the API moves user
``in_axes``/``out_axes`` to and from axis 0. A rule takes the operands and
their batch dims (0 or None, at least one 0) and returns ``(out, dim)``.
Ops whose operands are all unbatched are recorded as they are, so constants
and work that does not depend on the mapped inputs are never copied per
example.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..ir import Aval, Graph, Op
from ..ir.ops import BINARY, LINALG, TABLE, UNARY
from ..ir.source import pinned_where
from ..record import bind, replay
from ..record import frontend as F
from .graphs import const, replay_node, retrace, scalar


def batched(x, dim, size: int):
    """``x`` with the batch as axis 0 (an unbatched value is broadcast)."""
    if dim is not None:
        return x
    return bind(Op.BROADCAST, x, shape=(size, *x.shape), dims=tuple(range(1, x.ndim + 1)))


def batch_size(args, bdims) -> int:
    return next(x.shape[0] for x, d in zip(args, bdims) if d is not None)


def _elementwise(op: Op):
    def rule(args, bdims, **attrs):
        size = batch_size(args, bdims)
        return bind(op, *(batched(x, d, size) for x, d in zip(args, bdims)), **attrs), 0
    return rule


def _shift(axes) -> tuple[int, ...]:
    return tuple(a + 1 for a in axes)


def _reduce(op: Op):
    return lambda args, bdims, *, axes: (bind(op, args[0], axes=_shift(axes)), 0)


def _reshape(args, bdims, *, shape):
    return bind(Op.RESHAPE, args[0], shape=(args[0].shape[0], *shape)), 0


def _broadcast(args, bdims, **attrs):
    x = args[0]
    return bind(Op.BROADCAST, x, shape=(x.shape[0], *attrs["shape"]),
                dims=(0, *_shift(attrs["dims"]))), 0


def _transpose(args, bdims, *, perm):
    return bind(Op.TRANSPOSE, args[0], perm=(0, *_shift(perm))), 0


def _slice(args, bdims, *, start, limit, stride):
    x = args[0]
    return bind(Op.SLICE, x, start=(0, *start), limit=(x.shape[0], *limit),
                stride=(1, *stride)), 0


def _rev(args, bdims, *, axes):
    return bind(Op.REV, args[0], axes=_shift(axes)), 0


def _pad(args, bdims, *, lo, hi, interior):
    """A batched padding value (one per example) is a select against a mask
    of where the operand lands."""
    (x, value), size = args, batch_size(args, bdims)
    x = batched(x, bdims[0], size)
    widths = {"lo": (0, *lo), "hi": (0, *hi), "interior": (0, *interior)}
    if bdims[1] is None:
        return bind(Op.PAD, x, value, **widths), 0
    padded = bind(Op.PAD, x, scalar(0, x), **widths)
    inside = F.full(x.shape[1:], True)
    mask = bind(Op.PAD, inside, False, lo=lo, hi=hi, interior=interior)
    mask = batched(mask, None, size)
    fill = bind(Op.BROADCAST, value, shape=padded.shape, dims=(0,))
    return bind(Op.SELECT, mask, padded, fill), 0


def _concatenate(args, bdims, *, axis):
    size = batch_size(args, bdims)
    return bind(Op.CONCATENATE, *(batched(x, d, size) for x, d in zip(args, bdims)),
                axis=axis + 1), 0


def _dot_general(args, bdims, *, contracting, batch):
    """Both batched: one more batch axis. One batched: its batch axis is a
    free axis of that operand, moved to the front of the result."""
    (a, b), (da, db) = args, bdims
    (ca, cb), (ba, bb) = contracting, batch
    if da is not None and db is not None:
        out = bind(Op.DOT_GENERAL, a, b, contracting=(_shift(ca), _shift(cb)),
                   batch=((0, *_shift(ba)), (0, *_shift(bb))))
        return out, 0
    if da is not None:
        out = bind(Op.DOT_GENERAL, a, b, contracting=(_shift(ca), cb), batch=(_shift(ba), bb))
        at = len(ba)
    else:
        out = bind(Op.DOT_GENERAL, a, b, contracting=(ca, _shift(cb)), batch=(ba, _shift(bb)))
        at = len(ba) + (a.ndim - len(ca) - len(ba))
    return _to_front(out, at), 0


def _to_front(x, axis: int):
    if axis == 0:
        return x
    perm = (axis, *(i for i in range(x.ndim) if i != axis))
    return bind(Op.TRANSPOSE, x, perm=perm)


@functools.lru_cache(maxsize=512)
def batched_subgraph(graph: Graph, dims: tuple, size: int) -> Graph:
    """``graph`` batched over inputs ``dims``, every output batched at 0
    (the body of a batched custom-derivative call)."""
    return vmap_graph(graph, dims, size, all_batched=True)[0]


@functools.lru_cache(maxsize=512)
def summed_for(graph: Graph, arg_dims: tuple) -> Graph:
    """A batched bwd graph whose cotangents for unbatched arguments are
    summed over the batch (the per-example cotangents of a shared value
    add up)."""
    def body(*args):
        cts = replay(graph, *args)
        return [c if d is not None else bind(Op.REDUCE_SUM, c, axes=(0,))
                for c, d in zip(cts, arg_dims)]
    return retrace([x.aval for x in graph.inputs], body, graph.input_names, graph.name)


def _get(args, bdims, *, index):
    """One result of a batched node with several: its value and batch dim."""
    return args[0][index], bdims[0][index]


def _leading(op: Op):
    """Ops batched over their leading axes (``ops.LINALG``): the batch is one
    more leading axis of every operand and result."""
    def rule(args, bdims, **attrs):
        size = batch_size(args, bdims)
        out = bind(op, *(batched(x, d, size) for x, d in zip(args, bdims)), **attrs)
        return (out, (0,) * len(out)) if isinstance(out, tuple) else (out, 0)
    return rule


BATCH = {
    **{op: _elementwise(op) for op in UNARY | BINARY | TABLE},
    Op.SELECT: _elementwise(Op.SELECT),
    Op.STOP_GRADIENT: _elementwise(Op.STOP_GRADIENT),
    **{op: _reduce(op) for op in (Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX,
                                  Op.REDUCE_MIN)},
    Op.RESHAPE: _reshape,
    Op.BROADCAST: _broadcast,
    Op.TRANSPOSE: _transpose,
    Op.SLICE: _slice,
    Op.PAD: _pad,
    Op.REV: _rev,
    Op.CONCATENATE: _concatenate,
    Op.DOT_GENERAL: _dot_general,
    **{op: _leading(op) for op in LINALG},
    Op.GET: _get,
}
"""Region primitives (``ops.REGION``) add theirs when they register
(``regions.register``); a node with several results gives a tuple of values
and a tuple of batch dims."""
# Leaves are never batched: inputs arrive batched or not, constants are shared.
NO_BATCH = frozenset({Op.INPUT, Op.CONST})


def vmap_graph(graph: Graph, in_dims: Sequence[int | None], size: int,
               all_batched: bool = False) -> tuple[Graph, list[int | None]]:
    """``graph`` over a batch of ``size`` examples: inputs with dim 0 carry
    the batch as a new leading axis. Returns the batched graph and each
    output's batch dim (0, or None for outputs the batch does not reach,
    unless ``all_batched`` broadcasts those too)."""
    in_dims = [None if d is None else 0 for d in in_dims]
    out_dims: list = []

    def body(*args):
        env = dict(zip(graph.inputs, args))
        dims = dict(zip(graph.inputs, in_dims))
        for node in graph.nodes:
            if node in env:
                continue
            if node.op is Op.CONST:
                env[node], dims[node] = const(node), None
                continue
            env[node], dims[node] = _batch_node(node, [env[x] for x in node.inputs],
                                                [dims[x] for x in node.inputs])
        outs = [env[x] for x in graph.outputs]
        found = [dims[x] for x in graph.outputs]
        if all_batched:
            outs, found = [batched(x, d, size) for x, d in zip(outs, found)], [0] * len(outs)
        out_dims.extend(found)
        return outs

    avals = [Aval((size, *x.aval.shape), x.aval.dtype, x.aval.weak) if d == 0 else x.aval
             for x, d in zip(graph.inputs, in_dims)]
    return retrace(avals, body, graph.input_names, f"vmap_{graph.name}"), out_dims


def _batch_node(node, operands: list, bdims: list):
    if all(d is None for d in bdims):
        return replay_node(node, operands), None
    with pinned_where(node.where):
        return BATCH[node.op](operands, bdims, **node.attrs)
