"""One telemetry sample: every figure with its source; absent sources are named, never zero."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Temperature:
    name: str  # normalised: "cpu", "gpu", "soc", "npu", "nvme", ... (suffixed when repeated)
    celsius: float
    source: str  # the file it was read from
    trip_critical_c: float | None = None
    trip_passive_c: float | None = None
    label: str = ""  # the sensor's own name: "soc0-thermal", "coretemp Package id 0", ...


@dataclass(frozen=True)
class Clock:
    policy: str  # "policy0", ...
    cpus: str  # "0-3"
    cur_khz: int
    max_khz: int  # scaling_max_freq: the cap in force
    hw_max_khz: int  # cpuinfo_max_freq
    governor: str

    @property
    def capped(self) -> bool:
        return self.max_khz < self.hw_max_khz


@dataclass(frozen=True)
class PowerRail:
    name: str  # "VDD_IN", "package-0", ...
    watts: float
    source: str
    volts: float | None = None  # bus voltage where the rail reports it (INA3221)


@dataclass(frozen=True)
class Throttle:
    active: bool
    cause: str  # "" when not throttled; otherwise human text: "Pi: soft temperature limit now"
    source: str
    history: str = ""  # what happened earlier but not now: "Pi since boot: under-voltage"


@dataclass(frozen=True)
class Unavailable:
    what: str  # "temperature", "power", "clocks", "throttle", "energy", ...
    why: str  # "no thermal sensors exposed", "energy counter needs root", ...


@dataclass(frozen=True)
class TelemetrySample:
    timestamp: float  # time.monotonic()
    mem_total_bytes: int
    mem_available_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int
    cpu_percent: tuple[float, ...]  # per core
    engine_rss_bytes: int | None = None
    engine_uss_bytes: int | None = None
    temperatures: tuple[Temperature, ...] = ()
    clocks: tuple[Clock, ...] = ()
    power: tuple[PowerRail, ...] = ()
    total_power_w: float | None = None  # the input rail or package power; None when no source
    energy_j: float | None = None  # monotonic cumulative energy since the sampler started
    throttle: Throttle | None = None
    loads: tuple[tuple[str, float], ...] = ()  # ("npu0", 12.0), ("gpu", 40.0) in %
    unavailable: tuple[Unavailable, ...] = ()
    total_power_source: str = ""  # which rail total_power_w is: "VDD_IN (ina3221 hwmon1)", ...
    energy_source: str = ""  # "counter: intel-rapl:0" (measured) or "integrated: VDD_IN"
    device_clocks_mhz: tuple[tuple[str, float], ...] = ()  # ("gpu", 624.75), ("emc", 2133.0)
    memory_source: str = "psutil"  # "tegrastats" when a tegrastats source replaces psutil
    unit_sources: tuple[tuple[str, str], ...] = ()  # ("gpu", "/sys/devices/gpu.0/load"): where loads/clocks came from
