"""``custom_jvp`` and ``custom_vjp``: functions that bring their own
derivative, with JAX's call forms, and the three region primitives that
carry them, with all of their rules.

Called eagerly, such a function just runs. Called inside a recording (jit,
grad, vmap ...), it records one node with a result per output of the
function: ``custom_jvp_call`` carries the primal body (``fun``) and the rule
(``jvp``), ``custom_vjp_call`` the primal body and ``fwd``/``bwd``; both
rules are recorded at the call, as closed sub-graphs, so the node is pure
data. The JVP transform replays the rule; a custom_vjp's tangent is one
``custom_lin`` node, the linear map whose transpose is ``bwd``; vmap batches
the bodies; ``prepare_for_execution`` inlines the primal body.

Values the function closes over become extra operands; a closed-over value
that is being differentiated is refused (the rule cannot see its tangent),
so pass it as an argument. A rule may only close over values its function
uses.

Rules hold at every order: the value of a differentiated call is the call
again, with its rule; a rule receives its function's results at its primals
as inputs, so its own call ``f(x)`` on those primals is that value (computed
once, rule included). A call of the function on other arguments inside its
own rule records the primal body (its derivative there is the body's own):
a rule that recorded a rule-carrying call of its own function would have to
contain itself.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from ..ir import Aval, DifferentiationError, Op, ShapeError, SubGraph, dtypes
from ..ir.eval import run_graph
from ..ir.pytree import tree_flatten, tree_unflatten
from ..record import ShapeDtype, Tracer, bind, current_builder, replay, trace_flat
from ..record import frontend as F
from ..record.tracer import aval_of_example
from .api import copy_identity
from .graphs import retrace, zeros
from .jvp import all_or_zeros, jvp_graph, tangent_inputs
from .regions import RegionRules, register
from .simplify import prepare_for_execution
from .transpose import Lin
from .vmap import batch_size, batched, batched_subgraph, summed_for

_R = TypeVar("_R")
_Rule = TypeVar("_Rule", bound=Callable[..., Any])

CUSTOM_LIN_FORWARD = (
    "forward-mode derivative of custom_vjp function {name!r}: its rule only gives the "
    "reverse (transposed) map. Use reverse mode (grad, vjp, jacrev), or define {name!r} "
    "with custom_jvp, which serves both modes")
CLOSURE = ("custom derivative of {name!r}: it closes over a value that is being "
           "differentiated, which its rule cannot see; pass that value as an argument")
UNUSED_CLOSURE = ("the rule of {name!r} closes over a traced value that {name!r} itself does "
                  "not use; pass it to {name!r} as an argument")

_RULE_OF: ContextVar[Mapping] = ContextVar("isokernel_custom_rule_of",
                                          default=MappingProxyType({}))
"""The custom functions whose rules are being recorded now, by ``id``: each
with the rule's primal arguments (input tree and leaves) and the function's
results at them (output tree and leaves), or None while ``bwd`` is recorded."""


@contextlib.contextmanager
def _recording_rule_of(fun, own=None):
    token = _RULE_OF.set(_RULE_OF.get() | {id(fun): own})
    try:
        yield
    finally:
        _RULE_OF.reset(token)


def _own_results(fun, args):
    """Inside ``fun``'s own rule, a call of ``fun`` on the rule's primal
    arguments themselves: the call's results, which the rule receives as
    inputs (None for any other call)."""
    own = _RULE_OF.get().get(id(fun))
    if own is None:
        return None
    in_tree, primals, out_tree, outs = own
    leaves, tree = tree_flatten(args)
    if tree != in_tree or len(leaves) != len(primals) or not all(
            isinstance(x, Tracer) and x.node is p.node for x, p in zip(leaves, primals)):
        return None
    return tree_unflatten(out_tree, outs)


def _examples(leaves):
    """Strong shape/dtype examples for tangents and cotangents."""
    return [ShapeDtype(a.shape, a.dtype) for a in map(aval_of_example, leaves)]


def _name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _check_like(name: str, what: str, got, want) -> None:
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    if got_tree != want_tree:
        raise DifferentiationError(f"{what} of {name!r} has the structure {got_tree}, but "
                                   f"{want_tree} was expected; return one entry per value")
    for g, w in zip(got_leaves, want_leaves):
        ga, wa = aval_of_example(g), aval_of_example(w)
        if ga.shape != wa.shape or (ga.dtype != wa.dtype and wa.dtype in dtypes.FLOATS):
            raise DifferentiationError(f"{what} of {name!r}: got {ga.strong()} where "
                                       f"{wa.strong()} was expected; match shape and dtype")


def _operand_positions(name: str, captures, operands) -> tuple[int, ...]:
    """Where each value a rule closes over is among the call's operands."""
    nodes = [x.node if isinstance(x, Tracer) else None for x in operands]
    found = []
    for c in captures:
        if c.node not in nodes:
            raise DifferentiationError(UNUSED_CLOSURE.format(name=name))
        found.append(nodes.index(c.node))
    return tuple(found)


