"""``while_loop``: the region primitive ``while`` and the two that carry its
reverse mode, ``while_lin`` and ``while_vjp``, with all of their rules.

A ``while`` node reads the initial carry and the captured values and
carries two closed bodies, ``cond`` (carry, captures -> predicate) and
``body`` (carry, captures -> carry). Its meaning runs the body while the
predicate holds, keeping only the carry (no tape: memory O(carry)).

*Lanes.* A predicate with a shape (the batch a ``vmap`` of the loop maps)
is one predicate per lane, a prefix of every carry's shape: each lane runs
until its own predicate fails and then keeps its carry, bit for bit, while
the others go on; ``native`` compiles that into one C ``while`` per pixel.
Outside ``vmap`` a predicate must be a scalar.

*Derivatives.* Forward mode is one ``while`` over the carry and its tangent
(the JVP of the body; a frozen lane keeps its tangent too). Reverse mode
splits that node (``linearize.PARTIAL_EVAL``): the primal loop runs forward
with no tape, and the tangent map becomes ``while_lin``, a linear node whose
transpose is ``while_vjp``. ``while_vjp`` runs the primal loop once to count
its T steps, again to keep the carry every K steps (K = ``checkpoint_every``,
else ceil(sqrt(T))), then walks the checkpoints backwards, recomputing the
K carries of each segment and pulling the cotangent through the body's VJP
one step at a time: memory O(sqrt(T) * carry), time about three primal
loops plus one VJP loop. Forward mode over that reverse pass (``hessian`` =
``jacfwd(grad)``) is the reverse sweep of the JVP'd loop, checkpointed the
same way (``_vjp_jvp``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..ir import Aval, DifferentiationError, Op, ShapeError, SubGraph, dtypes
from ..ir.eval import namespace_rule
from ..ir.pytree import tree_flatten, tree_unflatten
from ..ir.source import user_where
from ..record import ShapeDtype, Tracer, bind, current_builder, replay
from ..record import frontend as F
from ..transforms.graphs import is_float, retrace, zeros
from ..transforms.jvp import jvp_graph
from ..transforms.linearize import Split, vjp_graph
from ..transforms.regions import RegionRules, register
from ..transforms.vmap import batch_size, batched, batched_subgraph, vmap_graph
from .common import (
    batch_body,
    batch_operands,
    carry_dims,
    carry_values,
    cast_weak,
    check_same,
    eager_avals,
    record_carry,
    settle_eager,
    strong_aval,
    trace_body,
    union,
    with_inputs,
)

_C = TypeVar("_C")  # a loop's carry

CARRY_CHANGED = ("return a carry of the same structure, shapes and dtypes as init_val (cast "
                 "with astype where the body changes a dtype)")
SECOND_ORDER = ("a second derivative through the tangent map of a while_loop is not "
                "supported: use hessian = jacfwd(grad) (or jacfwd(jacfwd(f))), whose rules "
                "cover it")


def while_loop(cond_fun: Callable[[_C], Any], body_fun: Callable[[_C], _C], init_val: _C, *,
               checkpoint_every: int | None = None) -> _C:
    """JAX's ``while_loop``: ``body_fun`` applied to the carry while
    ``cond_fun(carry)`` holds. ``checkpoint_every``: the carry is kept every
    that many steps for reverse mode (default: every sqrt(T) steps)."""
    where = user_where()
    if checkpoint_every is not None and (not isinstance(checkpoint_every, int)
                                         or checkpoint_every < 1):
        raise ValueError(f"while_loop at {where}: checkpoint_every={checkpoint_every!r}; give "
                         f"a positive number of steps, or None for sqrt(T)")
    leaves, tree = tree_flatten(init_val)
    if current_builder() is None:
        return _eager(cond_fun, body_fun, init_val, where)
    n = len(leaves)

    def body(examples):
        return trace_body(lambda *xs: body_fun(tree_unflatten(tree, xs)), examples, "body")

    def record(want):
        shaped = [ShapeDtype(a.shape, a.dtype) for a in want]
        cond_g, _, cond_caps, _ = trace_body(
            lambda *xs: _truth(cond_fun(tree_unflatten(tree, xs)), where), shaped, "cond")
        _check_predicate(cond_g.outputs[0].aval, where)
        body_g, body_tree, body_caps, weak = body(shaped)
        body_g = cast_weak(body_g, want, weak)
        check_same(where, "the body of while_loop", CARRY_CHANGED,
                   [x.aval.strong() for x in body_g.outputs], want, body_tree, tree)
        return cond_g, cond_caps, body_g, body_caps
    want, (cond_g, cond_caps, body_g, body_caps) = record_carry(leaves, record, body)
    caps = union(cond_caps, body_caps)
    outs = bind(Op.WHILE, *carry_values(leaves, want), *caps,
                cond=SubGraph(with_inputs(cond_g, n, cond_caps, caps)),
                body=SubGraph(with_inputs(body_g, n, body_caps, caps)), n_carry=n,
                checkpoint_every=checkpoint_every or 0, jvp_of=None)
    return tree_unflatten(tree, list(outs))


def _truth(value, where: str):
    """The predicate as a bool (a number is true when non-zero)."""
    dtype = value.dtype if isinstance(value, Tracer) else np.asarray(value).dtype
    return value if dtype == dtypes.bool_ else F.not_equal(value, 0)


def _check_predicate(aval: Aval, where: str) -> None:
    if aval.shape != ():
        raise ShapeError(f"while_loop at {where}: cond_fun returns shape {aval.shape}; outside "
                         f"vmap it must return a scalar. Reduce it (inp.any, inp.all) or map "
                         f"the loop over the elements with isokernel.vmap, where each element "
                         f"stops on its own")


def _eager(cond_fun, body_fun, init_val, where: str):
    """Outside a recording: the NumPy meaning, with the same checks."""
    val = init_val
    leaves, tree = tree_flatten(init_val)
    init, want = leaves, [strong_aval(x) for x in leaves]
    while True:
        pred = np.asarray(cond_fun(val))
        _check_predicate(Aval(pred.shape, pred.dtype), where)
        if not pred:
            return val
        val = body_fun(val)
        leaves, got_tree = tree_flatten(val)
        if init is not None and got_tree == tree:  # the first step settles weak leaves
            want, init = settle_eager(init, want, leaves), None
        check_same(where, "the body of while_loop", CARRY_CHANGED, eager_avals(leaves, want),
                   want, got_tree, tree)


# --- lanes --------------------------------------------------------------------------------
#
# The EVAL rules below run in an array namespace ``xp`` (``ir.eval.ArrayNamespace``):
# NumPy for the reference, the device's for the GPU strategies, whose ``any`` of a
# predicate is the one value brought to the host per step.

def lane_mask(xp, active, value):
    """A predicate of shape p, shaped to select over ``value`` (shape p + rest)."""
    return xp.reshape(active, xp.shape(active) + (1,) * (xp.ndim(value) - xp.ndim(active)))


def _step(xp, body, carry: list, caps: list, active) -> list:
    """One step: every lane the body runs; a lane whose predicate failed
    keeps its carry, bit for bit."""
    new = xp.run_graph(body.graph, carry + caps)
    if xp.ndim(active) == 0:
        return new
    return [xp.where(lane_mask(xp, active, c), x, c) for x, c in zip(new, carry)]


def _predicate(xp, cond, carry: list, caps: list):
    return xp.run_graph(cond.graph, carry + caps)[0]


def _own(xp, values: list, args) -> list:
    """Results never the caller's arrays (a loop that ran no step)."""
    return [xp.copy(v) if any(v is a for a in args) else v for v in values]


