"""tegrastats lines captured on real Jetsons (JetPack 4 to 7) parsed to the figures a person reads off them.

Every line comes from a file in tests/sysfs/tegrastats/ whose header names where it was published. The
expected figures are read off the line by eye; totals are added up by hand in the comments.
"""

import os
import stat
import sys
from pathlib import Path

import pytest

from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.tegrastats import TegrastatsLive, TegrastatsLog, parse_tegrastats_line

CAPTURES = Path(__file__).parent / "sysfs" / "tegrastats"


def _lines(name):
    return [line for line in (CAPTURES / name).read_text().splitlines() if line and not line.startswith("#")]


def _line(name, index=0):
    return parse_tegrastats_line(_lines(name)[index])


def test_every_capture_names_its_source():
    for path in sorted(CAPTURES.glob("*.log")):
        assert path.read_text().startswith("# source"), path.name


def test_agx_orin_jetpack6_total_is_the_sum_of_the_module_rails():
    reading = _line("agx-orin-jetpack6.log")
    assert reading.timestamp == "05-09-2026 18:42:06"
    assert (reading.ram_used_mb, reading.ram_total_mb) == (18207, 62841)
    assert (reading.swap_used_mb, reading.swap_total_mb, reading.swap_cached_mb) == (86, 31420, 0)
    assert reading.cpu_load_percent == (14.0, 5.0, 8.0, 14.0, 46.0, 47.0, 2.0, 10.0, 4.0, 5.0, 6.0, 10.0)
    assert reading.cpu_mhz == (2188, 2112, 2035, 2201, 1267, 1267, 1267, 1267, 1036, 1036, 1036, 1036)
    assert (reading.emc_percent, reading.emc_mhz) == (3.0, 2133)
    assert (reading.gpu_percent, reading.gpu_mhz, reading.gpc_mhz) == (0.0, 0, (0, 0))
    assert dict(reading.temperatures) == {"cpu": 52.562, "soc2": 48.437, "soc0": 49.093, "tj": 52.562, "soc1": 49.656}
    assert reading.rails_mw == (
        ("VDD_GPU_SOC", 2412.0, 2412.0), ("VDD_CPU_CV", 1607.0, 1607.0), ("VIN_SYS_5V0", 4707.0, 4707.0)
    )
    # No VDD_IN on an AGX Orin: VIN_SYS_5V0 (4707) is one rail, not the total (jetson_stats #344).
    # 2412 + 1607 + 4707 = 8726 mW
    assert reading.total_rail == ("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0", 8726.0)


def test_agx_orin_engines_nvenc_vic_ape_and_the_ones_that_are_off():
    reading = _line("agx-orin-jetpack6.log")
    # NVENC 79%@166, VIC 36%@115, APE 174 (a clock only)
    assert reading.engines == (("nvenc", 79.0, 166), ("vic", 36.0, 115), ("ape", None, 174))
    assert reading.engines_off == ("nvdec", "nvjpg", "nvjpg1", "ofa", "nvdla0", "nvdla1", "pva0")
    third = _line("agx-orin-jetpack6.log", 2)
    assert third.engines[0] == ("nvenc", 78.0, 179)
    # 2412 + 1607 + 4707 = 8726 mW again; the running average column (4674) is not the reading now
    assert third.total_rail == ("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0", 8726.0)


def test_agx_orin_unconnected_nc_channels_are_not_rails():
    reading = _line("agx-orin-jetpack5-nc.log")
    assert [name for name, _, _ in reading.rails_mw] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    # 2340 + 390 + 4025 + 301 = 7056 mW
    assert reading.total_rail == ("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0+VDDQ_VDD2_1V8AO", 7056.0)
    # CV0, CV1, GPU and CV2 read -256C: off, not temperatures
    assert dict(reading.temperatures) == {
        "CPU": 44.562, "Tboard": 32.0, "SOC2": 40.093, "Tdiode": 33.0, "SOC0": 41.093, "tj": 44.343, "SOC1": 41.25
    }
    assert reading.engines == (("vic", None, 729), ("ape", None, 174))  # VIC_FREQ 729, APE 174


