"""Reverse mode: the transpose rule of every linear op, and
``transpose_graph``.

A linear graph (what ``linearize`` returns) is run backwards: each node's
cotangent is pushed to its linear operands by the op's TRANSPOSE rule,
``rule(ct, *operands, **attrs) -> one cotangent (or None) per operand``,
where a linear operand arrives as a ``Lin`` (only its aval is known) and a
non-linear one as its value. Ops linear in some operands only (mul, div,
select, dot_general) transpose in those. Cotangents are summed where a value
is used twice; a value nobody pushed to has a symbolic zero cotangent.

``select`` routes cotangents with select, and the unselected branch's
cotangent stays an exact zero all the way through that branch: it travels as
a ``Masked`` cotangent (a value plus the predicate that zeroes it) through
the branch's elementwise ops and is only materialized, by a select, where it
meets other cotangents or a non-elementwise op. So a NaN or inf that the
unselected branch computes (log(0), 0 * inf in its own derivative) never
reaches any gradient, not even of an input both branches share.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir import Aval, DifferentiationError, Graph, Op, dtypes
from ..ir.ops import ELEMENTWISE, LINEAR
from ..ir.source import pinned_where
from ..record import bind, current_builder
from ..record import frontend as F
from ..record.tracer import as_tracer
from .graphs import const, depending, replay_node, retrace, scalar, zeros


class Lin:
    """A linear operand of a transpose rule: its value is what the rule
    computes the cotangent of, so only its aval is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: Aval):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)


class Masked:
    """A cotangent that is exactly zero wherever ``pred`` differs from
    ``keep``, whatever ``value`` holds there."""

    __slots__ = ("pred", "keep", "value")

    def __init__(self, pred, keep: bool, value):
        self.pred, self.keep, self.value = pred, keep, value

    def same_mask(self, other) -> bool:
        return (isinstance(other, Masked) and self.keep == other.keep
                and self.pred.node is other.pred.node)

    def materialize(self):
        zero = scalar(0, self.value)
        if self.keep:
            return F.where(self.pred, self.value, zero)
        return F.where(self.pred, zero, self.value)


class Parts(tuple):
    """The cotangent of a node with several results: one per result, each a
    value or ``None`` (zero). A get pushes its result's part; parts from
    several gets are merged."""


def _plain(ct):
    if isinstance(ct, Parts):
        return Parts(None if c is None else _plain(c) for c in ct)
    return ct.materialize() if isinstance(ct, Masked) else ct


def _get(ct, results, *, index):
    return (Parts(ct if k == index else None for k in range(len(results.aval))),)


def _lin(x) -> bool:
    return isinstance(x, Lin)


def _only(ct, *operands):
    """The same cotangent for every linear operand."""
    return tuple(ct if _lin(x) else None for x in operands)


def _is_one(x) -> bool:
    """A constant 1 (or a broadcast of one): the seed of a gradient."""
    node = x.node
    if node.op is Op.BROADCAST:
        node = node.inputs[0]
    return node.op is Op.CONST and bool(np.all(node.attrs["value"].value == 1))


def _times(ct, factor):
    """``ct * factor``, without a multiplication by the seed's ones."""
    return factor if _is_one(ct) and ct.shape == factor.shape else ct * factor


def _mul(ct, x, y):
    if _lin(x) and _lin(y):
        raise DifferentiationError("mul of two values that both depend on the tangents is "
                                   "not linear; a JVP rule wrote a non-linear tangent")
    return (_times(ct, y) if _lin(x) else None, _times(ct, x) if _lin(y) else None)


def _div(ct, x, y):
    if _lin(y):
        raise DifferentiationError("div by a value that depends on the tangents is not "
                                   "linear; a JVP rule wrote a non-linear tangent")
    return (ct / y, None)


def _ldexp(ct, x, n):
    """x·2^n is linear in x: the cotangent is scaled the same way."""
    if _lin(n):
        raise DifferentiationError("ldexp with an exponent that depends on the tangents is "
                                   "not linear; a JVP rule wrote a non-linear tangent")
    return (bind(Op.LDEXP, ct, n), None)


def _cast(ct, x, *, dtype):
    if ct.dtype in dtypes.COMPLEX and x.dtype not in dtypes.COMPLEX:
        ct = bind(Op.REAL, ct)  # JAX's: a real value made complex takes the real part back
    return (ct if ct.dtype == x.dtype else bind(Op.CAST, ct, dtype=x.dtype),)


def _complex(ct, re, im):
    """JAX's convention: ``complex(re, im)`` sends back ``real(ct)`` and
    ``-imag(ct)``."""
    return (bind(Op.REAL, ct) if _lin(re) else None,
            bind(Op.NEG, bind(Op.IMAG, ct)) if _lin(im) else None)


def _reduce_sum(ct, x, *, axes):
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    return (bind(Op.BROADCAST, ct, shape=x.shape, dims=kept),)


