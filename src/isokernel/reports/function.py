"""``isokernel report MODULE:FUNCTION --shape NAME=DIMS:DTYPE``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import numpy as np

from ..ir import dtypes
from ..pipeline import jit
from ..record import ShapeDtype

MEASURE_LIMIT_BYTES = 1 << 30


def parse_shape(spec: str) -> tuple[str, ShapeDtype]:
    """``mv=1000000:float32``, ``w=3,4:f64``, ``s=:float64`` (a scalar)."""
    try:
        name, rest = spec.split("=", 1)
        dims, dtype = rest.rsplit(":", 1) if ":" in rest else (rest, "float64")
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
        return name.strip(), ShapeDtype(shape, dtypes.canonical(dtype.strip()))
    except ValueError:
        raise ValueError(f"bad --shape {spec!r}; write NAME=DIMS:DTYPE, e.g. "
                         f"mv=1000000:float32 or w=3,4:float64") from None


def load_function(target: str):
    """``package.module:function`` or ``path/to/file.py:function``."""
    if ":" not in target:
        raise ValueError(f"bad target {target!r}; write MODULE:FUNCTION, e.g. model.py:forward")
    module_name, _, attr = target.rpartition(":")
    if module_name.endswith(".py") or os.sep in module_name:
        if not os.path.exists(module_name):
            raise FileNotFoundError(f"no such model file: {module_name}")
        if os.path.isdir(module_name):
            raise IsADirectoryError(f"{module_name} is a folder, not a model file; write "
                                    f"FILE.py:FUNCTION, e.g. model.py:forward")
        spec = importlib.util.spec_from_file_location("isokernel_user_model", module_name)
        if spec is None:
            raise ValueError(f"{module_name} is not a Python file (a model file's name ends "
                             f"in .py); write FILE.py:FUNCTION, e.g. model.py:forward")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"{module_name} has no function {attr!r}") from None


def report_function(target: str, shapes: list[str], strategy: str = "auto",
                    run: bool = True) -> str:
    """The graph, the capsules and the live-buffer peak of one function."""
    fn = load_function(target)
    examples = dict(parse_shape(s) for s in shapes)
    lowered = jit(fn, strategy=strategy).lower(**examples)
    compiled = lowered.compile()
    total = sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in examples.values())
    if run and total <= MEASURE_LIMIT_BYTES:
        rng = np.random.default_rng(0)
        data = {k: rng.uniform(0.1, 1.0, x.shape).astype(x.dtype) for k, x in examples.items()}
        compiled.measure(**data)
    return f"{lowered.as_text()}\n\n{compiled.report()}"
