"""Deployment sizing: memory shapes on hand-computed live sets, arithmetic
intensity, the host budget (GPU included, through a stand-in CuPy) and the
solver's edge cases."""

from __future__ import annotations

import logging
import os
import types

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel import deploy
from isokernel.backends import MemoryModel, all_strategies, static_liveness
from isokernel.backends.cpu.threads import default_tile_rows
from isokernel.backends.platform import Figure
from isokernel.deploy import (
    HostBudget,
    MemoryShape,
    block_concurrency,
    flops,
    host_budget,
    intensity,
    largest_block,
    memory_shape,
    roofline_knee,
    shard_tasks,
)
from isokernel.deploy.cost import eager_bytes, fused_bytes

P = 1000
X = np.linspace(0.1, 1.0, P)
W = np.array([0.5, 1.5, 2.5])
GIB = 1 << 30
DATA = os.path.join(os.path.dirname(__file__), "data", "platform")


def graph_of(fn, *args):
    return ik.jit(fn, strategy="reference").lower(*args).graph


def _chain(x):
    return inp.log1p(inp.exp(x) * 2.0)


def _outputs_held(x, y):
    a = x * y
    return a, inp.exp(a) + x


def _free_param(x, w):
    return inp.sum(x[:, None] * w, axis=1)


def _peak_inside(x):
    c = inp.exp(x) * inp.sin(x)
    return inp.sqrt(c)


# (function, args, live set at the peak (by hand), maxLiveNodes, fixed B, per-row B)
LIVE_SETS = [
    # x, exp(x), exp(x)*2 (the 2.0 is a broadcast view of an 8-byte constant);
    # log1p then runs once the product's factor has died: x, product, log1p = 3 again.
    (_chain, (X,), "x, e, m", 3, 8, 24),
    # x, y, a (an output, held to the end), exp(a), exp(a) + x: exp dies after the add.
    (_outputs_held, (X, X[::-1].copy()), "x, y, a, e, s", 5, 0, 40),
    # x, w (24 B, no pixel axis), the [P,3] product (24 B/row), the row sums.
    (_free_param, (X, W), "x, w, x*w, sum", 4, 24, 40),
    # x, exp, sin, their product — then exp and sin die, so sqrt peaks lower.
    (_peak_inside, (X,), "x, e, s, c", 4, 0, 32),
]


@pytest.mark.parametrize("fn,args,live,count,fixed,per", LIVE_SETS,
                         ids=[c[0].__name__ for c in LIVE_SETS])
def test_eager_shape_is_the_hand_computed_live_set(fn, args, live, count, fixed, per):
    graph = graph_of(fn, *args)
    shape = memory_shape(graph, "reference")
    assert (shape.max_live, shape.fixed, shape.per_element) == (count, fixed, per), live
    walk = static_liveness(graph)
    assert shape.bytes() == walk.peak_bytes + walk.const_bytes
    assert shape.bytes(10 * P) == fixed + per * 10 * P
    compiled = ik.jit(fn, strategy="reference").lower(*args).compile()
    compiled.measure(*args)  # the measured run agrees with the static walk
    assert compiled.executable.measured_liveness.peak_buffers == count


def test_peak_location_is_where_the_live_set_is_largest():
    graph = graph_of(_peak_inside, X)
    assert graph.nodes[static_liveness(graph).peak_at].op.value == "mul"


def test_fused_and_tiled_shapes():
    graph = graph_of(_free_param, X, W)
    native = memory_shape(graph, "native")
    mega = memory_shape(graph, "cuda-megakernel")
    # inputs + outputs: x (8/row) and the sums (8/row); w (24 B) fixed; native adds a copy of x
    assert (mega.fixed, mega.per_element) == (24, 16)
    assert (native.fixed, native.per_element) == (24, 24)
    threads = memory_shape(graph, "threads", workers=3)
    # per worker one tile of the eager working set without the inputs: 40 - 8 = 32 B/row
    tile = default_tile_rows(32, 3)  # the threads strategy's own tile for 32 B/row
    assert threads.fixed == 24 + 3 * tile * 32 and threads.per_element == 24
    assert "lower bound" in str(memory_shape(graph, "cuda-eager"))


def test_every_strategy_has_one_model():
    assert all(isinstance(s.memory, MemoryModel) for s in all_strategies())
    graph = graph_of(_chain, X)
    for name in [s.name for s in all_strategies()]:
        assert memory_shape(graph, name).bytes() > 0


def test_no_pixel_axis_is_all_fixed():
    shape = memory_shape(graph_of(lambda s: s * 2.0, np.float64(3.0)), "reference")
    assert shape.pixels is None and shape.per_element == 0 and shape.fixed == 24


# --- intensity ---