class _Custom(Generic[_R]):
    """What custom_jvp and custom_vjp share: the primal recording."""

    def __init__(self, fun: Callable[..., _R]) -> None:
        self.fun = fun
        copy_identity(self, fun)

    def _primal(self, args):
        leaves, in_tree = tree_flatten(args)
        graph, out_tree, caps = trace_flat(
            lambda *xs: self.fun(*tree_unflatten(in_tree, xs)), tuple(leaves),
            name=_name(self.fun))
        return leaves, in_tree, graph, out_tree, caps

    def _inside_own_rule(self) -> bool:
        return id(self) in _RULE_OF.get()


class custom_jvp(_Custom[_R]):  # noqa: N801 - JAX's name
    """``f = custom_jvp(f)``; ``@f.defjvp`` then gives
    ``rule(primals, tangents) -> (primal_out, tangent_out)``, with
    ``primals`` and ``tangents`` tuples of the positional arguments."""

    def __init__(self, fun: Callable[..., _R]) -> None:
        super().__init__(fun)
        self.jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: _Rule) -> _Rule:
        self.jvp = jvp
        return jvp

    def __call__(self, *args: Any) -> _R:
        name = _name(self.fun)
        if self.jvp is None:
            raise DifferentiationError(f"custom_jvp function {name!r} has no rule; add one "
                                       f"with @{name}.defjvp")
        if current_builder() is None:
            return self.fun(*args)
        own = _own_results(self, args)
        if own is not None:
            return own
        leaves, in_tree, fun_graph, out_tree, fun_caps = self._primal(args)
        operands = (*leaves, *fun_caps)
        if self._inside_own_rule():
            return tree_unflatten(out_tree, replay(fun_graph, *operands))
        examples = (*leaves, *_examples(leaves), *_examples_of(fun_graph.outputs))
        rule, _, rule_caps = trace_flat(self._rule_body(in_tree, len(leaves), out_tree),
                                        examples, name=f"jvp_{name}")
        outs = bind(Op.CUSTOM_JVP_CALL, *operands, fun=SubGraph(fun_graph),
                    jvp=SubGraph(rule), num_args=len(leaves),
                    captured=_operand_positions(name, rule_caps, operands))
        return tree_unflatten(out_tree, list(outs))

    def _rule_body(self, in_tree, n: int, out_tree):
        name = _name(self.fun)

        def body(*xs):
            primals = tree_unflatten(in_tree, xs[:n])
            tangents = tree_unflatten(in_tree, xs[n:2 * n])
            with _recording_rule_of(self, (in_tree, xs[:n], out_tree, xs[2 * n:])):
                out, tangent = self.jvp(tuple(primals), tuple(tangents))
            out_leaves, got_tree = tree_flatten(out)
            if got_tree != out_tree:
                raise DifferentiationError(f"the jvp rule of {name!r} returned a primal of "
                                           f"structure {got_tree}; the function returns "
                                           f"{out_tree}")
            _check_like(name, "the tangent from the jvp rule", tangent, out)
            return (*out_leaves, *tree_flatten(tangent)[0])
        return body


