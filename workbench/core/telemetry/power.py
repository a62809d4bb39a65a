"""Power and energy: RAPL counters, Jetson INA3221 rails, battery; cumulative energy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import PowerRail, Unavailable
from workbench.core.telemetry.sysfs import (
    Reader,
    read_int,
    read_int_why,
    read_optional,
    read_text,
    read_word_why,
    sorted_glob,
    under,
)
from workbench.core.telemetry.tegrastats import INPUT_RAILS, is_rail, total_of_rails

NEEDS_ROOT = "energy counter needs root"
NO_POWER = "no power source here"


@dataclass(frozen=True)
class RaplDomain:
    """A top-level powercap zone (package-0, psys, dram); sub-zones are inside the package."""

    zone: str  # "intel-rapl:0"
    name: str  # "package-0"
    energy_path: Path
    max_range_uj: int


@dataclass(frozen=True)
class InaChannel:
    """One labelled INA3221 channel: mainline hwmon (mV, mA) or JetPack 4 iio (mW); or Thor's INA238 (µW)."""

    label: str
    source: str
    volts_path: Path | None
    amps_path: Path | None
    milliwatts_path: Path | None = None
    microwatts_path: Path | None = None


@dataclass(frozen=True)
class Battery:
    name: str
    path: Path


@dataclass(frozen=True)
class PowerReading:
    rails: tuple[PowerRail, ...]
    total_w: float | None
    total_source: str
    energy_j: float | None
    energy_source: str
    unavailable: tuple[Unavailable, ...]


def energy_delta_uj(previous: int, current: int, max_range_uj: int) -> int:
    """Counter difference across one wrap: energy_uj restarts from 0 after max_energy_range_uj."""
    delta = current - previous
    return delta + max_range_uj if delta < 0 else delta