def test_flops_and_bytes_by_hand():
    graph = graph_of(lambda x: inp.exp(x) * 2.0, X)
    assert flops(graph) == (10 + 1) * P  # exp weighs 10, mul 1
    # exp writes 8P and reads x; mul writes 8P, reads exp(x) and the 8-byte constant
    assert eager_bytes(graph) == 16 * P + 16 * P + 8
    assert fused_bytes(graph) == 8 * P + 8 * P + 8
    eager, fused = intensity(graph, "reference"), intensity(graph, "cuda-megakernel")
    assert eager.value == pytest.approx(11 * P / (32 * P + 8))
    assert fused.value == pytest.approx(11 * P / (16 * P + 8))
    assert intensity(graph, "threads").traffic == "fused"


def test_reductions_and_products_count_their_work():
    a = np.ones((P, 3))
    assert flops(graph_of(lambda x: inp.sum(x, axis=1), a)) == 3 * P
    m = np.ones((4, 5))
    assert flops(graph_of(lambda x, y: x @ y, m, m.T)) == 2 * 5 * 16


def test_tau_omega_eager_is_far_below_fused():
    from isokernel.models.tau_omega import synthetic_inputs, tau_omega
    graph = graph_of(tau_omega, *synthetic_inputs(P, np.float32))
    eager, fused = intensity(graph, "reference").value, intensity(graph, "native").value
    assert flops(graph) == 47 * P  # 37 basic operations and one exp (10)
    # 3 inputs + 2 outputs, 4 B each, and nine 4-byte constants once
    assert fused == pytest.approx(47 * P / (20 * P + 36))
    assert fused / eager > 15


def test_roofline_knee_known_and_unknown():
    knee = roofline_knee("NVIDIA H200")
    assert knee.flop_per_byte == pytest.approx(67.0 / 4.8) and "data sheet" in knee.source
    assert roofline_knee("NVIDIA H200", double=True).flop_per_byte == pytest.approx(34 / 4.8)
    assert roofline_knee("Some Future GPU") is None and roofline_knee(None) is None


# --- host budget ---


def test_host_budget_on_captured_trees():
    budget = host_budget(root=os.path.join(DATA, "v2-container"))
    assert budget.memory.value == 27 * GIB and budget.cpus.value == 2
    assert budget.gpu is None and budget.gpu_reason == "not asked"
    assert "cgroup v2" in str(budget) and "GPU none" in str(budget)


def _fake_cupy(free=6 * GIB, cached=GIB, used=(0, 300, 700, 200)):
    """A stand-in for CuPy with the calls the budget and the probe make."""
    allocations = iter(used[1:])
    state = {"used": used[0], "allocator": None}

    class Pool:
        def free_bytes(self):
            return cached

        def used_bytes(self):
            return state["used"]

        def malloc(self, size):
            state["used"] = next(allocations)
            return size

    pool = Pool()
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1, deviceSynchronize=lambda: None,
        memGetInfo=lambda: (free, 141 * GIB),
        getDeviceProperties=lambda i: {"name": b"NVIDIA H200"})

    class Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda = types.SimpleNamespace(runtime=runtime, Device=Device,
                                 set_allocator=lambda fn: state.update(allocator=fn))
    module = types.SimpleNamespace(cuda=cuda, zeros=lambda *a, **k: None, float32=np.float32,
                                   get_default_memory_pool=lambda: pool)
    return module, state


def test_gpu_free_memory_after_warm_up(monkeypatch):
    module, _ = _fake_cupy()
    monkeypatch.setitem(__import__("sys").modules, "cupy", module)
    budget = host_budget()
    assert budget.gpu.value == 7 * GIB and budget.gpu_name == "NVIDIA H200"
    assert "after context warm-up" in budget.gpu.source and "CuPy's pool" in budget.gpu.source


