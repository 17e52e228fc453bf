"""Shared fixtures: the strategy fixture that checks every available
strategy against the reference under its contract, and Hypothesis profiles."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from isokernel.backends import all_strategies
from isokernel.backends.parity import bit_identical, max_ulp
from isokernel.ir.pytree import tree_leaves

# "ci" (the default) draws the same examples on every run, so a red CI is
# reproducible and never a coin toss; "explore" draws new ones each run (use it
# locally to hunt for failures); "dev" is a quick pass.
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("ISOKERNEL_HYPOTHESIS_PROFILE", "ci"))

STRATEGIES = [s.name for s in all_strategies()]


@pytest.fixture(params=STRATEGIES)
def strategy(request):
    """Every strategy of this version; unavailable ones skip with their reason."""
    found = next(s for s in all_strategies() if s.name == request.param)
    reason = found.unavailable_reason()
    if reason is not None:
        pytest.skip(f"{found.name}: {reason}")
    return found


def assert_contract(strategy_name: str, result, reference, ulp_bound: float = 0) -> None:
    """``result`` meets ``strategy_name``'s contract against ``reference``:
    bit-identical, or within ``ulp_bound`` where the contract allows one."""
    got_leaves, want_leaves = tree_leaves(result), tree_leaves(reference)
    assert len(got_leaves) == len(want_leaves)
    for got, want in zip(got_leaves, want_leaves):
        if ulp_bound == 0:
            assert bit_identical(got, want), f"{strategy_name}: bits differ from reference"
        else:
            assert max_ulp(got, want) <= ulp_bound, f"{strategy_name}: beyond {ulp_bound} ulp"
