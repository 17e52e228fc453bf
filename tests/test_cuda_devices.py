"""The CUDA device probe tells apart: CuPy not installed, no (recent enough)
driver, no visible GPU, an index beyond the GPUs, and a ready runtime; each
reason reaches ``isokernel devices`` and ``BackendUnavailableError``. CuPy is
replaced by fakes, so this runs anywhere."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import isokernel as ik
import isokernel.numpy as inp
from isokernel.backends import get_strategy
from isokernel.backends.devices import Device, unavailable_reason
from isokernel.codegen import nvrtc
from isokernel.reports import devices_table


class FakeRuntimeError(RuntimeError):
    def __init__(self, status, name):
        super().__init__(f"{name}: fake")
        self.status = status


def fake_cupy(count=None, error=None):
    def get_count():
        if error is not None:
            raise error
        return count

    props = {"name": b"Fake GPU", "major": 9, "minor": 0, "multiProcessorCount": 132,
             "totalGlobalMem": 80 * 2**30}
    runtime = types.SimpleNamespace(getDeviceCount=get_count,
                                    getDeviceProperties=lambda i: props,
                                    driverGetVersion=lambda: 12040,
                                    runtimeGetVersion=lambda: 12080)
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=runtime)
    module.__version__ = "0.fake"
    return module


@pytest.fixture
def cupy_as(monkeypatch):
    def install(module):
        monkeypatch.setitem(sys.modules, "cupy", module)
    nvrtc._find.cache_clear()
    yield install
    nvrtc._find.cache_clear()  # the fakes must not decide which NVRTC later tests get


def test_cupy_not_installed(cupy_as):
    cupy_as(None)
    assert unavailable_reason(Device("cuda")) == ("CuPy is not installed "
                                                  "(pip install 'isokernel[cuda]')")


def test_no_driver(cupy_as):
    cupy_as(fake_cupy(error=FakeRuntimeError(35, "cudaErrorInsufficientDriver")))
    reason = unavailable_reason(Device("cuda"))
    assert reason.startswith("no CUDA driver, or one older than CuPy's CUDA runtime needs")
    with pytest.raises(ik.BackendUnavailableError, match="no CUDA driver") as err:
        ik.jit(inp.exp, device="cuda")
    assert "Nothing was run on another device" in str(err.value)


def test_driver_without_a_visible_gpu(cupy_as, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cupy_as(fake_cupy(error=FakeRuntimeError(100, "cudaErrorNoDevice")))
    reason = unavailable_reason(Device("cuda"))
    assert reason.startswith("CUDA driver present but no visible GPU; CUDA_VISIBLE_DEVICES=''")
    cupy_as(fake_cupy(count=0))
    assert "no visible GPU" in unavailable_reason(Device("cuda"))


def test_index_beyond_the_visible_gpus(cupy_as):
    cupy_as(fake_cupy(count=2))
    assert unavailable_reason(Device("cuda", 1)) is None
    assert unavailable_reason(Device("cuda", 2)).startswith("cuda:2 requested but 2 GPU(s)")


def test_other_driver_errors_are_quoted(cupy_as):
    cupy_as(fake_cupy(error=FakeRuntimeError(999, "cudaErrorUnknown")))
    assert unavailable_reason(Device("cuda")) == "no usable CUDA driver: cudaErrorUnknown: fake"


def test_ready_runtime_is_described_and_strategies_name_their_reasons(cupy_as):
    cupy_as(fake_cupy(count=1))
    table = devices_table()
    assert "cuda: ready: cuda:0 Fake GPU, sm_90, 132 SMs, 80.0 GiB; driver 12.4" in table
    for name in ("cuda-eager", "cuda-fused", "cuda-megakernel"):
        reason = get_strategy(name).unavailable_reason()
        assert reason is None or "NVRTC is not available" in reason
        status = "available" if reason is None else f"unavailable: {reason}"
        assert f"{name:<17}cuda    {status}" in table


def test_every_state_reaches_the_devices_table(cupy_as):
    for module, text in ((None, "CuPy is not installed"),
                         (fake_cupy(error=FakeRuntimeError(35, "x")), "no CUDA driver"),
                         (fake_cupy(count=0), "CUDA driver present but no visible GPU")):
        cupy_as(module)
        table = devices_table()
        assert f"cuda: unavailable: {text}" in table
        assert f"cuda-megakernel  cuda    unavailable: {text}" in table


def test_host_inputs_to_a_named_gpu_strategy_ask_for_the_gpu(cupy_as):
    """A GPU strategy named explicitly for NumPy inputs runs on the GPU (the
    inputs are uploaded); without a GPU it is refused, never run on the CPU."""
    cupy_as(fake_cupy(error=FakeRuntimeError(100, "cudaErrorNoDevice")))
    with pytest.raises(ik.BackendUnavailableError, match="no visible GPU"):
        ik.jit(lambda x: x + 1.0, strategy="cuda-megakernel")(np.ones(3))