class custom_vjp(_Custom[_R]):  # noqa: N801 - JAX's name
    """``f = custom_vjp(f)``; ``f.defvjp(fwd, bwd)`` with
    ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, out_cotangent) -> one cotangent (or None) per argument``."""

    def __init__(self, fun: Callable[..., _R]) -> None:
        super().__init__(fun)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None

    def defvjp(self, fwd: Callable[..., tuple[Any, Any]],
               bwd: Callable[[Any, Any], Sequence[Any]]) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any) -> _R:
        name = _name(self.fun)
        if self.fwd is None:
            raise DifferentiationError(f"custom_vjp function {name!r} has no rule; add one "
                                       f"with {name}.defvjp(fwd, bwd)")
        if current_builder() is None:
            return self.fun(*args)
        own = _own_results(self, args)
        if own is not None:
            return own
        leaves, in_tree, fun_graph, out_tree, fun_caps = self._primal(args)
        operands = (*leaves, *fun_caps)
        if self._inside_own_rule():
            return tree_unflatten(out_tree, replay(fun_graph, *operands))
        res_tree: list = []
        fwd, _, fwd_caps = trace_flat(self._fwd_body(in_tree, len(leaves), out_tree, res_tree),
                                      (*leaves, *_examples_of(fun_graph.outputs)),
                                      name=f"fwd_{name}")
        examples = (_examples_of(fwd.outputs[len(fun_graph.outputs):])
                    + _examples_of(fun_graph.outputs))
        with _recording_rule_of(self):
            bwd, _, bwd_caps = trace_flat(self._bwd_body(args, res_tree, out_tree),
                                          tuple(examples), name=f"bwd_{name}")
        outs = bind(Op.CUSTOM_VJP_CALL, *operands, fun=SubGraph(fun_graph), fwd=SubGraph(fwd),
                    bwd=SubGraph(bwd), num_args=len(leaves),
                    fwd_captured=_operand_positions(name, fwd_caps, operands),
                    bwd_captured=_operand_positions(name, bwd_caps, operands), derived=False)
        return tree_unflatten(out_tree, list(outs))

    def _fwd_body(self, in_tree, n: int, out_tree, res_tree: list):
        name = _name(self.fun)

        def body(*xs):
            with _recording_rule_of(self, (in_tree, xs[:n], out_tree, xs[n:])):
                out, residuals = self.fwd(*tree_unflatten(in_tree, xs[:n]))
            out_leaves, got_tree = tree_flatten(out)
            if got_tree != out_tree:
                raise DifferentiationError(f"fwd of {name!r} returned an output of structure "
                                           f"{got_tree}; the function returns {out_tree}")
            res_leaves, tree = tree_flatten(residuals)
            res_tree[:] = [tree]
            return (*out_leaves, *res_leaves)
        return body

    def _bwd_body(self, args, res_tree: list, out_tree):
        name = _name(self.fun)

        def body(*xs):
            n_res = res_tree[0].num_leaves
            residuals = tree_unflatten(res_tree[0], xs[:n_res])
            cts = self.bwd(residuals, tree_unflatten(out_tree, xs[n_res:]))
            if not isinstance(cts, (tuple, list)) or len(cts) != len(args):
                raise DifferentiationError(f"bwd of {name!r} must return a tuple with one "
                                           f"cotangent per argument ({len(args)})")
            return [leaf for ct, arg in zip(cts, args) for leaf in _ct_leaves(name, ct, arg)]
        return body


def _examples_of(nodes):
    return [ShapeDtype(x.aval.shape, x.aval.dtype) for x in nodes]


def _ct_leaves(name: str, ct, arg) -> list:
    """One cotangent leaf per leaf of ``arg``; ``None`` means zero."""
    arg_leaves = tree_flatten(arg)[0]
    if ct is None:
        return [F.zeros(aval_of_example(a).shape, aval_of_example(a).dtype) for a in arg_leaves]
    _check_like(name, "a cotangent from bwd", ct, arg)
    return tree_flatten(ct)[0]


# --- custom_jvp_call and custom_vjp_call: a call of the primal body -----------------------

