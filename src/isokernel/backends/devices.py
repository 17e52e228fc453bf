"""Device names and what this machine can actually run."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import BackendUnavailableError

DEVICE_KINDS = ("cpu", "cuda", "metal", "rocm", "tpu", "trainium")
MAINTAINED = ("cpu", "cuda")
_SPEC = re.compile(r"^(?P<kind>[a-z]+)(?::(?P<index>\d+))?$")


@dataclass(frozen=True)
class Device:
    kind: str
    index: int | None = None  # None: the default device of that kind

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def parse_device(spec) -> Device:
    """``cpu``, ``cuda``, ``cuda:N``, ``metal``, ``rocm``, ``tpu`` or ``trainium``."""
    if isinstance(spec, Device):
        return spec
    match = _SPEC.match(str(spec).strip().lower())
    if match is None or match["kind"] not in DEVICE_KINDS:
        raise ValueError(f"unknown device {spec!r}; use one of cpu, cuda, cuda:N, metal, "
                         f"rocm, tpu, trainium")
    if match["kind"] == "cpu" and match["index"] not in (None, "0"):
        raise ValueError(f"device {spec!r}: the host is one device, write 'cpu'")
    index = match["index"]
    return Device(match["kind"], None if index is None or match["kind"] == "cpu" else int(index))


def unavailable_reason(device: Device) -> str | None:
    """None when ``device`` can run here, else the exact reason it cannot."""
    if device.kind == "cpu":
        return None
    if device.kind not in MAINTAINED:
        return (f"no maintained runtime profile for device '{device}': isokernel runs on "
                f"cpu and cuda")
    return _cuda_reason(device.index or 0)


def _cuda_reason(index: int) -> str | None:
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'isokernel[cuda]')"
    except Exception as err:  # a broken CuPy install raises many kinds of errors
        return f"CuPy failed to import: {err}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        return _driver_reason(err)
    if count == 0:
        return f"CUDA driver present but no visible GPU{_visible_devices()}"
    if index >= count:
        return f"cuda:{index} requested but {count} GPU(s) visible{_visible_devices()}"
    return None


NO_DEVICE, INSUFFICIENT_DRIVER = 100, 35  # cudaErrorNoDevice, cudaErrorInsufficientDriver


def _driver_reason(err: Exception) -> str:
    """The CUDA runtime's error on asking for the device count, in words:
    no GPU behind a working driver, or no (recent enough) driver."""
    status, text = _status(err), str(err)
    if status == NO_DEVICE or "cudaErrorNoDevice" in text:
        return f"CUDA driver present but no visible GPU{_visible_devices()} ({text})"
    if status == INSUFFICIENT_DRIVER or "cudaErrorInsufficientDriver" in text:
        return (f"no CUDA driver, or one older than CuPy's CUDA runtime needs ({text}); "
                f"install the NVIDIA driver, or a CuPy wheel for the driver's CUDA version")
    return f"no usable CUDA driver: {text}"


def _status(err: Exception) -> int | None:
    """The CUDA runtime's status code of CuPy's ``CUDARuntimeError``; None
    for an error that carries none."""
    try:
        return err.status
    except AttributeError:
        return None


def _visible_devices() -> str:
    import os

    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "" if value is None else f"; CUDA_VISIBLE_DEVICES={value!r}"


def cuda_description(index: int = 0) -> str:
    """One line about a ready ``cuda:index``: name, architecture, memory,
    driver and runtime versions (only call when it is available)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(index)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    driver, runtime = (cupy.cuda.runtime.driverGetVersion(),
                       cupy.cuda.runtime.runtimeGetVersion())
    return (f"cuda:{index} {name}, sm_{props['major']}{props['minor']}, "
            f"{props['multiProcessorCount']} SMs, {props['totalGlobalMem'] / 2**30:.1f} GiB; "
            f"driver {_version(driver)}, CuPy {cupy.__version__} on CUDA runtime "
            f"{_version(runtime)}")


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def require(device: Device) -> Device:
    reason = unavailable_reason(device)
    if reason is not None:
        raise BackendUnavailableError(f"device '{device}' is unavailable: {reason}. "
                                      f"Nothing was run on another device.")
    return device


def device_of(leaves) -> Device:
    """The device the input arrays live on (CUDA arrays expose
    ``__cuda_array_interface__``)."""
    for x in leaves:
        if hasattr(x, "__cuda_array_interface__"):
            return Device("cuda", _cuda_index(x))
    return Device("cpu")


def _cuda_index(x) -> int | None:
    """The GPU a CUDA array lives on (CuPy's ``x.device.id``); None, the
    default GPU, for an array of a library that does not say."""
    try:
        return int(x.device.id)
    except AttributeError:
        return None
