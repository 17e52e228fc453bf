"""The user-facing transforms, with JAX's call forms.

Each one records the user function with ``trace_flat``, transforms the
graph (``jvp_graph``, ``linearize_graph``, ``transpose_graph``,
``vmap_graph``) and runs the new graph with ``replay``. Outside a recording
``replay`` evaluates at once on NumPy values; inside one (jit, or another
transform) it records, so the transforms compose in any order and jit
compiles the composed graph as one. Arguments a transform does not act on
(outside ``argnums``; ``in_axes=None``) are closed over, not traced, so they
may be Python values used for control flow; values closed over from an
enclosing recording become graph inputs (captures) with zero tangents.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import DifferentiationError, Graph, Op, dtypes
from ..ir.pytree import (
    TreeDef,
    derivative_tree,
    is_scalar_tree,
    leaf_paths,
    register_pytree_node,
    tree_flatten,
    tree_map,
    tree_unflatten,
)
from ..record import ShapeDtype, Tracer, bind, current_builder, replay, trace_flat
from ..record import frontend as F
from ..record.tracer import as_tracer, aval_of_example
from ..typing import PyTree
from .jvp import jvp_graph, tangent_inputs
from .linearize import linearize_graph, vjp_graph
from .transpose import transpose_graph
from .vmap import batched, vmap_graph

# ----------------------------------------------------------------- naming


def _name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _label(fun) -> str:
    """``f (model.py:12)``: the function and where it is defined."""
    code = getattr(inspect.unwrap(fun), "__code__", None) if callable(fun) else None
    if code is None:
        return repr(_name(fun))
    return f"{_name(fun)!r} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def copy_identity(wrapper, fun):
    """Give ``wrapper`` the name, docstring, module and ``__wrapped__`` of
    ``fun``, and the ``__x__`` markers in its ``__dict__`` (a ``@numerics``
    default), but none of the wrapped object's state: a jit's or a custom
    rule's ``fun``, caches and rules stay its own (``functools.wraps``
    copies the whole ``__dict__``, and ``jit(grad(jit(f)))`` then ran ``f``
    itself)."""
    functools.update_wrapper(wrapper, fun, updated=())
    for key, value in getattr(fun, "__dict__", {}).items():
        if key.startswith("__") and key.endswith("__") and key != "__wrapped__":
            setattr(wrapper, key, value)
    return wrapper


def _wrap(transform: str, fun, wrapper):
    copy_identity(wrapper, fun)
    wrapper.__name__ = f"{transform}_{_name(fun)}"
    wrapper.__qualname__ = wrapper.__name__
    return wrapper


def _params(fun, n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return (params + [f"arg{i}" for i in range(len(params), n)])[:n]


# ------------------------------------------------------------- tracing


def _replay(graph, *args):
    """``replay``, with plain values lifted into an active recording first,
    so a broadcast of a seed or of an index stays a node instead of being
    evaluated now into a full-size constant."""
    builder = current_builder()
    if builder is not None:
        args = [a if isinstance(a, Tracer) else as_tracer(a, builder) for a in args]
    return replay(graph, *args)


class _Traced:
    """A user function recorded as a function of the arguments a transform
    acts on (``nums``); the others are closed over."""

    def __init__(self, transform: str, fun, args: tuple, kwargs: dict, nums: tuple):
        self.transform, self.fun = transform, fun
        self.dargs = tuple(args[i] for i in nums)
        params = _params(fun, len(args))
        self.names = [p for i in nums for p in leaf_paths(args[i], params[i])]
        self.leaves, self.in_tree = tree_flatten(self.dargs)
        part = _closing(fun, args, kwargs, nums)
        self.graph, self.out_tree, self.caps = trace_flat(part, self.dargs, self.names,
                                                          _name(fun))
        self.diff = [True] * len(self.leaves) + [False] * len(self.caps)

    @property
    def inputs(self) -> list:
        return [*self.leaves, *self.caps]

    def require_float_inputs(self, holomorphic: bool = False) -> None:
        for name, x in zip(self.names, self.graph.inputs):
            if x.aval.dtype not in dtypes.INEXACT:
                raise DifferentiationError(
                    f"{self.transform}({_label(self.fun)}): argument {name!r} is "
                    f"{x.aval.strong()}; only float and complex inputs can be differentiated. "
                    f"Pass floats (e.g. {name}.astype(inp.float64)) or leave it out of argnums")
            _check_complex(f"{self.transform}({_label(self.fun)})", f"argument {name!r}",
                           x.aval.strong(), True if holomorphic else None)

    def split_aux(self, has_aux: bool):
        """(tree of the differentiated output, tree of aux or None)."""
        if not has_aux:
            return self.out_tree, None
        tree = self.out_tree
        if tree.kind not in ("tuple", "list") or len(tree.children) != 2:
            raise DifferentiationError(f"{self.transform}({_label(self.fun)}, has_aux=True): "
                                       f"the function must return a pair (output, aux)")
        return tree.children

    def require_scalar_output(self, main, holomorphic: bool = False) -> None:
        if not is_scalar_tree(main):
            raise DifferentiationError(
                f"{self.transform}({_label(self.fun)}): the output is a {main.kind} of "
                f"{main.num_leaves} values, but {self.transform} needs one scalar output. "
                f"Return a scalar, or (output, aux) with has_aux=True")
        aval = self.graph.outputs[0].aval.strong()
        _check_complex(f"{self.transform}({_label(self.fun)})", "the output", aval,
                       holomorphic)
        if aval.dtype not in dtypes.INEXACT:
            raise DifferentiationError(
                f"{self.transform}({_label(self.fun)}): the output is {aval}; only float "
                f"outputs can be differentiated. Return the float value (before any "
                f"rounding or cast to an integer), e.g. y.astype(inp.float64)")
        if aval.shape != ():
            raise DifferentiationError(
                f"{self.transform}({_label(self.fun)}): the output is {aval}, but "
                f"{self.transform} needs a scalar output. Reduce it (e.g. inp.sum(y)), or use "
                f"jacobian, jacrev or vjp for a non-scalar output")


def _closing(fun, args: tuple, kwargs: dict, nums: tuple):
    """``fun`` of ``args[nums]`` alone; the other arguments closed over."""
    def part(*dargs):
        full = list(args)
        for i, a in zip(nums, dargs):
            full[i] = a
        return fun(*full, **kwargs)
    return part


def _argnums(transform: str, fun, argnums, nargs: int) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise DifferentiationError(f"{transform}({_label(fun)}): argnums {argnums} is out "
                                       f"of range for a call with {nargs} positional "
                                       f"arguments")
    return tuple(i % nargs for i in nums), single


def _coerce(transform: str, fun, given, avals, what: str):
    """Tangent/cotangent leaves as arrays of their primal's shape and dtype."""
    out = []
    for i, (t, pa) in enumerate(zip(given, avals)):
        ta = aval_of_example(t)
        if ta.shape != pa.shape or (not ta.weak and ta.dtype != pa.dtype):
            raise DifferentiationError(
                f"{transform}({_label(fun)}): {what} {i} is {ta.strong()}, its primal is "
                f"{pa.strong()}; pass one of the primal's shape and dtype")
        out.append(t if isinstance(t, Tracer) else np.asarray(t, dtype=pa.dtype))
    return out


