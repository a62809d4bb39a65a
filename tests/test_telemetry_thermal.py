"""Temperatures from each recorded tree: names normalised, trip points, hwmon/zone duplicates dropped."""

from pathlib import Path

import pytest

from workbench.core.telemetry.thermal import ThermalSampler, sensor_category

TREES = Path(__file__).parent / "sysfs"

EXPECTED_NAMES = {
    "jetson-orin-nano": ["cpu", "gpu", "soc0", "soc1", "soc2", "junction"],
    "rk3588": ["soc0", "cpu-big0", "cpu-big1", "cpu-little", "soc1", "gpu", "npu"],
    "raspberry-pi-5": ["cpu"],
    "raspberry-pi-5-cool": ["cpu"],
    "x86-laptop": ["nvme0", "nvme1", "cpu", "cpu-core0", "cpu-core1", "cpu-core2", "cpu-core3", "board"],
    "empty-container": [],
}


@pytest.mark.parametrize("tree", sorted(EXPECTED_NAMES))
def test_each_tree_gives_its_sensors_by_normalised_name(tree):
    readings = ThermalSampler(TREES / tree).read()
    assert [reading.name for reading in readings] == EXPECTED_NAMES[tree]
    for reading in readings:
        # Each value is the file it names, in m°C, divided by 1000.
        assert reading.celsius == int(Path(reading.source).read_text()) / 1000
        assert reading.celsius > 0


def test_orin_dead_sensor_sentinel_is_left_out_and_trip_points_read():
    readings = {reading.label: reading for reading in ThermalSampler(TREES / "jetson-orin-nano").read()}
    assert "cv0-thermal" not in readings  # it reads -256000: the sensor is off
    assert readings["cpu-thermal"].trip_critical_c == 104.5
    assert readings["cpu-thermal"].trip_passive_c == 99.0


def test_zone_seen_again_through_hwmon_counts_once():
    # The RK3588 and Pi trees register their zones as hwmon devices too ("soc_thermal").
    rk = ThermalSampler(TREES / "rk3588")
    assert [name for name, sensor in rk.sensors if "hwmon" in str(sensor.path)] == []
    laptop = {reading.label for reading in ThermalSampler(TREES / "x86-laptop").read()}
    assert "x86_pkg_temp" not in laptop and "coretemp Package id 0" in laptop  # same sensor, kept once
    assert sum(1 for label in laptop if "acpitz" in label) == 1


def test_a_sensor_that_disappears_is_skipped_not_zero(tmp_path):
    import shutil

    shutil.copytree(TREES / "raspberry-pi-5", tmp_path / "pi")
    sampler = ThermalSampler(tmp_path / "pi")
    (tmp_path / "pi/sys/class/thermal/thermal_zone0/temp").unlink()
    assert sampler.read() == ()


def test_empty_tree_has_no_sensors():
    assert not ThermalSampler(TREES / "empty-container").available


@pytest.mark.parametrize(
    ("raw", "category"),
    [
        ("tj-thermal", "junction"),
        ("k10temp Tctl", "cpu"),
        ("amdgpu edge", "gpu"),
        ("BAT0", "battery"),
        ("iwlwifi_1", "wifi"),
        ("Tboard", "board"),
        ("mystery_chip", "mystery"),
    ],
)
def test_sensor_category(raw, category):
    assert sensor_category(raw) == category


def test_repeated_names_keep_the_sensors_own_numbers():
    from workbench.core.telemetry.thermal import sensor_names

    assert sensor_names(["cpu", "soc2", "soc0", "gpu", "tj", "soc1"]) == ["cpu", "soc2", "soc0", "gpu", "junction", "soc1"]
    assert sensor_names(["nvme Composite", "nvme Sensor 1", "nvme Sensor 2"]) == ["nvme0", "nvme1", "nvme2"]
    assert sensor_names(["soc-thermal", "center-thermal"]) == ["soc0", "soc1"]
    assert sensor_names(["a1 cpu", "b1 cpu"]) == ["cpu0", "cpu1"]  # numbers that do not tell them apart
