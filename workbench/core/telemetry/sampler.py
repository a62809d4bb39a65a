"""One `Sampler` combining every source; discovers them once so each sample is a few reads."""

from __future__ import annotations

import time
from pathlib import Path

from workbench.core.telemetry.cpufreq import NO_CPUFREQ, CpufreqSampler
from workbench.core.telemetry.detect import BoardInfo, detect_board
from workbench.core.telemetry.loads import NO_LOADS, LoadSampler
from workbench.core.telemetry.memory import MemorySampler
from workbench.core.telemetry.power import PowerSampler
from workbench.core.telemetry.sample import PowerRail, TelemetrySample, Temperature, Unavailable
from workbench.core.telemetry.sysfs import Reader, read_text
from workbench.core.telemetry.tegrastats import TegrastatsLive, TegrastatsLog, TegrastatsReading
from workbench.core.telemetry.thermal import NO_SENSORS, ThermalSampler, sensor_names
from workbench.core.telemetry.throttle import NO_THROTTLE, ThrottleSampler
from workbench.core.units import MIB

TegrastatsSource = TegrastatsLog | TegrastatsLive
class Sampler:
    """`Sampler(root="/", engine_pid=None).sample() -> TelemetrySample`; cheap, call at <= 2 Hz.

    `tegrastats`: a recorded log path, "live" to run the tool, or a source object. When given,
    it is the authority for memory, swap and CPU load (it describes the Jetson, which may not
    be this machine), and it fills temperatures, rails and loads that sysfs does not expose.
    """

    def __init__(
        self,
        root: str | Path = "/",
        engine_pid: int | None = None,
        *,
        tegrastats: str | Path | TegrastatsSource | None = None,
        reader: Reader = read_text,
    ) -> None:
        self.root = Path(root)
        self.board: BoardInfo = detect_board(self.root, reader)
        self._memory = MemorySampler(engine_pid)
        self._thermal = ThermalSampler(self.root, reader)
        self._cpufreq = CpufreqSampler(self.root, reader)
        self._throttle = ThrottleSampler(self.root, reader, uses_clocks=self._cpufreq.available)
        self._power = PowerSampler(self.root, reader, now=time.monotonic())
        self._loads = LoadSampler(self.root, reader)
        if tegrastats is None or isinstance(tegrastats, TegrastatsLog | TegrastatsLive):
            self.tegrastats = tegrastats
        elif str(tegrastats) == "live":
            self.tegrastats = TegrastatsLive()
        else:
            self.tegrastats = TegrastatsLog(tegrastats)

    @property
    def finished(self) -> bool:
        """True once a replayed tegrastats log has no more lines."""
        return self.tegrastats is not None and self.tegrastats.finished

    def set_engine_pid(self, pid: int | None) -> None:
        self._memory.set_engine_pid(pid)

    def close(self) -> None:
        if self.tegrastats is not None:
            self.tegrastats.close()

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sample(self) -> TelemetrySample:
        now = time.monotonic()
        memory = self._memory.read()
        tegra = self.tegrastats.next_reading() if self.tegrastats is not None else None
        unavailable: list[Unavailable] = list(memory.unavailable)

        temperatures = self._thermal.read()
        unavailable.extend(self._thermal.unavailable)
        if not temperatures and tegra is not None:
            temperatures = _tegrastats_temperatures(tegra, self.tegrastats.source)  # type: ignore[union-attr]
        if not temperatures:
            unavailable.append(Unavailable("temperature", _group_why(NO_SENSORS, self._thermal.unavailable)))

        clocks = self._cpufreq.read()
        unavailable.extend(self._cpufreq.unavailable)
        if not clocks:
            unavailable.append(Unavailable("clocks", _group_why(NO_CPUFREQ, self._cpufreq.unavailable)))

        throttle = self._throttle.read(clocks)
        unavailable.extend(self._throttle.unavailable)
        if throttle is None:
            unavailable.append(Unavailable("throttle", _group_why(NO_THROTTLE, self._throttle.unavailable)))

        tegra_rails = _tegrastats_rails(tegra, self.tegrastats.source) if tegra else ()  # type: ignore[union-attr]
        power = self._power.read(now, tegra_rails)
        unavailable.extend(power.unavailable)

        loads = self._loads.read()
        unavailable.extend(loads.unavailable)
        load_values, unit_clocks = dict(loads.loads), dict(loads.clocks_mhz)
        unit_sources = dict(loads.sources)
        if tegra is not None:
            _fill_tegrastats_loads(tegra, load_values, unit_clocks, unit_sources, self.tegrastats.source)  # type: ignore[union-attr]
            if tegra.gpu_percent is None and tegra.gpu_mhz is not None and "gpu" not in load_values:
                unavailable.append(Unavailable("gpu load", "this tegrastats prints GPU clocks only (JetPack 7.0)"))
        if not load_values and not loads.unavailable:
            unavailable.append(Unavailable("loads", NO_LOADS))

        fields = {
            "mem_total_bytes": memory.mem_total_bytes,
            "mem_available_bytes": memory.mem_available_bytes,
            "swap_total_bytes": memory.swap_total_bytes,
            "swap_used_bytes": memory.swap_used_bytes,
            "cpu_percent": memory.cpu_percent,
            "memory_source": "psutil",
        }
        if tegra is not None and tegra.ram_total_mb is not None:
            fields.update(_tegrastats_memory(tegra))
        return TelemetrySample(
            timestamp=now,
            engine_rss_bytes=memory.engine_rss_bytes,
            engine_uss_bytes=memory.engine_uss_bytes,
            temperatures=temperatures,
            clocks=clocks,
            power=power.rails,
            total_power_w=power.total_w,
            energy_j=power.energy_j,
            throttle=throttle,
            loads=tuple(load_values.items()),
            unavailable=tuple(unavailable),
            total_power_source=power.total_source,
            energy_source=power.energy_source,
            device_clocks_mhz=tuple(unit_clocks.items()),
            unit_sources=tuple(unit_sources.items()),
            **fields,  # type: ignore[arg-type]
        )