def _tree_check(transform: str, fun, got, want, what: str) -> list:
    leaves, tree = tree_flatten(got)
    if tree != want:
        raise DifferentiationError(f"{transform}({_label(fun)}): {what} have the structure "
                                   f"{tree}, the primals {want}; pass one per primal")
    return leaves


# ------------------------------------------------------------ forward


def jvp(fun: Callable[..., Any], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), J·tangents)`` (and ``aux``): forward mode. Integer
    and bool primals take zero tangents whatever is passed for them."""
    primals, tangents = tuple(primals), tuple(tangents)
    traced = _Traced("jvp", fun, primals, {}, tuple(range(len(primals))))
    t_leaves = _tree_check("jvp", fun, tangents, traced.in_tree, "tangents")
    which = tangent_inputs(traced.graph, traced.diff)
    t_leaves = _coerce("jvp", fun, [t_leaves[i] for i in which],
                       [traced.graph.inputs[i].aval for i in which], "tangent")
    main, aux = traced.split_aux(has_aux)
    k = main.num_leaves
    graph = jvp_graph(traced.graph, traced.diff, wrt=range(k))
    outs = _replay(graph, *traced.inputs, *t_leaves)
    n = len(traced.graph.outputs)
    primal_out = tree_unflatten(main, outs[:k])
    tangent_out = tree_unflatten(main, outs[n:])
    if has_aux:
        return primal_out, tangent_out, tree_unflatten(aux, outs[k:n])
    return primal_out, tangent_out


def linearize(fun: Callable[..., Any], *primals: PyTree) -> tuple[Any, Callable[..., Any]]:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the linear
    map J·t, evaluated from stored residuals without re-running ``fun``."""
    traced = _Traced("linearize", fun, primals, {}, tuple(range(len(primals))))
    primal, linear = linearize_graph(traced.graph, traced.diff)
    outs = _replay(primal, *traced.inputs)
    k = len(traced.graph.outputs)
    residuals = outs[k:]
    which = tangent_inputs(traced.graph, traced.diff)

    def f_jvp(*tangents):
        t_leaves = _tree_check("linearize", fun, tuple(tangents), traced.in_tree, "tangents")
        t_leaves = _coerce("linearize", fun, [t_leaves[i] for i in which],
                           [traced.graph.inputs[i].aval for i in which], "tangent")
        return tree_unflatten(traced.out_tree, _replay(linear, *residuals, *t_leaves))
    return tree_unflatten(traced.out_tree, outs[:k]), f_jvp


