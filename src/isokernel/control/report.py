"""The report's account of the control flow a graph runs: each loop and
branch with its source line, and the memory its derivative mode keeps."""

from __future__ import annotations

from ..ir import Graph, Op, walk

_TEXT = {
    Op.WHILE: "while_loop: only the carry is kept (no tape)",
    Op.WHILE_LIN: "while_loop tangents: the JVP'd loop runs again from the initial carry",
    Op.SCAN: "scan of {length} steps: the carry and the stacked outputs",
    Op.COND: "cond: the taken branch only",
    Op.CHECKPOINT: "checkpoint: intermediates recomputed in reverse mode",
}


def _while_vjp(node) -> str:
    every = node.attrs["checkpoint_every"]
    kept = f"every {every} steps" if every else "every ceil(sqrt(T)) steps"
    return (f"while_loop reverse mode: the carry kept {kept} and each segment recomputed, "
            f"memory O({'T/' + str(every) + ' + ' + str(every) if every else 'sqrt(T)'} x "
            f"carry)")


def _segments(node) -> int | None:
    """The steps per segment of a checkpointed scan (``scan``'s
    ``checkpoint_every``: a scan whose body is a checkpoint of a scan), or
    None."""
    inner = [n for n in node.attrs["body"].graph.nodes if n.op is Op.CHECKPOINT]
    if len(inner) != 1:
        return None
    loops = [n for n in inner[0].attrs["body"].graph.nodes if n.op is Op.SCAN]
    return loops[0].attrs["length"] if len(loops) == 1 else None


def report_lines(graph: Graph) -> list[tuple[str, str]]:
    """``("control", text)`` per control-flow node of the graph and its
    bodies, in tape order; nothing when there is none."""
    lines = []
    for node in walk(graph):
        if node.op is Op.WHILE_VJP:
            text = _while_vjp(node)
        elif node.op is Op.SCAN and _segments(node):
            k, s = _segments(node), node.attrs["length"]
            text = (f"scan checkpointed: {s} segments of {k} steps, reverse mode keeps the "
                    f"carry per segment and recomputes one segment at a time, memory "
                    f"O(T/{k} + {k}) x residuals (checkpoint_every; by default every sqrt(T) "
                    f"steps above 512 MiB of carries)")
        elif node.op in _TEXT:
            text = _TEXT[node.op].format(length=node.attrs.get("length"))
        else:
            continue
        lines.append(("control" if not lines else "", f"{text} ({node.where or '?'})"))
    return lines
