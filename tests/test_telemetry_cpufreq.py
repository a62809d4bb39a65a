"""CPU clocks per policy from each recorded tree, caps included."""

from pathlib import Path

import pytest

from workbench.core.telemetry.cpufreq import CpufreqSampler

TREES = Path(__file__).parent / "sysfs"

EXPECTED = {  # tree -> [(policy, cpus, capped)]
    "jetson-orin-nano": [("policy0", "0-3", False), ("policy4", "4-5", False)],
    "rk3588": [("policy0", "0-3", False), ("policy4", "4-5", True), ("policy6", "6-7", False)],
    "raspberry-pi-5": [("policy0", "0-3", False)],
    "raspberry-pi-5-cool": [("policy0", "0-3", False)],
    "x86-laptop": [("policy0", "0", False), ("policy1", "1", False), ("policy2", "2", False), ("policy3", "3", False)],
    "empty-container": [],
}


@pytest.mark.parametrize("tree", sorted(EXPECTED))
def test_policies_cpus_and_caps(tree):
    clocks = CpufreqSampler(TREES / tree).read()
    assert [(clock.policy, clock.cpus, clock.capped) for clock in clocks] == EXPECTED[tree]
    for clock in clocks:
        folder = TREES / tree / "sys/devices/system/cpu/cpufreq" / clock.policy
        assert clock.cur_khz == int((folder / "scaling_cur_freq").read_text())
        assert clock.max_khz == int((folder / "scaling_max_freq").read_text())
        assert clock.governor == (folder / "scaling_governor").read_text().strip()


def test_each_read_follows_the_files(tmp_path):
    import shutil

    shutil.copytree(TREES / "rk3588", tmp_path / "rk")
    sampler = CpufreqSampler(tmp_path / "rk")
    (tmp_path / "rk/sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq").write_text("2400000\n")
    (tmp_path / "rk/sys/devices/system/cpu/cpufreq/policy4/scaling_cur_freq").write_text("2208000\n")
    policy4 = sampler.read()[1]
    assert (policy4.cur_khz, policy4.capped) == (2208000, False)


def test_offline_cluster_is_left_out(tmp_path):
    import shutil

    shutil.copytree(TREES / "jetson-orin-nano", tmp_path / "orin")
    sampler = CpufreqSampler(tmp_path / "orin")
    (tmp_path / "orin/sys/devices/system/cpu/cpufreq/policy4/scaling_cur_freq").unlink()
    assert [clock.policy for clock in sampler.read()] == ["policy0"]


def test_an_absurd_cpu_range_is_no_list(tmp_path):
    """A forged related_cpus of a billion CPUs would be a billion-entry list: it is refused, the clocks stay."""
    import shutil

    shutil.copytree(TREES / "rk3588", tmp_path / "rk")
    (tmp_path / "rk/sys/devices/system/cpu/cpufreq/policy4/related_cpus").write_text("0-999999999\n")
    clocks = CpufreqSampler(tmp_path / "rk").read()
    assert [(clock.policy, clock.cpus) for clock in clocks] == [("policy0", "0-3"), ("policy4", ""), ("policy6", "6-7")]