# --- while: the rules ---------------------------------------------------------------------

def _shape(*args: Aval, cond, body, n_carry, checkpoint_every, jvp_of) -> tuple[Aval, ...]:
    carry = [a.strong() for a in args[:n_carry]]
    for graph, what in ((cond.graph, "cond"), (body.graph, "body")):
        if [x.aval.strong() for x in graph.inputs] != [a.strong() for a in args]:
            takes = ", ".join(str(x.aval) for x in graph.inputs)
            raise ShapeError(f"while: its {what} takes ({takes}), the operands are "
                             f"({', '.join(map(str, args))})")
    if [x.aval.strong() for x in body.graph.outputs] != carry:
        raise ShapeError("while: the body returns another carry than it takes")
    pred = cond.graph.outputs[0].aval
    if pred.dtype != dtypes.bool_ or any(c.shape[:pred.ndim] != pred.shape for c in carry):
        raise ShapeError(f"while: the predicate is {pred}; it must be bool, a scalar or one "
                         f"per lane (a prefix of every carry's shape)")
    return tuple(carry)


def _eval(xp, *args, cond, body, n_carry, checkpoint_every, jvp_of) -> list:
    carry, caps = list(args[:n_carry]), list(args[n_carry:])
    active = _predicate(xp, cond, carry, caps)
    while xp.any(active):
        carry = _step(xp, body, carry, caps, active)
        active = _predicate(xp, cond, carry, caps)
    return _own(xp, carry, args)