def _tegrastats_temperatures(reading: TegrastatsReading, source: str) -> tuple[Temperature, ...]:
    names = sensor_names([name for name, _ in reading.temperatures])
    return tuple(
        Temperature(name=normalised, celsius=celsius, source=source, label=name)
        for normalised, (name, celsius) in zip(names, reading.temperatures)
    )


def _tegrastats_rails(reading: TegrastatsReading, source: str) -> tuple[PowerRail, ...]:
    return tuple(PowerRail(name, now_mw / 1000, source) for name, now_mw, _ in reading.rails_mw)


def _fill_tegrastats_loads(
    reading: TegrastatsReading,
    loads: dict[str, float],
    clocks: dict[str, float],
    sources: dict[str, str],
    source: str,
) -> None:
    """GPU, memory controller and engine (NVENC, NVDEC, VIC, APE, ...) figures sysfs did not give."""
    found: list[tuple[str, float | None, float | None]] = [
        ("gpu", reading.gpu_percent, reading.gpu_mhz),
        ("emc", reading.emc_percent, reading.emc_mhz),
        *reading.engines,
    ]
    for unit, percent, mhz in found:
        if percent is not None and unit not in loads:
            loads[unit] = percent
            sources.setdefault(unit, source)
        if mhz is not None and unit not in clocks:
            clocks[unit] = float(mhz)
            sources.setdefault(unit, source)


def _group_why(none_exposed: str, failures: tuple[Unavailable, ...]) -> str:
    """Why a whole group is empty: nothing exposed, or every source failed (the first reason)."""
    if not failures:
        return none_exposed
    return f"every source failed to read ({failures[0].why})"


def _tegrastats_memory(reading: TegrastatsReading) -> dict[str, object]:
    total = (reading.ram_total_mb or 0) * MIB
    used = (reading.ram_used_mb or 0) * MIB
    fields: dict[str, object] = {
        "mem_total_bytes": total,
        "mem_available_bytes": total - used,  # tegrastats "used" excludes buffers and page cache
        "memory_source": "tegrastats",
    }
    if reading.swap_total_mb is not None:
        fields["swap_total_bytes"] = reading.swap_total_mb * MIB
        fields["swap_used_bytes"] = (reading.swap_used_mb or 0) * MIB
    online = tuple(load for load in reading.cpu_load_percent if load is not None)
    if online:
        fields["cpu_percent"] = online  # cores tegrastats shows as "off" are left out
    return fields
