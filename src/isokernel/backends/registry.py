"""The strategies of this version, with their contracts and profiles."""

from __future__ import annotations

from .planning import Profile
from .reference import PROVIDER as NUMPY
from .reference import ReferenceExecutable
from .strategies import Strategy, register_strategy

REFERENCE_PROFILE = Profile("reference-cpu", "cpu", (NUMPY,), frozenset({"reference"}))

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
                               ReferenceExecutable))
    for name in ("threads", "native", "cuda-eager", "cuda-fused", "cuda-megakernel"):
        register_strategy(Strategy(name, _DEVICE[name], CONTRACTS[name], None, None))


_register()
