"""Buffer liveness of a graph run in tape order with last-use release.

A *buffer* is storage: inputs are live for the whole run (the caller owns
them); every other op allocates its result, except the view ops (broadcast,
reshape, transpose, slice, rev), which alias their operand's storage and keep
it alive; a buffer is released once no live value uses it; outputs stay to
the end. Constants are resident in the graph and counted apart. The peak is
taken after a node's result exists and before dead operands are released,
because the op reads them while writing it.

The static walk assumes NumPy makes a view wherever the op allows one; a
reshape of a value whose layout forbids that copies, and the measured run
then shows the larger figure.

A *staged* run (``threads``, ``native``) runs a partition of the graph in
*steps*: each op of a whole stage is one step, a row region is one step that
writes its outputs at once (its intermediates live in registers or tile
scratch, never as arrays); ``staged_release`` is when each value dies and
``staged_liveness`` the peak, by the same rules as above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..codegen.pixel import Partition, RowRegion
from ..ir import Graph, Node, Op

VIEW_OPS = frozenset({Op.BROADCAST, Op.RESHAPE, Op.TRANSPOSE, Op.SLICE, Op.REV})
STRIDED_VIEWS = VIEW_OPS - {Op.RESHAPE}
"""The views whose layout is not C-contiguous in general: a strategy that
hands a region contiguous operands copies them for the region's run."""


@dataclass(frozen=True)
class Liveness:
    peak_buffers: int  # most buffers live at once (maxLiveNodes)
    peak_bytes: int  # most bytes live at once
    peak_at: int  # index of the node at which the byte peak is reached
    const_bytes: int

    def __str__(self) -> str:
        return (f"peak {self.peak_buffers} live buffers, {format_bytes(self.peak_bytes)} "
                f"(at %{self.peak_at}); constants {format_bytes(self.const_bytes)}")


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def release_schedule(graph: Graph) -> list[list[Node]]:
    """For each node index, the values that die once that node has run."""
    last: dict[Node, int] = {}
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            last[x] = i
    keep = set(graph.outputs) | set(graph.inputs)
    frees: list[list[Node]] = [[] for _ in graph.nodes]
    for node, i in last.items():
        if node not in keep and node.op is not Op.CONST:
            frees[i].append(node)
    return frees


def _storage(graph: Graph) -> dict[Node, Node | None]:
    """The node whose allocation backs each value (None: a constant)."""
    owner: dict[Node, Node | None] = {}
    for node in graph.nodes:
        if node.op is Op.CONST:
            owner[node] = None
        elif node.op in VIEW_OPS or node.op is Op.GET:  # a get reads its node's results
            owner[node] = owner[node.inputs[0]]
        else:
            owner[node] = node
    return owner


def shared_outputs(graph: Graph) -> tuple[int, ...]:
    """Positions of the outputs whose storage is not their own: an input, a
    constant, or the storage of an earlier output (directly or through view
    ops). A call copies these, so every result is its own array, as NumPy's
    results are, and writing into one never changes an input, another result
    or a cached constant."""
    owner = _storage(graph)
    seen: set[Node] = set()
    shared = []
    for k, node in enumerate(graph.outputs):
        root = owner[node]
        if root is None or root.op is Op.INPUT or root in seen:
            shared.append(k)
        seen.add(root)
    return tuple(shared)


def static_liveness(graph: Graph, nbytes: Callable[[Node], int] | None = None) -> Liveness:
    """The peak, computed from avals by one walk over the graph. ``nbytes``
    (default: each buffer's aval size) lets a caller weigh buffers otherwise,
    e.g. deploy's memory shape evaluates the same walk at another pixel
    count."""
    size = nbytes or (lambda node: node.nbytes)
    owner = _storage(graph)
    end = len(graph.nodes)
    last: dict[Node, int] = {}
    for i, node in enumerate(graph.nodes):
        for x in node.inputs:
            if owner[x] is not None:
                last[owner[x]] = max(last.get(owner[x], -1), i)
    for x in (*graph.outputs, *graph.inputs):
        if owner[x] is not None:
            last[owner[x]] = end
    dying: dict[int, list[Node]] = {}
    for storage, i in last.items():
        dying.setdefault(i, []).append(storage)
    tracker = LiveTracker()
    for x in graph.inputs:
        tracker.open(x, size(x), -1)
    for i, node in enumerate(graph.nodes):
        if node.op is Op.CONST:
            tracker.const_bytes += node.nbytes
        elif owner[node] is node and node.op is not Op.INPUT:
            tracker.open(node, size(node), i)
        for storage in dying.get(i, ()):
            tracker.close(storage)
    return tracker.result()


