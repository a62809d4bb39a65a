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


def _agx_orin_ina3221(root):
    """Two INA3221 chips as on an AGX Orin module: 0x40 VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0; 0x41 NC,
    VDDQ_VDD2_1V8AO, NC; in7 is the chip's "sum of shunt voltages". The rail names and the NC channels are
    the module's (as tegrastats prints them in tests/sysfs/tegrastats/agx-orin-jetpack5-nc.log, and as jtop's log
    on an AGX Orin shows them: "Skipped NC /sys/bus/i2c/devices/1-0041/hwmon/hwmon2/in1_label", "Alarms
    VDDQ_VDD2_1V8AO", rbonghi/jetson_stats#381); the millivolt and milliamp values are written here by hand."""
    chips = {
        "hwmon2": [("VDD_GPU_SOC", 5000, 468), ("VDD_CPU_CV", 5000, 78), ("VIN_SYS_5V0", 5000, 805),
                   ("sum of shunt voltages", 5000, 9999)],
        "hwmon3": [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 5000, 60), ("NC", 0, 0)],
    }
    for hwmon, channels in chips.items():
        folder = root / "sys/class/hwmon" / hwmon
        folder.mkdir(parents=True)
        (folder / "name").write_text("ina3221\n")
        for index, (label, millivolts, milliamps) in enumerate(channels, start=1):
            number = 7 if label.startswith("sum of") else index
            (folder / f"in{number}_label").write_text(label + "\n")
            (folder / f"in{number}_input").write_text(f"{millivolts}\n")
            (folder / f"curr{number}_input").write_text(f"{milliamps}\n")


def test_agx_orin_total_is_the_sum_of_module_rails_not_vin_sys_5v0(tmp_path):
    _agx_orin_ina3221(tmp_path)
    reading = PowerSampler(tmp_path).read(1.0)
    assert [rail.name for rail in reading.rails] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    # 5000 mV x (468 + 78 + 805 + 60) mA = 5000 x 1411 = 7_055_000 µW = 7.055 W
    assert reading.total_w == pytest.approx(7.055)
    assert reading.total_source == "sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0+VDDQ_VDD2_1V8AO (ina3221 hwmon2, ina3221 hwmon3)"


def test_vin_board_input_is_the_total_where_it_exists(tmp_path):
    # Thor carrier boards report VIN (jetson_stats PR #900); the channel values are written here by hand.
    folder = tmp_path / "sys/class/hwmon/hwmon1"
    folder.mkdir(parents=True)
    (folder / "name").write_text("ina3221\n")
    for index, (label, millivolts, milliamps) in enumerate([("VIN_SYS_5V0", 5000, 1127), ("VIN", 19000, 1041)], 1):
        (folder / f"in{index}_label").write_text(label + "\n")
        (folder / f"in{index}_input").write_text(f"{millivolts}\n")
        (folder / f"curr{index}_input").write_text(f"{milliamps}\n")
    reading = PowerSampler(tmp_path).read(1.0)
    assert (reading.total_w, reading.total_source) == (pytest.approx(19.779), "VIN (ina3221 hwmon1)")  # 19000 x 1041 µW


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (OSError(22, "Invalid argument"), "EINVAL (Invalid argument)"),
        (OSError(61, "No data available"), "ENODATA (No data available)"),
        (PermissionError(13, "Permission denied"), "permission denied (EACCES, needs root)"),
        ("", "empty file"),
        ("-", "no number in it ('-')"),
        ("N/A", "no number in it ('N/A')"),
    ],
)
def test_a_rail_that_cannot_be_read_is_named_not_zero(tmp_path, failure, why):
    _agx_orin_ina3221(tmp_path)
    bad = tmp_path / "sys/class/hwmon/hwmon2/curr3_input"  # VIN_SYS_5V0's current

    def reader(path):
        if path == bad:
            if isinstance(failure, OSError):
                raise failure
            return failure
        return read_text(path)

    reading = PowerSampler(tmp_path, reader).read(1.0)
    assert "VIN_SYS_5V0" not in [rail.name for rail in reading.rails]
    assert ("power VIN_SYS_5V0", why) in [(item.what, item.why.split(": ")[0].split(" reading ")[0]) for item in reading.unavailable]
    # a sum without one of its rails is no total: none is shown, and why
    assert (reading.total_w, reading.energy_j) == (None, None)
    assert ("power", "the total needs VIN_SYS_5V0, which could not be read") in [
        (item.what, item.why) for item in reading.unavailable
    ]


def test_thor_ina238_vin_is_the_total(tmp_path):
    # jetson_stats PR #900: Thor's carrier INA238 reports VIN, the total input, as power1_input in µW. The values
    # are written here by hand: 19 780 000 µW = 19.78 W at 19 008 mV, beside a module INA3221 rail.
    ina238 = tmp_path / "sys/class/hwmon/hwmon4"
    ina238.mkdir(parents=True)
    (ina238 / "name").write_text("ina238\n")
    (ina238 / "power1_input").write_text("19780000\n")
    (ina238 / "in1_input").write_text("19008\n")
    module = tmp_path / "sys/class/hwmon/hwmon1"
    module.mkdir(parents=True)
    (module / "name").write_text("ina3221\n")
    for name, text in (("in1_label", "VIN_SYS_5V0"), ("in1_input", "5000"), ("curr1_input", "1127")):
        (module / name).write_text(text + "\n")
    reading = PowerSampler(tmp_path).read(1.0)
    rails = {rail.name: rail for rail in reading.rails}
    assert rails["VIN"].watts == pytest.approx(19.78) and rails["VIN"].volts == pytest.approx(19.008)
    assert (reading.total_w, reading.total_source) == (pytest.approx(19.78), "VIN (ina238 hwmon4)")