def _float_positions(avals) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(avals) if is_float(a))


def _jvp(operands, tangents, *, cond, body, n_carry, checkpoint_every, jvp_of):
    """One ``while`` over the carry and its tangent, the body's JVP; the
    node keeps its primal bodies (``jvp_of``) for reverse mode's split."""
    n, caps = n_carry, operands[n_carry:]
    carry_avals = [x.aval.strong() for x in body.graph.inputs[:n]]
    tpos = _float_positions(carry_avals)
    cpos = tuple(i for i, (x, t) in enumerate(zip(caps, tangents[n:]))
                 if t is not None and is_float(x.aval))
    both_cond, both_body = _jvp_bodies(cond.graph, body.graph, n, tpos, cpos)
    tcarry = [zeros(carry_avals[i]) if tangents[i] is None else tangents[i] for i in tpos]
    tcaps = [tangents[n + i] for i in cpos]
    outs = bind(Op.WHILE, *operands[:n], *tcarry, *caps, *tcaps, cond=SubGraph(both_cond),
                body=SubGraph(both_body), n_carry=n + len(tpos),
                checkpoint_every=checkpoint_every, jvp_of=(cond, body, n, tpos, cpos))
    found = dict(zip(tpos, outs[n:]))
    return tuple(outs[:n]), tuple(found.get(i) for i in range(n))


def _jvp_bodies(cond, body, n: int, tpos, cpos):
    """The loop over (carry, tangent carry, captures, tangent captures):
    the predicate of the primal carry and the body's JVP."""
    c = len(body.inputs) - n
    diff = [i in tpos for i in range(n)] + [i in cpos for i in range(c)]
    jg = jvp_graph(body, diff, wrt=list(tpos))
    inputs = [x.aval for x in body.inputs]
    avals = inputs[:n] + [inputs[i].strong() for i in tpos] + inputs[n:] + \
        [inputs[n + i].strong() for i in cpos]
    m = len(tpos)

    def step(*xs):
        carry, tcarry, caps, tcaps = xs[:n], xs[n:n + m], xs[n + m:n + m + c], xs[n + m + c:]
        return replay(jg, *carry, *caps, *tcarry, *tcaps)

    def test(*xs):
        return replay(cond, *xs[:n], *xs[n + m:n + m + c])
    return retrace(avals, test, name="cond_jvp"), retrace(avals, step, name="body_jvp")


def _partial_eval(node, operands, known):
    """Reverse mode's split of a JVP'd loop: the primal loop (no tape) is
    known; the tangents are ``while_lin`` of the initial carry and the
    captures, read back from the residuals."""
    if node.attrs["jvp_of"] is None:
        return None
    cond, body, n, tpos, cpos = node.attrs["jvp_of"]
    m, c = len(tpos), len(body.graph.inputs) - n
    primal = list(range(n)) + list(range(n + m, n + m + c))
    if not all(known[i] for i in primal):
        return None
    carry, caps = operands[:n], operands[n + m:n + m + c]
    at = [i for i in range(len(known)) if i not in primal]  # the tangents
    fixed = [operands[i] for i in at if known[i]]  # tangents known in the primal (zeros)
    every = node.attrs["checkpoint_every"]
    finals = bind(Op.WHILE, *carry, *caps, cond=cond, body=body, n_carry=n,
                  checkpoint_every=every, jvp_of=None)

    def staged(residuals, ops):
        given = iter(residuals[n + c:])
        tangents = [next(given) if known[i] else ops[i] for i in at]
        out = bind(Op.WHILE_LIN, *residuals[:n + c], *tangents, cond=cond, body=body,
                   cond_jvp=node.attrs["cond"], body_jvp=node.attrs["body"], n_carry=n,
                   tangent_carries=tpos, tangent_caps=cpos, checkpoint_every=every)
        return (None,) * n + tuple(out)
    return Split(known=tuple(finals) + (None,) * m, residuals=(*carry, *caps, *fixed),
                 staged=staged)


