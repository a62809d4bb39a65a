"""Throttling in words: Intel thermal-throttle counters, Raspberry Pi get_throttled, clock caps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import Clock, Throttle, Unavailable
from workbench.core.telemetry.sysfs import (
    Reader,
    os_error_text,
    read_int,
    read_int_why,
    read_optional,
    read_text,
    sorted_glob,
    under,
)

NO_THROTTLE = "no throttle indicators exposed"

# get_throttled: bits 0-3 describe now, bits 16-19 the same conditions since boot.
PI_THROTTLE_BITS = (
    (0, "under-voltage"),
    (1, "arm frequency capped"),
    (2, "throttled"),
    (3, "soft temperature limit"),
)
PI_SINCE_BOOT_SHIFT = 16


def describe_pi_throttled(value: int) -> tuple[bool, str, str]:
    """(active now, cause now, history since boot) for a get_throttled value such as 0x50005."""
    now = [text for bit, text in PI_THROTTLE_BITS if value >> bit & 1]
    since_boot = [text for bit, text in PI_THROTTLE_BITS if value >> (bit + PI_SINCE_BOOT_SHIFT) & 1]
    cause = f"Pi: {', '.join(now)} now" if now else ""
    history = f"Pi since boot: {', '.join(since_boot)}" if since_boot else ""
    return bool(now), cause, history


def describe_caps(clocks: tuple[Clock, ...]) -> list[str]:
    """"clock cap: cpus 4-7 at 1800 of 2400 MHz" for each policy held below its hardware max."""
    return [
        f"clock cap: cpus {clock.cpus} at {clock.max_khz // 1000} of {clock.hw_max_khz // 1000} MHz"
        for clock in clocks
        if clock.capped
    ]


@dataclass(frozen=True)
class ThrottleCounter:
    """One Intel counter file: per core, or per package (read from one CPU of the package)."""

    kind: str  # "core" or "package"
    owner: str  # "cpu3" or "package 0"
    path: Path


class ThrottleSampler:
    """Finds the counters and the Pi firmware file once; `read(clocks)` reports the state now.

    Intel counters only ever grow, so "throttling now" means "grew since the previous
    sample" (the first baseline is taken at construction).
    """

    def __init__(self, root: str | Path = "/", reader: Reader = read_text, *, uses_clocks: bool = False) -> None:
        self._reader = reader
        root = Path(root)
        self.counters = tuple(_intel_counters(root, reader))
        self._previous = {counter.path: read_int(reader, counter.path) for counter in self.counters}
        # soc/soc:firmware (Pi 4 and older kernels), soc@107c000000/...:firmware (Pi 5), or soc:firmware
        # directly under platform on some kernels.
        platform = under(root, "/sys/devices/platform")
        pi_files = sorted_glob(platform, "*/*firmware*/get_throttled") + sorted_glob(platform, "*firmware*/get_throttled")
        self.pi_file: Path | None = pi_files[0] if pi_files else None
        self.uses_clocks = uses_clocks  # cpufreq present: caps are a throttle source
        self.unavailable: tuple[Unavailable, ...] = ()  # what the last read() could not read, and why

    @property
    def available(self) -> bool:
        return bool(self.counters) or self.pi_file is not None or self.uses_clocks

    def read(self, clocks: tuple[Clock, ...] = ()) -> Throttle | None:
        if not self.available:
            return None
        causes: list[str] = []
        history = ""
        sources: list[str] = []
        failed: list[Unavailable] = []
        if self.counters:
            sources.append("thermal_throttle counters")
            causes.extend(self._intel_causes(failed))
        if self.pi_file is not None:
            value, why = self._pi_value()
            if value is None:
                failed.append(Unavailable("throttle Pi firmware", why))
            else:
                sources.append(str(self.pi_file))
                _, cause, history = describe_pi_throttled(value)
                if cause:
                    causes.append(cause)
        if self.uses_clocks:
            sources.append("cpufreq caps")
            causes.extend(describe_caps(clocks))
        self.unavailable = tuple(failed)
        if not sources:
            return None  # every source failed this time: no state, the reasons say why
        return Throttle(active=bool(causes), cause="; ".join(causes), source=", ".join(sources), history=history)

    def _pi_value(self) -> tuple[int | None, str]:
        assert self.pi_file is not None
        try:
            text = self._reader(self.pi_file)
        except OSError as error:
            return None, f"{os_error_text(error)} reading {self.pi_file}"
        value = _hex_value(text)
        return (value, "") if value is not None else (None, f"not a hex value ({text[:20]!r}): {self.pi_file}")

    def _intel_causes(self, failed: list[Unavailable]) -> list[str]:
        grew: dict[str, list[tuple[str, int]]] = {"core": [], "package": []}
        for counter in self.counters:
            count, why = read_int_why(self._reader, counter.path)
            if count is None:
                failed.append(Unavailable(f"throttle counter {counter.owner}", why))
                continue  # the previous count stays the baseline
            previous = self._previous.get(counter.path)
            self._previous[counter.path] = count
            if count is not None and previous is not None and count > previous:
                grew[counter.kind].append((counter.owner, count - previous))
        causes = []
        for kind, events in grew.items():
            if events:
                owners = ", ".join(owner for owner, _ in events)
                total = sum(delta for _, delta in events)
                causes.append(f"Intel: {kind} thermal throttling on {owners} (+{total} since last sample)")
        return causes


def _hex_value(text: str | None) -> int | None:
    """get_throttled is bare hex ("50005"); older firmware prints "throttled=0x50005"."""
    if text is None:
        return None
    try:
        return int(text.rsplit("=", 1)[-1], 16)
    except ValueError:
        return None


def _intel_counters(root: Path, reader: Reader) -> list[ThrottleCounter]:
    counters = []
    packages_seen: set[str] = set()
    for cpu in sorted_glob(under(root, "/sys/devices/system/cpu"), "cpu[0-9]*"):
        folder = cpu / "thermal_throttle"
        core_file = folder / "core_throttle_count"
        if core_file.exists():
            counters.append(ThrottleCounter("core", cpu.name, core_file))
        package_file = folder / "package_throttle_count"
        if package_file.exists():
            package = read_optional(reader, cpu / "topology" / "physical_package_id") or "0"
            if package not in packages_seen:  # every CPU of a package shows the same count
                packages_seen.add(package)
                counters.append(ThrottleCounter("package", f"package {package}", package_file))
    return counters
