"""``scan`` and ``fori_loop``: the region primitive ``scan`` with all of its
rules.

A ``scan`` node reads the initial carry, the sequences ``xs`` (axis 0 is
the step) and the captured values, and carries one closed body (carry, x,
captures -> carry, y). Its meaning applies the body ``length`` times, in
order or reversed, and returns the final carry and every step's ``y``
stacked on a new axis 0; only the carry and the outputs are kept.

``fori_loop`` with bounds known at record time is a ``scan`` whose carry
holds the counter (so it reverse-differentiates); with traced bounds it is
a ``while_loop``.

*Derivatives.* Forward mode is one ``scan`` over the carry and its tangent.
Reverse mode splits that node (``linearize.PARTIAL_EVAL``): a primal scan
that also stacks each step's residuals (a residual that is a capture or a
step of ``xs`` is read from there instead of stacked), and a linear scan
over them; the linear scan transposes to a scan run the other way whose
carry is the carry's cotangent plus the captures' accumulated cotangents.
Memory: the stacked residuals, O(T * residuals). ``checkpoint_every=K``
records the loop as an outer scan over segments of K steps, each segment a
``checkpoint`` of the inner scan: reverse mode then keeps the carry once per
segment and recomputes one segment's residuals at a time, memory
O((T/K + K) * residuals), about one more forward pass of time. The same
operations in the same order: the values and gradients are the unchecked
loop's bits. By default (``checkpoint_every=None``) a loop whose carries
alone would fill more than ``CHECKPOINT_BYTES`` over its steps is
checkpointed every ceil(sqrt(T)) steps; ``checkpoint_every=False`` never.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..ir import Aval, Op, ShapeError, SubGraph
from ..ir.eval import namespace_rule
from ..ir.pytree import tree_flatten, tree_unflatten
from ..ir.source import user_where
from ..record import ShapeDtype, Tracer, bind, current_builder, replay
from ..record import frontend as F
from ..transforms.graphs import is_float, retrace, zeros
from ..transforms.jvp import jvp_graph
from ..transforms.linearize import Split, linearize_graph
from ..transforms.regions import RegionRules, register
from ..transforms.transpose import Lin, transpose_graph
from ..transforms.vmap import batch_size, vmap_graph
from ..typing import ArrayLike, PyTree
from .checkpoint import checkpoint
from .common import (
    as_values,
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
    with_inputs,
)
from .while_loop import while_loop

_C = TypeVar("_C")  # a loop's carry

CHECKPOINT_BYTES = 512 << 20
"""The default checkpoints a scan whose steps × carry bytes exceed this."""
CHECKPOINT_MIN_STEPS = 16

NOT_A_PAIR = "the body must return a pair (carry, y); return y=None when nothing is stacked"
CARRY_CHANGED = ("return (carry, y) with the carry of the same structure, shapes and dtypes as "
                 "init (cast with astype where the body changes a dtype)")


def scan(f: Callable[[_C, Any], tuple[_C, Any]], init: _C, xs: PyTree = None,
         length: int | None = None, reverse: bool = False, *,
         checkpoint_every: int | bool | None = None) -> tuple[_C, Any]:
    """JAX's ``scan``: ``carry, y = f(carry, x)`` over axis 0 of ``xs``;
    returns the final carry and the ``y`` of every step, stacked.
    ``checkpoint_every``: reverse mode keeps the carry every that many steps
    and recomputes in between (the module docstring); None: every
    ceil(sqrt(T)) steps when the carries of all steps would exceed
    ``CHECKPOINT_BYTES``, else every step's residuals; False: never."""
    where = user_where()
    carry_leaves, carry_tree = tree_flatten(init)
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = as_values(x_leaves)
    steps = _length(x_leaves, length, where)
    if current_builder() is None and not any(isinstance(x, Tracer)
                                             for x in carry_leaves + x_leaves):
        _checkpoint_policy(checkpoint_every, steps, carry_leaves, where)  # checks the value
        return _eager(f, init, xs, x_leaves, x_tree, steps, reverse, where)
    every = _checkpoint_policy(checkpoint_every, steps, carry_leaves, where)
    if every:
        return _checkpointed(f, init, xs, steps, every, reverse)
    n = len(carry_leaves)
    trees: list = []
    x_examples = [ShapeDtype(x.shape[1:], x.dtype) for x in x_leaves]

    def step(carry_examples):
        return trace_body(_flat_step(f, carry_tree, x_tree, n, trees, where),
                          list(carry_examples) + x_examples, getattr(f, "__name__", "f"))

    def record(want):
        body, _, caps, weak = step([ShapeDtype(a.shape, a.dtype) for a in want])
        body = cast_weak(body, want + [x.aval.strong() for x in body.outputs[n:]], weak)
        check_same(where, "the body of scan", CARRY_CHANGED,
                   [x.aval.strong() for x in body.outputs[:n]], want, trees[0], carry_tree)
        return body, caps
    want, (body, caps) = record_carry(carry_leaves, record, step)
    body = with_inputs(body, n + len(x_leaves), caps, caps)
    outs = bind(Op.SCAN, *carry_values(carry_leaves, want), *as_values(x_leaves), *caps,
                body=SubGraph(body), n_carry=n, n_xs=len(x_leaves), length=steps,
                reverse=bool(reverse), jvp_of=None)
    return tree_unflatten(carry_tree, list(outs[:n])), tree_unflatten(trees[1], list(outs[n:]))