def test_agx_orin_jetpack7_three_figure_rails_and_two_gpcs():
    reading = _line("agx-orin-jetpack7.log")
    assert (reading.gpu_percent, reading.gpu_mhz, reading.gpc_mhz) == (12.0, 1300, (1300, 1300))
    assert (reading.emc_percent, reading.emc_mhz) == (3.0, 3199)
    assert dict(reading.temperatures) == {"cpu": 52.968, "soc2": 48.406, "soc0": 49.531, "gpu": 47.625}
    # 5139 + 3268 + 5500 = 13907 mW
    assert reading.total_rail == ("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0", 13907.0)
    assert reading.swap_total_mb is None  # this line has no SWAP field
    assert "vic" in reading.engines_off and reading.engines == (("ape", None, 174),)


def test_thor_gpc_clocks_without_a_load_and_vin_as_the_total():
    reading = _line("thor-jetpack7.log")
    # GR3D_FREQ @[314,314,314]: three GPC clocks and no load at all (not 0%)
    assert (reading.gpu_percent, reading.gpu_mhz, reading.gpc_mhz) == (None, 314, (314, 314, 314))
    assert (reading.emc_percent, reading.emc_mhz) == (0.0, 2750)
    assert reading.engines == (
        ("nvenc0", None, 314), ("nvenc1", None, 314), ("nvdec0", None, 314), ("nvdec1", None, 314),
        ("nvjpg0", None, 314), ("ofa", None, 315), ("ape", None, 300),
    )
    assert reading.engines_off == ("vic", "pva0")
    assert len(reading.cpu_load_percent) == 14
    # VIN 19780mW is the board input: the total, and not VIN_SYS_5V0 (5635)
    assert reading.total_rail == ("VIN", 19780.0)


def test_thor_without_vin_sums_its_rails_and_reads_vic_load():
    reading = _line("thor-jetpack7.log", 1)
    # 4925 + 8710 + 6767 = 20402 mW
    assert reading.total_rail == ("sum of VDD_GPU+VDD_CPU_SOC_MSS+VIN_SYS_5V0", 20402.0)
    assert ("vic", 59.0, 423) in reading.engines
    assert dict(reading.temperatures)["soc345"] == 34.406  # "soc345@34.406C/34.406C": now, then peak


def test_agx_xavier_jetpack4_rails_without_a_prefix():
    reading = _line("agx-xavier-jetpack4.log")
    assert reading.format == "jetpack4"
    assert reading.rails_mw == (
        ("GPU", 463.0, 463.0), ("CPU", 618.0, 618.0), ("SOC", 2936.0, 2936.0), ("CV", 0.0, 0.0),
        ("VDDRQ", 309.0, 309.0), ("SYS5V", 3306.0, 3306.0),
    )
    # 463 + 618 + 2936 + 0 + 309 + 3306 = 7632 mW
    assert reading.total_rail == ("sum of GPU+CPU+SOC+CV+VDDRQ+SYS5V", 7632.0)
    assert (reading.ram_used_mb, reading.ram_total_mb) == (14700, 15692)  # RAM a/bMB is no rail
    assert (reading.emc_percent, reading.emc_mhz, reading.gpu_percent, reading.gpu_mhz) == (0.0, None, 0.0, None)
    # PMIC@100C is a fixed placeholder, left out
    assert dict(reading.temperatures) == {
        "AO": 30.0, "GPU": 30.5, "Tboard": 31.0, "Tdiode": 32.0, "AUX": 30.5, "CPU": 31.5, "thermal": 30.8
    }


