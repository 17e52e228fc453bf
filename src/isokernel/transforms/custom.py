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
uses. A rule may call its own function: inside the rule, that call records
the function's primal (its derivative there is the primal's own).
"""

from __future__ import annotations

import contextlib
import functools
from contextvars import ContextVar

from ..ir import Aval, DifferentiationError, Op, ShapeError, SubGraph, dtypes
from ..ir.eval import run_graph
from ..ir.pytree import tree_flatten, tree_unflatten
from ..record import ShapeDtype, Tracer, bind, current_builder, replay, trace_flat
from ..record.tracer import aval_of_example
from .graphs import zeros
from .jvp import all_or_zeros
from .regions import RegionRules, register
from .simplify import prepare_for_execution
from .transpose import Lin
from .vmap import batch_size, batched, batched_subgraph, summed_for

CUSTOM_LIN_FORWARD = (
    "forward-mode derivative of custom_vjp function {name!r}: its rule only gives the "
    "reverse (transposed) map. Use reverse mode (grad, vjp, jacrev), or define {name!r} "
    "with custom_jvp, which serves both modes")
CLOSURE = ("custom derivative of {name!r}: it closes over a value that is being "
           "differentiated, which its rule cannot see; pass that value as an argument")
UNUSED_CLOSURE = ("the rule of {name!r} closes over a traced value that {name!r} itself does "
                  "not use; pass it to {name!r} as an argument")

_RULE_OF: ContextVar[frozenset] = ContextVar("isokernel_custom_rule_of", default=frozenset())
"""The custom functions whose rules are being recorded now (a call of one of
them inside its own rule records its primal)."""


@contextlib.contextmanager
def _recording_rule_of(fun):
    token = _RULE_OF.set(_RULE_OF.get() | {id(fun)})
    try:
        yield
    finally:
        _RULE_OF.reset(token)


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


class _Custom:
    """What custom_jvp and custom_vjp share: the primal recording."""

    def __init__(self, fun):
        self.fun = fun
        functools.update_wrapper(self, fun)

    def _primal(self, args):
        leaves, in_tree = tree_flatten(args)
        graph, out_tree, caps = trace_flat(
            lambda *xs: self.fun(*tree_unflatten(in_tree, xs)), tuple(leaves),
            name=_name(self.fun))
        return leaves, in_tree, graph, out_tree, caps

    def _inside_own_rule(self) -> bool:
        return id(self) in _RULE_OF.get()


class custom_jvp(_Custom):  # noqa: N801 - JAX's name
    """``f = custom_jvp(f)``; ``@f.defjvp`` then gives
    ``rule(primals, tangents) -> (primal_out, tangent_out)``, with
    ``primals`` and ``tangents`` tuples of the positional arguments."""

    def __init__(self, fun):
        super().__init__(fun)
        self.jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def __call__(self, *args):
        name = _name(self.fun)
        if self.jvp is None:
            raise DifferentiationError(f"custom_jvp function {name!r} has no rule; add one "
                                       f"with @{name}.defjvp")
        if current_builder() is None:
            return self.fun(*args)
        leaves, in_tree, fun_graph, out_tree, fun_caps = self._primal(args)
        operands = (*leaves, *fun_caps)
        if self._inside_own_rule():
            return tree_unflatten(out_tree, replay(fun_graph, *operands))
        with _recording_rule_of(self):
            rule, _, rule_caps = trace_flat(self._rule_body(in_tree, len(leaves), out_tree),
                                            (*leaves, *_examples(leaves)), name=f"jvp_{name}")
        outs = bind(Op.CUSTOM_JVP_CALL, *operands, fun=SubGraph(fun_graph),
                    jvp=SubGraph(rule), num_args=len(leaves),
                    captured=_operand_positions(name, rule_caps, operands))
        return tree_unflatten(out_tree, list(outs))

    def _rule_body(self, in_tree, n: int, out_tree):
        name = _name(self.fun)

        def body(*xs):
            primals = tree_unflatten(in_tree, xs[:n])
            tangents = tree_unflatten(in_tree, xs[n:])
            out, tangent = self.jvp(tuple(primals), tuple(tangents))
            out_leaves, got_tree = tree_flatten(out)
            if got_tree != out_tree:
                raise DifferentiationError(f"the jvp rule of {name!r} returned a primal of "
                                           f"structure {got_tree}; the function returns "
                                           f"{out_tree}")
            _check_like(name, "the tangent from the jvp rule", tangent, out)
            return (*out_leaves, *tree_flatten(tangent)[0])
        return body


class custom_vjp(_Custom):  # noqa: N801 - JAX's name
    """``f = custom_vjp(f)``; ``f.defvjp(fwd, bwd)`` with
    ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, out_cotangent) -> one cotangent (or None) per argument``."""

    def __init__(self, fun):
        super().__init__(fun)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        name = _name(self.fun)
        if self.fwd is None:
            raise DifferentiationError(f"custom_vjp function {name!r} has no rule; add one "
                                       f"with {name}.defvjp(fwd, bwd)")
        if current_builder() is None:
            return self.fun(*args)
        leaves, in_tree, fun_graph, out_tree, fun_caps = self._primal(args)
        operands = (*leaves, *fun_caps)
        if self._inside_own_rule():
            return tree_unflatten(out_tree, replay(fun_graph, *operands))
        res_tree: list = []
        with _recording_rule_of(self):
            fwd, _, fwd_caps = trace_flat(self._fwd_body(in_tree, out_tree, res_tree),
                                          tuple(leaves), name=f"fwd_{name}")
            examples = (_examples_of(fwd.outputs[len(fun_graph.outputs):])
                        + _examples_of(fun_graph.outputs))
            bwd, _, bwd_caps = trace_flat(self._bwd_body(args, res_tree, out_tree),
                                          tuple(examples), name=f"bwd_{name}")
        outs = bind(Op.CUSTOM_VJP_CALL, *operands, fun=SubGraph(fun_graph), fwd=SubGraph(fwd),
                    bwd=SubGraph(bwd), num_args=len(leaves),
                    fwd_captured=_operand_positions(name, fwd_caps, operands),
                    bwd_captured=_operand_positions(name, bwd_caps, operands))
        return tree_unflatten(out_tree, list(outs))

    def _fwd_body(self, in_tree, out_tree, res_tree: list):
        name = _name(self.fun)

        def body(*xs):
            out, residuals = self.fwd(*tree_unflatten(in_tree, xs))
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
    from ..record import frontend as F
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
    """The user's rule, replayed on the primals and (zero-filled) tangents."""
    _refuse_closure(fun.graph.name, tangents, num_args)
    args = operands[:num_args]
    outs = replay(jvp.graph, *args, *all_or_zeros(args, tangents[:num_args]),
                  *(operands[i] for i in captured))
    k = len(fun.graph.outputs)
    return tuple(outs[:k]), tuple(outs[k:])


