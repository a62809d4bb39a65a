"""The combined Sampler on every recorded tree and on this machine; absent sources named, never 0."""

import os
import shutil
from pathlib import Path

import pytest

from workbench.core.telemetry.sampler import Sampler
from workbench.core.telemetry.sysfs import read_text

TREES = Path(__file__).parent / "sysfs"
ALL_TREES = sorted(path.name for path in TREES.iterdir() if (path / "sys").is_dir())


def _reasons(sample):
    return {item.what: item.why for item in sample.unavailable}


@pytest.mark.parametrize("tree", ALL_TREES)
def test_every_tree_gives_a_complete_sample(tree):
    with Sampler(TREES / tree) as sampler:
        sample = sampler.sample()
    reasons = _reasons(sample)
    # Each group is either present or named as unavailable, never silently empty.
    assert bool(sample.temperatures) != ("temperature" in reasons)
    assert bool(sample.clocks) != ("clocks" in reasons)
    assert (sample.throttle is not None) != ("throttle" in reasons)
    assert (sample.total_power_w is not None) != ("power" in reasons)
    assert (sample.energy_j is not None) != ("energy" in reasons)
    assert all(t.celsius != 0 for t in sample.temperatures)
    assert sample.mem_total_bytes > 0 and sample.cpu_percent


def test_empty_container_gives_only_unavailable_entries():
    sample = Sampler(TREES / "empty-container").sample()
    assert (sample.temperatures, sample.clocks, sample.power, sample.loads) == ((), (), (), ())
    assert (sample.total_power_w, sample.energy_j, sample.throttle) == (None, None, None)
    assert _reasons(sample) == {
        "temperature": "no thermal sensors exposed",
        "clocks": "no cpufreq (no clocks exposed)",
        "throttle": "no throttle indicators exposed",
        "power": "no power source here",
        "energy": "no power source here",
        "loads": "no GPU/NPU load exposed",
    }


def test_orin_sample():
    sample = Sampler(TREES / "jetson-orin-nano").sample()
    assert [t.name for t in sample.temperatures] == ["cpu", "gpu", "soc0", "soc1", "soc2", "junction"]
    assert sample.total_power_source == "VDD_IN (ina3221 hwmon1)"
    assert sample.total_power_w == pytest.approx(5048 * 920 / 1e6)  # in1_input mV x curr1_input mA
    assert dict(sample.loads) == {"gpu": 12.3}
    assert sample.throttle.active is False
    assert sample.unavailable == ()


def test_x86_laptop_energy_counter_and_needs_root(tmp_path):
    shutil.copytree(TREES / "x86-laptop", tmp_path / "x86")
    energy = tmp_path / "x86/sys/class/powercap/intel-rapl:0/energy_uj"
    sampler = Sampler(tmp_path / "x86")
    energy.write_text(f"{int(energy.read_text()) + 2_500_000}\n")
    sample = sampler.sample()
    assert sample.energy_source == "counter: intel-rapl:0"
    assert sample.energy_j == pytest.approx(2.5)
    assert sample.total_power_w > 0

    # Without root (injected through the reader seam: these tests run as root, and root reads
    # even a chmod-000 file) and without the battery, the sample says why there is no energy.
    def unprivileged(path):
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path)

    shutil.rmtree(tmp_path / "x86/sys/class/power_supply")
    sample = Sampler(tmp_path / "x86", reader=unprivileged).sample()
    assert (sample.total_power_w, sample.energy_j) == (None, None)
    assert _reasons(sample)["power"] == _reasons(sample)["energy"] == "energy counter needs root"


def test_tegrastats_log_fills_what_sysfs_lacks():
    # Replaying a captured AGX Orin log on a root with no sensors: temperatures, rails, loads,
    # engine clocks and memory come from the log, with the log named as their source.
    sampler = Sampler(TREES / "empty-container", tegrastats=TREES / "tegrastats/agx-orin-jetpack6.log")
    first = sampler.sample()
    assert first.memory_source == "tegrastats"
    assert first.mem_total_bytes == 62841 * 1024 * 1024
    assert first.mem_available_bytes == (62841 - 18207) * 1024 * 1024
    assert first.cpu_percent == (14.0, 5.0, 8.0, 14.0, 46.0, 47.0, 2.0, 10.0, 4.0, 5.0, 6.0, 10.0)
    assert [(t.name, t.celsius) for t in first.temperatures] == [
        ("cpu", 52.562), ("soc2", 48.437), ("soc0", 49.093), ("junction", 52.562), ("soc1", 49.656)
    ]
    # 2412 + 1607 + 4707 mW = 8.726 W: the module rails, as there is no input rail
    assert first.total_power_w == pytest.approx(8.726)
    assert first.total_power_source == "sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0 (tegrastats log agx-orin-jetpack6.log)"
    assert dict(first.loads) == {"gpu": 0.0, "emc": 3.0, "nvenc": 79.0, "vic": 36.0}
    assert dict(first.device_clocks_mhz) == {"gpu": 0.0, "emc": 2133.0, "nvenc": 166.0, "vic": 115.0, "ape": 174.0}
    assert dict(first.unit_sources)["nvenc"] == "tegrastats log agx-orin-jetpack6.log"
    second = sampler.sample()
    # second line: 2412 + 1607 + 4607 mW = 8.626 W; the energy is the trapezoid between the two
    assert second.total_power_w == pytest.approx(8.626)
    assert second.energy_j == pytest.approx((8.726 + 8.626) / 2 * (second.timestamp - first.timestamp))
    sampler.sample()
    assert sampler.finished


def test_thor_log_says_the_gpu_load_is_not_printed():
    sampler = Sampler(TREES / "empty-container", tegrastats=TREES / "tegrastats/thor-jetpack7.log")
    sample = sampler.sample()
    assert "gpu" not in dict(sample.loads) and dict(sample.device_clocks_mhz)["gpu"] == 314.0
    assert _reasons(sample)["gpu load"] == "this tegrastats prints GPU clocks only (JetPack 7.0)"
    assert (sample.total_power_w, sample.total_power_source) == (
        pytest.approx(19.78), "VIN (tegrastats log thor-jetpack7.log)"
    )


def test_engine_pid_can_be_set_later():
    sampler = Sampler(TREES / "empty-container")
    assert sampler.sample().engine_rss_bytes is None
    sampler.set_engine_pid(os.getpid())
    assert sampler.sample().engine_rss_bytes > 0


def test_this_machine():
    sample = Sampler("/").sample()
    assert sample.mem_total_bytes > 0 and sample.mem_available_bytes > 0
    assert len(sample.cpu_percent) == os.cpu_count()
    reasons = _reasons(sample)
    # Each group is a real reading or named as unavailable in words; both sides are checked on
    # every machine, whatever it has.
    groups = {
        "temperature": bool(sample.temperatures),
        "clocks": bool(sample.clocks),
        "throttle": sample.throttle is not None,
        "power": sample.total_power_w is not None,
    }
    assert {group: group in reasons for group in groups} == {group: not present for group, present in groups.items()}
    known = {
        "temperature": ("no thermal sensors exposed",),
        "clocks": ("no cpufreq (no clocks exposed)",),
        "throttle": ("no throttle indicators exposed",),
        "power": ("no power source here", "energy counter needs root"),
    }
    for group in groups:
        why = reasons.get(group, known[group][0])
        assert why in known[group] or why.startswith("every source failed to read ("), (group, why)
    assert all(item.why for item in sample.unavailable)
    assert all(t.celsius > -100 for t in sample.temperatures)  # sentinels (-256 °C) are never readings