def _checkpoint_policy(every, steps: int, carry_leaves, where: str) -> int:
    """The segment length of a checkpointed scan, or 0 for none."""
    if every is False:
        return 0
    if every is None:
        carry = sum(int(np.prod(np.shape(x))) * np.dtype(x.dtype).itemsize
                    if hasattr(x, "dtype") else 8 for x in carry_leaves)
        if steps < CHECKPOINT_MIN_STEPS or steps * carry <= CHECKPOINT_BYTES:
            return 0
        return math.isqrt(steps - 1) + 1
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"scan at {where}: checkpoint_every={every!r}; give a positive number "
                         f"of steps, None (every sqrt(T) steps above {CHECKPOINT_BYTES >> 20} "
                         f"MiB of carries) or False (keep every step's residuals)")
    return int(every) if every < steps else 0


def _checkpointed(f, init, xs, steps: int, every: int, reverse: bool):
    """The scan as segments of ``every`` steps, each a ``checkpoint`` of the
    inner scan (the steps past the last whole segment as one more scan),
    in the order the steps run: the same operations, the same bits."""
    segments, rest = divmod(steps, every)
    cut = segments * every
    x_leaves, x_tree = tree_flatten(xs)
    head = tree_unflatten(x_tree, [F.reshape(x[:cut], (segments, every, *x.shape[1:]))
                                   for x in x_leaves])
    tail = tree_unflatten(x_tree, [x[cut:] for x in x_leaves])

    @checkpoint
    def segment(carry, seg_xs):
        return scan(f, carry, seg_xs, length=every, reverse=reverse, checkpoint_every=False)

    def run_head(carry):
        carry, ys = scan(segment, carry, head, length=segments, reverse=reverse,
                         checkpoint_every=False)
        y_leaves, y_tree = tree_flatten(ys)
        return carry, y_leaves, y_tree

    def run_tail(carry):
        carry, ys = scan(f, carry, tail, length=rest, reverse=reverse, checkpoint_every=False)
        return carry, tree_flatten(ys)[0]

    if reverse:
        carry, tail_ys = run_tail(init) if rest else (init, None)
        carry, head_ys, y_tree = run_head(carry)
    else:
        carry, head_ys, y_tree = run_head(init)
        carry, tail_ys = run_tail(carry) if rest else (carry, None)
    ys = [F.reshape(y, (cut, *y.shape[2:])) for y in head_ys]
    if tail_ys is not None:
        ys = [F.concatenate([y, t]) for y, t in zip(ys, tail_ys)]
    return carry, tree_unflatten(y_tree, ys)


def _length(x_leaves, length, where: str) -> int:
    if any(len(x.shape) == 0 for x in x_leaves):
        raise ShapeError(f"scan at {where}: a sequence of xs is a scalar; every leaf of xs "
                         f"needs axis 0 for the steps")
    lengths = {int(x.shape[0]) for x in x_leaves}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ShapeError(f"scan at {where}: " + ("give length= or xs" if not lengths else
                         f"the sequences and length disagree on the step count {sorted(lengths)}"))
    return lengths.pop()