def test_gpu_reason_without_cupy(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import fails
    budget = host_budget()
    assert budget.gpu is None and "CuPy" in budget.gpu_reason


def test_device_probe_tracks_the_pool_peak(monkeypatch):
    module, state = _fake_cupy(used=(100, 400, 900, 300))
    monkeypatch.setitem(__import__("sys").modules, "cupy", module)

    def run():
        for size in (300, 500, 0):
            state["allocator"](size)
    assert deploy.measure_device(run) == 800
    assert state["allocator"] == module.get_default_memory_pool().malloc


# --- solver ---

CPUS = Figure(8, "scheduler affinity")


def test_task_sharding_fits_and_is_capped_by_cpus(caplog):
    with caplog.at_level(logging.INFO, logger="isokernel.deploy"):
        found = shard_tasks(Figure(GIB, "tile"), Figure(GIB, "scratch"),
                            Figure(20 * GIB, "cgroup v2 memory.max"), CPUS)
    assert (found.value, found.status) == (8, "fits")
    assert caplog.records[-1].getMessage() == found.line
    for term in ("CPUs 8 [scheduler affinity]", "memory 20.0 GiB [cgroup v2 memory.max]",
                 "resident 1.0 GiB [tile]", "per-shard 1.0 GiB [scratch]"):
        assert term in found.line


def test_task_sharding_exactly_one_shard():
    found = shard_tasks(Figure(3 * GIB, "tile"), Figure(GIB, "scratch"),
                        Figure(4 * GIB + GIB // 2, "memory"), CPUS)
    assert found.value == 1 and found.status == "fits"
    one_cpu = shard_tasks(Figure(GIB, "tile"), Figure(0, "none"), Figure(9 * GIB, "m"),
                          Figure(1, "cgroup v2 cpu.max 100000/100000"))
    assert one_cpu.value == 1


def test_task_sharding_resident_too_big_says_shrink_the_tile():
    found = shard_tasks(Figure(30 * GIB, "tile"), Figure(1, "scratch"),
                        Figure(28 * GIB, "cgroup v2 memory.max"), CPUS)
    assert found.value is None and found.status == "nothing fits"
    assert "shrink the tile" in found.remedy and "2.0 GiB" in found.remedy
    assert "no shard count" in found.line


def test_task_sharding_one_shard_too_big():
    found = shard_tasks(Figure(GIB, "tile"), Figure(2 * GIB, "scratch"),
                        Figure(2 * GIB, "memory"), CPUS)
    assert found.value is None and "per-shard scratch" in found.remedy


def test_override_wins_verbatim_even_when_nothing_fits():
    found = shard_tasks(Figure(30 * GIB, "tile"), Figure(1, "scratch"),
                        Figure(28 * GIB, "memory"), CPUS, override=3)
    assert (found.value, found.status) == (3, "override")
    assert "operator override" in found.line and "nothing fits" in found.line
    fits = block_concurrency(Figure(GIB, "block"), Figure(0, "none"), Figure(4 * GIB, "m"),
                             CPUS, override=16)
    assert fits.value == 16 and "the budget alone gives 4 = " in fits.line


def test_block_concurrency():
    found = block_concurrency(Figure(GIB, "bytes(P)"), Figure(GIB, "tables"),
                              Figure(4 * GIB, "memory"), CPUS)
    assert found.value == 3
    assert block_concurrency(Figure(GIB, "b"), Figure(0, "r"), Figure(GIB, "m"),
                             Figure(1, "c")).value == 1
    none = block_concurrency(Figure(2 * GIB, "b"), Figure(GIB, "r"), Figure(2 * GIB, "m"),
                             CPUS)
    assert none.value is None and "lower the block size" in none.remedy


def _shape(fixed, per, pixels):
    return MemoryShape("reference", fixed, per, pixels, 3, "hand-made")


def test_largest_block():
    whole = largest_block(_shape(100, 10, 1000), Figure(10**6, "m"), Figure(0, "r"))
    assert whole.value == 1000 and "whole call" in whole.line
    part = largest_block(_shape(100, 10, 1000), Figure(5100, "m"), Figure(1000, "outputs"))
    assert part.value == 400  # (5100 - 1000 - 100) / 10
    none = largest_block(_shape(100, 10, 1000), Figure(105, "m"), Figure(0, "r"))
    assert none.value is None and "not even one pixel row" in none.remedy
    flat = largest_block(_shape(100, 0, None), Figure(100, "m"), Figure(0, "r"))
    assert flat.value == 0 and flat.status == "fits"
    assert largest_block(_shape(100, 0, None), Figure(99, "m"), Figure(0, "r")).value is None
    assert largest_block(_shape(100, 10, 1000), Figure(105, "m"), Figure(0, "r"),
                         override=50).value == 50


def test_sizing_shapes_per_strategy():
    graph = graph_of(_chain, X)
    budget = HostBudget(Figure(4, "affinity"), Figure(GIB, "cgroup"), None, None, "no GPU")
    assert deploy.sizing(graph, "reference", budget).kind == "block concurrency"
    assert deploy.sizing(graph, "threads", budget).kind == "task sharding"
    assert deploy.sizing(graph, "native", budget).value == 4
    gpu = deploy.sizing(graph, "cuda-megakernel", budget)
    assert gpu.value is None and "no GPU" in gpu.line


def test_gpu_strategies_plan_against_device_memory():
    graph = graph_of(_chain, X)  # eager: 8 B + 24 B/row; a block holds 16 B/row beside x
    budget = HostBudget(Figure(4, "affinity"), Figure(GIB, "cgroup"),
                        Figure(15_000, "cudaMemGetInfo free"), "NVIDIA H200")
    found = deploy.block_decision(graph, "cuda-eager", budget)
    expected = (int(15_000 * deploy.BUDGET_FRACTION) - 8 * P - 8) // 16
    assert found.value == expected == 249 and "cudaMemGetInfo free" in found.line
    assert deploy.block_decision(graph, "reference", budget).value == P
