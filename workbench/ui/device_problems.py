"""The device profile's problems with a preset (layers sent to a GPU slower than the CPU), as preset Problems."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.config.device_accelerator import offload_problems
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import Problem


@dataclass(frozen=True)
class DeviceProblem(Problem):
    """A problem the device's profile names: the main verdict line says it, since it costs speed, not memory."""


def device_problems(preset: Preset, device: DeviceProfile) -> tuple[DeviceProblem, ...]:
    """What the CLI's ledger and bench say about `preset` on `device`, before anything loads."""
    return tuple(DeviceProblem(level, message, fix) for level, message, fix in offload_problems(preset, device))