def _flat_step(f, carry_tree, x_tree, n: int, trees: list, where: str):
    """``f`` over flat leaves, returning carry and y leaves; the output
    structures land in ``trees`` (carry, y)."""
    def step(*leaves):
        result = f(tree_unflatten(carry_tree, leaves[:n]), tree_unflatten(x_tree, leaves[n:]))
        if not isinstance(result, tuple) or len(result) != 2:
            raise ShapeError(f"scan at {where}: {NOT_A_PAIR}")
        carry_leaves, got_tree = tree_flatten(result[0])
        y_leaves, y_tree = tree_flatten(result[1])
        trees[:] = [got_tree, y_tree]
        return [*carry_leaves, *y_leaves]
    return step


def _eager(f, init, xs, x_leaves, x_tree, steps: int, reverse: bool, where: str):
    """Outside a recording: the NumPy meaning, with the same checks."""
    carry, ys = init, []
    init, tree = tree_flatten(init)
    want = [strong_aval(x) for x in init]
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        result = f(carry, tree_unflatten(x_tree, [np.asarray(x)[t] for x in x_leaves]))
        if not isinstance(result, tuple) or len(result) != 2:
            raise ShapeError(f"scan at {where}: {NOT_A_PAIR}")
        carry, y = result
        leaves, got_tree = tree_flatten(carry)
        if init is not None and got_tree == tree:  # the first step settles weak leaves
            want, init = settle_eager(init, want, leaves), None
        check_same(where, "the body of scan", CARRY_CHANGED, eager_avals(leaves, want), want,
                   got_tree, tree)
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys:
        return carry, None
    y_leaves = [tree_flatten(y)[0] for y in ys]
    stacked = [np.stack([np.asarray(row[k]) for row in y_leaves]) for k in range(len(y_leaves[0]))]
    return carry, tree_unflatten(tree_flatten(ys[0])[1], stacked)


def fori_loop(lower: ArrayLike, upper: ArrayLike, body_fun: Callable[[Any, _C], _C], init_val: _C,
              *, checkpoint_every: int | bool | None = None) -> _C:
    """JAX's ``fori_loop``: ``val = body_fun(i, val)`` for ``i`` in
    ``[lower, upper)``. Bounds known now make a ``scan`` (reverse mode
    stacks residuals, or checkpoints: ``scan``'s ``checkpoint_every``);
    traced bounds a ``while_loop`` (which keeps the carry every
    ``checkpoint_every`` steps, by default every sqrt(T))."""
    if isinstance(lower, Tracer) or isinstance(upper, Tracer):
        def test(state):
            return state[0] < upper

        def step(state):
            return state[0] + 1, body_fun(state[0], state[1])
        every = checkpoint_every if checkpoint_every else None
        return while_loop(test, step, (F.astype(lower, np.int64), init_val),
                          checkpoint_every=every)[1]
    lower, upper = int(lower), int(upper)

    def count(state, _):
        i, val = state
        return (i + 1, body_fun(i, val)), None
    return scan(count, (np.int64(lower), init_val), length=max(upper - lower, 0),
                checkpoint_every=checkpoint_every)[0][1]


# --- the rules ----------------------------------------------------------------------------

def _parts(args, n_carry: int, n_xs: int):
    return list(args[:n_carry]), list(args[n_carry:n_carry + n_xs]), list(args[n_carry + n_xs:])


def _shape(*args: Aval, body, n_carry, n_xs, length, reverse, jvp_of) -> tuple[Aval, ...]:
    carry, xs, caps = _parts(args, n_carry, n_xs)
    steps = [Aval(x.shape[1:], x.dtype) for x in xs]
    if any(x.shape[:1] != (length,) for x in xs):
        raise ShapeError(f"scan: every sequence must have {length} steps on axis 0")
    expected = [a.strong() for a in carry + steps + caps]
    if [x.aval.strong() for x in body.graph.inputs] != expected:
        raise ShapeError("scan: the body's inputs do not match the carry, steps and captures")
    outs = [x.aval.strong() for x in body.graph.outputs]
    if outs[:n_carry] != [a.strong() for a in carry]:
        raise ShapeError("scan: the body returns another carry than it takes")
    return tuple(outs[:n_carry]) + tuple(Aval((length, *y.shape), y.dtype)
                                         for y in outs[n_carry:])


