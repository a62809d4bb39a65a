"""Throttling in words: Intel counter deltas, Pi get_throttled bits, clock caps; each tree."""

import shutil
from pathlib import Path

import pytest

from workbench.core.telemetry.cpufreq import CpufreqSampler
from workbench.core.telemetry.throttle import ThrottleSampler, describe_pi_throttled

TREES = Path(__file__).parent / "sysfs"


def _throttle(root):
    clocks = CpufreqSampler(root)
    sampler = ThrottleSampler(root, uses_clocks=clocks.available)
    return sampler, clocks


@pytest.mark.parametrize(
    ("tree", "active", "cause_words"),
    [
        ("jetson-orin-nano", False, ""),
        ("rk3588", True, "clock cap: cpus 4-5 at 1800 of 2400 MHz"),
        ("raspberry-pi-5", True, "Pi: under-voltage, throttled now"),
        ("raspberry-pi-5-cool", False, ""),
        ("x86-laptop", False, ""),  # counters are not zero, but did not grow since the baseline
    ],
)
def test_each_tree(tree, active, cause_words):
    sampler, clocks = _throttle(TREES / tree)
    throttle = sampler.read(clocks.read())
    assert throttle is not None
    assert throttle.active is active
    assert throttle.cause == cause_words


def test_empty_tree_has_no_throttle_source():
    sampler, clocks = _throttle(TREES / "empty-container")
    assert not sampler.available and sampler.read(clocks.read()) is None


def test_pi_since_boot_bits_are_history_not_now():
    sampler, clocks = _throttle(TREES / "raspberry-pi-5-cool")  # get_throttled = 0x50000
    throttle = sampler.read(clocks.read())
    assert throttle.history == "Pi since boot: under-voltage, throttled"


@pytest.mark.parametrize(
    ("value", "now", "history"),
    [
        (0x0, "", ""),
        (0x50005, "Pi: under-voltage, throttled now", "Pi since boot: under-voltage, throttled"),
        (0x8, "Pi: soft temperature limit now", ""),
        (0x2, "Pi: arm frequency capped now", ""),
        (0xF000F, "Pi: under-voltage, arm frequency capped, throttled, soft temperature limit now",
         "Pi since boot: under-voltage, arm frequency capped, throttled, soft temperature limit"),
    ],
)
def test_pi_bits(value, now, history):
    active, cause, since_boot = describe_pi_throttled(value)
    assert (active, cause, since_boot) == (bool(now), now, history)


def test_intel_counters_report_the_growth_since_the_previous_sample(tmp_path):
    shutil.copytree(TREES / "x86-laptop", tmp_path / "x86")
    cpus = tmp_path / "x86/sys/devices/system/cpu"
    sampler = ThrottleSampler(tmp_path / "x86")
    assert [counter.owner for counter in sampler.counters] == ["cpu0", "package 0", "cpu1", "cpu2", "cpu3"]
    (cpus / "cpu1/thermal_throttle/core_throttle_count").write_text("5\n")  # 3 -> 5
    (cpus / "cpu3/thermal_throttle/core_throttle_count").write_text("2\n")  # 1 -> 2
    first = sampler.read()
    assert first.active
    assert first.cause == "Intel: core thermal throttling on cpu1, cpu3 (+3 since last sample)"
    assert sampler.read().active is False  # no growth since the previous sample
    for cpu in ("cpu0", "cpu1", "cpu2", "cpu3"):  # every CPU shows its package's count
        (cpus / cpu / "thermal_throttle/package_throttle_count").write_text("9\n")
    assert sampler.read().cause == "Intel: package thermal throttling on package 0 (+2 since last sample)"


def test_unreadable_get_throttled_value_is_skipped(tmp_path):
    shutil.copytree(TREES / "raspberry-pi-5", tmp_path / "pi")
    firmware = tmp_path / "pi/sys/devices/platform/soc/soc:firmware/get_throttled"
    sampler = ThrottleSampler(tmp_path / "pi")
    firmware.write_text("throttled=0x8\n")  # the vcgencmd spelling
    assert sampler.read().cause == "Pi: soft temperature limit now"
    firmware.write_text("garbage\n")
    assert sampler.read() is None  # nothing read, nothing claimed: no state, and the reason
    assert [(item.what, item.why) for item in sampler.unavailable] == [
        ("throttle Pi firmware", f"not a hex value ('garbage'): {firmware}")
    ]


def test_get_throttled_directly_under_platform(tmp_path):
    # Some kernels put the firmware node at /sys/devices/platform/soc:firmware (a path other monitors also try,
    # e.g. THROTTLE_PATHS in a public C monitor in the code index); the value is written here by hand.
    node = tmp_path / "sys/devices/platform/soc:firmware"
    node.mkdir(parents=True)
    (node / "get_throttled").write_text("50005\n")
    state = ThrottleSampler(tmp_path).read()
    assert state.active and state.cause == "Pi: under-voltage, throttled now"
