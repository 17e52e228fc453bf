"""Region primitives: nodes that carry sub-graphs (``ir.subgraphs``) and may
have several results, each keeping all of its rules in one module.

A region primitive's rules call each other (a JVP replays a body, a batch
rule batches the bodies, the transpose of a linear map replays its reverse
body), so, as JAX's control-flow modules do, one module of this package
defines them together and registers them here when it is imported:

- ``transforms/fusion.py``: ``fused`` (a named fused form);
- ``transforms/custom.py``: ``custom_jvp_call``, ``custom_vjp_call`` and
  ``custom_lin`` (the linear map of a custom_vjp rule).

``register(RegionRules(...))`` installs SHAPE and EVAL (``ir``), JVP, TRANSPOSE
(for a linear map), BATCH, the partial-evaluation hook ``linearize`` calls,
and the lowering ``prepare_for_execution`` applies. Rules a primitive does
not give fall back to the shared defaults: no JVP rule means its bodies are
differentiated as they are, no partial-evaluation rule means linearize's
dependency split, no lowering means the node reaches the strategies as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Op, register_region
from .jvp import JVP
from .linearize import PARTIAL_EVAL
from .simplify import LOWER
from .transpose import TRANSPOSABLE, TRANSPOSE
from .vmap import BATCH


@dataclass(frozen=True)
class RegionRules:
    """Every rule of one region primitive. ``shape`` and ``eval`` as in
    ``ir`` (a node with several results: a tuple of avals, a list of
    values); ``jvp(operands, tangents, **attrs) -> (out, tangent)`` (tuples
    for several results, ``None`` for a zero tangent); ``transpose(ct,
    *operands, **attrs)`` for a linear map; ``batch(args, bdims, **attrs) ->
    (out, dim)``; ``partial_eval`` (``linearize.PARTIAL_EVAL``); ``lower(node,
    operands) -> values`` (``simplify.LOWER``); ``cost(node, body_cost)``, the
    flops of one node given a function that costs a sub-graph (None: the sum
    of its bodies, read by ``deploy``)."""

    op: Op
    shape: Callable
    eval: Callable
    jvp: Callable | None = None
    transpose: Callable | None = None
    batch: Callable | None = None
    partial_eval: Callable | None = None
    lower: Callable | None = None
    cost: Callable | None = None


REGION_RULES: dict[Op, RegionRules] = {}
"""The registered region primitives, by op."""


def register(rules: RegionRules) -> RegionRules:
    register_region(rules.op, shape=rules.shape, eval=rules.eval)
    tables = ((JVP, rules.jvp), (TRANSPOSE, rules.transpose), (BATCH, rules.batch),
              (PARTIAL_EVAL, rules.partial_eval), (LOWER, rules.lower))
    for table, rule in tables:
        if rule is not None:
            table[rules.op] = rule
    if rules.transpose is not None:
        TRANSPOSABLE.add(rules.op)
    REGION_RULES[rules.op] = rules
    return rules
