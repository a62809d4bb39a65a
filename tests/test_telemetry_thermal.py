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
    "jetson-nano": ["ao", "cpu", "gpu", "pll", "fan", "wifi"],
    "orange-pi-5": ["soc0", "cpu-big0", "cpu-big1", "cpu-little", "soc1", "gpu", "npu"],
    "rk3588-mainline": ["soc0", "cpu-big0", "cpu-big2", "cpu-little", "soc1", "gpu", "npu"],
    "x86-coretemp-nvme": ["cpu", "cpu-core0", "cpu-core1", "nvme0", "nvme1", "nvme2"],
}


@pytest.mark.parametrize("tree", sorted(EXPECTED_NAMES))
def test_each_tree_gives_its_sensors_by_normalised_name(tree):
    readings = ThermalSampler(TREES / tree).read()
    assert [reading.name for reading in readings] == EXPECTED_NAMES[tree]
    for reading in readings:
        # Each value is the file it names, in m°C, divided by 1000.
        assert reading.celsius == int(Path(reading.source).read_text()) / 1000


def test_a_negative_temperature_is_a_reading(tmp_path):
    import shutil

    # A board outdoors in winter: -18.5 °C (the value is written here by hand).
    shutil.copytree(TREES / "raspberry-pi-5", tmp_path / "pi")
    (tmp_path / "pi/sys/class/thermal/thermal_zone0/temp").write_text("-18500\n")
    (reading,) = ThermalSampler(tmp_path / "pi").read()
    assert reading.celsius == -18.5
    (tmp_path / "pi/sys/class/thermal/thermal_zone0/temp").write_text("-256000\n")  # Orin's "sensor off"
    assert ThermalSampler(tmp_path / "pi").read() == ()


def test_jetson_nano_pmic_die_fixed_100c_is_no_temperature():
    # huataihuang/cloud-atlas jetson_pcie_err.rst: "PMIC-Die 100.0°C" beside AO-therm 41.5, CPU-therm 34.0, ...
    readings = ThermalSampler(TREES / "jetson-nano").read()
    assert "PMIC-Die" not in {reading.label for reading in readings}
    assert max(reading.celsius for reading in readings) == 41.5  # AO-therm, the hottest real sensor


def test_orange_pi_5_vendor_kernel_readings():
    # htop-dev/htop#1160 `sensors -u`: gpu_thermal 33.307, the others 34.230, soc_thermal crit 115.000
    readings = {reading.label: reading for reading in ThermalSampler(TREES / "orange-pi-5").read()}
    assert readings["gpu-thermal"].celsius == 33.307
    assert readings["soc-thermal"].celsius == 34.23
    assert readings["soc-thermal"].trip_critical_c == 115.0


def test_rk3588_mainline_package_thermal_is_the_soc_not_the_cpu():
    # Mainline names the sensor at the SoC centre "package-thermal" (vendor kernel: "soc-thermal").
    names = {reading.label: reading.name for reading in ThermalSampler(TREES / "rk3588-mainline").read()}
    assert names["package-thermal"] == "soc0"
    assert sensor_category("package-thermal") == "soc"
    assert sensor_category("coretemp Package id 0") == "cpu"  # x86's package sensor stays the CPU


def test_nvme_placeholder_limits_are_not_trip_points():
    # dannygils/cockpit-temperature-plugin README `sensors`: Composite high = +76.8, crit = +78.8;
    # Sensor 1/2 low = -273.1, high = +65261.8 (the drive sets no limit there).
    readings = {reading.label: reading for reading in ThermalSampler(TREES / "x86-coretemp-nvme").read()}
    composite, sensor1 = readings["nvme Composite"], readings["nvme Sensor 1"]
    assert (composite.trip_critical_c, composite.trip_passive_c) == (78.85, 76.85)
    assert (sensor1.trip_critical_c, sensor1.trip_passive_c) == (None, None)
    assert readings["coretemp Package id 0"].celsius == 63.0


def test_nvme_limit_that_fails_with_eio_is_skipped():
    # linux-hwmon list (PM1733): "cat .../temp3_max: Input/output error"
    from workbench.core.telemetry.sysfs import read_text

    def pm1733(path):
        if path.name in ("temp3_min", "temp3_max"):
            raise OSError(5, "Input/output error", str(path))
        return read_text(path)

    readings = {reading.label: reading for reading in ThermalSampler(TREES / "x86-coretemp-nvme", pm1733).read()}
    assert readings["nvme Sensor 2"].celsius == 52.85 and readings["nvme Sensor 2"].trip_passive_c is None


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
