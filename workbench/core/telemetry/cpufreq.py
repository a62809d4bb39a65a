"""CPU clocks per cpufreq policy: current, cap in force (scaling_max) and hardware max, governor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import Clock, Unavailable
from workbench.core.telemetry.sysfs import (
    Reader,
    cpu_list,
    read_int,
    read_int_why,
    read_optional,
    read_text,
    read_word_why,
    sorted_glob,
    under,
)

NO_CPUFREQ = "no cpufreq (no clocks exposed)"


@dataclass(frozen=True)
class CpufreqPolicy:
    """A policy found at discovery: its CPUs and its hardware maximum do not change."""

    name: str
    path: Path
    cpus: str
    hw_max_khz: int


class CpufreqSampler:
    """Finds the policies once; each `read()` is three small reads per policy."""

    def __init__(self, root: str | Path = "/", reader: Reader = read_text) -> None:
        self._reader = reader
        policies = []
        for path in sorted_glob(under(Path(root), "/sys/devices/system/cpu/cpufreq"), "policy*"):
            hw_max = read_int(reader, path / "cpuinfo_max_freq")
            if hw_max is None:
                continue
            cpus = read_optional(reader, path / "related_cpus") or read_optional(reader, path / "affected_cpus") or ""
            policies.append(CpufreqPolicy(path.name, path, cpu_list(cpus), hw_max))
        self.policies: tuple[CpufreqPolicy, ...] = tuple(policies)
        self.unavailable: tuple[Unavailable, ...] = ()  # policies the last read() could not read, and why

    @property
    def available(self) -> bool:
        return bool(self.policies)

    def read(self) -> tuple[Clock, ...]:
        clocks = []
        failed = []
        for policy in self.policies:
            current, why = read_int_why(self._reader, policy.path / "scaling_cur_freq")
            if current is None:
                # An offline cluster keeps its policy but has no current clock; say which and why.
                failed.append(Unavailable(f"clock cpus {policy.cpus or policy.name}", why))
                continue
            cap, cap_why = read_int_why(self._reader, policy.path / "scaling_max_freq")
            if cap is None:  # shown at the hardware maximum, and said so: the cap in force is unknown
                failed.append(Unavailable(f"clock cap cpus {policy.cpus or policy.name}", cap_why))
            governor, governor_why = read_word_why(self._reader, policy.path / "scaling_governor")
            if governor is None:
                failed.append(Unavailable(f"governor cpus {policy.cpus or policy.name}", governor_why))
            clocks.append(
                Clock(
                    policy=policy.name,
                    cpus=policy.cpus,
                    cur_khz=current,
                    max_khz=cap if cap is not None else policy.hw_max_khz,
                    hw_max_khz=policy.hw_max_khz,
                    governor=governor or "unknown",
                )
            )
        self.unavailable = tuple(failed)
        return tuple(clocks)