def _broadcast(ct, x, *, shape, dims):
    """Sum over the new axes and over the size-1 axes that were stretched."""
    new = [i for i in range(len(shape)) if i not in dims]
    stretched = [d for size, d in zip(x.shape, dims) if size == 1 and shape[d] != 1]
    axes = tuple(sorted(new + stretched))
    summed = bind(Op.REDUCE_SUM, ct, axes=axes) if axes else ct
    return (F.reshape(summed, x.shape),)


def _transpose(ct, x, *, perm):
    return (bind(Op.TRANSPOSE, ct, perm=tuple(int(i) for i in np.argsort(perm))),)


def _slice(ct, x, *, start, limit, stride):
    """Scatter back: pad with zeros before, after and between the taken
    elements."""
    hi = tuple(n - (b + (c - 1) * s + 1) if c else n - b
               for n, b, s, c in zip(x.shape, start, stride, ct.shape))
    interior = tuple(s - 1 for s in stride)
    return (bind(Op.PAD, ct, scalar(0, ct), lo=tuple(start), hi=hi, interior=interior),)


def _unpad(ct, shape, lo, interior):
    limit = tuple(a + (n - 1) * (i + 1) + 1 if n else a for a, n, i in zip(lo, shape, interior))
    return bind(Op.SLICE, ct, start=tuple(lo), limit=limit,
                stride=tuple(i + 1 for i in interior))


def _pad(ct, x, value, *, lo, hi, interior):
    inner = _unpad(ct, x.shape, lo, interior)
    every = tuple(range(ct.ndim))
    ct_value = None
    if _lin(value):
        ct_value = bind(Op.REDUCE_SUM, ct, axes=every) - bind(Op.REDUCE_SUM, inner, axes=every)
    return (inner if _lin(x) else None, ct_value)


def _concatenate(ct, *xs, axis):
    out, start = [], 0
    for x in xs:
        stop = start + x.shape[axis]
        if _lin(x):
            lo = tuple(start if i == axis else 0 for i in range(ct.ndim))
            hi = tuple(stop if i == axis else n for i, n in enumerate(ct.shape))
            out.append(bind(Op.SLICE, ct, start=lo, limit=hi, stride=(1,) * ct.ndim))
        else:
            out.append(None)
        start = stop
    return tuple(out)


def _select(ct, pred, x, y):
    return (None, Masked(pred, True, ct) if _lin(x) else None,
            Masked(pred, False, ct) if _lin(y) else None)


def _ranges(*lengths):
    start = 0
    for n in lengths:
        yield tuple(range(start, start + n))
        start += n


def _dot_lhs(ct, a_shape_ndim, b, contracting, batch, swap=False):
    """Cotangent of the left operand of dot_general (JAX's formulation)."""
    (ca, cb), (ba, bb) = contracting, batch
    a_kept = [i for i in range(a_shape_ndim) if i not in ca and i not in ba]
    b_kept = [i for i in range(b.ndim) if i not in cb and i not in bb]
    if swap:
        ans_batch, ans_b, _ = _ranges(len(ba), len(b_kept), len(a_kept))
    else:
        ans_batch, _, ans_b = _ranges(len(ba), len(a_kept), len(b_kept))
    dims = {"contracting": (tuple(ans_b), tuple(b_kept)), "batch": (tuple(ans_batch), tuple(bb))}
    ca_by_b = [ca[i] for i in np.argsort(cb)]
    perm = tuple(int(i) for i in np.argsort(list(ba) + a_kept + ca_by_b))
    out = bind(Op.DOT_GENERAL, ct, b, **dims)
    return bind(Op.TRANSPOSE, out, perm=perm) if perm != tuple(range(len(perm))) else out


def _dot_general(ct, a, b, *, contracting, batch):
    if _lin(a) and _lin(b):
        raise DifferentiationError("dot_general of two values that both depend on the "
                                   "tangents is not linear")
    if _lin(a):
        return (_dot_lhs(ct, a.ndim, b, contracting, batch), None)
    (ca, cb), (ba, bb) = contracting, batch
    swapped = ((cb, ca), (bb, ba))
    return (None, _dot_lhs(ct, b.ndim, a, swapped[0], swapped[1], swap=True))


def _triangular_solve(ct, a, b, *, lower, transpose_a, unit_diagonal):
    """x = op(a)⁻¹ b is linear in b: b's cotangent is op(a)⁻ᵀ ct, one more
    triangular solve with the same factor."""
    if _lin(a):
        raise DifferentiationError("triangular_solve with a matrix that depends on the "
                                   "tangents is not linear; a JVP rule wrote a non-linear "
                                   "tangent")
    return (None, bind(Op.TRIANGULAR_SOLVE, a, ct, lower=lower, transpose_a=not transpose_a,
                       unit_diagonal=unit_diagonal))