def _batch(args, bdims, *, cond, body, n_carry, checkpoint_every, jvp_of):
    """The carries the batch reaches are batched (found by iterating the
    body to a fixed point); a mapped predicate makes the loop lane-wise,
    every carry then batched."""
    size = batch_size(args, bdims)
    dims = _loop_dims(cond.graph, body.graph, n_carry, bdims, size)
    out = [d is not None for d in dims[:n_carry]]
    outs = bind(Op.WHILE, *batch_operands(args, dims, bdims, size),
                cond=SubGraph(_batched_test(cond.graph, dims, size, n_carry)),
                body=SubGraph(batch_body(body.graph, dims, size, out)), n_carry=n_carry,
                checkpoint_every=checkpoint_every,
                jvp_of=None if jvp_of is None else _batched_jvp_of(jvp_of, dims, size))
    return outs, dims[:n_carry]


def _loop_dims(cond, body, n_carry: int, bdims, size: int) -> tuple:
    """The loop's batch dims: the carries' fixed point, and every carry
    batched when the predicate is (one per lane), or when it has lanes
    already (an inner ``vmap``'s) and the batch reaches a carry: the lanes
    lead every carry, so the new batch axis leads them all."""
    dims = carry_dims(body, n_carry, bdims, size)
    if vmap_graph(cond, dims, size)[1][0] is None and not _lanes_carried(cond, dims, n_carry):
        return dims
    return (0,) * n_carry + tuple(dims[n_carry:])


def _lanes_carried(cond, dims, n_carry: int) -> bool:
    """A predicate with lanes whose loop has a batched carry."""
    return cond.outputs[0].aval.ndim > 0 and any(d is not None for d in dims[:n_carry])


def _batched_jvp_of(jvp_of, dims, size: int):
    cond, body, n, tpos, cpos = jvp_of
    m, c = len(tpos), len(body.graph.inputs) - n
    primal_dims = dims[:n] + dims[n + m:n + m + c]
    out = [d is not None for d in primal_dims[:n]]
    return (SubGraph(_batched_test(cond.graph, primal_dims, size, n)),
            SubGraph(batch_body(body.graph, primal_dims, size, out)), n, tpos, cpos)


def _cost(node, flops) -> int:
    """One step and one test (the trip count is known only at run time)."""
    return flops(node.attrs["cond"].graph) + flops(node.attrs["body"].graph)


register(RegionRules(Op.WHILE, shape=_shape, eval=namespace_rule(Op.WHILE, _eval), jvp=_jvp,
                     batch=_batch, partial_eval=_partial_eval, cost=_cost))


# --- while_lin: the tangent map of a loop, linear in the tangents -------------------------

def _lin_split(args, n_carry: int, body):
    """(carry, captures, tangents) of a ``while_lin`` node's operands."""
    n, c = n_carry, len(body.graph.inputs) - n_carry
    return list(args[:n]), list(args[n:n + c]), list(args[n + c:])


def _lin_shape(*args: Aval, cond, body, cond_jvp, body_jvp, n_carry, tangent_carries,
               tangent_caps, checkpoint_every) -> tuple[Aval, ...]:
    carry = [x.aval.strong() for x in body.graph.inputs[:n_carry]]
    return tuple(carry[i] for i in tangent_carries)