def _call_shape(*args: Aval, fun: SubGraph, num_args: int, **_) -> tuple[Aval, ...]:
    """The operands must match the body's inputs; one result per output."""
    graph = fun.graph
    for i, (a, x) in enumerate(zip(args, graph.inputs)):
        if a.shape != x.aval.shape or a.dtype != x.aval.dtype:
            raise ShapeError(f"argument {i} of {graph.name!r} is {a}, its recording "
                             f"expects {x.aval}; call it with the recorded shapes")
    return tuple(x.aval for x in graph.outputs)


def _call_eval(*args, fun: SubGraph, **_) -> list:
    """The body, run once per call for all of its results."""
    return run_graph(fun.graph, args[:len(fun.graph.inputs)])


def _inline_primal(node, operands: list) -> tuple:
    """For execution: the primal body, inlined."""
    body = prepare_for_execution(node.attrs["fun"].graph)
    return tuple(replay(body, *operands[:len(body.inputs)]))


def _refuse_closure(name: str, tangents, num_args: int) -> None:
    if any(t is not None for t in tangents[num_args:]):
        raise DifferentiationError(CLOSURE.format(name=name))


def _jvp_call_jvp(operands, tangents, *, fun, jvp, num_args, captured):
    """The user's rule, replayed on the primals, the (zero-filled) tangents
    and the call's results. The primal results are the call itself, bound
    again with its rule, so the rule holds for them at every order (the
    rule's own primal results, which should be the same values, go unused)."""
    _refuse_closure(fun.graph.name, tangents, num_args)
    args = operands[:num_args]
    outs = tuple(bind(Op.CUSTOM_JVP_CALL, *operands, fun=fun, jvp=jvp, num_args=num_args,
                      captured=captured))
    found = replay(jvp.graph, *args, *all_or_zeros(args, tangents[:num_args]), *outs,
                   *(operands[i] for i in captured))
    return outs, tuple(found[len(outs):])


def _jvp_call_batch(args, bdims, *, fun, jvp, num_args, captured):
    size = batch_size(args, bdims)
    arg_dims = tuple(bdims[:num_args])
    results = (0,) * len(fun.graph.outputs)  # a batched call's results are batched at 0
    rule_dims = arg_dims + arg_dims + results + tuple(bdims[i] for i in captured)
    outs = bind(Op.CUSTOM_JVP_CALL, *args,
                fun=SubGraph(batched_subgraph(fun.graph, tuple(bdims), size)),
                jvp=SubGraph(batched_subgraph(jvp.graph, rule_dims, size)),
                num_args=num_args, captured=captured)
    return outs, (0,) * len(outs)


def _vjp_call_jvp(operands, tangents, *, fun, fwd, bwd, num_args, fwd_captured,
                  bwd_captured, derived):
    """fwd now, given the call's results, which stay one custom call (as in
    ``_jvp_call_jvp``), marked ``derived``: the value inside a derivative
    graph. The tangents are one custom_lin node that transposes to bwd; for
    a derived call it also has a forward meaning (``_forward_map``)."""
    _refuse_closure(fun.graph.name, tangents, num_args)
    args = operands[:num_args]
    outs = tuple(bind(Op.CUSTOM_VJP_CALL, *operands, fun=fun, fwd=fwd, bwd=bwd,
                      num_args=num_args, fwd_captured=fwd_captured, bwd_captured=bwd_captured,
                      derived=True))
    k = len(outs)
    residuals = replay(fwd.graph, *args, *outs, *(operands[i] for i in fwd_captured))[k:]
    out_avals = tuple(x.aval.strong() for x in fun.graph.outputs)
    forward = _forward_map(fun, num_args) if derived else None
    tangent = bind(Op.CUSTOM_LIN, *residuals, *(operands[i] for i in bwd_captured),
                   *(operands if derived else ()), *all_or_zeros(args, tangents[:num_args]),
                   bwd=bwd, forward=forward, name=fun.graph.name, out_avals=out_avals,
                   num_res=len(residuals), num_args=num_args)
    return outs, tangent


