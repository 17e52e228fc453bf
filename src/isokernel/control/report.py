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


def report_lines(graph: Graph) -> list[tuple[str, str]]:
    """``("control", text)`` per control-flow node of the graph and its
    bodies, in tape order; nothing when there is none."""
    lines = []
    for node in walk(graph):
        if node.op is Op.WHILE_VJP:
            text = _while_vjp(node)
        elif node.op in _TEXT:
            text = _TEXT[node.op].format(length=node.attrs.get("length"))
        else:
            continue
        lines.append(("control" if not lines else "", f"{text} ({node.where or '?'})"))
    return lines