class PowerSampler:
    """Finds rails once and takes a baseline; each `read(now)` gives watts and energy since start.

    The total is, in order of preference: the input rail (VDD_IN, VIN, POM_5V_IN) or, on a
    module without one (AGX Orin, AGX Xavier), the sum of its rails; the RAPL counter
    (package, or psys when present); a discharging battery. Energy comes from the RAPL counter
    when that is the total; otherwise it is the total power integrated between samples.
    """

    def __init__(self, root: str | Path = "/", reader: Reader = read_text, *, now: float = 0.0) -> None:
        self._reader = reader
        root = Path(root)
        self.rapl, self.rapl_needs_root = _rapl_domains(root, reader)
        self.ina = tuple(_ina3221_channels(root, reader))
        self.batteries = tuple(_batteries(root, reader))
        self._rapl_last = {domain.zone: read_int(reader, domain.energy_path) for domain in self.rapl}
        self._rapl_watts: dict[str, float] = {}
        self._last_time = now
        self._energy_j = 0.0
        self._last_total_w: float | None = None
        self._last_total_time: float | None = None

    @property
    def available(self) -> bool:
        return bool(self.rapl or self.ina or self.batteries)

    def read(self, now: float, extra_rails: tuple[PowerRail, ...] = ()) -> PowerReading:
        """`extra_rails`: rails from tegrastats, used when sysfs exposes none."""
        rails: list[PowerRail] = []
        failed: list[Unavailable] = []
        total: tuple[float, str] | None = None
        counter_joules = self._read_rapl(now, rails, failed)
        unread: list[str] = []
        for channel in self.ina:
            watts, volts, why = _channel_watts(self._reader, channel)
            if watts is None:
                failed.append(Unavailable(f"power {channel.label}", why))
                unread.append(channel.label)
                continue
            rails.append(PowerRail(channel.label, watts, channel.source, volts))
        rails.extend(rail for rail in extra_rails if not self.ina and is_rail(rail.name))
        board = [rail for rail in rails if not rail.source.startswith("intel-rapl")]
        found = total_of_rails({rail.name: rail.watts for rail in board})
        partial_why = ""
        if found is not None and unread and (found[0].startswith("sum of") or set(unread) & set(INPUT_RAILS)):
            # A sum without one of its rails, or the module rails without the input rail, is no total.
            partial_why = f"the total needs {', '.join(unread)}, which could not be read"
            found = None
        if found is not None:
            how, watts = found
            summed = board if how.startswith("sum of") else [rail for rail in board if rail.name == how]
            sources = ", ".join(dict.fromkeys(rail.source for rail in summed))
            total = (watts, f"{how} ({sources})")
        rapl_rails = [rail for rail in rails if rail.source.startswith("intel-rapl")]
        if total is None and rapl_rails:
            psys = [rail for rail in rapl_rails if rail.name == "psys"]
            chosen = psys or rapl_rails
            total = (sum(rail.watts for rail in chosen), "+".join(rail.name for rail in chosen) + " (RAPL)")
        for battery in self.batteries:
            watts, discharging, why = _battery_watts(self._reader, battery)
            if watts is None:
                failed.append(Unavailable(f"power {battery.name}", why))
                continue
            rails.append(PowerRail(battery.name, watts, str(battery.path)))
            if total is None and discharging:
                total = (watts, f"{battery.name} discharging")
        self._last_time = now
        return self._finish(now, tuple(rails), total, counter_joules, failed, partial_why)

    def _read_rapl(self, now: float, rails: list[PowerRail], failed: list[Unavailable]) -> float | None:
        """Append RAPL rails; return the joules the counter total measured since the last read."""
        if not self.rapl:
            return None
        elapsed = now - self._last_time
        joules: dict[str, float] = {}
        for domain in self.rapl:
            current, why = read_int_why(self._reader, domain.energy_path)
            previous = self._rapl_last.get(domain.zone)
            if current is None:
                failed.append(Unavailable(f"energy {domain.name}", why))
                continue
            if previous is None:
                self._rapl_last[domain.zone] = current  # the baseline read failed: this one starts it
                continue
            self._rapl_last[domain.zone] = current
            delta_uj = energy_delta_uj(previous, current, domain.max_range_uj)
            if delta_uj == 0:
                continue  # a live package counter always advances; a frozen one measures nothing
            joules[domain.name] = delta_uj / 1e6
            if elapsed > 0:
                self._rapl_watts[domain.zone] = joules[domain.name] / elapsed
            if domain.zone in self._rapl_watts:
                rails.append(PowerRail(domain.name, self._rapl_watts[domain.zone], domain.zone))
        if not joules:
            return None
        return joules["psys"] if "psys" in joules else sum(joules.values())

    def _finish(
        self,
        now: float,
        rails: tuple[PowerRail, ...],
        total: tuple[float, str] | None,
        counter_joules: float | None,
        failed: list[Unavailable],
        partial_why: str = "",
    ) -> PowerReading:
        unavailable: list[Unavailable] = list(failed)
        if total is None:
            why = partial_why or (NEEDS_ROOT if self.rapl_needs_root else NO_POWER)
            unavailable += [Unavailable("power", why), Unavailable("energy", why)]
            return PowerReading(rails, None, "", None, "", tuple(unavailable))
        total_w, total_source = total
        if counter_joules is not None and "(RAPL)" in total_source:
            self._energy_j += counter_joules
            energy_source = "counter: " + "+".join(domain.zone for domain in self.rapl)
        else:
            # Trapezoid between this sample and the previous one that had a total.
            if self._last_total_w is not None and self._last_total_time is not None:
                self._energy_j += (self._last_total_w + total_w) / 2 * (now - self._last_total_time)
            energy_source = f"integrated: {total_source}"
        self._last_total_w, self._last_total_time = total_w, now
        return PowerReading(rails, total_w, total_source, self._energy_j, energy_source, tuple(unavailable))


def _rapl_domains(root: Path, reader: Reader) -> tuple[list[RaplDomain], bool]:
    domains = []
    needs_root = False
    for zone in sorted_glob(under(root, "/sys/class/powercap"), "intel-rapl:*"):
        if zone.name.count(":") != 1:
            continue  # intel-rapl:0:0 (core) is part of intel-rapl:0 (package)
        energy_path = zone / "energy_uj"
        try:
            int(reader(energy_path))
        except PermissionError:
            needs_root = True  # root-only since Linux 5.10 (PLATYPUS side channel)
            continue
        except (OSError, ValueError):
            continue
        max_range = read_int(reader, zone / "max_energy_range_uj") or 2**32
        name = read_optional(reader, zone / "name") or zone.name
        domains.append(RaplDomain(zone.name, name, energy_path, max_range))
    return domains, needs_root and not domains


