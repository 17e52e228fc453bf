"""What ran where under which numerical rules: the report of a compiled
function."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from ..backends.capsules import Capsule
from ..backends.liveness import Liveness


@dataclass
class Report:
    function: str
    strategy: str
    requested: str
    device: str
    contract: str
    profile: str
    nodes: int
    inputs: int
    outputs: int
    capsules: list[tuple[Capsule, int]]
    static_liveness: Liveness | None = None
    measured_liveness: Liveness | None = None
    extra: list[tuple[str, str]] = field(default_factory=list)
    passed_over: list[tuple[str, str]] = field(default_factory=list)  # auto's skipped choices

    def __str__(self) -> str:
        how = "auto: fastest available" if self.requested == "auto" else "requested"
        if self.passed_over:
            how = "auto: " + "; ".join(f"{n} unavailable: {r}" for n, r in self.passed_over)
        lines = [
            f"isokernel report: {self.function}",
            f"  strategy   {self.strategy} on {self.device} ({how})",
            f"  contract   {self.contract}",
            f"  profile    {self.profile}",
            f"  graph      {self.nodes} nodes, {self.inputs} inputs, {self.outputs} outputs",
        ]
        if self.static_liveness is not None:
            lines.append(f"  buffers    static:   {self.static_liveness}")
        if self.measured_liveness is not None:
            agree = _agreement(self.static_liveness, self.measured_liveness)
            lines.append(f"             measured: {self.measured_liveness}{agree}")
        lines += [f"  {key:<10} {value}" for key, value in self.extra]
        lines.append("capsules that ran:")
        for capsule, count in sorted(self.capsules, key=lambda c: c[0].op.value):
            head, rest = capsule.describe().split("\n", 1)
            lines.append(f"  {head}  [{count} node{'s' * (count > 1)}]")
            lines.append(textwrap.indent(rest, "  "))
        return "\n".join(lines)

    __repr__ = __str__


def _agreement(static: Liveness | None, measured: Liveness) -> str:
    if static is None:
        return ""
    same = (static.peak_buffers, static.peak_bytes) == (measured.peak_buffers,
                                                         measured.peak_bytes)
    return "  (agrees with static)" if same else "  (DIFFERS from static)"
