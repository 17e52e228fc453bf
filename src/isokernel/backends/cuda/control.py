"""Control flow on the device, op by op: the ``CUPY`` rules of ``cond``,
``while``, ``while_lin``, ``while_vjp``, ``scan`` and ``checkpoint``.

Each rule is the primitive's EVAL rule (``isokernel.control``) with the
bodies run by the device executor, one device operation per node, every
iteration: the host only decides. A ``while`` brings its predicate to the
host once per iteration (``any`` of it for a lane-wise loop, whose lanes
that have stopped keep their carry: a device copy where the predicate
holds, as the EVAL rule's ``where``); a ``cond`` brings its index; a
``scan`` writes each step's outputs into the stacked arrays on the device.
The arithmetic is the bodies' kernels', so the contract is the eager
strategy's. In ``cuda-megakernel`` a row-local control-flow node runs inside
its region kernel instead (``codegen.emit``: one loop per thread).
"""

from __future__ import annotations

import math

import numpy as np


def run_body(ex, graph, args) -> list:
    """A body on the device: every node by its ``CUPY`` rule."""
    env = dict(zip(graph.inputs, args))
    for node in graph.nodes:
        if node not in env:
            env[node] = ex.run_node(node, env)
    return [ex.value(x, env) for x in graph.outputs]


def _on_host(ex, value) -> np.ndarray:
    return np.asarray(ex.rt.to_host(value))


def _running(ex, active) -> bool:
    """Whether any lane (or the one predicate) holds: read on the host."""
    return bool(_on_host(ex, active).any())


def _copy(ex, x):
    out = ex.rt.empty(x.shape, x.dtype)
    out[...] = x
    return out


def _kept(ex, active, new, old):
    """``new`` where the lane runs, ``old`` (bit for bit) where it stopped."""
    mask = active.reshape(active.shape + (1,) * (old.ndim - active.ndim))
    out = _copy(ex, old)
    ex.rt.xp.copyto(out, new, where=mask)
    return out


def _step(ex, body, carry: list, caps: list, active) -> list:
    new = run_body(ex, body.graph, carry + caps)
    if active.ndim == 0:
        return new
    return [_kept(ex, active, x, c) for x, c in zip(new, carry)]


def _predicate(ex, cond, carry: list, caps: list):
    return run_body(ex, cond.graph, carry + caps)[0]


def _own(ex, values: list, args) -> list:
    """Results never the operands' arrays (a loop that ran no step)."""
    return [_copy(ex, v) if any(v is a for a in args) else v for v in values]


def _loop(ex, cond, body, n: int, args) -> list:
    carry, caps = list(args[:n]), list(args[n:])
    active = _predicate(ex, cond, carry, caps)
    while _running(ex, active):
        carry = _step(ex, body, carry, caps, active)
        active = _predicate(ex, cond, carry, caps)
    return _own(ex, carry, args)


def while_rule(ex, node, *args) -> list:
    a = node.attrs
    return _loop(ex, a["cond"], a["body"], a["n_carry"], args)


def while_lin_rule(ex, node, *args) -> list:
    """The JVP'd loop run from the residuals; its tangent carries."""
    a = node.attrs
    n, c, m = a["n_carry"], len(a["body"].graph.inputs) - a["n_carry"], len(a["tangent_carries"])
    carry, caps, tangents = list(args[:n]), list(args[n:n + c]), list(args[n + c:])
    both = carry + tangents[:m] + caps + tangents[m:]
    return _loop(ex, a["cond_jvp"], a["body_jvp"], n + m, both)[n:]


def scan_rule(ex, node, *args) -> list:
    a = node.attrs
    n, nx, length, graph = a["n_carry"], a["n_xs"], a["length"], a["body"].graph
    carry, xs, caps = list(args[:n]), list(args[n:n + nx]), list(args[n + nx:])
    ys = [ex.rt.empty((length, *y.aval.shape), y.aval.dtype) for y in graph.outputs[n:]]
    for t in (range(length - 1, -1, -1) if a["reverse"] else range(length)):
        outs = run_body(ex, graph, carry + [x[t] for x in xs] + caps)
        carry = outs[:n]
        for y, value in zip(ys, outs[n:]):
            y[t] = value
    return _own(ex, carry, args) + ys


