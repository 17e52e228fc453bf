"""``custom_jvp`` and ``custom_vjp``: functions that bring their own
derivative, with JAX's call forms.

Called eagerly, such a function just runs. Called inside a recording (jit,
grad, vmap ...), it records its primal and its rule as sub-graphs carried by
one CUSTOM_JVP_CALL / CUSTOM_VJP_CALL node per output: the JVP transform
uses the rule, vmap batches the sub-graphs, and jit inlines the primal
before planning. Values the function closes over become extra operands; a
closed-over value that is being differentiated is refused (the rule cannot
see its tangent), so pass it as an argument.
"""

from __future__ import annotations

import functools

from ..ir import DifferentiationError, Op, dtypes
from ..ir.pytree import tree_flatten, tree_unflatten
from ..record import ShapeDtype, bind, current_builder, trace_flat
from ..record.tracer import aval_of_example


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


class Rule:
    """A derivative rule, traced the first time a transform needs it (a call
    records only its primal, so a rule may call the function itself). Values
    the rule closes over are resolved as at the call, and must be operands of
    the call: its arguments or values its function also closes over."""

    def __init__(self, name: str, trace, operands):
        self.name = name
        self._trace = trace
        self._operands = operands
        self._builder = current_builder()
        self._found = None

    def graph(self):
        """(the rule's graph, the operand index of each value it closes over)."""
        if self._found is None:
            with self._builder.active():
                graph, captures = self._trace()
            self._found = graph, tuple(self._operand_index(c) for c in captures)
        return self._found

    def _operand_index(self, captured) -> int:
        for i, x in enumerate(self._operands):
            if x is captured:
                return i
        raise DifferentiationError(
            f"the rule of {self.name!r} closes over a traced value that {self.name!r} itself "
            f"does not use; pass it to {self.name!r} as an argument")

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class FixedRule:
    """A rule whose graph is already known (a batched rule)."""

    def __init__(self, name: str, graph, captures: tuple):
        self.name = name
        self._found = graph, captures

    def graph(self):
        return self._found

    def __repr__(self) -> str:
        return f"<rule {self.name}>"


class custom_jvp:  # noqa: N801 - JAX's name
    """``f = custom_jvp(f)``; ``@f.defjvp`` then gives
    ``rule(primals, tangents) -> (primal_out, tangent_out)``, with
    ``primals`` and ``tangents`` tuples of the positional arguments."""

    def __init__(self, fun):
        self.fun = fun
        self.jvp = None
        functools.update_wrapper(self, fun)

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
        leaves, in_tree = tree_flatten(args)
        fun_graph, out_tree, fun_caps = trace_flat(
            lambda *xs: self.fun(*tree_unflatten(in_tree, xs)), tuple(leaves), name=name)
        operands = (*leaves, *fun_caps)

        def trace_rule():
            graph, _, caps = trace_flat(self._rule_body(in_tree, len(leaves), out_tree),
                                        (*leaves, *_examples(leaves)), name=f"jvp_{name}")
            return graph, caps
        rule = Rule(name, trace_rule, operands)
        outs = [bind(Op.CUSTOM_JVP_CALL, *operands, fun=fun_graph, jvp=rule,
                     num_args=len(leaves), index=k) for k in range(len(fun_graph.outputs))]
        return tree_unflatten(out_tree, outs)

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


class custom_vjp:  # noqa: N801 - JAX's name
    """``f = custom_vjp(f)``; ``f.defvjp(fwd, bwd)`` with
    ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, out_cotangent) -> one cotangent (or None) per argument``."""

    def __init__(self, fun):
        self.fun = fun
        self.fwd = self.bwd = None
        functools.update_wrapper(self, fun)

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        name = _name(self.fun)
        if self.fwd is None:
            raise DifferentiationError(f"custom_vjp function {name!r} has no rule; add one "
                                       f"with {name}.defvjp(fwd, bwd)")
        if current_builder() is None:
            return self.fun(*args)
        leaves, in_tree = tree_flatten(args)
        fun_graph, out_tree, fun_caps = trace_flat(
            lambda *xs: self.fun(*tree_unflatten(in_tree, xs)), tuple(leaves), name=name)
        operands = (*leaves, *fun_caps)
        res_tree: list = []

        def trace_fwd():
            graph, _, caps = trace_flat(self._fwd_body(in_tree, out_tree, res_tree),
                                        tuple(leaves), name=f"fwd_{name}")
            return graph, caps
        fwd = Rule(name, trace_fwd, operands)

        def trace_bwd():
            fwd_graph = fwd.graph()[0]
            examples = _examples_of(fwd_graph.outputs[len(fun_graph.outputs):]) + \
                _examples_of(fun_graph.outputs)
            graph, _, caps = trace_flat(self._bwd_body(args, res_tree, out_tree),
                                        tuple(examples), name=f"bwd_{name}")
            return graph, caps
        bwd = Rule(name, trace_bwd, operands)
        outs = [bind(Op.CUSTOM_VJP_CALL, *operands, fun=fun_graph, fwd=fwd, bwd=bwd,
                     num_args=len(leaves), index=k) for k in range(len(fun_graph.outputs))]
        return tree_unflatten(out_tree, outs)

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
