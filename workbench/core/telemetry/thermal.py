"""Temperatures from hwmon and thermal zones, named cpu/gpu/soc/npu/... with trip points."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sample import Temperature, Unavailable
from workbench.core.telemetry.sysfs import Reader, read_int, read_int_why, read_optional, read_text, sorted_glob, under

NO_SENSORS = "no thermal sensors exposed"

# Checked in order against the words of a sensor's own name; the first hit names it.
_CATEGORIES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"bigcore"}), "cpu-big"),
    (frozenset({"littlecore"}), "cpu-little"),
    (frozenset({"core"}), "cpu-core"),  # coretemp "Core 0"
    (frozenset({"tccd"}), "cpu-ccd"),
    (
        frozenset({"cpu", "package", "pkg", "tctl", "tdie", "coretemp", "k10temp", "zenpower", "bcpu", "mcpu"}),
        "cpu",
    ),
    (frozenset({"gpu", "gr3d", "amdgpu", "nouveau", "mali", "edge"}), "gpu"),
    (frozenset({"npu", "rknpu", "dla"}), "npu"),
    (frozenset({"nvme", "drivetemp", "composite"}), "nvme"),
    (frozenset({"bat", "battery"}), "battery"),
    (frozenset({"tj"}), "junction"),
    (frozenset({"soc", "center"}), "soc"),
    (frozenset({"ddr", "dram", "mem", "dimm"}), "memory"),
    (frozenset({"iwlwifi", "wifi", "ath10k", "ath11k", "mt7921"}), "wifi"),
    (frozenset({"acpitz", "board", "tboard", "tdiode", "thermal", "pch", "skin", "ambient"}), "board"),
)

# A reading at or below this is a sensor's "absent" sentinel (Orin reports -256 °C). Anything
# above is a reading, negative ones included: a board outdoors in winter reads -20 °C.
_DEAD_BELOW_C = -100.0
# Zones that hold a fixed value, not a measurement: the Jetson Nano/TX1/TX2 "PMIC-Die" zone
# always reads 100 °C (tegrastats prints it as PMIC@100C).
_PLACEHOLDER_ZONES = ("pmic-die",)
# Trip points outside this range are a driver's "no limit" filler, not a limit: NVMe sensors
# without a threshold report temp*_max = 65261850 m°C (65261.85 °C) and temp*_min = -273150.
_PLAUSIBLE_TRIP_C = (-55.0, 200.0)


def sensor_category(raw_name: str) -> str:
    """"soc0-thermal" -> "soc", "coretemp Package id 0" -> "cpu", "x" -> "x"."""
    if raw_name.lower().replace("_", "-") == "package-thermal":
        # Rockchip mainline names the sensor at the SoC centre "package-thermal" (the vendor
        # kernel's "soc-thermal"); x86's package sensor is "coretemp Package id 0" or x86_pkg_temp.
        return "soc"
    words = [re.sub(r"\d+$", "", word) for word in re.split(r"[^a-z0-9]+", raw_name.lower()) if word]
    words = [word for word in words if word and word not in ("temp", "id", "sensor")]
    if len(words) > 1:
        words = [word for word in words if word != "thermal"]
    present = set(words)
    for keywords, category in _CATEGORIES:
        if present & keywords:
            return category
    return words[0] if words else "sensor"


def sensor_names(labels: list[str]) -> list[str]:
    """Category names, suffixed when a category repeats: the sensor's own number where it has
    one ("soc2-thermal" -> "soc2", "Core 3" -> "cpu-core3"), else the next free number."""
    categories = [sensor_category(label) for label in labels]
    names: list[str] = list(categories)
    for category in set(categories):
        members = [index for index, other in enumerate(categories) if other == category]
        if len(members) == 1:
            continue
        numbers = {index: re.findall(r"\d+", labels[index]) for index in members}
        hinted = {index: int(found[-1]) for index, found in numbers.items() if found}
        if len(set(hinted.values())) != len(hinted):
            hinted = {}  # the numbers do not tell the sensors apart
        used = set(hinted.values())
        free = (number for number in range(len(members) * 2 + 1) if number not in used)
        for index in members:
            names[index] = f"{category}{hinted[index] if index in hinted else next(free)}"
    return names


@dataclass(frozen=True)
class ThermalSensor:
    """A temperature file found at discovery, with its static trip points."""

    label: str
    category: str
    path: Path
    trip_critical_c: float | None
    trip_passive_c: float | None


class ThermalSampler:
    """Finds the sensors once; each `read()` is one small read per sensor."""

    def __init__(self, root: str | Path = "/", reader: Reader = read_text) -> None:
        self._reader = reader
        root = Path(root)
        zones = _thermal_zones(root, reader)
        hwmons = _hwmon_sensors(root, reader, {_mirror_key(zone.label) for zone in zones})
        # coretemp's "Package id N" is the same sensor as the x86_pkg_temp zone; keep the
        # labelled hwmon one.
        if any(sensor.label.startswith("coretemp Package") for sensor in hwmons):
            zones = [zone for zone in zones if zone.label != "x86_pkg_temp"]
        sensors = hwmons + zones
        names = sensor_names([sensor.label for sensor in sensors])
        self.sensors: tuple[tuple[str, ThermalSensor], ...] = tuple(zip(names, sensors))
        self.unavailable: tuple[Unavailable, ...] = ()  # the sensors the last read() could not read, and why

    @property
    def available(self) -> bool:
        return bool(self.sensors)

    def read(self) -> tuple[Temperature, ...]:
        readings = []
        failed = []
        for name, sensor in self.sensors:
            millidegrees, why = read_int_why(self._reader, sensor.path)
            if millidegrees is None:
                failed.append(Unavailable(f"temperature {name}", why))  # EINVAL/ENODATA/EACCES, "-", ...
                continue
            if millidegrees / 1000 <= _DEAD_BELOW_C:
                continue  # the sensor's "off" sentinel: a powered-down unit, not a failure
            readings.append(
                Temperature(
                    name=name,
                    celsius=millidegrees / 1000,
                    source=str(sensor.path),
                    trip_critical_c=sensor.trip_critical_c,
                    trip_passive_c=sensor.trip_passive_c,
                    label=sensor.label,
                )
            )
        self.unavailable = tuple(failed)
        return tuple(readings)


def _mirror_key(name: str) -> str:
    # The kernel registers a hwmon device named "cpu_thermal" for thermal zone "cpu-thermal".
    return name.lower().replace("-", "_")


def _thermal_zones(root: Path, reader: Reader) -> list[ThermalSensor]:
    sensors = []
    for zone in sorted_glob(under(root, "/sys/class/thermal"), "thermal_zone*"):
        zone_type = read_optional(reader, zone / "type")
        if zone_type is None or not (zone / "temp").exists() or zone_type.lower() in _PLACEHOLDER_ZONES:
            continue
        critical, passive = None, None
        for trip_type_path in sorted_glob(zone, "trip_point_*_type"):
            trip_type = read_optional(reader, trip_type_path)
            millidegrees = read_int(reader, trip_type_path.with_name(trip_type_path.name[: -len("type")] + "temp"))
            if millidegrees is None or trip_type is None or not _plausible_trip(millidegrees):
                continue
            celsius = millidegrees / 1000
            if trip_type == "critical":
                critical = celsius if critical is None else min(critical, celsius)
            elif trip_type == "passive":
                passive = celsius if passive is None else min(passive, celsius)
        sensors.append(ThermalSensor(zone_type, sensor_category(zone_type), zone / "temp", critical, passive))
    return sensors


def _hwmon_sensors(root: Path, reader: Reader, zone_keys: set[str]) -> list[ThermalSensor]:
    sensors = []
    for hwmon in sorted_glob(under(root, "/sys/class/hwmon"), "hwmon*"):
        chip = read_optional(reader, hwmon / "name") or hwmon.name
        inputs = sorted_glob(hwmon, "temp*_input")
        if not inputs or (len(inputs) == 1 and _mirror_key(chip) in zone_keys):
            continue  # no temperatures, or a thermal zone seen again through hwmon
        for path in inputs:
            stem = path.name[: -len("_input")]
            label = read_optional(reader, hwmon / f"{stem}_label")
            full_label = f"{chip} {label}" if label else chip
            critical = read_int(reader, hwmon / f"{stem}_crit")
            high = read_int(reader, hwmon / f"{stem}_max")
            sensors.append(
                ThermalSensor(
                    full_label,
                    sensor_category(full_label),
                    path,
                    critical / 1000 if critical is not None and _plausible_trip(critical) else None,
                    high / 1000 if high is not None and _plausible_trip(high) else None,
                )
            )
    return sensors


def _plausible_trip(millidegrees: int) -> bool:
    low, high = _PLAUSIBLE_TRIP_C
    return low < millidegrees / 1000 <= high and millidegrees != 0
