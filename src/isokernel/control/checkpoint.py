"""``checkpoint`` (alias ``remat``): the region primitive ``checkpoint`` with
all of its rules.

A ``checkpoint`` node carries one closed body and means exactly that body.
What it changes is reverse mode: its JVP is two nodes, the body itself and a
``checkpoint`` whose body recomputes the primal from the inputs and returns
only the tangents. That second node is linear in the tangents and reads only
the inputs, so linearize keeps the inputs, not the body's intermediates, and
its transpose is again a ``checkpoint`` that recomputes the forward pass
inside the reverse pass: memory for time. The nodes stay regions up to the
strategies (inlining them would let common-subexpression merging undo the
recomputation); the reference runs each body where its node runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ..ir import Aval, Op, ShapeError, SubGraph
from ..ir.eval import namespace_rule
from ..ir.pytree import tree_flatten, tree_unflatten
from ..record import bind, current_builder, replay
from ..transforms.graphs import is_float, retrace, zeros
from ..transforms.linearize import linearize_graph
from ..transforms.regions import RegionRules, register
from ..transforms.transpose import Lin, transpose_graph
from ..transforms.vmap import batch_size, batched_subgraph
from .common import as_values, trace_body

_F = TypeVar("_F", bound=Callable[..., Any])


def checkpoint(fun: _F) -> _F:
    """``fun``, whose intermediates reverse mode recomputes instead of
    keeping (JAX's ``checkpoint``/``remat``)."""
    @functools.wraps(fun)
    def rematerialized(*args):
        if current_builder() is None:
            return fun(*args)
        leaves, tree = tree_flatten(args)
        values = as_values(leaves)
        graph, out_tree, caps, _ = trace_body(lambda *xs: fun(*tree_unflatten(tree, xs)), values,
                                           getattr(fun, "__name__", "f"))
        outs = bind(Op.CHECKPOINT, *values, *caps, body=SubGraph(graph))
        return tree_unflatten(out_tree, list(outs))
    return rematerialized


remat = checkpoint


def _shape(*args: Aval, body) -> tuple[Aval, ...]:
    if [x.aval.strong() for x in body.graph.inputs] != [a.strong() for a in args]:
        raise ShapeError(f"checkpoint: operands ({', '.join(map(str, args))}) do not match "
                         f"its body's inputs")
    return tuple(x.aval.strong() for x in body.graph.outputs)


def _eval(xp, *args, body) -> list:
    return xp.run_graph(body.graph, args)


def _jvp(operands, tangents, *, body):
    """The body, and a ``checkpoint`` of its tangents that recomputes the
    primal part from the inputs and then applies the linear part (linear in
    the tangents, so it transposes even when the body holds loops)."""
    graph = body.graph
    diff = [t is not None and is_float(x.aval) for x, t in zip(operands, tangents)]
    float_out = [i for i, x in enumerate(graph.outputs) if is_float(x.aval)]
    primal_part, linear_part = linearize_graph(graph, diff, float_out)
    k, n = len(graph.outputs), len(graph.inputs)

    def only_tangents(*xs):
        residuals = replay(primal_part, *xs[:n])[k:]
        return replay(linear_part, *residuals, *xs[n:])
    given = [t for t, d in zip(tangents, diff) if d]
    avals = [x.aval for x in graph.inputs] + [t.aval.strong() for t in given]
    tangent_body = retrace(avals, only_tangents, name=f"jvp_{graph.name}")
    primal = bind(Op.CHECKPOINT, *operands, body=body)
    found = dict(zip(float_out, bind(Op.CHECKPOINT, *operands, *given,
                                     body=SubGraph(tangent_body))))
    return tuple(primal), tuple(found.get(i) for i in range(k))


def _transpose(cts, *operands, body):
    """A ``checkpoint`` of the transposed body: it recomputes what it needs
    from the non-linear operands inside the reverse pass."""
    linear = [isinstance(x, Lin) for x in operands]
    fixed = [x for x, is_lin in zip(operands, linear) if not is_lin]
    given = [zeros(o.aval.strong()) if c is None else c for c, o in zip(cts, body.graph.outputs)]
    flipped = SubGraph(transpose_graph(body.graph, linear))
    found = iter(bind(Op.CHECKPOINT, *fixed, *given, body=flipped))
    return tuple(next(found) if is_lin else None for is_lin in linear)


def _batch(args, bdims, *, body):
    size = batch_size(args, bdims)
    outs = bind(Op.CHECKPOINT, *args,
                body=SubGraph(batched_subgraph(body.graph, tuple(bdims), size)))
    return outs, (0,) * len(outs)


register(RegionRules(Op.CHECKPOINT, shape=_shape, eval=namespace_rule(Op.CHECKPOINT, _eval),
                     jvp=_jvp, transpose=_transpose, batch=_batch))
