"""``isokernel devices``: each strategy, available or the exact reason not."""

from __future__ import annotations

from ..backends import all_strategies


def devices_table() -> str:
    lines = [f"{'strategy':<17}{'device':<8}status"]
    for strategy in all_strategies():
        reason = strategy.unavailable_reason()
        status = "available" if reason is None else f"unavailable: {reason}"
        lines.append(f"{strategy.name:<17}{strategy.device:<8}{status}")
        lines.append(f"{'':<25}contract: {strategy.contract}")
    return "\n".join(lines)
