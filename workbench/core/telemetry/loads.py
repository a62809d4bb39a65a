"""Accelerator load and clocks: RK3588 NPU cores, Jetson GPU, devfreq units (GPU, NPU, memory)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import Unavailable
from workbench.core.telemetry.sysfs import Reader, read_int, read_optional, read_text, sorted_glob, under

NO_LOADS = "no GPU/NPU load exposed"
NPU_NEEDS_ROOT = "NPU load needs root (debugfs)"

_NPU_CORE = re.compile(r"Core(\d+):\s*(\d+)%")
_NPU_SINGLE = re.compile(r"NPU load:\s*(\d+)%")
_DEVFREQ_LOAD = re.compile(r"^(\d+)@(\d+)Hz$")  # Rockchip devfreq `load`: "35@800000000Hz"
_JETSON_GPU_LOADS = ("/sys/devices/gpu.0/load", "/sys/devices/platform/gpu.0/load")
# devfreq device names -> the unit they clock.
_DEVFREQ_UNITS = (
    (("gpu", "ga10b", "gv11b", "gp10b", "gm20b", "mali"), "gpu"),
    (("npu",), "npu"),
    (("dmc", "emc"), "emc"),
)


def parse_rknpu_load(text: str) -> tuple[tuple[str, float], ...]:
    """"NPU load:  Core0: 12%, Core1:  0%, Core2:  0%," -> (("npu0", 12.0), ...); older: "NPU load: 12%"."""
    cores = _NPU_CORE.findall(text)
    if cores:
        return tuple((f"npu{index}", float(percent)) for index, percent in cores)
    single = _NPU_SINGLE.search(text)
    return (("npu", float(single[1])),) if single else ()


@dataclass(frozen=True)
class DevfreqUnit:
    unit: str  # "gpu", "npu", "emc"
    path: Path


@dataclass(frozen=True)
class LoadReading:
    loads: tuple[tuple[str, float], ...]
    clocks_mhz: tuple[tuple[str, float], ...]
    unavailable: tuple[Unavailable, ...]


class LoadSampler:
    """Finds the load files once; each `read()` is one or two reads per unit."""

    def __init__(self, root: str | Path = "/", reader: Reader = read_text) -> None:
        self._reader = reader
        root = Path(root)
        self.npu_file: Path | None = None
        self.npu_needs_root = False
        npu_file = under(root, "/sys/kernel/debug/rknpu/load")
        try:
            reader(npu_file)
            self.npu_file = npu_file
        except PermissionError:
            self.npu_needs_root = True
        except OSError:
            pass
        self.gpu_load_file = next(
            (path for path in (under(root, name) for name in _JETSON_GPU_LOADS) if path.exists()), None
        )
        units = []
        for device in sorted_glob(under(root, "/sys/class/devfreq"), "*"):
            name = device.name.lower()
            unit = next((unit for keys, unit in _DEVFREQ_UNITS if any(key in name for key in keys)), None)
            if unit is not None and (device / "cur_freq").exists():
                units.append(DevfreqUnit(unit, device))
        self.devfreq = tuple(units)

    @property
    def available(self) -> bool:
        return self.npu_file is not None or self.gpu_load_file is not None or bool(self.devfreq)

    def read(self) -> LoadReading:
        loads: dict[str, float] = {}
        clocks: dict[str, float] = {}
        if self.npu_file is not None:
            text = read_optional(self._reader, self.npu_file)
            loads.update(parse_rknpu_load(text or ""))
        if self.gpu_load_file is not None:
            per_mille = read_int(self._reader, self.gpu_load_file)
            if per_mille is not None:
                loads["gpu"] = per_mille / 10
        for device in self.devfreq:
            hertz = read_int(self._reader, device.path / "cur_freq")
            if hertz is not None:
                clocks.setdefault(device.unit, hertz / 1e6)
            if device.unit in loads or (device.unit == "npu" and any(key.startswith("npu") for key in loads)):
                continue
            load = _devfreq_load(self._reader, device.path)
            if load is not None:
                loads[device.unit] = load
        unavailable = ()
        if self.npu_needs_root:
            unavailable = (Unavailable("npu load", NPU_NEEDS_ROOT),)
        return LoadReading(tuple(loads.items()), tuple(clocks.items()), unavailable)


def _devfreq_load(reader: Reader, device: Path) -> float | None:
    text = read_optional(reader, device / "load")
    if text is not None and (match := _DEVFREQ_LOAD.match(text)):
        return float(match[1])
    per_mille = read_int(reader, device / "device" / "load")  # Jetson: the GPU's own load file
    return per_mille / 10 if per_mille is not None else None