def _eval(xp, *args, body, n_carry, n_xs, length, reverse, jvp_of) -> list:
    """The body step by step in the array namespace ``xp``
    (``ir.eval.ArrayNamespace``), each step's outputs written into the
    stacked arrays."""
    carry, xs, caps = _parts(args, n_carry, n_xs)
    ys = [xp.empty((length, *y.aval.shape), y.aval.dtype) for y in body.graph.outputs[n_carry:]]
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = xp.run_graph(body.graph, carry + [x[t] for x in xs] + caps)
        carry = outs[:n_carry]
        for y, value in zip(ys, outs[n_carry:]):
            y[t] = value
    return [xp.copy(c) if any(c is a for a in args) else c for c in carry] + ys


def _jvp(operands, tangents, *, body, n_carry, n_xs, length, reverse, jvp_of):
    """One ``scan`` over the carry and its tangent, the steps and theirs,
    the captures and theirs: the body's JVP. The node keeps its primal body
    (``jvp_of``) for reverse mode's split."""
    n, nx = n_carry, n_xs
    inputs = [x.aval.strong() for x in body.graph.inputs]
    tpos = tuple(i for i in range(n) if is_float(inputs[i]))
    xpos = tuple(i for i in range(nx) if tangents[n + i] is not None and is_float(inputs[n + i]))
    cpos = tuple(i for i in range(len(inputs) - n - nx)
                 if tangents[n + nx + i] is not None and is_float(inputs[n + nx + i]))
    ypos = tuple(i for i, y in enumerate(body.graph.outputs[n:]) if is_float(y.aval))
    layout = (n, nx, tpos, xpos, cpos, ypos)
    carry, xs, caps = _parts(operands, n, nx)
    tcarry = [zeros(inputs[i]) if tangents[i] is None else tangents[i] for i in tpos]
    txs = [tangents[n + i] for i in xpos]
    tcaps = [tangents[n + nx + i] for i in cpos]
    outs = bind(Op.SCAN, *carry, *tcarry, *xs, *txs, *caps, *tcaps,
                body=SubGraph(_jvp_body(body.graph, layout)), n_carry=n + len(tpos),
                n_xs=nx + len(xpos), length=length, reverse=reverse,
                jvp_of=(body, *layout))
    m, ny = len(tpos), len(body.graph.outputs) - n
    tangent_carry = dict(zip(tpos, outs[n:n + m]))
    tangent_ys = dict(zip(ypos, outs[n + m + ny:]))
    primal = tuple(outs[:n]) + tuple(outs[n + m:n + m + ny])
    return primal, tuple(tangent_carry.get(i) for i in range(n)) + \
        tuple(tangent_ys.get(i) for i in range(ny))


def _jvp_body(body, layout):
    """The JVP of the body laid out as a scan body: carries (carry, tangent
    carry), steps (x, tangent x), captures (captures, their tangents);
    outputs (carry, tangent carry, y, tangent y)."""
    n, nx, tpos, xpos, cpos, ypos = layout
    c = len(body.inputs) - n - nx
    diff = ([i in tpos for i in range(n)] + [i in xpos for i in range(nx)]
            + [i in cpos for i in range(c)])
    wrt = list(tpos) + [n + i for i in ypos]
    jg = jvp_graph(body, diff, wrt)
    ins = [x.aval for x in body.inputs]
    m, mx = len(tpos), len(xpos)
    avals = (ins[:n] + [ins[i].strong() for i in tpos] + ins[n:n + nx]
             + [ins[n + i].strong() for i in xpos] + ins[n + nx:]
             + [ins[n + nx + i].strong() for i in cpos])
    ny = len(body.outputs) - n

    def step(*v):
        carry, tcarry = v[:n], v[n:n + m]
        x, tx = v[n + m:n + m + nx], v[n + m + nx:n + m + nx + mx]
        caps, tcaps = v[n + m + nx + mx:n + m + nx + mx + c], v[n + m + nx + mx + c:]
        outs = replay(jg, *carry, *x, *caps, *tcarry, *tx, *tcaps)
        k = n + ny
        return outs[:n] + outs[k:k + m] + outs[n:k] + outs[k + m:]
    return retrace(avals, step, name=f"jvp_{body.name}")