# --- staged runs ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One step of a staged run: stage ``stage`` writes ``writes`` reading
    ``reads`` (a whole op: its node; a row region: its outputs, from its
    inputs read by rows and whole)."""

    stage: int
    writes: tuple[Node, ...]
    reads: tuple[Node, ...]


def staged_steps(part: Partition) -> list[list[Step]]:
    """For each stage of ``part``, its steps in order."""
    steps = []
    for k, stage in enumerate(part.stages):
        if isinstance(stage, RowRegion):
            steps.append([Step(k, stage.outputs, (*stage.row_inputs, *stage.whole_inputs))])
        else:
            steps.append([Step(k, (node,), node.inputs) for node in stage.nodes])
    return steps


def staged_release(part: Partition) -> list[list[list[Node]]]:
    """For each stage, for each of its steps, the values no later step reads
    (the graph's inputs, outputs and constants are never released): a whole
    stage drops each value after its last reader, not at the stage's end."""
    steps = staged_steps(part)
    last: dict[Node, tuple[int, int]] = {}
    for k, stage in enumerate(steps):
        for j, step in enumerate(stage):
            for x in step.reads:
                last[x] = (k, j)
    keep = set(part.graph.outputs) | set(part.graph.inputs)
    release = [[[] for _ in stage] for stage in steps]
    for node, (k, j) in last.items():
        if node not in keep and node.op is not Op.CONST:
            release[k][j].append(node)
    return release


def drop(env: dict, dead: list[Node]) -> None:
    """Forget the values ``staged_release`` lists for a step."""
    for node in dead:
        env.pop(node, None)


def _staged_storage(part: Partition) -> dict[Node, Node | None]:
    """The storage backing each value a staged run holds: whole ops as in
    ``_storage``; a region's outputs are arrays of their own, its other nodes
    are never arrays (absent)."""
    owner: dict[Node, Node | None] = {x: x for x in part.graph.inputs}
    owner.update((n, None) for n in part.graph.nodes if n.op is Op.CONST)
    for stage in part.stages:
        if isinstance(stage, RowRegion):
            owner.update((x, x) for x in stage.outputs)
            continue
        for node in stage.nodes:
            if node.op in VIEW_OPS or node.op is Op.GET:
                owner[node] = owner.get(node.inputs[0])
            else:
                owner[node] = node
    return owner


def staged_liveness(part: Partition, nbytes: Callable[[Node], int] | None = None,
                    copies: bool = False) -> Liveness:
    """The peak of a staged run of ``part``: the graph's inputs for the whole
    run, each whole op's result from its step to its storage's last reader,
    a region's outputs together from its step on; with ``copies``, a region
    also holds, while it runs, a contiguous copy of each strided view it
    reads (``STRIDED_VIEWS``). ``nbytes`` as for ``static_liveness``."""
    size = nbytes or (lambda node: node.nbytes)
    owner = _staged_storage(part)
    steps = [step for stage in staged_steps(part) for step in stage]
    last: dict[Node, int] = {}
    for i, step in enumerate(steps):
        for x in step.reads:
            if owner.get(x) is not None:
                last[owner[x]] = i
    for x in (*part.graph.outputs, *part.graph.inputs):
        if owner.get(x) is not None:
            last[owner[x]] = len(steps)
    tracker = LiveTracker()
    tracker.const_bytes = sum(n.nbytes for n in part.graph.nodes if n.op is Op.CONST)
    for x in part.graph.inputs:
        tracker.open(x, size(x), -1)
    index = {node: i for i, node in enumerate(part.graph.nodes)}
    for i, step in enumerate(steps):
        at = index[step.writes[0]] if step.writes else -1
        for x in step.writes:
            if owner[x] is x:
                tracker.open(x, size(x), at)
        copied = []
        if copies and isinstance(part.stages[step.stage], RowRegion):
            copied = [x for x in dict.fromkeys(step.reads)
                      if x.op in STRIDED_VIEWS and owner.get(x) is not x]
        for x in copied:
            tracker.open(("copy", x), size(x), at)
        for x in copied:
            tracker.close(("copy", x))
        for storage in {owner[x] for x in step.reads if owner.get(x) is not None}:
            if last[storage] == i:
                tracker.close(storage)
    return tracker.result()


class LiveTracker:
    """Running count and bytes of live buffers, and their peaks."""

    def __init__(self):
        self.live: dict = {}
        self.bytes = 0
        self.peak_buffers = 0
        self.peak_bytes = 0
        self.peak_at = -1
        self.const_bytes = 0

    def open(self, key, nbytes: int, at: int) -> None:
        self.live[key] = nbytes
        self.bytes += nbytes
        self.peak_buffers = max(self.peak_buffers, len(self.live))
        if self.bytes > self.peak_bytes:
            self.peak_bytes, self.peak_at = self.bytes, at

    def close(self, key) -> None:
        self.bytes -= self.live.pop(key)

    def result(self) -> Liveness:
        return Liveness(self.peak_buffers, self.peak_bytes, self.peak_at, self.const_bytes)


class MeasuringTracker(LiveTracker):
    """The same accounting over the actual arrays of a run: values are
    mapped to the storage they view (following ``.base``), and a storage is
    released when the last live value using it is."""

    def __init__(self):
        super().__init__()
        self._const_roots: set[int] = set()
        self._roots: dict[int, int] = {}  # value key -> root id
        self._users: dict[int, int] = {}  # root id -> live values using it

    def const(self, value) -> None:
        root = _root(value)
        if id(root) not in self._const_roots:
            self._const_roots.add(id(root))
            self.const_bytes += np.asarray(root).nbytes

    def alloc(self, key, value, at: int) -> None:
        root = _root(value)
        rid = id(root)
        if rid in self._const_roots:
            return
        self._roots[key] = rid
        self._users[rid] = self._users.get(rid, 0) + 1
        if self._users[rid] == 1:
            self.open(rid, int(np.asarray(root).nbytes), at)

    def free(self, key) -> None:
        rid = self._roots.pop(key, None)
        if rid is None:
            return
        self._users[rid] -= 1
        if self._users[rid] == 0:
            del self._users[rid]
            self.close(rid)


def _root(value):
    while isinstance(value, np.ndarray) and isinstance(value.base, np.ndarray):
        value = value.base
    return value
