"""tegrastats lines of JetPack 4, 5 and 6 parsed; the recorded logs replayed; the live tool followed."""

import os
import stat
import sys
from pathlib import Path

import pytest

from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.tegrastats import TegrastatsLive, TegrastatsLog, parse_tegrastats_line

ORIN = Path(__file__).parent / "sysfs" / "jetson-orin-nano"


def _lines(name):
    return [line for line in (ORIN / name).read_text().splitlines() if line and not line.startswith("#")]


def test_jetpack6_line():
    reading = parse_tegrastats_line(_lines("tegrastats.log")[0])
    assert reading.format == "jetpack5/6"
    assert reading.timestamp == "10-08-2026 04:38:21"
    assert (reading.ram_used_mb, reading.ram_total_mb) == (1343, 7620)
    assert (reading.swap_used_mb, reading.swap_total_mb, reading.swap_cached_mb) == (165, 3810, 3)
    assert reading.cpu_load_percent == (0.0,) * 6
    assert reading.cpu_mhz == (1497, 729, 729, 729, 729, 729)
    assert (reading.emc_percent, reading.emc_mhz) == (15.0, 204)
    assert (reading.gpu_percent, reading.gpu_mhz) == (0.0, 305)
    assert dict(reading.temperatures) == {
        "cpu": 48.562, "soc2": 46.593, "soc0": 48.625, "gpu": 49.625, "tj": 49.312, "soc1": 47.937
    }
    assert reading.rails_mw == (
        ("VDD_IN", 5251.0, 8535.0), ("VDD_CPU_GPU_CV", 512.0, 1944.0), ("VDD_SOC", 2720.0, 3659.0)
    )
    assert reading.total_rail == ("VDD_IN", 5251.0)


def test_jetpack5_line_with_off_cores_and_off_sensors():
    reading = parse_tegrastats_line(_lines("tegrastats.log")[2])
    assert reading.format == "jetpack5/6" and reading.timestamp is None
    assert reading.cpu_load_percent == (1.0, 0.0, 0.0, 0.0, None, None)  # "off" cores
    assert "CV0" not in dict(reading.temperatures)  # -256C: sensor off
    assert dict(reading.temperatures)["CPU"] == 50.031
    assert reading.total_rail == ("VDD_IN", 4952.0)


def test_jetpack4_line_rails_without_units():
    first, second = (parse_tegrastats_line(line) for line in _lines("tegrastats-jetpack4.log"))
    assert first.format == "jetpack4"
    assert first.rails_mw == (("POM_5V_IN", 4520.0, 4680.0), ("POM_5V_GPU", 0.0, 0.0), ("POM_5V_CPU", 1078.0, 1205.0))
    assert first.total_rail == ("POM_5V_IN", 4520.0)
    assert (first.gpu_percent, first.gpu_mhz) == (0.0, 76)
    assert dict(first.temperatures)["thermal"] == 59.75
    assert (second.emc_percent, second.emc_mhz, second.gpu_mhz) == (0.0, None, None)  # "EMC_FREQ 0%"


def test_two_gpc_gpu_clock_and_agx_total_rail():
    line = (
        "04-11-2025 10:36:27 RAM 4321/62801MB (lfb 1759x4MB) SWAP 19/31400MB (cached 0MB) "
        "CPU [0%@729,0%@729] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[0,0] VIC_FREQ 729 APE 174 CV0@-256C "
        "CPU@44.562C tj@44.343C VDD_GPU_SOC 2340mW/2340mW VDD_CPU_CV 390mW/390mW VIN_SYS_5V0 4025mW/4025mW"
    )
    reading = parse_tegrastats_line(line)
    assert reading.gpu_mhz == 0
    assert reading.total_rail == ("VIN_SYS_5V0", 4025.0)


def test_not_a_tegrastats_line():
    with pytest.raises(ValueError):
        parse_tegrastats_line("tegrastats: command not found")


def test_log_replays_one_line_per_reading_then_ends():
    log = TegrastatsLog(ORIN / "tegrastats.log")
    readings = [log.next_reading() for _ in range(3)]
    assert [reading.ram_used_mb for reading in readings] == [1343, 6712, 3162]
    assert log.finished and log.next_reading() is None


def test_bad_log_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("hello\n")
    with pytest.raises(WorkbenchError, match=r"bad.log:1: not a tegrastats line"):
        TegrastatsLog(bad)
    with pytest.raises(WorkbenchError, match="cannot read tegrastats log"):
        TegrastatsLog(tmp_path / "missing.log")


def test_live_follows_the_running_tool(tmp_path, monkeypatch):
    # A stand-in `tegrastats` on PATH that prints the recorded lines like the real tool does
    # (jetson_stats tests the same way); the pipe, the thread and the shutdown are the real ones.
    script = tmp_path / "tegrastats"
    lines = _lines("tegrastats.log")
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

        deadline = time.monotonic() + 10
        while (reading := live.next_reading()) is None or reading.ram_used_mb != 3162:
            assert time.monotonic() < deadline, "tegrastats stand-in printed nothing"
            time.sleep(0.02)
    finally:
        live.close()
    assert live.finished and live.next_reading() is None  # a stopped tool is not the present


def test_live_without_the_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkbenchError, match="tegrastats is not installed here"):
        TegrastatsLive()