def _partial_eval(node, operands, known):
    """Reverse mode's split of a JVP'd scan: a primal scan that also stacks
    the residuals of every step (those that are a capture or a step of the
    sequences are read from there), and a linear scan over them."""
    if node.attrs["jvp_of"] is None:
        return None
    body, n, nx, tpos, xpos, cpos, ypos = node.attrs["jvp_of"]
    m, mx, c = len(tpos), len(xpos), len(body.graph.inputs) - n - nx
    primal_at = list(range(n)) + list(range(n + m, n + m + nx)) + \
        list(range(n + m + nx + mx, n + m + nx + mx + c))
    if not all(known[i] for i in primal_at):
        return None
    at = [i for i in range(len(known)) if i not in primal_at]  # the tangents
    fixed = [operands[i] for i in at if known[i]]  # tangents known in the primal (zeros)
    carry, xs, caps = (operands[:n], operands[n + m:n + m + nx],
                       operands[n + m + nx + mx:n + m + nx + mx + c])
    diff = ([i in tpos for i in range(n)] + [i in xpos for i in range(nx)]
            + [i in cpos for i in range(c)])
    primal, linear = linearize_graph(body.graph, diff, list(tpos) + [n + i for i in ypos])
    ny = len(body.graph.outputs) - n
    sources = _residual_sources(primal, n, nx, ny)
    attrs = node.attrs
    outs = bind(Op.SCAN, *carry, *xs, *caps, body=SubGraph(_stacking(primal, n, ny, sources)),
                n_carry=n, n_xs=nx, length=attrs["length"], reverse=attrs["reverse"],
                jvp_of=None)
    stacked = [*outs[n + ny:], *_invariants(primal, sources, carry, xs, caps, n, ny)]

    def staged(residuals, ops):
        given = iter(residuals[len(residuals) - len(fixed):])
        values = {i: next(given) if known[i] else ops[i] for i in at}
        tangents = ([values[i] for i in range(n, n + m)],
                    [values[i] for i in range(n + m + nx, n + m + nx + mx)],
                    [values[i] for i in at if i >= n + m + nx + mx + c])
        return _linear_scan(linear, sources, residuals[:len(residuals) - len(fixed)], tangents,
                            (n, nx, ny, ypos, m), attrs)
    known_results = tuple(outs[:n]) + (None,) * m + tuple(outs[n:n + ny]) + \
        (None,) * len(ypos)
    return Split(known=known_results, residuals=(*stacked, *xs, *caps, *fixed), staged=staged)


def _residual_sources(primal, n: int, nx: int, ny: int) -> list[tuple[str, int]]:
    """Where the linear scan reads each residual: ``("x", i)`` a step of
    sequence i, ``("cap", i)`` capture i, ``("stacked", k)`` the k-th stacked
    one, ``("invariant", k)`` the k-th of those that read neither the carry
    nor the steps (a capture's negation, a broadcast constant): computed
    once before the loop, not stacked T times."""
    inputs = {x: i for i, x in enumerate(primal.inputs)}
    varying = _varying(primal, n + nx)
    sources, counts = [], {"stacked": 0, "invariant": 0}
    for r in primal.outputs[n + ny:]:
        i = inputs.get(r)
        if i is not None and n <= i < n + nx:
            sources.append(("x", i - n))
        elif i is not None and i >= n + nx:
            sources.append(("cap", i - n - nx))
        else:
            kind = "stacked" if r in varying else "invariant"
            sources.append((kind, counts[kind]))
            counts[kind] += 1
    return sources


def _varying(graph, k: int) -> set:
    """The nodes of ``graph`` that read one of its first ``k`` inputs."""
    found = set(graph.inputs[:k])
    for node in graph.nodes:
        if any(x in found for x in node.inputs):
            found.add(node)
    return found


def _invariants(primal, sources, carry, xs, caps, n: int, ny: int) -> list:
    """The invariant residuals, computed from the captures before the loop
    (the carry and a step of each sequence stand in for inputs they do not read)."""
    wanted = [r for r, (kind, _) in zip(primal.outputs[n + ny:], sources) if kind == "invariant"]
    if not wanted:
        return []
    steps = [zeros(Aval(x.aval.shape[1:], x.aval.dtype)) for x in xs]
    outs = replay(primal, *carry, *steps, *caps)
    by_node = dict(zip(primal.outputs, outs))
    return [by_node[r] for r in wanted]