# ------------------------------------------------------------ reverse


@dataclass(frozen=True, eq=False)
class _Pullback:
    """What a ``VJPFunction`` holds besides its residuals."""

    fun: object
    back: Graph
    which: tuple  # the differentiated leaves that get a cotangent from ``back``
    main: TreeDef  # of the outputs (the cotangent's structure)
    out_avals: tuple
    in_tree: TreeDef  # of the primals
    in_avals: tuple


class VJPFunction:
    """The ``vjp_fn`` that ``vjp`` returns: ``vjp_fn(ct)`` is Jᵀ·ct, one
    cotangent per primal. A pytree whose leaves are the residuals (JAX's
    ``Partial``), so it may be returned from ``jit``, passed to one, or kept
    as a residual of a ``custom_vjp`` rule."""

    __slots__ = ("pullback", "residuals")

    def __init__(self, pullback: _Pullback, residuals: Sequence[Any]) -> None:
        self.pullback, self.residuals = pullback, tuple(residuals)

    def __call__(self, ct: PyTree) -> tuple[Any, ...]:
        p = self.pullback
        cts = _tree_check("vjp", p.fun, ct, p.main, "cotangents")
        cts = _coerce("vjp", p.fun, cts, p.out_avals, "cotangent")
        found = dict(zip(p.which, _replay(p.back, *self.residuals, *cts)))
        leaves = [found[i] if i in found else F.zeros(a.shape, a.dtype)
                  for i, a in enumerate(p.in_avals)]
        return tuple(tree_unflatten(p.in_tree, leaves))


register_pytree_node(VJPFunction, lambda f: (f.residuals, f.pullback),
                     lambda pullback, residuals: VJPFunction(pullback, residuals))