def _lin_eval(xp, *args, cond, body, cond_jvp, body_jvp, n_carry, tangent_carries,
              tangent_caps, checkpoint_every) -> list:
    """The loop's tangent: the JVP'd loop run from the residuals."""
    carry, caps, tangents = _lin_split(args, n_carry, body)
    m = len(tangent_carries)
    both = carry + tangents[:m] + caps + tangents[m:]
    finals = _eval(xp, *both, cond=cond_jvp, body=body_jvp, n_carry=n_carry + m,
                   checkpoint_every=checkpoint_every, jvp_of=None)
    return finals[n_carry:]


def _lin_jvp(operands, tangents, **attrs):
    """Linear in its tangent operands; a tangent of the residuals (the primal
    carry or captures) would be a second derivative of the loop."""
    k = len(attrs["body"].graph.inputs)  # the carry and the captures
    if any(t is not None for t in tangents[:k]):
        raise DifferentiationError(SECOND_ORDER)
    given = [zeros(x.aval.strong()) if t is None else t
             for x, t in zip(operands[k:], tangents[k:])]
    return (bind(Op.WHILE_LIN, *operands, **attrs),
            bind(Op.WHILE_LIN, *operands[:k], *given, **attrs))


def _lin_transpose(cts, *operands, cond, body, cond_jvp, body_jvp, n_carry, tangent_carries,
                   tangent_caps, checkpoint_every):
    """``while_vjp``: the cotangent of the initial tangent carry and of the
    captures' tangents, by the checkpointed reverse sweep."""
    n, c = n_carry, len(body.graph.inputs) - n_carry
    carry_avals = [x.aval.strong() for x in body.graph.inputs[:n]]
    given = [zeros(carry_avals[i]) if ct is None else ct
             for ct, i in zip(cts, tangent_carries)]
    diff = [i in tangent_carries for i in range(n)] + [i in tangent_caps for i in range(c)]
    pulled = vjp_graph(body.graph, diff, wrt=list(tangent_carries))
    found = bind(Op.WHILE_VJP, *operands[:n + c], *given, cond=cond, body=body,
                 body_vjp=SubGraph(pulled), n_carry=n, tangent_carries=tangent_carries,
                 tangent_caps=tangent_caps, checkpoint_every=checkpoint_every)
    return (None,) * (n + c) + tuple(found)


def _lin_batch(args, bdims, *, cond, body, cond_jvp, body_jvp, n_carry, tangent_carries,
               tangent_caps, checkpoint_every):
    size = batch_size(args, bdims)
    n, c, m = n_carry, len(body.graph.inputs) - n_carry, len(tangent_carries)
    args = [batched(x, d, size) if i < n or n + c <= i < n + c + m else x
            for i, (x, d) in enumerate(zip(args, bdims))]
    dims = [0 if i < n or n + c <= i < n + c + m else d for i, d in enumerate(bdims)]
    primal = tuple(dims[:n + c])
    both = tuple(dims[:n] + dims[n + c:n + c + m] + dims[n:n + c] + dims[n + c + m:])
    outs = bind(Op.WHILE_LIN, *args,
                cond=SubGraph(_batched_test(cond.graph, primal, size, n)),
                body=SubGraph(batched_subgraph(body.graph, primal, size)),
                cond_jvp=SubGraph(_batched_test(cond_jvp.graph, both, size, n + m)),
                body_jvp=SubGraph(batched_subgraph(body_jvp.graph, both, size)),
                n_carry=n, tangent_carries=tangent_carries, tangent_caps=tangent_caps,
                checkpoint_every=checkpoint_every)
    return outs, (0,) * len(outs)


def _lin_cost(node, flops) -> int:
    return flops(node.attrs["cond_jvp"].graph) + flops(node.attrs["body_jvp"].graph)


register(RegionRules(Op.WHILE_LIN, shape=_lin_shape,
                     eval=namespace_rule(Op.WHILE_LIN, _lin_eval), jvp=_lin_jvp,
                     transpose=_lin_transpose, batch=_lin_batch, cost=_lin_cost))


# --- while_vjp: the checkpointed reverse sweep --------------------------------------------

def _vjp_shape(*args: Aval, cond, body, body_vjp, n_carry, tangent_carries, tangent_caps,
               checkpoint_every) -> tuple[Aval, ...]:
    return tuple(x.aval.strong() for x in body_vjp.graph.outputs[n_carry:])