def _stacking(primal, n: int, ny: int, sources):
    """The primal part as a scan body: its outputs, then the residuals it
    must stack as extra ys."""
    stacked = [r for r, (kind, _) in zip(primal.outputs[n + ny:], sources) if kind == "stacked"]

    def step(*xs):
        outs = replay(primal, *xs)
        by_node = dict(zip(primal.outputs, outs))
        return outs[:n + ny] + [by_node[r] for r in stacked]
    return retrace([x.aval for x in primal.inputs], step, name=primal.name)


def _linear_scan(linear, sources, residuals, tangents, sizes, attrs):
    """The tangent part: a scan over the tangent carry, reading each step's
    residuals (stacked, a step of the sequences, or a capture)."""
    n, nx, ny, ypos, m = sizes
    tcarry, txs, tcaps = tangents
    n_stacked = sum(kind == "stacked" for kind, _ in sources)
    n_inv = sum(kind == "invariant" for kind, _ in sources)
    stacked, invariant = residuals[:n_stacked], residuals[n_stacked:n_stacked + n_inv]
    xs, caps = residuals[n_stacked + n_inv:n_stacked + n_inv + nx], \
        residuals[n_stacked + n_inv + nx:]
    seq = list(txs) + list(stacked) + list(xs)
    fixed = list(tcaps) + list(caps) + list(invariant)
    step_avals = [Aval(x.shape[1:], x.dtype) for x in seq]
    avals = [t.aval for t in tcarry] + step_avals + [x.aval for x in fixed]
    mx, mc = len(txs), len(tcaps)

    def step(*v):
        tc, tx = v[:m], v[m:m + mx]
        st, x = v[m + mx:m + mx + n_stacked], v[m + mx + n_stacked:m + mx + n_stacked + nx]
        rest = v[len(v) - len(fixed):]
        tcp, cp, inv = rest[:mc], rest[mc:mc + len(caps)], rest[mc + len(caps):]
        source = {"stacked": st, "x": x, "cap": cp, "invariant": inv}
        res = [source[kind][i] for kind, i in sources]
        return replay(linear, *res, *tc, *tx, *tcp)
    body = retrace(avals, step, name=linear.name)
    outs = bind(Op.SCAN, *tcarry, *seq, *fixed, body=SubGraph(body), n_carry=m,
                n_xs=len(seq), length=attrs["length"], reverse=attrs["reverse"], jvp_of=None)
    return (None,) * n + tuple(outs[:m]) + (None,) * ny + tuple(outs[m:])


def _transpose(cts, *operands, body, n_carry, n_xs, length, reverse, jvp_of):
    """A linear scan (linear in its carry and in some steps and captures)
    transposes to a scan run the other way: its carry is the carry's
    cotangent and the linear captures' accumulated cotangents, its steps the
    outputs' cotangents and the non-linear steps; it stacks the linear
    steps' cotangents."""
    carry, xs, caps = _parts(operands, n_carry, n_xs)
    # every carry of a linear scan is a tangent carry, linear in the body even
    # where it starts from a known value (a zero): its cotangent is then dropped
    lin_x = [isinstance(x, Lin) for x in xs]
    lin_c = [isinstance(x, Lin) for x in caps]
    flipped = transpose_graph(body.graph, [True] * n_carry + lin_x + lin_c)
    outs = body.graph.outputs
    given = [zeros(o.aval.strong()) if c is None else c for c, o in zip(cts[:n_carry], outs)]
    ys = [zeros(Aval((length, *o.aval.shape), o.aval.dtype)) if c is None else c
          for c, o in zip(cts[n_carry:], outs[n_carry:])]
    acc = [zeros(x.aval) for x, is_lin in zip(caps, lin_c) if is_lin]
    fixed_x = [x for x, is_lin in zip(xs, lin_x) if not is_lin]
    fixed_c = [x for x, is_lin in zip(caps, lin_c) if not is_lin]
    back = _transposed_body(flipped, n_carry, len(acc), ys, fixed_x, fixed_c, sum(lin_x))
    found = bind(Op.SCAN, *given, *acc, *ys, *fixed_x, *fixed_c, body=SubGraph(back),
                 n_carry=n_carry + len(acc), n_xs=len(ys) + len(fixed_x), length=length,
                 reverse=not reverse, jvp_of=None)
    ct_carry, ct_caps = found[:n_carry], iter(found[n_carry:n_carry + len(acc)])
    ct_xs = iter(found[n_carry + len(acc):])
    ct_carry = [c if isinstance(x, Lin) else None for c, x in zip(ct_carry, carry)]
    return (tuple(ct_carry) + tuple(next(ct_xs) if is_lin else None for is_lin in lin_x)
            + tuple(next(ct_caps) if is_lin else None for is_lin in lin_c))


