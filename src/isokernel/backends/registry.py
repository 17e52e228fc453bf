"""The strategies of this version, with their contracts and profiles."""

from __future__ import annotations

from .. import codegen
from .native import PROVIDER as NATIVE
from .native import NativeExecutable
from .planning import Profile
from .reference import PROVIDER as NUMPY
from .reference import ReferenceExecutable
from .strategies import Strategy, register_strategy
from .threads import PROVIDER as TILES
from .threads import ThreadsExecutable

REFERENCE_PROFILE = Profile("reference-cpu", "cpu", (NUMPY,), frozenset({"reference"}))
THREADS_PROFILE = Profile("threads-cpu", "cpu", (TILES, NUMPY),
                          frozenset({"checked", "reference"}))
NATIVE_PROFILE = Profile("native-cpu", "cpu", (NATIVE, NUMPY), frozenset({"checked", "reference"}),
                         probe=codegen.unavailable_reason)

CONTRACTS = {
    "reference": "the oracle: NumPy, node by node, buffers freed after last use",
    "threads": "bit-identical to reference",
    "native": "bit-identical to reference for IEEE basic ops; transcendentals ulp-bounded",
    "cuda-eager": "ulp-bounded vs reference; bit-identical in portable numerics",
    "cuda-fused": "bit-identical to cuda-eager",
    "cuda-megakernel": "bit-identical to cuda-eager (FMA contraction off)",
}
_DEVICE = {"reference": "cpu", "threads": "cpu", "native": "cpu", "cuda-eager": "cuda",
           "cuda-fused": "cuda", "cuda-megakernel": "cuda"}


def _register() -> None:
    register_strategy(Strategy("reference", "cpu", CONTRACTS["reference"], REFERENCE_PROFILE,
                               ReferenceExecutable, frozenset({"reductions"})))
    register_strategy(Strategy("threads", "cpu", CONTRACTS["threads"], THREADS_PROFILE,
                               ThreadsExecutable,
                               frozenset({"workers", "tile_rows", "reductions"})))
    register_strategy(Strategy("native", "cpu", CONTRACTS["native"], NATIVE_PROFILE,
                               NativeExecutable, frozenset({"workers", "contract", "reductions"})))
    for name in ("cuda-eager", "cuda-fused", "cuda-megakernel"):
        register_strategy(Strategy(name, _DEVICE[name], CONTRACTS[name], None, None))


_register()