def test_xavier_nx_and_nano_input_rails():
    nx4, nx5, nano = (_line("xavier-nx-and-nano.log", index) for index in range(3))
    assert nx4.format == "jetpack4" and nx4.total_rail == ("VDD_IN", 6140.0)
    assert (nx4.gpu_mhz, nx4.engines) == (1109, (("ape", None, 150),))
    assert nx5.format == "jetpack5+" and nx5.timestamp == "07-09-2024 13:31:31"
    assert nx5.total_rail == ("VDD_IN", 2763.0)
    assert (nx5.gpu_mhz, nx5.engines) == (114, (("vic", None, 115), ("ape", None, 150)))
    assert "PMIC" not in dict(nx5.temperatures)  # PMIC@50C: a fixed placeholder on Xavier
    assert nano.total_rail == ("POM_5V_IN", 1750.0)
    assert nano.rails_mw == (("POM_5V_IN", 1750.0, 1628.0), ("POM_5V_GPU", 0.0, 0.0), ("POM_5V_CPU", 366.0, 406.0))
    assert (nano.gpu_mhz, nano.emc_mhz, nano.swap_cached_mb) == (76, 1600, 6)
    assert dict(nano.temperatures) == {"PLL": 37.0, "CPU": 40.0, "GPU": 40.0, "AO": 45.0, "thermal": 40.0}


def test_orin_nano_jetpack6_line():
    reading = _line("orin-nano-jetpack6.log")
    assert reading.total_rail == ("VDD_IN", 4556.0)
    assert (reading.gpu_percent, reading.gpu_mhz) == (0.0, None)  # "GR3D_FREQ 0%": a load, no clock
    assert (reading.emc_percent, reading.emc_mhz) == (None, None)  # no EMC field on this line
    assert dict(reading.temperatures)["tj"] == 48.625
    assert (reading.swap_used_mb, reading.swap_total_mb) == (1476, 3810)


def test_a_negative_temperature_is_a_reading():
    # A winter line: only the temperature changed from the captured Orin Nano line (written here by hand).
    line = _lines("orin-nano-jetpack6.log")[0].replace("cpu@47.687C", "cpu@-12.5C")
    assert dict(parse_tegrastats_line(line).temperatures)["cpu"] == -12.5


def test_not_a_tegrastats_line():
    with pytest.raises(ValueError):
        parse_tegrastats_line("tegrastats: command not found")


def test_log_replays_one_line_per_reading_then_ends():
    log = TegrastatsLog(CAPTURES / "agx-orin-jetpack6.log")
    readings = [log.next_reading() for _ in range(3)]
    assert [reading.ram_used_mb for reading in readings] == [18207, 18202, 18203]
    assert log.finished and log.next_reading() is None


def test_bad_log_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("hello\n")
    with pytest.raises(WorkbenchError, match=r"bad.log:1: not a tegrastats line"):
        TegrastatsLog(bad)
    with pytest.raises(WorkbenchError, match="cannot read tegrastats log"):
        TegrastatsLog(tmp_path / "missing.log")


def test_live_follows_the_running_tool(tmp_path, monkeypatch):
    # A stand-in `tegrastats` on PATH that prints the captured lines like the real tool does
    # (jetson_stats tests the same way); the pipe, the thread and the shutdown are the real ones.
    script = tmp_path / "tegrastats"
    lines = _lines("agx-orin-jetpack6.log")
    script.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        f"lines = {lines!r}\n"
        "for line in lines:\n    print(line, flush=True)\n"
        "time.sleep(30)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    live = TegrastatsLive(interval_ms=100)
    try:
        import time

        deadline = time.monotonic() + 30
        while (reading := live.next_reading()) is None or reading.ram_used_mb != 18203:
            assert time.monotonic() < deadline, "tegrastats stand-in printed nothing"
            time.sleep(0.02)
    finally:
        live.close()
    assert live.finished and live.next_reading() is None  # a stopped tool is not the present


def test_live_without_the_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkbenchError, match="tegrastats is not installed here"):
        TegrastatsLive()
