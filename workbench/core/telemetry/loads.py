"""Accelerator load and clocks: RK3588 NPU cores, Jetson GPU, devfreq units (GPU, NPU, memory)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import Unavailable
from workbench.core.telemetry.sysfs import (
    Reader,
    os_error_text,
    read_int_why,
    read_text,
    sorted_glob,
    under,
)

NO_LOADS = "no GPU/NPU load exposed"
NPU_NEEDS_ROOT = "NPU load needs root (debugfs)"

_NPU_CORE = re.compile(r"Core(\d+):\s*(\d+)%")
# Jetson codec and helper engines in debugfs (root only), as jtop reads them: clk_enable_count and clk_rate (Hz).
_ENGINE_CLOCKS = "/sys/kernel/debug/clk"
_ENGINE_NAME = re.compile(r"^(ape|vic\d*|nvenc\d*|nvdec\d*|nvjpg\d*|ofa|msenc|nvdla\d+|pva\d+)$")
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
    sources: tuple[tuple[str, str], ...] = ()  # (unit, the file its load or clock came from)


class LoadSampler:
    """Finds the load files once; each `read()` is one or two reads per unit."""

    def __init__(self, root: str | Path = "/", reader: Reader = read_text) -> None:
        self._reader = reader
        root = Path(root)
        self.npu_file: Path | None = None
        self.npu_needs_root = False
        self.engines_need_root = False
        npu_file = under(root, "/sys/kernel/debug/rknpu/load")
        units = []
        for device in sorted_glob(under(root, "/sys/class/devfreq"), "*"):
            name = device.name.lower()
            unit = next((unit for keys, unit in _DEVFREQ_UNITS if any(key in name for key in keys)), None)
            if unit is not None and (device / "cur_freq").exists():
                units.append(DevfreqUnit(unit, device))
        self.devfreq = tuple(units)
        try:
            reader(npu_file)
            self.npu_file = npu_file
        except PermissionError:
            # debugfs is closed to users as a whole: say "needs root" only where an NPU is known to be.
            self.npu_needs_root = any(unit.unit == "npu" for unit in units) or under(root, "/sys/module/rknpu").exists()
        except OSError:
            pass
        self.gpu_load_file = next(
            (path for path in (under(root, name) for name in _JETSON_GPU_LOADS) if path.exists()), None
        )
        self.engines: tuple[Path, ...] = ()
        clk = under(root, _ENGINE_CLOCKS)
        try:
            self.engines = tuple(sorted(path for path in clk.iterdir() if _ENGINE_NAME.match(path.name)))
        except PermissionError:
            self.engines_need_root = self.gpu_load_file is not None  # a Jetson (its GPU load file is there)
        except OSError:
            pass

    @property
    def available(self) -> bool:
        return self.npu_file is not None or self.gpu_load_file is not None or bool(self.devfreq) or bool(self.engines)

    def read(self) -> LoadReading:
        loads: dict[str, float] = {}
        clocks: dict[str, float] = {}
        sources: dict[str, str] = {}
        unavailable: list[Unavailable] = []
        if self.npu_needs_root:
            unavailable.append(Unavailable("npu load", NPU_NEEDS_ROOT))
        if self.npu_file is not None:
            self._read_npu(loads, sources, unavailable)
        if self.gpu_load_file is not None:
            per_mille, why = read_int_why(self._reader, self.gpu_load_file)
            if per_mille is None:
                unavailable.append(Unavailable("gpu load", why))
            else:
                loads["gpu"] = per_mille / 10
                sources["gpu"] = str(self.gpu_load_file)
        for device in self.devfreq:
            hertz, why = read_int_why(self._reader, device.path / "cur_freq")
            if hertz is None:
                unavailable.append(Unavailable(f"{device.unit} clock", why))
            elif device.unit not in clocks:
                clocks[device.unit] = hertz / 1e6
                sources.setdefault(device.unit, str(device.path))
            if device.unit in loads or (device.unit == "npu" and any(key.startswith("npu") for key in loads)):
                continue
            load, load_why = _devfreq_load(self._reader, device.path)
            if load is not None:
                loads[device.unit] = load
            elif load_why:
                unavailable.append(Unavailable(f"{device.unit} load", load_why))
        if self.engines_need_root:
            unavailable.append(Unavailable("engine clocks", "engine clocks need root (debugfs)"))
        for engine in self.engines:
            self._read_engine(engine, clocks, sources, unavailable)
        return LoadReading(tuple(loads.items()), tuple(clocks.items()), tuple(unavailable), tuple(sources.items()))

    def _read_engine(self, engine: Path, clocks: dict[str, float], sources: dict[str, str],
                     unavailable: list[Unavailable]) -> None:
        """NVENC/NVDEC/VIC/APE...: the clock while the engine is on; an engine that is off has no clock."""
        enabled, enabled_why = read_int_why(self._reader, engine / "clk_enable_count")
        hertz, rate_why = read_int_why(self._reader, engine / "clk_rate")
        if enabled is None or hertz is None:
            unavailable.append(Unavailable(f"{engine.name} clock", enabled_why or rate_why))
            return
        if enabled == 0 or hertz == 0:
            return  # gated or not enabled: the engine is off, which is no clock of 0 (jtop shows "off")
        clocks.setdefault(engine.name, hertz / 1e6)
        sources.setdefault(engine.name, str(engine))

    def _read_npu(self, loads: dict[str, float], sources: dict[str, str], unavailable: list[Unavailable]) -> None:
        assert self.npu_file is not None
        try:
            text = self._reader(self.npu_file)
        except OSError as error:
            unavailable.append(Unavailable("npu load", f"{os_error_text(error)} reading {self.npu_file}"))
            return
        cores = parse_rknpu_load(text)
        if not cores:
            unavailable.append(Unavailable("npu load", f"no load in {self.npu_file} ({text[:30]!r})"))
        for core, percent in cores:
            if percent > 100:
                # The rknpu driver is known to print loads above 100% (its busy time counts
                # more than the window); such a figure is no load at all, so it is not shown.
                unavailable.append(Unavailable(f"{core} load", f"driver reported {percent:.0f}% (over 100%)"))
                continue
            loads[core] = percent
            sources[core] = str(self.npu_file)


def _devfreq_load(reader: Reader, device: Path) -> tuple[float | None, str]:
    """(load %, "") from Rockchip's `load` ("35@800000000Hz") or Jetson's device/load (per mille);
    (None, why) when the file is there but gives no load; (None, "") when the unit has no load file."""
    load_file = device / "load"
    if load_file.exists():
        try:
            text = reader(load_file)
        except OSError as error:
            return None, f"{os_error_text(error)} reading {load_file}"
        if match := _DEVFREQ_LOAD.match(text):
            return float(match[1]), ""
        return None, f"no load in it ({text[:20]!r}): {load_file}"
    per_mille_file = device / "device" / "load"  # Jetson: the GPU's own load file
    if not per_mille_file.exists():
        return None, ""
    per_mille, why = read_int_why(reader, per_mille_file)
    return (per_mille / 10 if per_mille is not None else None), why