def _jvp_call_batch(args, bdims, *, fun, jvp, num_args, captured):
    size = batch_size(args, bdims)
    arg_dims = tuple(bdims[:num_args])
    rule_dims = arg_dims + arg_dims + tuple(bdims[i] for i in captured)
    outs = bind(Op.CUSTOM_JVP_CALL, *args,
                fun=SubGraph(batched_subgraph(fun.graph, tuple(bdims), size)),
                jvp=SubGraph(batched_subgraph(jvp.graph, rule_dims, size)),
                num_args=num_args, captured=captured)
    return outs, (0,) * len(outs)


def _vjp_call_jvp(operands, tangents, *, fun, fwd, bwd, num_args, fwd_captured,
                  bwd_captured):
    """fwd now; the tangents are one custom_lin node that transposes to bwd."""
    _refuse_closure(fun.graph.name, tangents, num_args)
    args = operands[:num_args]
    outs = replay(fwd.graph, *args, *(operands[i] for i in fwd_captured))
    k = len(fun.graph.outputs)
    residuals = outs[k:]
    out_avals = tuple(x.aval.strong() for x in fun.graph.outputs)
    tangent = bind(Op.CUSTOM_LIN, *residuals, *(operands[i] for i in bwd_captured),
                   *all_or_zeros(args, tangents[:num_args]), bwd=bwd, name=fun.graph.name,
                   out_avals=out_avals, num_res=len(residuals), num_args=num_args)
    return tuple(outs[:k]), tangent


