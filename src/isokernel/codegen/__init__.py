"""Graph -> C: the one body emitter (SSA values and statements: blocks and
loops) with its per-op expression table (``C_EXPR``), the CPU host wrapper
and the compiler, the CUDA wrappers around the same body (``cuda_source``)
and NVRTC, with the one on-disk kernel cache both use (``cache``).
It sits below ``backends``, whose strategies call it (the layers of
``[tool.importlinter]`` in ``pyproject.toml``)."""

from .c_expr import C_EXPR, MATH, literal, math_name
from .cache import CacheWarning
from .compiler import Built, CompileError, Compiler, build, current_compiler, unavailable_reason
from .cuda import cuda_module, cuda_source
from .emit import CBody, Unsupported, emit_body, supports
from .host import ISK_BLOCK, host_source

__all__ = [
    "C_EXPR", "ISK_BLOCK", "MATH", "Built", "CBody", "CacheWarning", "CompileError", "Compiler",
    "Unsupported",
    "build", "cuda_module", "cuda_source", "current_compiler", "emit_body", "host_source",
    "literal", "math_name", "supports", "unavailable_reason",
]