def _vjp_call_batch(args, bdims, *, fun, fwd, bwd, num_args, fwd_captured, bwd_captured,
                    derived):
    """Batched fwd and bwd; bwd's cotangents for unbatched arguments are
    summed over the batch."""
    size = batch_size(args, bdims)
    arg_dims = tuple(bdims[:num_args])
    results = (0,) * len(fun.graph.outputs)  # a batched call's results are batched at 0
    fwd_dims = arg_dims + results + tuple(bdims[i] for i in fwd_captured)
    n_res_ct = len(fwd.graph.outputs)  # residuals and output cotangents, all batched
    bwd_dims = (0,) * n_res_ct + tuple(bdims[i] for i in bwd_captured)
    bwd_b = summed_for(batched_subgraph(bwd.graph, bwd_dims, size), arg_dims)
    outs = bind(Op.CUSTOM_VJP_CALL, *args,
                fun=SubGraph(batched_subgraph(fun.graph, tuple(bdims), size)),
                fwd=SubGraph(batched_subgraph(fwd.graph, fwd_dims, size)),
                bwd=SubGraph(bwd_b), num_args=num_args, fwd_captured=fwd_captured,
                bwd_captured=bwd_captured, derived=derived)
    return outs, (0,) * len(outs)


def _vjp_call_transpose(cts, *operands, fun, fwd, bwd, num_args, fwd_captured, bwd_captured,
                        derived):
    """A custom_vjp function applied to tangents (inside a custom_jvp rule:
    an implicit solve's tangent is a solve) is linear in them, so its
    transpose is its own bwd, with the residuals fwd gives at zero for them."""
    name = fun.graph.name
    if any(isinstance(x, Lin) for x in operands[num_args:]):
        raise DifferentiationError(f"custom_vjp function {name!r} closes over a tangent; pass "
                                   "it as an argument to transpose the call")
    args = [zeros(x.aval.strong()) if isinstance(x, Lin) else x for x in operands[:num_args]]
    results = replay(fun.graph, *args, *operands[num_args:])
    outs = replay(fwd.graph, *args, *results, *(operands[i] for i in fwd_captured))
    k = len(fun.graph.outputs)
    given = [zeros(o.aval.strong()) if c is None else c for c, o in zip(cts, fun.graph.outputs)]
    arg_cts = replay(bwd.graph, *outs[k:], *given, *(operands[i] for i in bwd_captured))
    found = [c if isinstance(x, Lin) else None for c, x in zip(arg_cts, operands[:num_args])]
    return tuple(found) + (None,) * (len(operands) - num_args)


register(RegionRules(Op.CUSTOM_JVP_CALL, shape=_call_shape, eval=_call_eval,
                     jvp=_jvp_call_jvp, batch=_jvp_call_batch, lower=_inline_primal))
register(RegionRules(Op.CUSTOM_VJP_CALL, shape=_call_shape, eval=_call_eval,
                     jvp=_vjp_call_jvp, transpose=_vjp_call_transpose,
                     batch=_vjp_call_batch, lower=_inline_primal))


# --- custom_lin: the linear map of a custom_vjp rule --------------------------------------
#
# Operands: the residuals (``num_res``), the values bwd closes over, then, where
# the map has a forward meaning (``forward``, below), the call's operands, and
# last one tangent per argument (``num_args``).

def _lin_shape(*args: Aval, out_avals, **_) -> tuple[Aval, ...]:
    return tuple(out_avals)


def _lin_parts(operands, num_res: int, num_args: int, forward) -> tuple:
    """(residuals, captures, the call's operands, tangents)."""
    n_fun = len(forward.graph.inputs) - num_args if forward is not None else 0
    n_caps = len(operands) - num_res - n_fun - num_args
    return (operands[:num_res], operands[num_res:num_res + n_caps],
            operands[num_res + n_caps:len(operands) - num_args],
            operands[len(operands) - num_args:])


def _refuse_forward(name: str, where: str | None = None):
    message = CUSTOM_LIN_FORWARD.format(name=name)
    raise DifferentiationError(message if where is None else f"{message} (at {where or '?'})")


def _lin_eval(*operands, forward, name, num_res, num_args, **_):
    if forward is None:
        _refuse_forward(name)
    _, _, fun_operands, tangents = _lin_parts(operands, num_res, num_args, forward)
    return run_graph(forward.graph, [*fun_operands, *tangents])


