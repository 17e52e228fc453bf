"""``isokernel devices``: each strategy, available or the exact reason not."""

from __future__ import annotations

from ..backends import all_strategies
from ..backends.devices import Device, cuda_description, unavailable_reason


def cuda_line() -> str:
    """The CUDA device: ready (what it is) or the exact reason it is not."""
    reason = unavailable_reason(Device("cuda", 0))
    if reason is not None:
        return f"cuda: unavailable: {reason}"
    try:
        return f"cuda: ready: {cuda_description(0)}"
    except Exception as err:  # a driver that answers the count but not the properties
        return f"cuda: ready, but its properties could not be read: {err}"


def devices_table() -> str:
    lines = [cuda_line(), "", f"{'strategy':<17}{'device':<8}status"]
    for strategy in all_strategies():
        reason = strategy.unavailable_reason()
        status = "available" if reason is None else f"unavailable: {reason}"
        lines.append(f"{strategy.name:<17}{strategy.device:<8}{status}")
        lines.append(f"{'':<25}contract: {strategy.contract}")
    return "\n".join(lines)