def vjp(fun: Callable[..., Any], *primals: PyTree, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), vjp_fn)`` (and ``aux``): ``vjp_fn(ct)`` is Jᵀ·ct, one
    cotangent per primal, by transposing the linearized graph (a
    ``VJPFunction``). Integer and bool primals get zero cotangents."""
    traced = _Traced("vjp", fun, primals, {}, tuple(range(len(primals))))
    main, aux = traced.split_aux(has_aux)
    k, n = main.num_leaves, len(traced.graph.outputs)
    primal, linear = linearize_graph(traced.graph, traced.diff, wrt=range(k))
    n_res = len(primal.outputs) - n
    back = transpose_graph(linear, [False] * n_res + [True] * (len(linear.inputs) - n_res))
    outs = _replay(primal, *traced.inputs)
    pullback = _Pullback(
        fun, back, tuple(tangent_inputs(traced.graph, traced.diff)), main,
        tuple(x.aval.strong() for x in traced.graph.outputs[:k]), traced.in_tree,
        tuple(x.aval for x in traced.graph.inputs[:len(traced.leaves)]))
    vjp_fn = VJPFunction(pullback, outs[n:])
    out = tree_unflatten(main, outs[:k])
    return (out, vjp_fn, tree_unflatten(aux, outs[k:n])) if has_aux else (out, vjp_fn)


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False,
                   holomorphic: bool = False) -> Callable[..., tuple[Any, Any]]:
    """``(fun(*args), gradient)`` of a scalar float function; with
    ``has_aux`` the function returns ``(output, aux)`` and the value is
    ``(output, aux)``. The gradient has the structure of ``args[argnums]``
    (a tuple of them when ``argnums`` is a tuple). Complex inputs follow
    JAX's convention (the transposes are not conjugated: the gradient of a
    real ``f(z)`` is the conjugate of its Wirtinger gradient's double);
    ``holomorphic=True`` differentiates a complex-valued holomorphic ``f``
    of complex inputs: ``f'(z)``. With quantities (``isokernel.units``) the
    value keeps its unit and each gradient leaf is in the output's unit per
    its input's unit."""
    def value_and_grad_f(*args, **kwargs):
        nums, single = _argnums("grad", fun, argnums, len(args))
        traced = _Traced("grad", fun, args, kwargs, nums)
        main, aux = traced.split_aux(has_aux)
        traced.require_scalar_output(main, holomorphic)
        traced.require_float_inputs(holomorphic)
        seed = np.ones((), traced.graph.outputs[0].aval.dtype)
        graph = vjp_graph(traced.graph, traced.diff, wrt=[0], seeds=[seed])
        outs = _replay(graph, *traced.inputs)
        n = len(traced.graph.outputs)
        # quantities (isokernel.units): the gradient in output units per input unit
        grads = tree_unflatten(derivative_tree(traced.in_tree, main), outs[n:])
        grads = grads[0] if single else tuple(grads)
        value = tree_unflatten(main, outs[:1])
        if has_aux:
            return (value, tree_unflatten(aux, outs[1:n])), grads
        return value, grads
    return _wrap("value_and_grad", fun, value_and_grad_f)


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar float function (``(gradient, aux)`` with
    ``has_aux``). ``grad(f, argnums=(0, 1))`` gives a tuple. Complex inputs
    and ``holomorphic``: as ``value_and_grad``."""
    inner = value_and_grad(fun, argnums, has_aux, holomorphic)

    def grad_f(*args, **kwargs):
        value, grads = inner(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return _wrap("grad", fun, grad_f)


# ----------------------------------------------------------- jacobians


def _one_hot_leaves(i, like: list) -> list:
    """Leaves shaped like ``like`` that are 1 at flat position ``i`` of their
    concatenation and 0 elsewhere (``i`` is traced under vmap)."""
    total = sum(int(np.prod(np.shape(x), dtype=np.int64)) for x in like)
    mask = F.equal(np.arange(total), i)
    out, start = [], 0
    for x in like:
        aval = aval_of_example(x).strong()
        part = mask[start:start + aval.size]
        one, zero = np.ones((), aval.dtype), np.zeros((), aval.dtype)
        out.append(F.reshape(F.where(part, one, zero), aval.shape))
        start += aval.size
    return out


def _sizes(leaves) -> list[int]:
    return [aval_of_example(x).size for x in leaves]


def _block(rows, start: int, count: int, row_shape, col_shape):
    """Rows ``start:start+count`` of a batch-major result, as an array of
    shape ``(*row_shape, *col_shape)``."""
    block = F.reshape(rows[start:start + count], (*row_shape, *col_shape))
    return block


def _front_to_back(x, front: int):
    """Move the first ``front`` axes to the end."""
    rank = aval_of_example(x).ndim
    perm = list(range(front, rank)) + list(range(front))
    return F.transpose(x, perm)


def _check_complex(label: str, what: str, aval, holomorphic: bool | None) -> None:
    """JAX's rule for complex values: refused unless ``holomorphic=True``
    (``holomorphic`` False), required with it (True), either (None)."""
    if holomorphic is False and aval.dtype in dtypes.COMPLEX:
        raise DifferentiationError(
            f"{label}: {what} is {aval}; differentiating complex values this way needs "
            f"holomorphic=True (JAX's convention), or take inp.real, inp.imag or inp.abs first")
    if holomorphic and aval.dtype not in dtypes.COMPLEX:
        raise DifferentiationError(
            f"{label} with holomorphic=True: {what} is {aval}; holomorphic differentiation "
            f"needs complex inputs and outputs (e.g. x.astype(inp.complex128))")


def _require_float_leaves(transform: str, fun, leaves, what: str,
                          holomorphic: bool | None = None) -> None:
    """Float or complex leaves; with ``holomorphic`` False, no complex ones
    (JAX's rule: say ``holomorphic=True``), with True, complex ones only."""
    for i, x in enumerate(leaves):
        aval = aval_of_example(x)
        _check_complex(f"{transform}({_label(fun)})", f"{what} {i}", aval.strong(), holomorphic)
        if aval.dtype not in dtypes.INEXACT:
            raise DifferentiationError(
                f"{transform}({_label(fun)}): {what} {i} is {aval.strong()}; only float "
                f"values can be differentiated. Cast it (e.g. x.astype(inp.float64)) or "
                f"leave it out")


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian by forward mode: one JVP per input element, all of them
    batched into one pass by vmap. Shape: ``(*out.shape, *in.shape)``."""
    def jacfwd_f(*args, **kwargs):
        nums, single = _argnums("jacfwd", fun, argnums, len(args))
        part = _closing(fun, args, kwargs, nums)
        dargs = tuple(args[i] for i in nums)
        leaves, in_tree = tree_flatten(dargs)
        _require_float_leaves("jacfwd", fun, leaves, "argument leaf",
                              True if holomorphic else False)

        def push(i):
            tangents = tree_unflatten(in_tree, _one_hot_leaves(i, leaves))
            result = jvp(part, dargs, tangents, has_aux=has_aux)
            return (result[1], result[2]) if has_aux else result[1]
        total = sum(_sizes(leaves))
        found = vmap(push, out_axes=(0, None) if has_aux else 0)(np.arange(total))
        touts, aux = found if has_aux else (found, None)

        def per_output(rows):
            out_shape = aval_of_example(rows).shape[1:]
            blocks, start = [], 0
            for x, size in zip(leaves, _sizes(leaves)):
                shape = aval_of_example(x).shape
                block = _block(rows, start, size, shape, out_shape)
                blocks.append(_front_to_back(block, len(shape)))
                start += size
            tree = tree_unflatten(in_tree, blocks)
            return tree[0] if single else tuple(tree)
        jac = tree_map(per_output, touts)
        return (jac, aux) if has_aux else jac
    return _wrap("jacfwd", fun, jacfwd_f)


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one VJP per output element, batched by
    vmap; a scalar output takes a single reverse pass (a gradient)."""
    def jacrev_f(*args, **kwargs):
        nums, single = _argnums("jacrev", fun, argnums, len(args))
        part = _closing(fun, args, kwargs, nums)
        dargs = tuple(args[i] for i in nums)
        _require_float_leaves("jacrev", fun, tree_flatten(dargs)[0], "argument leaf",
                              True if holomorphic else None)
        traced = _Traced("jacrev", fun, args, kwargs, nums)
        main, _ = traced.split_aux(has_aux)
        outs = traced.graph.outputs[:main.num_leaves]
        _require_float_leaves("jacrev", fun, [x.aval for x in outs], "output leaf",
                              True if holomorphic else False)
        if len(outs) == 1 and outs[0].aval.shape == ():
            found = grad(part, tuple(range(len(dargs))), has_aux, holomorphic)(*dargs)
            cts, aux = found if has_aux else (found, None)
            jac = cts[0] if single else cts
            if not is_scalar_tree(main):  # a quantity's gradient has its units already
                jac = tree_unflatten(main, [jac])
            return (jac, aux) if has_aux else jac
        found = vjp(part, *dargs, has_aux=has_aux)
        out_leaves, out_tree = tree_flatten(found[0])
        jac = _jacrev_rows(found[1], out_leaves, out_tree, dargs, single)
        return (jac, found[2]) if has_aux else jac
    return _wrap("jacrev", fun, jacrev_f)


def _jacrev_rows(pull, out_leaves, out_tree, dargs, single):
    def pull_row(i):
        return pull(tree_unflatten(out_tree, _one_hot_leaves(i, out_leaves)))
    cts = vmap(pull_row)(np.arange(sum(_sizes(out_leaves))))
    ct_leaves, in_tree = tree_flatten(cts)
    in_shapes = [aval_of_example(x).shape for x in tree_flatten(dargs)[0]]
    per_out, start = [], 0
    for y, size in zip(out_leaves, _sizes(out_leaves)):
        shape = aval_of_example(y).shape
        blocks = [_block(c, start, size, shape, s) for c, s in zip(ct_leaves, in_shapes)]
        tree = tree_unflatten(in_tree, blocks)
        per_out.append(tree[0] if single else tuple(tree))
        start += size
    return tree_unflatten(out_tree, per_out)


def jacobian_mode(n_in: int, n_out: int) -> str:
    """Reverse mode costs one pass per output element, forward mode one per
    input element: reverse when there are fewer outputs than inputs, else
    forward (which also stores no residuals)."""
    return "reverse" if n_out < n_in else "forward"


def jacobian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
             mode: str = "auto") -> Callable[..., Any]:
    """The Jacobian, by the cheaper direction (``jacobian_mode``) unless
    ``mode`` is ``"forward"`` or ``"reverse"``."""
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError(f"jacobian mode {mode!r}: use 'auto', 'forward' or 'reverse'")

    def jacobian_f(*args, **kwargs):
        chosen = mode
        if mode == "auto":
            nums, _ = _argnums("jacobian", fun, argnums, len(args))
            traced = _Traced("jacobian", fun, args, kwargs, nums)
            main, _ = traced.split_aux(has_aux)
            n_out = sum(x.aval.size for x in traced.graph.outputs[:main.num_leaves])
            chosen = jacobian_mode(sum(_sizes(traced.leaves)), n_out)
        direction = jacrev if chosen == "reverse" else jacfwd
        return direction(fun, argnums, has_aux)(*args, **kwargs)
    return _wrap("jacobian", fun, jacobian_f)


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
            has_aux: bool = False) -> Callable[..., Any]:
    """Second derivatives by forward-over-reverse: ``jacfwd(jacrev(fun))``,
    which for a scalar function is ``jacfwd(grad(fun))``."""
    inner = jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)
    return _wrap("hessian", fun, lambda *args, **kwargs: inner(*args, **kwargs))