def _lin_lower(node, operands):
    forward, num_res, num_args = (node.attrs[k] for k in ("forward", "num_res", "num_args"))
    if forward is None:
        _refuse_forward(node.attrs["name"], node.where)
    _, _, fun_operands, tangents = _lin_parts(operands, num_res, num_args, forward)
    return tuple(replay(prepare_for_execution(forward.graph), *fun_operands, *tangents))


def _lin_jvp(operands, tangents, *, forward, name, num_res, num_args, **attrs):
    """Forward mode over the forward map (its tangents in the call's operands
    and in the tangents it maps); the map itself stays one node."""
    if forward is None:
        _refuse_forward(name)
    outs = bind(Op.CUSTOM_LIN, *operands, forward=forward, name=name, num_res=num_res,
                num_args=num_args, **attrs)
    graph = forward.graph
    n = len(graph.inputs)
    which = tangent_inputs(graph, None)
    given = [t if t is not None else zeros(x.aval.strong())
             for t, x in zip(tangents[len(operands) - n:], graph.inputs)]
    found = replay(jvp_graph(graph), *operands[len(operands) - n:], *(given[i] for i in which))
    return tuple(outs), tuple(found[len(graph.outputs):])


def _lin_transpose(cts, *operands, bwd, forward, name, out_avals, num_res, num_args):
    """bwd, with the results' cotangents (zeros where none arrived)."""
    residuals, caps, fun_operands, _ = _lin_parts(operands, num_res, num_args, forward)
    given = [zeros(a) if c is None else c for c, a in zip(cts, out_avals)]
    arg_cts = replay(bwd.graph, *residuals, *given, *caps)
    return (None,) * (num_res + len(caps) + len(fun_operands)) + tuple(arg_cts)


def _lin_batch(args, bdims, *, bwd, forward, name, out_avals, num_res, num_args):
    size = batch_size(args, bdims)
    args = [batched(x, d, size) if i < num_res else x
            for i, (x, d) in enumerate(zip(args, bdims))]
    _, caps, fun_operands, _ = _lin_parts(args, num_res, num_args, forward)
    n_caps, n_fun = len(caps), len(fun_operands)
    bwd_dims = (0,) * (num_res + len(out_avals)) + tuple(bdims[num_res:num_res + n_caps])
    tangent_dims = tuple(bdims[len(args) - num_args:])
    bwd_b = summed_for(batched_subgraph(bwd.graph, bwd_dims, size), tangent_dims)
    if forward is not None:
        forward_dims = tuple(bdims[num_res + n_caps:num_res + n_caps + n_fun]) + tangent_dims
        forward = SubGraph(batched_subgraph(forward.graph, forward_dims, size))
    avals = tuple(Aval((size, *a.shape), a.dtype) for a in out_avals)
    outs = bind(Op.CUSTOM_LIN, *args, bwd=SubGraph(bwd_b), forward=forward, name=name,
                out_avals=avals, num_res=num_res, num_args=num_args)
    return outs, (0,) * len(outs)


@functools.lru_cache(maxsize=256)
def _forward_map(fun: SubGraph, num_args: int) -> SubGraph:
    """(the call's operands, one tangent per argument) -> the results'
    tangents, by differentiating the primal body: the forward meaning of a
    custom_vjp call's value inside a derivative graph (a custom_vjp rule has
    none of its own), so forward over reverse (``hessian``) differentiates
    that value as the primal body, while reverse over reverse keeps bwd."""
    graph = fun.graph
    diff = [True] * num_args + [False] * (len(graph.inputs) - num_args)
    which = tangent_inputs(graph, diff)
    jvp = jvp_graph(graph, diff)
    n = len(graph.inputs)

    def body(*xs):
        tangents = xs[n:]
        return replay(jvp, *xs[:n], *(tangents[i] for i in which))[len(graph.outputs):]
    avals = [x.aval for x in graph.inputs] + [x.aval for x in graph.inputs[:num_args]]
    return SubGraph(retrace(avals, body, name=f"forward_{graph.name}"))


register(RegionRules(Op.CUSTOM_LIN, shape=_lin_shape, eval=_lin_eval, jvp=_lin_jvp,
                     transpose=_lin_transpose, batch=_lin_batch, lower=_lin_lower))