def _ina3221_channels(root: Path, reader: Reader) -> list[InaChannel]:
    channels = []
    for hwmon in sorted_glob(under(root, "/sys/class/hwmon"), "hwmon*"):
        if read_optional(reader, hwmon / "name") != "ina3221":
            continue
        for label_path in sorted_glob(hwmon, "in*_label"):
            index = label_path.name[2 : -len("_label")]
            label = read_optional(reader, label_path)
            if not label or not is_rail(label) or index == "7":
                continue  # an unconnected channel ("NC"), or in7 "sum of shunt voltages" (as jtop skips it)
            if not (hwmon / f"in{index}_input").exists() or not (hwmon / f"curr{index}_input").exists():
                continue  # a label without its readings is no rail
            channels.append(
                InaChannel(label, f"ina3221 {hwmon.name}", hwmon / f"in{index}_input", hwmon / f"curr{index}_input")
            )
    # Jetson AGX Thor carrier: an INA238 measures VIN, the board input (jetson_stats PR #900): power1_input in µW.
    for hwmon in sorted_glob(under(root, "/sys/class/hwmon"), "hwmon*"):
        if read_optional(reader, hwmon / "name") == "ina238" and (hwmon / "power1_input").exists():
            channels.append(InaChannel("VIN", f"ina238 {hwmon.name}", hwmon / "in1_input", None,
                                       microwatts_path=hwmon / "power1_input"))
    # JetPack 4 (L4T 32): the downstream ina3221x driver exposes iio devices in mW.
    for device in sorted_glob(under(root, "/sys/bus/i2c/drivers/ina3221x"), "*/iio:device*"):
        for name_path in sorted_glob(device, "rail_name_*"):
            index = name_path.name.rsplit("_", 1)[1]
            label = read_optional(reader, name_path)
            if label and is_rail(label):
                channels.append(InaChannel(label, "ina3221x iio", None, None, device / f"in_power{index}_input"))
    return channels


def _channel_watts(reader: Reader, channel: InaChannel) -> tuple[float | None, float | None, str]:
    """(watts, volts, why): why names the file and its error when the channel gives no reading."""
    if channel.microwatts_path is not None:
        microwatts, why = read_int_why(reader, channel.microwatts_path)
        millivolts, _ = read_int_why(reader, channel.volts_path) if channel.volts_path else (None, "")
        volts = millivolts / 1000 if millivolts is not None else None
        return (microwatts / 1e6 if microwatts is not None else None), volts, why
    if channel.milliwatts_path is not None:
        milliwatts, why = read_int_why(reader, channel.milliwatts_path)
        return (milliwatts / 1000 if milliwatts is not None else None), None, why
    assert channel.volts_path is not None and channel.amps_path is not None
    millivolts, volts_why = read_int_why(reader, channel.volts_path)
    milliamps, amps_why = read_int_why(reader, channel.amps_path)
    if millivolts is None or milliamps is None:
        return None, None, volts_why or amps_why
    return millivolts * milliamps / 1e6, millivolts / 1000, ""  # mV × mA = µW


def _batteries(root: Path, reader: Reader) -> list[Battery]:
    return [
        Battery(supply.name, supply)
        for supply in sorted_glob(under(root, "/sys/class/power_supply"), "*")
        if read_optional(reader, supply / "type") == "Battery"
    ]


def _battery_watts(reader: Reader, battery: Battery) -> tuple[float | None, bool, str]:
    """The same files psutil.sensors_battery() reads, read under the root so tests can point here."""
    status, status_why = read_word_why(reader, battery.path / "status")
    if status is None:
        return None, False, status_why
    discharging = status == "Discharging"
    microwatts, power_why = read_int_why(reader, battery.path / "power_now")
    if microwatts is not None:
        return abs(microwatts) / 1e6, discharging, ""
    microvolts, volts_why = read_int_why(reader, battery.path / "voltage_now")
    microamps, amps_why = read_int_why(reader, battery.path / "current_now")
    if microvolts is None or microamps is None:
        return None, discharging, f"{power_why}; {volts_why or amps_why}"  # neither way gave a reading
    return abs(microvolts * microamps) / 1e12, discharging, ""
