"""``cond`` and ``switch``: one region primitive, ``cond``, with all of its
rules.

A ``cond`` node reads an integer index and operands and carries one closed
body per branch, every branch taking the same inputs (the operands, then
every value some branch captures). Its meaning runs the branch the index
picks, clamped to the branches there are, as JAX's ``switch`` does; nothing
else is computed, so a NaN of an untaken branch never reaches a value.

Derivatives: the JVP is two nodes, a ``cond`` of the branches' primal parts
that also returns every branch's residuals (each branch zeros for the
others'), and a ``cond`` of their linear parts reading them, so linearize's
dependency split needs no rule of its own and reverse mode transposes the
linear ``cond`` branch by branch: only the taken branch's derivative flows.
Under ``vmap`` an unmapped index batches the branches; a mapped one runs
every branch and selects per element with ``where``, whose derivatives route
an exact zero to the unselected side (the transpose rule's masked
cotangents), so untaken NaNs reach no gradient either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np

from ..ir import Aval, DTypeError, Op, ShapeError, SubGraph, dtypes
from ..ir.eval import namespace_rule
from ..ir.pytree import tree_flatten, tree_unflatten
from ..ir.source import user_where
from ..record import Tracer, bind, replay
from ..record import frontend as F
from ..transforms.graphs import is_float, retrace, zeros
from ..transforms.linearize import linearize_graph
from ..transforms.regions import RegionRules, register
from ..transforms.transpose import Lin, transpose_graph
from ..transforms.vmap import batch_size, batched_subgraph
from ..typing import ArrayLike
from .common import as_values, cast_weak, check_same, examples, trace_body, union, with_inputs

_R = TypeVar("_R")

BRANCHES_DIFFER = "return the same structure, shapes and dtypes from every branch"


def switch(index: ArrayLike, branches: Iterable[Callable[..., _R]], *operands: Any) -> _R:
    """``branches[index](*operands)``, the index clamped to
    ``[0, len(branches) - 1]``. A concrete index picks its branch now; a
    traced one records every branch and picks at run time."""
    branches = list(branches)
    where = user_where()
    if not branches:
        raise ValueError(f"switch at {where}: give at least one branch")
    if not isinstance(index, Tracer):
        return branches[int(np.clip(np.asarray(index), 0, len(branches) - 1))](*operands)
    _check_index(index.aval, where, "switch")
    leaves, in_tree = tree_flatten(operands)
    graphs, out_tree, caps = _branches(branches, leaves, in_tree, where)
    index = index if index.dtype == dtypes.int32 else F.astype(index, np.int32)
    outs = bind(Op.COND, index, *as_values(leaves), *caps,
                branches=tuple(SubGraph(g) for g in graphs))
    return tree_unflatten(out_tree, list(outs))


def cond(pred: ArrayLike, true_fun: Callable[..., _R], false_fun: Callable[..., _R],
         *operands: Any) -> _R:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``;
    ``pred`` a scalar (under ``vmap``, one per element), a number true when
    it is non-zero (``pred != 0``, as JAX: NaN is true)."""
    if not isinstance(pred, Tracer):
        value = np.asarray(pred)
        _check_index(Aval(value.shape, value.dtype), user_where(), "cond", numbers=True)
        return (true_fun if bool(value) else false_fun)(*operands)
    _check_index(pred.aval, user_where(), "cond", numbers=True)
    truth = pred if pred.dtype == dtypes.bool_ else F.not_equal(pred, 0)
    return switch(F.astype(truth, np.int32), [false_fun, true_fun], *operands)


def _check_index(aval: Aval, where: str, name: str, numbers: bool = False) -> None:
    """A scalar integer or bool (``numbers``: a float too, for a predicate)."""
    if aval.shape != ():
        raise ShapeError(f"{name} at {where}: the predicate has shape {aval.shape}; outside "
                         f"vmap it must be a scalar. Reduce it (inp.any, inp.all) or map the "
                         f"function over the elements with isokernel.vmap")
    allowed = dtypes.INTS | {dtypes.bool_} | (dtypes.FLOATS if numbers else frozenset())
    if aval.dtype not in allowed:
        raise DTypeError(f"{name} at {where}: the index is {aval}; give an integer or bool "
                         f"scalar")


def _branches(branches, leaves, in_tree, where: str):
    """Each branch recorded on the operands, all with one signature."""
    traced = [trace_body(lambda *xs, b=b: b(*tree_unflatten(in_tree, xs)), examples(leaves),
                         getattr(b, "__name__", f"branch{k}")) for k, b in enumerate(branches)]
    out_tree = traced[0][1]
    want = _common_avals(traced)
    graphs = []
    for graph, tree, _, weak in traced:
        graph = cast_weak(graph, want, weak)
        check_same(where, "a branch of cond/switch", BRANCHES_DIFFER,
                   [x.aval.strong() for x in graph.outputs], want, tree, out_tree)
        graphs.append(graph)
    caps = union(*(c for _, _, c, _ in traced))
    return ([with_inputs(g, len(leaves), c, caps) for g, (_, _, c, _) in zip(graphs, traced)],
            out_tree, caps)


def _common_avals(traced) -> list[Aval]:
    """Per output, the first strongly typed aval any branch gives (a Python
    scalar in one branch takes the others' dtype)."""
    found = []
    for k, first in enumerate(traced[0][0].outputs):
        strong = [g.outputs[k].aval for g, _, _, weak in traced
                  if k < len(weak) and not weak[k]]
        found.append((strong[0] if strong else first.aval).strong())
    return found


# --- the rules ----------------------------------------------------------------------------