def _vjp_call_batch(args, bdims, *, fun, fwd, bwd, num_args, fwd_captured, bwd_captured):
    """Batched fwd and bwd; bwd's cotangents for unbatched arguments are
    summed over the batch."""
    size = batch_size(args, bdims)
    arg_dims = tuple(bdims[:num_args])
    fwd_dims = arg_dims + tuple(bdims[i] for i in fwd_captured)
    n_res_ct = len(fwd.graph.outputs)  # residuals and output cotangents, all batched
    bwd_dims = (0,) * n_res_ct + tuple(bdims[i] for i in bwd_captured)
    bwd_b = summed_for(batched_subgraph(bwd.graph, bwd_dims, size), arg_dims)
    outs = bind(Op.CUSTOM_VJP_CALL, *args,
                fun=SubGraph(batched_subgraph(fun.graph, tuple(bdims), size)),
                fwd=SubGraph(batched_subgraph(fwd.graph, fwd_dims, size)),
                bwd=SubGraph(bwd_b), num_args=num_args, fwd_captured=fwd_captured,
                bwd_captured=bwd_captured)
    return outs, (0,) * len(outs)


def _vjp_call_transpose(cts, *operands, fun, fwd, bwd, num_args, fwd_captured, bwd_captured):
    """A custom_vjp function applied to tangents (inside a custom_jvp rule:
    an implicit solve's tangent is a solve) is linear in them, so its
    transpose is its own bwd, with the residuals fwd gives at zero for them."""
    name = fun.graph.name
    if any(isinstance(x, Lin) for x in operands[num_args:]):
        raise DifferentiationError(f"custom_vjp function {name!r} closes over a tangent; pass "
                                   "it as an argument to transpose the call")
    args = [zeros(x.aval.strong()) if isinstance(x, Lin) else x for x in operands[:num_args]]
    outs = replay(fwd.graph, *args, *(operands[i] for i in fwd_captured))
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

def _lin_shape(*args: Aval, out_avals, **_) -> tuple[Aval, ...]:
    return tuple(out_avals)


def _forward_use(*_, name, **__):
    raise DifferentiationError(CUSTOM_LIN_FORWARD.format(name=name))


def _lin_lower(node, operands):
    message = CUSTOM_LIN_FORWARD.format(name=node.attrs["name"])
    raise DifferentiationError(f"{message} (at {node.where or '?'})")


def _lin_jvp(operands, tangents, *, name, **_):
    raise DifferentiationError(CUSTOM_LIN_FORWARD.format(name=name))


def _lin_transpose(cts, *operands, bwd, name, out_avals, num_res, num_args):
    """bwd, with the results' cotangents (zeros where none arrived)."""
    n_caps = len(operands) - num_res - num_args
    residuals = operands[:num_res]
    caps = operands[num_res:num_res + n_caps]
    given = [zeros(a) if c is None else c for c, a in zip(cts, out_avals)]
    arg_cts = replay(bwd.graph, *residuals, *given, *caps)
    return (None,) * (num_res + n_caps) + tuple(arg_cts)


def _lin_batch(args, bdims, *, bwd, name, out_avals, num_res, num_args):
    size = batch_size(args, bdims)
    args = [batched(x, d, size) if i < num_res else x
            for i, (x, d) in enumerate(zip(args, bdims))]
    n_caps = len(args) - num_res - num_args
    bwd_dims = (0,) * (num_res + len(out_avals)) + tuple(bdims[num_res:num_res + n_caps])
    tangent_dims = tuple(bdims[num_res + n_caps:])
    bwd_b = summed_for(batched_subgraph(bwd.graph, bwd_dims, size), tangent_dims)
    avals = tuple(Aval((size, *a.shape), a.dtype) for a in out_avals)
    outs = bind(Op.CUSTOM_LIN, *args, bwd=SubGraph(bwd_b), name=name, out_avals=avals,
                num_res=num_res, num_args=num_args)
    return outs, (0,) * len(outs)


register(RegionRules(Op.CUSTOM_LIN, shape=_lin_shape, eval=_forward_use, jvp=_lin_jvp,
                     transpose=_lin_transpose, batch=_lin_batch, lower=_lin_lower))

