"""The pixel-axis analysis now lives in ``isokernel.codegen.pixel`` (the
CUDA source generator needs it, and ``codegen`` sits below ``backends``);
this module keeps the old import path working."""

from ..codegen.pixel import (  # noqa: F401
    ROW_RULES,
    ROWS,
    WHOLE,
    Outside,
    Partition,
    Region,
    partition,
    pixel_count,
    row_modes,
)
