"""The decisions deploy makes for a compiled function: the block size behind
``jit(block=...)``, the admission check of whole calls, the sizing line and
deploy lines of the report, and the measured probe that runs beside
``compiled.measure()``; ``isokernel.pipeline`` calls each."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..backends import all_strategies, get_strategy
from ..backends.liveness import format_bytes
from ..backends.platform import Figure
from ..backends.strategies import TRAFFIC_KINDS
from ..codegen.pixel import pixel_count
from ..ir import Graph, IsokernelError
from .budget import HostBudget, host_budget
from .cost import intensity, roofline_knee, traffic_intensity
from .probe import Probe, measure_device, measure_host
from .shape import MemoryShape, memory_shape, pixel_io_bytes
from .solver import Decision, block_concurrency, largest_block, shard_tasks

# jit(block="auto") plans against this share of the memory headroom: the eager
# shape is a lower bound, and the process allocates besides the model.
BUDGET_FRACTION = 0.8

# calls whose static working set is below this run without asking the budget
ADMISSION_FLOOR = 256 << 20

_PROBES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class BudgetError(IsokernelError, MemoryError):
    """Not even one pixel row fits the memory budget."""


@dataclass(frozen=True)
class BlockChoice:
    """Pixel rows per block (None: run the call whole) and the decision as
    one line with its terms and their sources."""

    block: int | None
    line: str


def _usable(memory: Figure) -> Figure:
    return Figure(int(memory.value * BUDGET_FRACTION),
                  f"{BUDGET_FRACTION:.0%} of {memory.source}")


def _on_gpu(strategy: str) -> bool:
    return get_strategy(strategy).device == "cuda"


def _memory_for(strategy: str, budget: HostBudget) -> Figure:
    """Host memory for CPU strategies, free device memory for GPU ones."""
    if not _on_gpu(strategy):
        return budget.memory
    return budget.gpu or Figure(0, f"no GPU: {budget.gpu_reason}")


def _working(shape: MemoryShape, graph: Graph) -> MemoryShape:
    """A block's own bytes: its pixel inputs are views of the caller's
    arrays, which the budget's usage figure already counts."""
    in_row, _ = pixel_io_bytes(graph)
    return MemoryShape(shape.strategy, shape.fixed, max(shape.per_element - in_row, 0),
                       shape.pixels, shape.max_live,
                       f"{shape.basis}, less the pixel inputs (views of the caller's arrays)")


def block_decision(graph: Graph, strategy: str, budget: HostBudget,
                   override: int | None = None) -> Decision:
    """Pixel rows per block for one call; the whole call when it fits."""
    shape = _working(memory_shape(graph, strategy), graph)
    memory = _usable(_memory_for(strategy, budget))
    if override is None and shape.bytes() <= memory.value:
        return largest_block(shape, memory, Figure(0, "nothing resident: one block"))
    _, out_row = pixel_io_bytes(graph)
    resident = Figure(out_row * (shape.pixels or 0), "outputs allocated once for the call")
    return largest_block(shape, memory, resident, override)


def plan_block(compiled, requested) -> BlockChoice:
    """The block decision behind ``jit(block=...)``: ``"auto"`` sizes blocks
    to the memory budget; an explicit number of rows is checked against it
    and recorded."""
    graph, strategy = compiled.graph, compiled.lowered.strategy.name
    if not pixel_count(graph):
        return BlockChoice(None, "no input has a pixel axis: the call runs whole")
    override = None if requested == "auto" else requested
    decision = block_decision(graph, strategy, host_budget(gpu=_on_gpu(strategy)), override)
    if decision.value is None:
        raise BudgetError(f"jit({graph.name}, block='auto'): {decision.line}")
    block = None if decision.value >= pixel_count(graph) else decision.value
    return BlockChoice(block, decision.line)


def admission(compiled):
    """The admission check of whole calls: a call whose working
    set (the memory shape less its pixel inputs, a lower bound) exceeds the
    memory budget is refused before any work, with the sizing line; calls
    below ``ADMISSION_FLOOR`` are not checked."""
    graph, strategy = compiled.graph, compiled.lowered.strategy.name
    shape = _working(memory_shape(graph, strategy), graph)
    need = shape.bytes()
    if need < ADMISSION_FLOOR:
        return None

    def admit() -> None:
        budget = host_budget(gpu=_on_gpu(strategy))
        memory = _memory_for(strategy, budget)
        if need > memory.value:
            line = block_decision(graph, strategy, budget).line
            raise BudgetError(
                f"jit({graph.name}) on {strategy}: this call needs at least "
                f"{format_bytes(need)} ({shape.formula()} at P={shape.pixels}) and the memory "
                f"budget is {format_bytes(memory.value)} ({memory.source}); nothing was run. "
                f"Sizing: {line}. Pass block='auto' to run it in blocks, or fewer pixels")
    return admit


