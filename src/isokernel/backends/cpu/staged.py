"""What ``threads`` and ``native`` share to run a partitioned graph: the
staged executor (whole stages by the reference rules, row regions by the
strategy), the value of a node in a run, and the plan that runs, made once
by the strategy's planner: the partition, with capsules bound per node."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...codegen.pixel import Outside, Partition, RowRegion
from ...ir import Graph, Node, Op
from ..capsules import lookup
from ..executable import ExecutableBase
from ..liveness import drop, staged_release
from ..planning import NodePlan, Profile, plan
from ..reductions import check_mode
from ..reductions import kernel as reduction_kernel
from .contraction import is_sliceable, sliced
from .numpy_rules import NUMPY_PROVIDER, eval_kernel
from .pool import run_tasks


class StagedExecutable(ExecutableBase):
    """Runs a partition: whole stages by the reference rules, regions by
    ``run_region``; each value is dropped after the last op (or region) that
    reads it, inside a whole stage too (``liveness.staged_release``).
    The partition is the plan's (``StagedPlan``). ``workers``: the pool's
    worker count, which also runs deterministic reductions."""

    def __init__(self, plan: StagedPlan, workers: int, reductions: str = "reference"):
        super().__init__(plan)
        part = plan.partition
        self.workers = workers
        self.graph: Graph = part.graph
        self.partition = part
        self.reductions = check_mode(reductions)
        self._whole = {node: self._whole_kernel(node)
                       for stage in part.stages if isinstance(stage, Outside)
                       for node in stage.nodes}
        self._release = staged_release(part)

    def call_flat(self, arrays: Sequence) -> tuple:
        env = dict(zip(self.graph.inputs, arrays))
        for k, stage in enumerate(self.partition.stages):
            release = self._release[k]
            if isinstance(stage, Outside):
                for node, dead in zip(stage.nodes, release):
                    env[node] = self._whole[node](*(stage_value(env, x) for x in node.inputs))
                    drop(env, dead)
            else:
                self.run_region(k, stage, env)
                drop(env, release[0])
        return tuple(stage_value(env, x) for x in self.graph.outputs)

    def _whole_kernel(self, node: Node):
        """How a node outside the row regions runs: by the reference rule,
        a pixel-axis reduction in tree order when asked, a contraction batched
        over the pixel axis in pixel slices on the pool (``contraction``)."""
        pixels = self.partition.pixels
        rule = reduction_kernel(node, eval_kernel(node), pixels, self.reductions,
                                self._run_blocks, tasks=2 * self.workers)
        if is_sliceable(node, pixels):
            return sliced(node, rule, pixels, self._run_blocks, 4 * self.workers)
        return rule

    def contraction_lines(self) -> list[tuple[str, str]]:
        """The report line on contractions, when the graph has any."""
        nodes = [n for n in self.graph.nodes if n.op is Op.DOT_GENERAL]
        if not nodes:
            return []
        pixels = self.partition.pixels
        pooled = sum(is_sliceable(n, pixels) for n in nodes)
        return [("contractions", f"{pooled} batched over the pixel axis run in pixel slices "
                                 f"on the pool (bit-identical: each batch entry is its own "
                                 f"product); {len(nodes) - pooled} run whole")]

    @abstractmethod
    def run_region(self, k: int, region: RowRegion, env: dict) -> None:
        """Compute ``region`` (stage ``k``) over the pixel rows into ``env``."""

    def _run_blocks(self, work, count: int) -> None:
        """The work units of a deterministic reduction, on the pool."""
        run_tasks(work, count, self.workers)

    def allocate_outputs(self, region: RowRegion) -> list[np.ndarray]:
        pixels = self.partition.pixels
        return [np.empty((pixels, *n.shape[1:]), n.dtype) for n in region.outputs]


def stage_value(env: dict, node: Node):
    """A node's value in a staged run (constants are read from the node)."""
    if node.op is Op.CONST:
        return node.attrs["value"].value
    return env[node]


@dataclass(frozen=True)
class StagedPlan(NodePlan):
    """The plan of a staged strategy: its partition of the graph, each node's
    capsule (inside a region the strategy's, outside the reference's), and
    what the planner built per region to choose them (``regions``: stage
    index -> the strategy's region runner, where choosing a capsule needed
    one)."""

    partition: Partition | None = None
    regions: dict = field(default_factory=dict)


def staged_plan(graph: Graph, profile: Profile, part: Partition, provider: str,
                by_stage: dict[int, str] | None = None,
                regions: dict | None = None) -> StagedPlan:
    """Every op accepted by ``profile`` (else ``PlanningError``), then each
    node bound: inside a region to ``provider``'s capsule (or the provider
    ``by_stage`` names for that region's stage), outside to the reference's."""
    accepted = plan(graph, profile)
    inside = {n: (by_stage or {}).get(k, provider) for k, stage in enumerate(part.stages)
              if isinstance(stage, RowRegion) for n in stage.nodes}
    capsules = {}
    for node in part.graph.nodes:
        if node.op in (Op.INPUT, Op.CONST):
            continue
        capsules[node] = lookup(node.op, inside.get(node, NUMPY_PROVIDER))
    return StagedPlan(part.graph, profile, accepted.capsules, capsules, part, regions or {})
