"""Accelerator loads and clocks: RK3588 NPU cores, Jetson GPU per-mille, devfreq units."""

import shutil
from pathlib import Path

import pytest

from workbench.core.telemetry.loads import NPU_NEEDS_ROOT, LoadSampler, parse_rknpu_load
from workbench.core.telemetry.sysfs import read_text

TREES = Path(__file__).parent / "sysfs"


def test_rk3588_npu_cores_gpu_and_memory_controller():
    reading = LoadSampler(TREES / "rk3588").read()
    # rknpu/load as published (airockchip/rknn-toolkit2#269): "NPU load:  Core0:  21%, Core1:  11%, Core2:  0%,"
    assert dict(reading.loads) == {"npu0": 21.0, "npu1": 11.0, "npu2": 0.0, "gpu": 8.0, "emc": 23.0}
    assert dict(reading.clocks_mhz) == {"gpu": 300.0, "emc": 2112.0, "npu": 1000.0}


def test_orin_gpu_load_is_per_mille():
    reading = LoadSampler(TREES / "jetson-orin-nano").read()
    per_mille = int((TREES / "jetson-orin-nano/sys/devices/gpu.0/load").read_text())
    assert dict(reading.loads) == {"gpu": per_mille / 10}
    assert dict(reading.clocks_mhz) == {"gpu": 305.0}


@pytest.mark.parametrize("tree", ["raspberry-pi-5", "x86-laptop", "empty-container"])
def test_no_loads(tree):
    sampler = LoadSampler(TREES / tree)
    assert not sampler.available
    assert sampler.read().loads == ()


def unprivileged(path):
    """The reader an ordinary user has: debugfs answers EACCES (the tests run as root, who reads anything)."""
    if "debug" in path.parts:
        raise PermissionError(13, "Permission denied", str(path))
    return read_text(path)


def test_npu_load_in_root_only_debugfs():
    reading = LoadSampler(TREES / "rk3588", unprivileged).read()
    assert "npu0" not in dict(reading.loads)
    assert [(item.what, item.why) for item in reading.unavailable] == [("npu load", NPU_NEEDS_ROOT)]


def test_rknpu_formats():
    assert parse_rknpu_load("NPU load:  Core0: 71%, Core1: 35%, Core2:  0%,\n") == (
        ("npu0", 71.0), ("npu1", 35.0), ("npu2", 0.0)
    )
    assert parse_rknpu_load("NPU load: 25%\n") == (("npu", 25.0),)
    assert parse_rknpu_load("") == ()


def test_jetson_gpu_load_through_devfreq_device(tmp_path):
    shutil.copytree(TREES / "jetson-orin-nano", tmp_path / "orin")
    shutil.rmtree(tmp_path / "orin/sys/devices/gpu.0")  # JetPack 6 has no gpu.0 alias
    (tmp_path / "orin/sys/class/devfreq/17000000.ga10b/device/load").write_text("998\n")
    assert dict(LoadSampler(tmp_path / "orin").read().loads) == {"gpu": 99.8}


def test_npu_load_over_100_percent_is_not_shown(tmp_path):
    # The rknpu driver can print loads above 100%; the 126% here is written by hand in its format.
    shutil.copytree(TREES / "rk3588", tmp_path / "rk")
    (tmp_path / "rk/sys/kernel/debug/rknpu/load").write_text("NPU load:  Core0: 126%, Core1:  40%, Core2:   0%,\n")
    reading = LoadSampler(tmp_path / "rk").read()
    assert "npu0" not in dict(reading.loads)
    assert (dict(reading.loads)["npu1"], dict(reading.loads)["npu2"]) == (40.0, 0.0)
    assert [(item.what, item.why) for item in reading.unavailable] == [("npu0 load", "driver reported 126% (over 100%)")]


def test_jetson_engine_clocks_from_debugfs_and_off_engines_left_out():
    # jtop's engine reader (rbonghi/jetson_stats jtop/core/engine.py) reads clk_enable_count and clk_rate (Hz) under
    # /sys/kernel/debug/clk; the Nano tree's values are written by hand: NVENC off (enable 0 at 716.8 MHz), NVDEC on
    # at 716800000 Hz, APE at 25500000 Hz, VIC (vic03 on a Nano) at 192000000 Hz.
    reading = LoadSampler(TREES / "jetson-nano").read()
    assert dict(reading.clocks_mhz) == {"ape": 25.5, "nvdec": 716.8, "vic03": 192.0}
    assert reading.unavailable == ()


def test_engine_clocks_without_root_are_named():
    reading = LoadSampler(TREES / "jetson-nano", unprivileged).read()
    assert reading.clocks_mhz == ()
    assert {item.what for item in reading.unavailable} == {"ape clock", "nvdec clock", "nvenc clock", "vic03 clock"}
    assert all("permission denied (EACCES, needs root)" in item.why for item in reading.unavailable)