def _shape(index: Aval, *args: Aval, branches) -> tuple[Aval, ...]:
    if index.shape != () or index.dtype != dtypes.int32:
        raise ShapeError(f"cond: the index is {index}; it must be an int32 scalar")
    for b in branches:
        expected = [x.aval.strong() for x in b.graph.inputs]
        if [a.strong() for a in args] != expected:
            raise ShapeError(f"cond: operands ({', '.join(map(str, args))}) do not match the "
                             f"branch {b.graph.name!r} ({', '.join(map(str, expected))})")
    return tuple(x.aval.strong() for x in branches[0].graph.outputs)


def _eval(xp, index, *args, branches) -> list:
    """The branch the index picks, clamped; nothing else runs. In the array
    namespace ``xp`` (``ir.eval.ArrayNamespace``): on a device, the index is
    the one value brought to the host."""
    taken = branches[min(max(int(index), 0), len(branches) - 1)]
    return xp.run_graph(taken.graph, args)


def _jvp(operands, tangents, *, branches):
    """A ``cond`` of the branches' primal parts (outputs, then every
    branch's residuals, zeros for the branches not taken) and a ``cond`` of
    their linear parts: one linear in the tangents, which transposes."""
    index, args = operands[0], operands[1:]
    diff = [t is not None and is_float(x.aval) for x, t in zip(args, tangents[1:])]
    split = [linearize_graph(b.graph, diff) for b in branches]
    k = len(branches[0].graph.outputs)
    res_avals = [x.aval.strong() for p, _ in split for x in p.outputs[k:]]
    slots = _residual_slots([p for p, _ in split], k)
    known = [_padded_primal(p, k, s, res_avals) for (p, _), s in zip(split, slots)]
    outs = bind(Op.COND, index, *args, branches=tuple(map(SubGraph, known)))
    residuals = outs[k:]
    given = [t for t, d in zip(tangents[1:], diff) if d]
    linear = [_reading_slots(lin, s, res_avals, given) for (_, lin), s in zip(split, slots)]
    tangent = bind(Op.COND, index, *residuals, *given, branches=tuple(map(SubGraph, linear)))
    return tuple(outs[:k]), tuple(tangent)


def _residual_slots(primals, k: int) -> list[list[int]]:
    """Where each branch's residuals sit among all branches' residuals."""
    slots, start = [], 0
    for p in primals:
        n = len(p.outputs) - k
        slots.append(list(range(start, start + n)))
        start += n
    return slots


def _padded_primal(primal, k: int, slots: list[int], res_avals: list[Aval]):
    """A branch's primal part returning its outputs and every branch's
    residual slot: its own residuals, zeros in the other branches' slots."""
    def body(*xs):
        outs = replay(primal, *xs)
        own = dict(zip(slots, outs[k:]))
        return outs[:k] + [own[i] if i in own else zeros(a) for i, a in enumerate(res_avals)]
    return retrace([x.aval for x in primal.inputs], body, primal.input_names, primal.name)


def _reading_slots(linear, slots: list[int], res_avals: list[Aval], given):
    """A branch's linear part taking every residual slot, then the tangents,
    and reading its own slots."""
    avals = list(res_avals) + [t.aval.strong() for t in given]
    n = len(res_avals)

    def body(*xs):
        return replay(linear, *(xs[i] for i in slots), *xs[n:])
    return retrace(avals, body, name=linear.name)


def _transpose(cts, index, *operands, branches):
    """Branch by branch: a ``cond`` of the transposed branches, taking the
    non-linear operands and the outputs' cotangents (zeros where none came)
    and giving the linear operands' cotangents."""
    linear = [isinstance(x, Lin) for x in operands]
    fixed = [x for x, is_lin in zip(operands, linear) if not is_lin]
    outs = branches[0].graph.outputs
    given = [zeros(x.aval.strong()) if c is None else c for c, x in zip(cts, outs)]
    flipped = tuple(SubGraph(transpose_graph(b.graph, linear)) for b in branches)
    found = iter(bind(Op.COND, index, *fixed, *given, branches=flipped))
    return (None,) + tuple(next(found) if is_lin else None for is_lin in linear)


def _batch(args, bdims, *, branches):
    """Unmapped index: the branches batched. Mapped: every branch batched,
    then ``where`` per element (the index clamped as ``_eval`` clamps)."""
    size = batch_size(args, bdims)
    batched = tuple(SubGraph(batched_subgraph(b.graph, tuple(bdims[1:]), size))
                    for b in branches)
    if bdims[0] is None:
        outs = bind(Op.COND, args[0], *args[1:], branches=batched)
        return outs, (0,) * len(outs)
    picked = F.clip(args[0], 0, len(branches) - 1)
    results = [replay(b.graph, *args[1:]) for b in batched]
    chosen = results[-1]
    for j in range(len(branches) - 2, -1, -1):
        chosen = [F.where(_lanes(F.equal(picked, j), r), r, c)
                  for r, c in zip(results[j], chosen)]
    return tuple(chosen), (0,) * len(chosen)


def _lanes(mask, like):
    """A per-element mask of shape (B,) shaped to broadcast against ``like``."""
    return F.reshape(mask, (mask.shape[0],) + (1,) * (like.ndim - 1))


def _cost(node, flops) -> int:
    """The dearest branch (which one runs is known only at run time)."""
    return max(flops(b.graph) for b in node.attrs["branches"])


register(RegionRules(Op.COND, shape=_shape, eval=namespace_rule(Op.COND, _eval),
                     jvp=_jvp, transpose=_transpose, batch=_batch, cost=_cost))