def cond_rule(ex, node, index, *args) -> list:
    """The branch the index picks, clamped; nothing else runs."""
    branches = node.attrs["branches"]
    taken = int(np.clip(_on_host(ex, index), 0, len(branches) - 1))
    return run_body(ex, branches[taken].graph, list(args))


def checkpoint_rule(ex, node, *args) -> list:
    return run_body(ex, node.attrs["body"].graph, list(args))


# --- while_vjp: the checkpointed reverse sweep, on the device ------------------------------

def while_vjp_rule(ex, node, *args) -> list:
    """As the EVAL rule: count the steps T, keep the carry every K steps,
    then pull the cotangent back segment by segment."""
    a = node.attrs
    n, cond, body = a["n_carry"], a["cond"], a["body"]
    c, m = len(body.graph.inputs) - n, len(a["tangent_carries"])
    carry, caps, ct = list(args[:n]), list(args[n:n + c]), list(args[n + c:])
    steps = _count(ex, cond, body, carry, caps)
    every = a["checkpoint_every"] or max(1, math.isqrt(max(steps - 1, 0)) + 1)
    kept = _checkpoints(ex, cond, body, carry, caps, steps, every)
    ct_caps = None
    for s in range(len(kept) - 1, -1, -1):
        for state in reversed(_segment(ex, cond, body, kept[s], caps,
                                       min(every, steps - s * every))):
            ct, pulled = _pull(ex, cond, a["body_vjp"], state, caps, ct, n, m)
            ct_caps = pulled if ct_caps is None else [_add(ex, x, y)
                                                      for x, y in zip(ct_caps, pulled)]
    if ct_caps is None:  # no step ran: the captures got no cotangent
        ct_caps = [_zeros(ex, x.aval.shape, x.aval.dtype)
                   for x in a["body_vjp"].graph.outputs[n + m:]]
    return _own(ex, ct, args) + ct_caps


def _count(ex, cond, body, carry: list, caps: list) -> int:
    steps, active = 0, _predicate(ex, cond, carry, caps)
    while _running(ex, active):
        carry = _step(ex, body, carry, caps, active)
        active = _predicate(ex, cond, carry, caps)
        steps += 1
    return steps


def _checkpoints(ex, cond, body, carry: list, caps: list, steps: int, every: int) -> list:
    kept = []
    for t in range(steps):
        if t % every == 0:
            kept.append(carry)
        carry = _step(ex, body, carry, caps, _predicate(ex, cond, carry, caps))
    return kept


def _segment(ex, cond, body, start: list, caps: list, length: int) -> list:
    states = [start]
    for _ in range(length - 1):
        states.append(_step(ex, body, states[-1], caps, _predicate(ex, cond, states[-1], caps)))
    return states


def _pull(ex, cond, body_vjp, state: list, caps: list, ct: list, n: int, m: int):
    """One step backwards; a lane that had stopped passes its cotangent on
    and gives the captures nothing."""
    active = _predicate(ex, cond, state, caps)
    if active.ndim == 0:
        outs = run_body(ex, body_vjp.graph, state + caps + ct)
        return outs[n:n + m], outs[n + m:]
    masked = [_kept(ex, active, x, _zeros(ex, x.shape, x.dtype)) for x in ct]
    outs = run_body(ex, body_vjp.graph, state + caps + masked)
    back = [_kept(ex, active, b, x) for b, x in zip(outs[n:n + m], ct)]
    return back, outs[n + m:]


def _zeros(ex, shape, dtype):
    out = ex.rt.empty(shape, dtype)
    out[...] = 0
    return out


def _add(ex, x, y):
    """``x + y`` (IEEE addition, as the EVAL rule's)."""
    out = ex.rt.empty(x.shape, x.dtype)
    ex.rt.xp.add(x, y, out=out)
    return out


def get_rule(ex, node, results):
    return results[node.attrs["index"]]
