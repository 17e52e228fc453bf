"""What this machine will grant a run: CPUs, memory and GPU memory, each with
its source (``platform`` reads the host; this adds the GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from ..backends.devices import Device, unavailable_reason
from ..backends.liveness import format_bytes
from ..backends.platform import Figure, cpu_budget, memory_budget


@dataclass(frozen=True)
class HostBudget:
    cpus: Figure
    memory: Figure
    gpu: Figure | None = None  # free device memory after warm-up
    gpu_name: str | None = None
    gpu_reason: str | None = None  # why there is no GPU figure

    def __str__(self) -> str:
        gpu = (f"GPU {format_bytes(self.gpu.value)} free ({self.gpu.source})"
               if self.gpu is not None else f"GPU none ({self.gpu_reason})")
        return (f"CPUs {self.cpus.value} ({self.cpus.source}); memory "
                f"{format_bytes(self.memory.value)} ({self.memory.source}); {gpu}")


def host_budget(root: str = "/", gpu: bool = True, device: int = 0) -> HostBudget:
    """CPUs (affinity ∩ cgroup quota), memory (cgroup v2 → v1 → MemAvailable)
    and, when CuPy and a GPU are present, the device's free memory after
    warm-up. ``root`` points the host readers at a captured /proc and /sys
    tree; such a tree has no GPU, so the GPU is asked only for ``root='/'``."""
    cpus, memory = cpu_budget(root), memory_budget(root)
    if not gpu or root != "/":
        return HostBudget(cpus, memory, gpu_reason="not asked")
    reason = unavailable_reason(Device("cuda", device))
    if reason is not None:
        return HostBudget(cpus, memory, gpu_reason=reason)
    try:
        figure, name = gpu_free_memory(device)
    except Exception as err:  # a driver error is a reason, not a crash of the budget
        return HostBudget(cpus, memory, gpu_reason=f"CUDA query failed: {err}")
    return HostBudget(cpus, memory, figure, name)


def gpu_free_memory(device: int = 0) -> tuple[Figure, str]:
    """Free memory on ``cuda:device`` after the context exists (so its fixed
    tax is already netted out), plus what CuPy's pool holds for reuse."""
    import cupy

    with cupy.cuda.Device(device):
        cupy.zeros(1, dtype=cupy.float32)  # warm-up: creates the context
        cupy.cuda.runtime.deviceSynchronize()
        free, total = cupy.cuda.runtime.memGetInfo()
        cached = cupy.get_default_memory_pool().free_bytes()
        name = cupy.cuda.runtime.getDeviceProperties(device)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    source = (f"cudaMemGetInfo free on cuda:{device} ({name}, {format_bytes(total)} total) "
              f"after context warm-up, plus {format_bytes(cached)} cached in CuPy's pool")
    return Figure(int(free) + int(cached), source), name
