"""The combined Sampler on every recorded tree and on this machine; absent sources named, never 0."""

import os
import shutil
from pathlib import Path

import pytest

from workbench.core.telemetry.sampler import Sampler
from workbench.core.telemetry.sysfs import read_text

TREES = Path(__file__).parent / "sysfs"
ALL_TREES = ["jetson-orin-nano", "rk3588", "raspberry-pi-5", "raspberry-pi-5-cool", "x86-laptop", "empty-container"]


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
    assert sample.total_power_w == pytest.approx(5080 * 984 / 1e6)
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
    # Replaying an Orin log on a root with no sensors: temperatures, rails, loads and memory
    # come from the log, with the log named as their source.
    sampler = Sampler(TREES / "empty-container", tegrastats=TREES / "jetson-orin-nano/tegrastats.log")
    first = sampler.sample()
    assert first.memory_source == "tegrastats"
    assert first.mem_total_bytes == 7620 * 1024 * 1024
    assert first.mem_available_bytes == (7620 - 1343) * 1024 * 1024
    assert first.cpu_percent == (0.0,) * 6
    assert [t.name for t in first.temperatures] == ["cpu", "soc2", "soc0", "gpu", "junction", "soc1"]
    assert first.total_power_w == pytest.approx(5.251)
    assert first.total_power_source == "VDD_IN (tegrastats log tegrastats.log)"
    assert dict(first.loads) == {"gpu": 0.0, "emc": 15.0}
    assert dict(first.device_clocks_mhz) == {"gpu": 305.0, "emc": 204.0}
    second = sampler.sample()
    assert second.energy_j == pytest.approx((5.251 + 11.021) / 2 * (second.timestamp - first.timestamp))
    sampler.sample()
    assert sampler.finished


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
    # Whatever this machine lacks is named in words; whatever it has is a real reading.
    if not sample.temperatures:
        assert reasons["temperature"] == "no thermal sensors exposed"
    if not sample.clocks:
        assert reasons["clocks"] == "no cpufreq (no clocks exposed)"
    if sample.total_power_w is None:
        assert reasons["power"] in ("no power source here", "energy counter needs root")
    assert all(item.why for item in sample.unavailable)