def sizing(graph: Graph, strategy: str, budget: HostBudget) -> Decision:
    """The sizing decision for calls of this shape under ``strategy``: shards
    for the multi-threaded CPU strategies, concurrent blocks of this size for
    the eager CPU one, the largest block on a GPU."""
    shape = memory_shape(graph, strategy, workers=budget.cpus.value)
    consts = sum(n.nbytes for n in graph.consts())
    at = f"P={shape.pixels}" if shape.pixels else "no pixel axis"
    at_p = f"{strategy} bytes({at}) = {shape.formula()}, {shape.basis}"
    if _on_gpu(strategy):
        return largest_block(shape, _memory_for(strategy, budget), Figure(0, "nothing resident"))
    if get_strategy(strategy).memory.kind in ("eager", "arena"):
        per_block = Figure(shape.bytes() - consts, at_p)
        return block_concurrency(per_block, Figure(consts, "constants, shared"),
                                 budget.memory, budget.cpus)
    resident = Figure(shape.bytes() - shape.scratch, at_p)
    per_shard = Figure(shape.scratch // max(budget.cpus.value, 1), "one worker's tile scratch")
    return shard_tasks(resident, per_shard, budget.memory, budget.cpus)


def _intensity_line(graph: Graph, strategy: str, budget: HostBudget) -> str:
    """The strategy's intensity, then the other traffic models' for comparison."""
    chosen = intensity(graph, strategy)
    others = {t: traffic_intensity(graph, t) for t in TRAFFIC_KINDS}
    double = any(x.aval.dtype == np.float64 for x in graph.inputs)
    knee = roofline_knee(budget.gpu_name, double)
    where = (f"roofline knee {knee}" if knee is not None else
             f"roofline knee not known for {get_strategy(strategy).device}"
             + (f" ({budget.gpu_name} not in the table)" if budget.gpu_name else ""))
    rest = "; ".join(f"{t} {x.value:.3g}" for t, x in others.items() if t != chosen.traffic)
    return f"{strategy} {chosen}; {rest}; {where}"


def report_lines(compiled) -> list[tuple[str, str]]:
    """The deploy lines of ``compiled.report()``."""
    graph, strategy = compiled.lowered.recorded, compiled.lowered.strategy.name
    budget = host_budget()
    shapes = {s.name: memory_shape(graph, s.name, workers=budget.cpus.value)
              for s in all_strategies()}
    lines = [("memory", f"{strategy}: {shapes[strategy]}")]
    lines += [("", f"{n}: {s}") for n, s in shapes.items() if n != strategy]
    lines += [("intensity", _intensity_line(graph, strategy, budget)),
              ("maxLive", f"{shapes[strategy].max_live} buffers (maxLiveNodes, tape order "
                          f"with last-use release)"),
              ("budget", str(budget)),
              ("sizing", sizing(graph, strategy, budget).line),
              ("max block", block_decision(graph, strategy, budget).line
               if pixel_count(graph) else "no input has a pixel axis: calls run whole")]
    if compiled.block_choice is not None:
        lines.append(("blocks", compiled.block_choice.line))
    if compiled in _PROBES:
        lines.append(("probe", str(_PROBES[compiled])))
    return lines


def probe(compiled, arrays) -> Probe:
    """Run one real block (the first, or the whole call when it is not
    chunked) and record its measured peak beside the static shape."""
    graph, strategy = compiled.graph, compiled.lowered.strategy.name
    pixels = pixel_count(graph) or None
    rows = compiled.blocks.block if compiled.blocks is not None else pixels
    run, args = compiled.executable, list(arrays)
    if compiled.blocks is not None and rows < pixels:
        pixel_in = [compiled.blocks.rows[x] for x in graph.inputs]
        args = [a[:rows] if p else a for a, p in zip(arrays, pixel_in)]
        run = compiled.blocks.executable(rows)
    static = memory_shape(graph, strategy).bytes(rows)
    if _on_gpu(strategy):
        found = Probe(rows, static, None, None, measure_device(lambda: run.call_flat(args)))
    else:
        in_bytes = sum(np.asarray(a).nbytes for a in args)
        traced, rss, reason = measure_host(lambda: run.call_flat(args), in_bytes)
        found = Probe(rows, static, traced, rss, rss_reason=reason)
    _PROBES[compiled] = found
    return found


def probe_of(compiled) -> Probe | None:
    """The last probe taken of ``compiled`` (by ``compiled.measure()``)."""
    return _PROBES.get(compiled)