def _vjp_eval(xp, *args, cond, body, body_vjp, n_carry, tangent_carries, tangent_caps,
              checkpoint_every) -> list:
    """Count the steps T, keep the carry every K steps, then pull the
    cotangent back segment by segment, recomputing each segment's carries:
    memory O((T/K + K) * carry), O(sqrt(T) * carry) for the default K."""
    n, c = n_carry, len(body.graph.inputs) - n_carry
    carry, caps, ct = list(args[:n]), list(args[n:n + c]), list(args[n + c:])
    steps = _count(xp, cond, body, carry, caps)
    every = checkpoint_every or max(1, math.isqrt(max(steps - 1, 0)) + 1)
    checkpoints = _checkpoints(xp, cond, body, carry, caps, steps, every)
    ct_caps = None
    for s in range(len(checkpoints) - 1, -1, -1):
        states = _segment(xp, cond, body, checkpoints[s], caps, min(every, steps - s * every))
        for state in reversed(states):
            ct, pulled = _pull(xp, cond, body_vjp, state, caps, ct, n, len(tangent_carries))
            ct_caps = pulled if ct_caps is None else [xp.add(a, b)
                                                      for a, b in zip(ct_caps, pulled)]
        del states, state  # this segment's carries go before the next one's come
    if ct_caps is None:  # no step ran: the captures got no cotangent
        avals = [x.aval for x in body_vjp.graph.outputs[n + len(tangent_carries):]]
        ct_caps = [xp.zeros(a.shape, a.dtype) for a in avals]
    return _own(xp, ct, args) + ct_caps


def _count(xp, cond, body, carry: list, caps: list) -> int:
    steps, active = 0, _predicate(xp, cond, carry, caps)
    while xp.any(active):
        carry = _step(xp, body, carry, caps, active)
        active = _predicate(xp, cond, carry, caps)
        steps += 1
    return steps


def _checkpoints(xp, cond, body, carry: list, caps: list, steps: int,
                 every: int) -> list[list]:
    """The carry before steps 0, K, 2K ... (those that start a segment)."""
    kept = []
    for t in range(steps):
        if t % every == 0:
            kept.append(carry)
        carry = _step(xp, body, carry, caps, _predicate(xp, cond, carry, caps))
    return kept


def _segment(xp, cond, body, start: list, caps: list, length: int) -> list[list]:
    states = [start]
    for _ in range(length - 1):
        states.append(_step(xp, body, states[-1], caps,
                            _predicate(xp, cond, states[-1], caps)))
    return states


def _pull(xp, cond, body_vjp, state: list, caps: list, ct: list, n: int, m: int):
    """One step backwards: the cotangent of the carry before the step, and
    the captures' share. A lane that had stopped passes its cotangent on
    unchanged and gives the captures nothing."""
    active = _predicate(xp, cond, state, caps)
    if xp.ndim(active) == 0:
        outs = xp.run_graph(body_vjp.graph, state + caps + ct)
        return outs[n:n + m], outs[n + m:]
    masked = [xp.where(lane_mask(xp, active, x), x, xp.zeros(xp.shape(x), x.dtype))
              for x in ct]
    outs = xp.run_graph(body_vjp.graph, state + caps + masked)
    back = [xp.where(lane_mask(xp, active, b), b, x) for b, x in zip(outs[n:n + m], ct)]
    return back, outs[n + m:]


def _vjp_jvp(operands, tangents, *, cond, body, body_vjp, n_carry, tangent_carries,
             tangent_caps, checkpoint_every):
    """Linear in the cotangents; along the carry and the captures (a second
    derivative, ``hessian`` = ``jacfwd(grad)``) it is the reverse sweep of
    the JVP'd loop: for the loop D over (c, c') whose body is the body's
    JVP, the cotangent (dct, ct) pulls back to (∂F)^T ct on c' and, on c,
    (∂F)^T dct + (∂²F c')^T ct, the tangent of (∂F)^T ct along c' (the
    second derivative is symmetric). One ``while_vjp`` of D gives it,
    checkpointed like the first."""
    attrs = {"cond": cond, "body": body, "body_vjp": body_vjp, "n_carry": n_carry,
             "tangent_carries": tangent_carries, "tangent_caps": tangent_caps,
             "checkpoint_every": checkpoint_every}
    k = len(body.graph.inputs)
    given = [zeros(x.aval.strong()) if t is None else t
             for x, t in zip(operands[k:], tangents[k:])]
    primal = bind(Op.WHILE_VJP, *operands, **attrs)
    if all(t is None for t in tangents[:k]):
        return primal, bind(Op.WHILE_VJP, *operands[:k], *given, **attrs)
    return primal, _second_order(operands, tangents, given, attrs)