def _transposed_body(flipped, n: int, q: int, ys, fixed_x, fixed_c, n_lin_x: int):
    """(ct carry, acc, ct y, fixed x, fixed captures) -> (ct carry before,
    acc + this step's capture cotangents, ct of the linear steps)."""
    avals = ([x.aval for x in flipped.outputs[:n]] + [x.aval for x in flipped.outputs[n + n_lin_x:]]
             + [Aval(y.shape[1:], y.dtype) for y in ys]
             + [Aval(x.shape[1:], x.dtype) for x in fixed_x] + [x.aval for x in fixed_c])
    ny, nf = len(ys), len(fixed_x)

    def step(*v):
        ct, acc = v[:n], v[n:n + q]
        cty, fx, fc = v[n + q:n + q + ny], v[n + q + ny:n + q + ny + nf], v[n + q + ny + nf:]
        pulled = replay(flipped, *fx, *fc, *ct, *cty)
        before, at_x, at_c = pulled[:n], pulled[n:n + n_lin_x], pulled[n + n_lin_x:]
        return list(before) + [a + b for a, b in zip(acc, at_c)] + list(at_x)
    return retrace(avals, step, name=f"transpose_{flipped.name}")


def _batch(args, bdims, *, body, n_carry, n_xs, length, reverse, jvp_of):
    """The carries the batch reaches are batched (the body iterated to a
    fixed point); a batched sequence has its batch moved behind the step
    axis, and each batched stacked y is moved back to batch-first."""
    size = batch_size(args, bdims)
    dims = carry_dims(body.graph, n_carry, bdims, size)
    y_dims = vmap_graph(body.graph, dims, size)[1][n_carry:]
    out = [d is not None for d in dims[:n_carry]] + [d is not None for d in y_dims]
    args = batch_operands(args, dims, bdims, size)
    args = [_step_major(x) if n_carry <= i < n_carry + n_xs and d is not None else x
            for i, (x, d) in enumerate(zip(args, dims))]
    outs = bind(Op.SCAN, *args, body=SubGraph(batch_body(body.graph, dims, size, out)),
                n_carry=n_carry, n_xs=n_xs, length=length, reverse=reverse,
                jvp_of=None if jvp_of is None else _batched_jvp_of(jvp_of, dims, size))
    ys = [_step_major(y) if d is not None else y for y, d in zip(outs[n_carry:], y_dims)]
    return tuple(outs[:n_carry]) + tuple(ys), tuple(dims[:n_carry]) + tuple(
        None if d is None else 0 for d in y_dims)


def _step_major(x):
    """Swap the first two axes."""
    perm = (1, 0, *range(2, x.ndim))
    return bind(Op.TRANSPOSE, x, perm=perm)


def _batched_jvp_of(jvp_of, dims, size: int):
    body, n, nx, tpos, xpos, cpos, ypos = jvp_of
    m, mx = len(tpos), len(xpos)
    c = len(body.graph.inputs) - n - nx
    primal = (dims[:n] + dims[n + m:n + m + nx]
              + dims[n + m + nx + mx:n + m + nx + mx + c])
    y_dims = vmap_graph(body.graph, primal, size)[1][n:]
    out = [d is not None for d in primal[:n]] + [d is not None for d in y_dims]
    return (SubGraph(batch_body(body.graph, primal, size, out)), n, nx, tpos, xpos, cpos, ypos)


def _cost(node, flops) -> int:
    return node.attrs["length"] * flops(node.attrs["body"].graph)


register(RegionRules(Op.SCAN, shape=_shape, eval=namespace_rule(Op.SCAN, _eval),
                     jvp=_jvp, transpose=_transpose, batch=_batch, partial_eval=_partial_eval,
                     cost=_cost))
