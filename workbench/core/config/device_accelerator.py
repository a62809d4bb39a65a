"""A device profile's accelerator: its kind, and whether its memory is the board's RAM or its own."""

from __future__ import annotations

from typing import Any

from workbench.core.config.preset_split import ALL_LAYERS, effective_gpu_layers
from workbench.core.config.toml_checks import TomlSource, closest, get_bool, get_int, get_number, get_str
from workbench.core.errors import PresetError

ACCELERATORS = ("cuda", "vulkan", "none")
SLOWER_KEY = "accelerator_slower_than_cpu"  # published runs show offloading to it slower than the CPU


def accelerator_fields(data: dict[str, Any], source: TomlSource) -> dict[str, Any]:
    """`accelerator`, `vram_mb` and `vram_bandwidth_gbs`, checked; absent vram_mb = unified memory."""
    kind = get_str(data, "accelerator", "none", source, example='accelerator = "cuda"').lower()
    if kind not in ACCELERATORS:
        guess = closest(kind, ACCELERATORS)
        hint = f"Did you mean {guess}? " if guess else ""
        raise PresetError(f'accelerator = "{data["accelerator"]}" is not one the workbench models',
                          where=source.where("accelerator"),
                          fix=f"{hint}Use one of: {', '.join(ACCELERATORS)} (llama.cpp's CUDA or Vulkan backend)")
    vram_mb = None
    if "vram_mb" in data:
        if kind == "none":
            raise PresetError("vram_mb is set but accelerator is none", where=source.where("vram_mb"),
                              fix='Set accelerator = "cuda" or "vulkan", or drop vram_mb')
        vram_mb = get_int(data, "vram_mb", None, source, minimum=256, maximum=1 << 24, example="vram_mb = 8192",
                          unit="MB")
    bandwidth = get_number(data, "vram_bandwidth_gbs", None, source, minimum_exclusive=0, maximum=100_000,
                           example="vram_bandwidth_gbs = 272")
    if bandwidth is not None and vram_mb is None:
        raise PresetError("vram_bandwidth_gbs is set but the accelerator has no memory of its own (no vram_mb)",
                          where=source.where("vram_bandwidth_gbs"),
                          fix="Unified memory runs at mem_bandwidth_gbs: drop vram_bandwidth_gbs, or add vram_mb")
    slower = get_bool(data, SLOWER_KEY, False, source)
    if slower and kind == "none":
        raise PresetError(f"{SLOWER_KEY} is set but accelerator is none", where=source.where(SLOWER_KEY),
                          fix=f'Name the accelerator (accelerator = "vulkan"), or drop {SLOWER_KEY}')
    return {"accelerator": kind, "vram_mb": vram_mb, "vram_bandwidth_gbs": float(bandwidth or 0.0),
            "accelerator_slower_than_cpu": slower}


def offload_problems(preset: Any, device: Any) -> list[tuple[str, str, str]]:
    """(level, message, fix) when the preset sends layers to an accelerator the device's profile says is slower."""
    layers = effective_gpu_layers(preset)
    if not getattr(device, "accelerator_slower_than_cpu", False) or layers == 0:
        return []
    source = dict(device.notes).get(SLOWER_KEY, "see the device profile's notes")
    count = "all layers" if layers == ALL_LAYERS else f"{layers} layers"
    return [("warning", f"gpu_layers sends {count} to {device.name}'s {device.accelerator} GPU when llama.cpp is "
             f"built with it, and published runs show it slower than this board's CPU ({source})",
             "Set gpu_layers = 0 to keep every layer on the CPU")]
