"""The machine a bench ran on: CPU, cores, RAM, OS, device profile and llama.cpp build."""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from workbench.core.config.preset import DeviceProfile
from workbench.core.engine.measured import EngineFacts


@dataclass(frozen=True)
class Machine:
    label: str  # how compare names it: hostname and device profile
    hostname: str
    cpu_model: str
    cores_physical: int | None
    cores_logical: int | None
    ram_bytes: int
    os: str
    python: str
    device_profile: str
    device_ram_total_mb: int
    device_budget_mb: int
    device_bandwidth_gbs: float
    device_power_limit_w: float | None
    llama_cpp_version: str
    llama_cpp_system_info: str
    device_description: str = ""  # the profile's own words ("Raspberry Pi 5 8 GB: 4 x Cortex-A76, ...")


def describe_machine(device: DeviceProfile, facts: EngineFacts | None, *, root: str = "/") -> Machine:
    """This machine, as the bench saw it. `facts` come from the engine (the only llama.cpp user)."""
    hostname = socket.gethostname()
    return Machine(
        label=f"{hostname} ({device.name})",
        hostname=hostname,
        cpu_model=cpu_model(root),
        cores_physical=psutil.cpu_count(logical=False),
        cores_logical=psutil.cpu_count(logical=True),
        ram_bytes=int(psutil.virtual_memory().total),
        os=platform.platform(),
        python=platform.python_version(),
        device_profile=device.name,
        device_ram_total_mb=device.ram_total_mb,
        device_budget_mb=device.budget_mb,
        device_bandwidth_gbs=device.mem_bandwidth_gbs,
        device_power_limit_w=device.power_limit_w,
        llama_cpp_version=facts.llama_cpp_version if facts else "unavailable: no preset loaded",
        llama_cpp_system_info=facts.system_info if facts else "unavailable: no preset loaded",
        device_description=device.description,
    )


def cpu_model(root: str = "/") -> str:
    """x86 names itself in /proc/cpuinfo; ARM boards name the board in the device tree."""
    base = Path(root)
    try:
        for line in (base / "proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    try:
        return (base / "proc/device-tree/model").read_text(errors="replace").strip("\x00\n ")
    except OSError:
        pass
    return platform.processor() or platform.machine() or f"unknown ({os.name})"


def machine_to_dict(machine: Machine) -> dict[str, Any]:
    return dataclasses.asdict(machine)


def machine_from_dict(data: dict[str, Any]) -> Machine:
    names = {f.name for f in dataclasses.fields(Machine)}
    return Machine(**{key: value for key, value in data.items() if key in names})
