"""Power and energy: RAPL with wrap and the needs-root path, INA3221 rails, battery, integration."""

import shutil
from pathlib import Path

import pytest

from workbench.core.telemetry.power import NEEDS_ROOT, NO_POWER, PowerSampler, energy_delta_uj
from workbench.core.telemetry.sysfs import read_text

TREES = Path(__file__).parent / "sysfs"


def test_orin_rails_are_millivolts_times_milliamps():
    hwmon = TREES / "jetson-orin-nano/sys/class/hwmon/hwmon1"
    reading = PowerSampler(TREES / "jetson-orin-nano").read(1.0)
    rails = {rail.name: rail for rail in reading.rails}
    assert list(rails) == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    for index, name in enumerate(rails, start=1):
        millivolts = int((hwmon / f"in{index}_input").read_text())
        milliamps = int((hwmon / f"curr{index}_input").read_text())
        assert rails[name].watts == pytest.approx(millivolts * milliamps / 1_000_000)
        assert rails[name].volts == pytest.approx(millivolts / 1000)
    assert reading.total_w == rails["VDD_IN"].watts
    assert reading.total_source == "VDD_IN (ina3221 hwmon1)"
    assert reading.energy_source.startswith("integrated:")


def test_integrated_energy_is_the_trapezoid_between_samples(tmp_path):
    shutil.copytree(TREES / "jetson-orin-nano", tmp_path / "orin")
    hwmon = tmp_path / "orin/sys/class/hwmon/hwmon1"
    sampler = PowerSampler(tmp_path / "orin", now=0.0)
    (hwmon / "in1_input").write_text("5000\n")
    (hwmon / "curr1_input").write_text("1000\n")  # 5 W
    assert sampler.read(10.0).energy_j == 0.0  # the first power reading starts the integral
    (hwmon / "curr1_input").write_text("2000\n")  # 10 W
    assert sampler.read(12.0).energy_j == pytest.approx((5 + 10) / 2 * 2)


def test_rapl_counter_power_energy_and_wrap(tmp_path):
    shutil.copytree(TREES / "x86-laptop", tmp_path / "x86")
    zone = tmp_path / "x86/sys/class/powercap/intel-rapl:0"
    max_range = int((zone / "max_energy_range_uj").read_text())
    start = int((zone / "energy_uj").read_text())
    sampler = PowerSampler(tmp_path / "x86", now=100.0)
    assert [domain.name for domain in sampler.rapl] == ["package-0"]  # the core sub-zone is inside it
    (zone / "energy_uj").write_text(f"{start + 3_000_000}\n")  # 3 J in 0.5 s
    first = sampler.read(100.5)
    assert first.total_w == pytest.approx(6.0)
    assert first.total_source == "package-0 (RAPL)"
    assert (first.energy_j, first.energy_source) == (pytest.approx(3.0), "counter: intel-rapl:0")
    # The counter wraps: 4 J more lands past max_energy_range_uj and restarts from zero.
    after_wrap = start + 3_000_000 + 4_000_000 - max_range
    assert after_wrap > 0
    (zone / "energy_uj").write_text(f"{after_wrap}\n")
    second = sampler.read(101.5)
    assert second.total_w == pytest.approx(4.0)
    assert second.energy_j == pytest.approx(7.0)


def test_energy_delta_uj():
    assert energy_delta_uj(100, 250, 1000) == 150
    assert energy_delta_uj(900, 50, 1000) == 150


def test_rapl_unreadable_without_root_is_said_so():
    # The tests run as root, and root reads a chmod-000 file anyway; so the unprivileged
    # kernel's answer (EACCES on energy_uj, root-only since Linux 5.10) is injected through
    # the reader seam every sampler takes.
    def unprivileged(path):
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path)

    root = TREES / "x86-laptop"
    sampler = PowerSampler(root, unprivileged)
    assert sampler.rapl == [] and sampler.rapl_needs_root
    reading = sampler.read(1.0)
    # The battery is discharging, so it carries the total; RAPL is just absent.
    assert reading.total_source == "BAT0 discharging"
    no_battery = PowerSampler(root, lambda path: unprivileged(path) if "power_supply" not in str(path) else _missing(path))
    reading = no_battery.read(1.0)
    assert reading.total_w is None and reading.energy_j is None
    assert [(item.what, item.why) for item in reading.unavailable] == [("power", NEEDS_ROOT), ("energy", NEEDS_ROOT)]


def _missing(path):
    raise FileNotFoundError(2, "No such file or directory", str(path))


def test_battery_watts_from_power_now_or_volts_times_amps(tmp_path):
    shutil.copytree(TREES / "x86-laptop", tmp_path / "x86")
    battery = tmp_path / "x86/sys/class/power_supply/BAT0"
    shutil.rmtree(tmp_path / "x86/sys/class/powercap")
    sampler = PowerSampler(tmp_path / "x86")
    assert sampler.read(1.0).total_w == pytest.approx(int((battery / "power_now").read_text()) / 1e6)
    (battery / "power_now").unlink()
    (battery / "current_now").write_text("600000\n")  # µA, with voltage_now in µV
    volts = int((battery / "voltage_now").read_text()) / 1e6
    assert sampler.read(2.0).total_w == pytest.approx(volts * 0.6)
    (battery / "status").write_text("Charging\n")
    charging = sampler.read(3.0)
    assert charging.total_w is None and [rail.name for rail in charging.rails] == ["BAT0"]


@pytest.mark.parametrize("tree", ["rk3588", "raspberry-pi-5", "empty-container"])
def test_no_power_source(tree):
    reading = PowerSampler(TREES / tree).read(1.0)
    assert (reading.rails, reading.total_w, reading.energy_j) == ((), None, None)
    assert [(item.what, item.why) for item in reading.unavailable] == [("power", NO_POWER), ("energy", NO_POWER)]


def test_jetpack4_ina3221x_iio_rails(tmp_path):
    device = tmp_path / "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
    device.mkdir(parents=True)
    for index, (name, milliwatts) in enumerate([("POM_5V_IN", 4520), ("POM_5V_GPU", 0), ("POM_5V_CPU", 1078)]):
        (device / f"rail_name_{index}").write_text(name + "\n")
        (device / f"in_power{index}_input").write_text(f"{milliwatts}\n")
    reading = PowerSampler(tmp_path).read(1.0)
    assert [(rail.name, rail.watts) for rail in reading.rails] == [
        ("POM_5V_IN", 4.52), ("POM_5V_GPU", 0.0), ("POM_5V_CPU", 1.078)
    ]
    assert reading.total_w == 4.52