TRANSPOSE = {
    Op.NEG: lambda ct, x: (-ct,),
    Op.ADD: _only,
    Op.SUB: lambda ct, x, y: (ct if _lin(x) else None, -ct if _lin(y) else None),
    Op.MUL: _mul,
    Op.DIV: _div,
    Op.CAST: _cast,
    Op.REAL: lambda ct, x: (bind(Op.COMPLEX, ct, F.zeros_like(ct)),),
    Op.IMAG: lambda ct, x: (bind(Op.COMPLEX, F.zeros_like(ct), bind(Op.NEG, ct)),),
    Op.CONJ: lambda ct, x: (bind(Op.CONJ, ct),),
    Op.COMPLEX: _complex,
    Op.SELECT: _select,
    Op.REDUCE_SUM: _reduce_sum,
    Op.RESHAPE: lambda ct, x, *, shape: (F.reshape(ct, x.shape),),
    Op.BROADCAST: _broadcast,
    Op.TRANSPOSE: _transpose,
    Op.SLICE: _slice,
    Op.PAD: _pad,
    Op.REV: lambda ct, x, *, axes: (bind(Op.REV, ct, axes=axes),),
    Op.CONCATENATE: _concatenate,
    Op.DOT_GENERAL: _dot_general,
    Op.LDEXP: _ldexp,
    Op.TRIANGULAR_SOLVE: _triangular_solve,
    Op.GET: _get,
}

# Ops linear in some operands only; the rest of TRANSPOSE's keys are LINEAR
# and the projection get. Linear region primitives (custom_lin) add themselves
# when they register (``regions.register``).
LINEAR_IN_SOME = frozenset({Op.MUL, Op.DIV, Op.SELECT, Op.DOT_GENERAL, Op.LDEXP,
                            Op.TRIANGULAR_SOLVE})
TRANSPOSABLE = set(LINEAR | LINEAR_IN_SOME | {Op.GET})


def _accumulate(cts: dict, node, ct) -> None:
    old = cts.get(node)
    if old is None:
        cts[node] = ct
    elif isinstance(old, Parts):
        cts[node] = Parts(b if a is None else a if b is None else _plain(a) + _plain(b)
                          for a, b in zip(old, ct))
    elif isinstance(old, Masked) and old.same_mask(ct):
        cts[node] = Masked(old.pred, old.keep, old.value + ct.value)
    else:
        cts[node] = _plain(old) + _plain(ct)


def _push(node, ct, env: dict, linear: set, cts: dict) -> None:
    """Transpose one node; a masked cotangent stays masked through
    elementwise ops (position i of the result only reads position i)."""
    rule = TRANSPOSE.get(node.op)
    if rule is None:
        raise DifferentiationError(f"{node.op.value} at {node.where or '?'} is not linear in "
                                   f"the tangents and cannot be transposed")
    mask = ct if isinstance(ct, Masked) and node.op in ELEMENTWISE else None
    operands = [Lin(x.aval) if x in linear else env[x] for x in node.inputs]
    with pinned_where(node.where):
        pushed = rule(mask.value if mask else _plain(ct), *operands, **node.attrs)
        for x, c in zip(node.inputs, pushed):
            if x in linear and c is not None:
                c = Masked(mask.pred, mask.keep, _plain(c)) if mask else c
                _accumulate(cts, x, c)


def transpose_graph(graph: Graph, linear: Sequence[bool], seeds=None) -> Graph:
    """The transpose of ``graph``, which is linear in the inputs marked in
    ``linear``. Inputs: the other (non-linear) inputs, then one cotangent per
    output, unless ``seeds`` gives the cotangents as constants (a gradient's
    1, which the rules then multiply by without a node). Outputs: the
    cotangent of each linear input."""
    lin_inputs = [x for x, m in zip(graph.inputs, linear) if m]
    fixed = [x for x, m in zip(graph.inputs, linear) if not m]
    lin = depending(graph, lin_inputs)

    def body(*args):
        env = dict(zip(fixed, args[:len(fixed)]))
        for node in graph.nodes:
            if node not in lin and node not in env:
                env[node] = const(node) if node.op is Op.CONST else \
                    replay_node(node, [env[x] for x in node.inputs])
        given = args[len(fixed):] if seeds is None else [as_tracer(np.asarray(s, x.dtype),
                                                                    current_builder())
                                                          for s, x in zip(seeds, graph.outputs)]
        cts: dict = {}
        for out, ct in zip(graph.outputs, given):
            if out in lin:
                _accumulate(cts, out, ct)
        for node in reversed(graph.nodes):
            if node in lin and node.op is not Op.INPUT and node in cts:
                _push(node, cts.pop(node), env, lin, cts)
        return [_plain(cts[x]) if x in cts else zeros(x.aval.strong()) for x in lin_inputs]

    avals = [x.aval for x in fixed]
    names = [graph.input_names[graph.index(x)] for x in fixed]
    if seeds is None:
        avals += [x.aval.strong() for x in graph.outputs]
        names += [f"ct{i}" for i in range(len(graph.outputs))]
    return retrace(avals, body, names, f"transpose_{graph.name}")
