"""`workbench monitor` through main(): lines, JSON lines, a tegrastats replay, errors in one line."""

import json
from pathlib import Path

import pytest

from workbench.cli.cmd_monitor import format_block
from workbench.cli.main import main
from workbench.core.telemetry.sampler import Sampler

TREES = Path(__file__).parent / "sysfs"


def test_once_on_the_orin_tree(capsys):
    assert main(["monitor", "--once", "--interval", "0.1", "--root", str(TREES / "jetson-orin-nano")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    line = lines[0]
    # cpu-thermal 47687 and tj-thermal 48625 m°C; both clusters at 729.6 of 1728 MHz; VDD_IN 5048 mV x 920 mA
    # = 4.644 W, VDD_SOC 5040 mV x 288 mA = 1.452 W (tests/sysfs/jetson-orin-nano/SOURCES.md)
    assert "cpu 47.7°C" in line and "junction 48.6°C" in line
    assert "cpus 0-3 729/1728 MHz schedutil" in line and "cpus 4-5 729/1728 MHz schedutil" in line
    assert "power 4.64 W [VDD_IN (ina3221 hwmon1)]" in line and "VDD_SOC 1.45 W" in line
    assert "gpu 12% @305 MHz" in line
    assert "throttle: no" in line
    assert "n/a" not in line


def test_json_lines_on_the_rk3588_tree(capsys):
    root = str(TREES / "rk3588")
    assert main(["monitor", "--json", "--count", "2", "--interval", "0.1", "--root", root]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 2 and records[1]["timestamp"] > records[0]["timestamp"]
    record = records[0]
    assert record["board"]["profile"] == "rk3588-8gb"
    assert [clock["capped"] for clock in record["clocks"]] == [False, True, False]
    assert record["throttle"]["cause"] == "clock cap: cpus 4-5 at 1800 of 2400 MHz"
    assert record["total_power_w"] is None and record["energy_j"] is None
    assert {"what": "power", "why": "no power source here"} in record["unavailable"]
    assert dict(record["loads"])["npu0"] == 21.0  # "Core0:  21%" in the tree's rknpu/load


def test_empty_container_names_every_absent_source(capsys):
    assert main(["monitor", "--once", "--interval", "0.1", "--root", str(TREES / "empty-container")]) == 0
    line = capsys.readouterr().out
    assert "°C" not in line and " W " not in line
    for words in ("no thermal sensors exposed", "no cpufreq (no clocks exposed)", "no power source here"):
        assert words in line


def test_tegrastats_replay_stops_at_the_end_of_the_log(capsys):
    log = TREES / "tegrastats/xavier-nx-and-nano.log"  # three captured lines (waggle-sensor/jetson-exporter)
    args = ["monitor", "--interval", "0.1", "--root", str(TREES / "empty-container"), "--tegrastats", str(log)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3  # one per line of the log
    assert "power 6.14 W [VDD_IN (tegrastats log xavier-nx-and-nano.log)]" in lines[0]  # VDD_IN 6140/5510
    assert "power 2.76 W [VDD_IN" in lines[1]  # VDD_IN 2763mW/2846mW
    assert "power 1.75 W [POM_5V_IN" in lines[2]  # POM_5V_IN 1750/1628


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--root", "/no/such/root"], "workbench: /no/such/root: no such folder. give the root of a /sys tree"),
        (["--interval", "0.01"], "workbench: --interval 0.01 is too short"),
        (["--count", "0"], "workbench: --count 0 must be at least 1"),
        (["--tegrastats", "/no/such.log"], "workbench: /no/such.log: cannot read tegrastats log"),
    ],
)
def test_bad_input_is_one_line(capsys, args, message):
    assert main(["monitor", "--once", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_block_for_a_terminal():
    sampler = Sampler(TREES / "raspberry-pi-5")
    block = format_block(sampler.sample(), sampler.board)
    rows = dict(line.split(None, 1) for line in block.splitlines())
    assert rows["board"].startswith("Raspberry Pi 5 Model B Rev 1.0 · suggested profile raspberry-pi-5-8gb")
    assert rows["temps"] == "cpu 82.9°C"  # cpu-thermal 82900 m°C
    assert rows["throttle"] == "Pi: under-voltage, throttled now (Pi since boot: under-voltage, throttled)"
    assert rows["n/a"].startswith("power: no power source here")
    assert "power" not in rows


def test_block_lists_each_unavailable_source_on_its_own_line():
    sampler = Sampler(TREES / "empty-container")
    sample = sampler.sample()
    lines = format_block(sample, sampler.board).splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("n/a "))
    expected = [f"{item.what}: {item.why}" for item in sample.unavailable]
    assert len(expected) > 2
    assert [line.strip().removeprefix("n/a").strip() for line in lines[first:]] == expected
    assert all(line.startswith(" " * 9) for line in lines[first + 1:])


def test_json_lines_carry_the_wall_time_for_logs(capsys):
    from datetime import datetime, timedelta, timezone

    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    assert main(["monitor", "--json", "--once", "--root", str(TREES / "raspberry-pi-5")]) == 0
    record = json.loads(capsys.readouterr().out)
    stamp = datetime.fromisoformat(record["time"])
    assert stamp.tzinfo is not None and before <= stamp <= datetime.now(timezone.utc)


def test_a_pid_that_is_not_running_is_refused_up_front(capsys):
    import psutil

    missing = max(psutil.pids()) + 100_000
    assert main(["monitor", "--once", "--pid", str(missing)]) == 2
    assert capsys.readouterr().err == (f"workbench: --pid: no running process {missing}. "
                                       "give the PID of a running process, e.g. from `pgrep llama-server`\n")
    import os

    assert main(["monitor", "--once", "--pid", str(os.getpid()), "--root", str(TREES / "raspberry-pi-5")]) == 0