def hvp(fun: Callable[..., Any], primals: Sequence[PyTree], tangents: Sequence[PyTree]) -> Any:
    """The Hessian-vector product H·v of a scalar function, forward over
    reverse (one JVP of the gradient): an array for one primal, a tuple for
    several."""
    primals, tangents = tuple(primals), tuple(tangents)
    nums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(fun, argnums=nums), primals, tangents)[1]


# ------------------------------------------------------------- markers


def stop_gradient(x: PyTree) -> PyTree:
    """``x`` as a constant for differentiation: its tangent and cotangent are
    zero. Works on pytrees; integer and bool leaves pass unchanged."""
    def stop(leaf):
        if aval_of_example(leaf).dtype not in dtypes.INEXACT:
            return leaf
        return bind(Op.STOP_GRADIENT, leaf)
    return tree_map(stop, x)


# ----------------------------------------------------------------- vmap


def _axes_for(spec, value, where: str) -> list:
    """One axis (or None) per leaf of ``value``: ``spec`` is an int or None
    for all of them, or a container of the same shape (a pytree prefix)."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_flatten(value)[0])
    if isinstance(value, (tuple, list)) and isinstance(spec, (tuple, list)) \
            and len(spec) == len(value):
        return [a for s, v in zip(spec, value) for a in _axes_for(s, v, where)]
    if isinstance(value, dict) and isinstance(spec, dict) and set(spec) == set(value):
        return [a for k in sorted(value, key=repr) for a in _axes_for(spec[k], value[k], where)]
    raise ValueError(f"{where} {spec!r} does not match the structure of {type(value).__name__} "
                     f"values; give an int, None, or one entry per element")


def _mapped_size(fun, leaves, axes, names) -> tuple[list, int]:
    sizes, normal = {}, []
    for leaf, axis, name in zip(leaves, axes, names):
        if axis is None:
            normal.append(None)
            continue
        rank = aval_of_example(leaf).ndim
        if isinstance(leaf, (bool, int, float)) or not -rank <= axis < max(rank, 1) or rank == 0:
            raise ValueError(f"vmap({_label(fun)}): in_axes {axis} for {name!r}, which has "
                             f"rank {rank}; map an axis it has, or pass None to share it")
        normal.append(axis % rank)
        sizes[name] = aval_of_example(leaf).shape[axis % rank]
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{k}: {v}" for k, v in sizes.items())
        raise ValueError(f"vmap({_label(fun)}): mapped axes differ in size ({shown}); map "
                         f"axes of one length")
    return normal, next(iter(sizes.values()), None)


def _to_front(x, axis: int):
    if axis == 0:
        return x
    rank = aval_of_example(x).ndim
    return F.transpose(x, [axis] + [i for i in range(rank) if i != axis])


def _place(fun, out, dim, axis, size: int):
    if axis is None:
        if dim is not None:
            raise ValueError(f"vmap({_label(fun)}): out_axes=None for an output that depends "
                             f"on the mapped inputs; give it an axis")
        return out
    out = batched(out, dim, size)
    rank = aval_of_example(out).ndim
    axis = axis % rank
    if axis == 0:
        return out
    return F.transpose(out, [i for i in range(1, axis + 1)] + [0] +
                       [i for i in range(axis + 1, rank)])


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None) -> Callable[..., Any]:
    """Map ``fun`` over an axis of its arguments, as one batched graph.
    ``in_axes``: an int, None, or one entry per positional argument (each an
    int, None, or a matching container); keyword arguments are mapped over
    axis 0. ``out_axes``: the same, for the outputs."""
    def vmap_f(*args, **kwargs):
        spec = in_axes if not isinstance(in_axes, list) else tuple(in_axes)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"vmap({_label(fun)}): in_axes has {len(spec)} entries for "
                             f"{len(args)} positional arguments")
        leaves, treedef = tree_flatten((args, kwargs))
        axes = _axes_for((spec, 0), (args, kwargs), "in_axes")
        params = _params(fun, len(args))
        names = [p for a, n in zip(args, params) for p in leaf_paths(a, n)] + \
            [p for k, v in kwargs.items() for p in leaf_paths(v, k)]
        axes, size = _mapped_size(fun, leaves, axes, names)
        size = axis_size if size is None else size
        if size is None:
            raise ValueError(f"vmap({_label(fun)}): no argument is mapped; map one, or give "
                             f"axis_size")
        return _vmap_call(fun, leaves, treedef, axes, names, size, out_axes)
    return _wrap("vmap", fun, vmap_f)


def _vmap_call(fun, leaves, treedef, axes, names, size, out_axes):
    mapped = [i for i, a in enumerate(axes) if a is not None]

    def per_example(*values):
        full = list(leaves)
        for i, v in zip(mapped, values):
            full[i] = v
        a, kw = tree_unflatten(treedef, full)
        return fun(*a, **kw)
    examples = []
    for i in mapped:
        aval = aval_of_example(leaves[i])
        shape = aval.shape[:axes[i]] + aval.shape[axes[i] + 1:]
        examples.append(ShapeDtype(shape, aval.dtype))
    graph, out_tree, caps = trace_flat(per_example, tuple(examples), [names[i] for i in mapped],
                                       _name(fun))
    batched_graph, out_dims = vmap_graph(graph, [0] * len(mapped) + [None] * len(caps), size)
    moved = [_to_front(leaves[i], axes[i]) for i in mapped]
    outs = _replay(batched_graph, *moved, *caps)
    out_spec = _axes_for(out_axes, tree_unflatten(out_tree, outs), "out_axes")
    return tree_unflatten(out_tree, [_place(fun, o, d, a, size)
                                     for o, d, a in zip(outs, out_dims, out_spec)])