def _second_order(operands, tangents, dct, attrs):
    """The tangent of ``while_vjp``'s result along the carry and captures."""
    cond, body, n = attrs["cond"].graph, attrs["body"].graph, attrs["n_carry"]
    tpos, cpos = attrs["tangent_carries"], attrs["tangent_caps"]
    c, m, k = len(body.inputs) - n, len(tpos), len(body.inputs)
    moved = {i for i in range(c) if tangents[n + i] is not None and is_float(operands[n + i].aval)}
    both = tuple(sorted(set(cpos) | moved))
    d_cond, d_body = _jvp_bodies(cond, body, n, tpos, both)
    carry_avals = [x.aval.strong() for x in body.inputs]
    dcarry = [tangents[i] if tangents[i] is not None else zeros(carry_avals[i]) for i in tpos]
    dcaps = [tangents[n + i] if tangents[n + i] is not None else zeros(carry_avals[n + i])
             for i in both]
    d_carries = tuple(tpos) + tuple(range(n, n + m))
    d_caps = both + tuple(range(c, c + len(both)))
    diff = [i in d_carries for i in range(n + m)] + [i in d_caps for i in range(c + len(both))]
    pulled = vjp_graph(d_body, diff, wrt=list(d_carries))
    outs = bind(Op.WHILE_VJP, *operands[:n], *dcarry, *operands[n:k], *dcaps, *dct,
                *operands[k:],
                cond=SubGraph(d_cond), body=SubGraph(d_body), body_vjp=SubGraph(pulled),
                n_carry=n + m, tangent_carries=d_carries, tangent_caps=d_caps,
                checkpoint_every=attrs["checkpoint_every"])
    of_caps = outs[2 * m:2 * m + len(both)]
    return tuple(outs[:m]) + tuple(of_caps[both.index(i)] for i in cpos)


def _vjp_batch(args, bdims, *, cond, body, body_vjp, n_carry, tangent_carries, tangent_caps,
               checkpoint_every):
    size = batch_size(args, bdims)
    n, k = n_carry, len(body.graph.inputs)
    args = [batched(x, d, size) if i < n or i >= k else x
            for i, (x, d) in enumerate(zip(args, bdims))]
    dims = tuple(0 if i < n or i >= k else d for i, d in enumerate(bdims))
    pulled = vmap_graph(body_vjp.graph, dims, size, all_batched=True)[0]
    outs = bind(Op.WHILE_VJP, *args,
                cond=SubGraph(_batched_test(cond.graph, dims[:k], size, n)),
                body=SubGraph(batched_subgraph(body.graph, dims[:k], size)),
                body_vjp=SubGraph(pulled),
                n_carry=n, tangent_carries=tangent_carries, tangent_caps=tangent_caps,
                checkpoint_every=checkpoint_every)
    return outs, (0,) * len(outs)


def _vjp_cost(node, flops) -> int:
    return 3 * flops(node.attrs["body"].graph) + flops(node.attrs["body_vjp"].graph)


register(RegionRules(Op.WHILE_VJP, shape=_vjp_shape,
                     eval=namespace_rule(Op.WHILE_VJP, _vjp_eval), jvp=_vjp_jvp,
                     batch=_vjp_batch, cost=_vjp_cost))


def _batched_test(cond, dims, size: int, n_carry: int):
    """The predicate batched over ``dims`` (one per lane when the batch
    reaches it, and always when it has lanes already and the carries are
    batched: the lanes lead the carries)."""
    return batch_body(cond, dims, size, [_lanes_carried(cond, dims, n_carry)])
