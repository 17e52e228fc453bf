"""The pipeline of one call: ``jit`` records a function once per input
signature (``key``), lowers the recording for a strategy (the strategy
prepares the graph it runs), compiles it (one plan, one build), and calls
the compilation, whole or block by block (``blocks``), with the admission
check, sizing and report lines of ``deploy``, which it calls directly.
``Report`` is what ``compiled.report()`` returns."""

from .blocks import BlockError, BlockRunner, pixel_rows, resize_rows
from .compile import Compiled, Lowered
from .jit import CallKey, Jitted, RetraceWarning, jit
from .report import Report

__all__ = ["BlockError", "BlockRunner", "CallKey", "Compiled", "Jitted", "Lowered", "Report",
           "RetraceWarning", "jit", "pixel_rows", "resize_rows"]
