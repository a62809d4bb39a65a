"""The host profile's own accelerator as a device of the split (what a CUDA/Vulkan build of llama.cpp sees)."""

from __future__ import annotations

from workbench.core.config.preset import DeviceProfile
from workbench.core.ledger.split_types import SplitDevice
from workbench.core.units import MIB

GPU_NAMES = {"cuda": "CUDA0", "vulkan": "Vulkan0"}


def local_gpu_device(host: DeviceProfile) -> SplitDevice | None:
    """The host's GPU: with its own memory (vram_mb) a budget of its own, else it shares the host's RAM."""
    if host.accelerator not in GPU_NAMES:
        return None
    if host.vram_mb is None:
        return SplitDevice(name=GPU_NAMES[host.accelerator], free_bytes=host.budget_mb * MIB, budget_bytes=None,
                           budget_source="unified memory: the host's budget",
                           bandwidth_bytes_per_s=host.mem_bandwidth_gbs * 1e9 or None,
                           bandwidth_source=f"device profile {host.name}", shares_host_memory=True)
    bandwidth = host.vram_bandwidth_gbs or 0.0
    return SplitDevice(name=GPU_NAMES[host.accelerator], free_bytes=host.vram_mb * MIB, budget_bytes=host.vram_mb * MIB,
                       budget_source=f"vram_mb of {host.name}", bandwidth_bytes_per_s=bandwidth * 1e9 or None,
                       bandwidth_source=f"vram_bandwidth_gbs of {host.name}" if bandwidth else "",
                       alignment=128 if host.accelerator == "cuda" else 256)
