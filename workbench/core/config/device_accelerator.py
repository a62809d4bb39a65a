"""A device profile's accelerator: its kind, and whether its memory is the board's RAM or its own."""

from __future__ import annotations

from typing import Any

from workbench.core.config.toml_checks import TomlSource, closest, get_int, get_number, get_str
from workbench.core.errors import PresetError

ACCELERATORS = ("cuda", "vulkan", "none")


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
    return {"accelerator": kind, "vram_mb": vram_mb, "vram_bandwidth_gbs": float(bandwidth or 0.0)}
