"""DVFS sweep limits on writable copies of recorded cpufreq trees: apply, restore, restore after SIGKILL."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.core.bench.dvfs import (
    CpufreqLimits,
    DvfsSetting,
    limits_held,
    load_state,
    parse_frequencies,
    restore_pending,
)
from workbench.core.errors import WorkbenchError

SYSFS = Path(__file__).parent / "sysfs"
POLICIES = "sys/devices/system/cpu/cpufreq"


def tree(tmp_path: Path, board: str) -> Path:
    root = tmp_path / board
    shutil.copytree(SYSFS / board, root)
    return root


def attr(root: Path, policy: str, name: str) -> str:
    return (root / POLICIES / policy / name).read_text().strip()


def test_parse_frequencies_units():
    # bare numbers are MHz; 2.4 GHz = 2,400,000 kHz; 'max' leaves each policy's own cap
    assert parse_frequencies("1200, 1800MHz,2.4GHz,max,408000kHz") == (1_200_000, 1_800_000, 2_400_000, None, 408_000)
    for bad in ("fast", "", "0", "1e9"):
        with pytest.raises(WorkbenchError):
            parse_frequencies(bad)


def test_apply_then_restore_rk3588(tmp_path):
    root = tree(tmp_path, "rk3588")
    state = tmp_path / "state.json"
    limits = CpufreqLimits(root, state)
    # the recorded tree: policy4 capped at 1.8 of 2.4 GHz, schedutil (a scenario by hand, tests/sysfs/rk3588/SOURCES.md)
    assert attr(root, "policy4", "scaling_max_freq") == "1800000"
    with limits_held(limits):
        limits.apply(DvfsSetting(max_khz=1_200_000, governor="powersave"))
        assert state.exists()
        for policy in ("policy0", "policy4", "policy6"):
            assert attr(root, policy, "scaling_max_freq") == "1200000"
            assert attr(root, policy, "scaling_governor") == "powersave"
        limits.apply(DvfsSetting(max_khz=None))  # 'max' = the cap in force before the sweep
        assert attr(root, "policy4", "scaling_max_freq") == "1800000"
        limits.apply(DvfsSetting(max_khz=9_000_000))  # above the hardware: clamped to cpuinfo_max_freq
        assert attr(root, "policy6", "scaling_max_freq") == "2400000"
    assert attr(root, "policy4", "scaling_max_freq") == "1800000"
    assert attr(root, "policy4", "scaling_governor") == "schedutil"
    assert attr(root, "policy4", "scaling_min_freq") == "408000"
    assert not state.exists()


def test_ctrl_c_restores(tmp_path):
    root = tree(tmp_path, "jetson-orin-nano")
    before = attr(root, "policy0", "scaling_max_freq")
    limits = CpufreqLimits(root, tmp_path / "state.json")
    with pytest.raises(KeyboardInterrupt):
        with limits_held(limits):
            limits.apply(DvfsSetting(max_khz=729_600))
            assert attr(root, "policy0", "scaling_max_freq") == "729600"
            raise KeyboardInterrupt
    assert attr(root, "policy0", "scaling_max_freq") == before


def test_cap_below_min_lowers_min_first(tmp_path):
    root = tree(tmp_path, "rk3588")
    (root / POLICIES / "policy0" / "scaling_min_freq").write_text("1200000\n")
    limits = CpufreqLimits(root, tmp_path / "state.json")
    with limits_held(limits):
        limits.apply(DvfsSetting(max_khz=600_000))
        assert attr(root, "policy0", "scaling_max_freq") == "600000"
        assert int(attr(root, "policy0", "scaling_min_freq")) <= 600_000
    assert attr(root, "policy0", "scaling_min_freq") == "1200000"


def test_restore_after_sigkill_mid_sweep(tmp_path):
    root = tree(tmp_path, "rk3588")
    state = tmp_path / "state.json"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from workbench.core.bench.dvfs import CpufreqLimits, DvfsSetting, limits_held\n"
        "limits = CpufreqLimits(Path(sys.argv[1]), Path(sys.argv[2]))\n"
        "with limits_held(limits):\n"
        "    limits.apply(DvfsSetting(max_khz=1_008_000, governor='performance'))\n"
        "    print('applied', flush=True)\n"
        "    sys.stdin.readline()\n"  # mid-sweep: blocks until killed
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(root), str(state)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "applied"
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    # the kill left the sweep's limits in place, and the originals on disk
    assert attr(root, "policy6", "scaling_max_freq") == "1008000"
    assert attr(root, "policy6", "scaling_governor") == "performance"
    assert [p.max_khz for p in load_state(state, root)] == [1_800_000, 1_800_000, 2_400_000]

    message = restore_pending(root, state)
    assert "restored" in message and "policy4 1800 MHz schedutil" in message
    assert attr(root, "policy0", "scaling_max_freq") == "1800000"
    assert attr(root, "policy4", "scaling_max_freq") == "1800000"
    assert attr(root, "policy6", "scaling_max_freq") == "2400000"
    assert attr(root, "policy6", "scaling_governor") == "schedutil"
    assert not state.exists()
    assert restore_pending(root, state) == ""  # nothing left to do


def test_a_state_file_of_another_tree_is_left_alone(tmp_path):
    root = tree(tmp_path, "rk3588")
    state = tmp_path / "state.json"
    state.write_text('{"format": "workbench-cpufreq-originals/1", "root": "/elsewhere", "policies": []}')
    message = restore_pending(root, state)
    assert "/elsewhere" in message and "left alone" in message
    assert state.exists()


def test_not_writable_says_so(tmp_path):
    root = tree(tmp_path, "raspberry-pi-5")

    def read_only(path, value):
        raise PermissionError(13, "Permission denied")  # the tests run as root: chmod would not stop a write

    reason = CpufreqLimits(root, tmp_path / "s.json", writer=read_only).not_writable_reason()
    assert "not writable" in reason and "Permission denied" in reason and "\n" not in reason
    assert "no cpufreq policies" in CpufreqLimits(tree(tmp_path, "empty-container"), tmp_path / "s.json").not_writable_reason()
    assert CpufreqLimits(root, tmp_path / "s.json").not_writable_reason() == ""


@pytest.mark.parametrize("document", [
    '{"format": "workbench-cpufreq-originals/1", "root": "ROOT", "policies": [{"policy": "../../etc", "max_khz": 1, "min_khz": 1, "governor": "x", "hw_min_khz": 1, "hw_max_khz": 1}]}',
    '{"format": "workbench-cpufreq-originals/1", "root": "ROOT", "policies": [{"policy": "policy0", "max_khz": 1, "min_khz": 1, "governor": "x; rm -rf", "hw_min_khz": 1, "hw_max_khz": 1}]}',
    '{"format": "workbench-cpufreq-originals/1", "root": "ROOT", "policies": [{"policy": "policy0", "max_khz": -5, "min_khz": 1, "governor": "x", "hw_min_khz": 1, "hw_max_khz": 1}]}',
    'not json',
])
def test_hostile_state_file_is_refused_and_kept(tmp_path, document):
    root = tree(tmp_path, "rk3588")
    state = tmp_path / "state.json"
    state.write_text(document.replace("ROOT", str(root.resolve())))
    with pytest.raises(WorkbenchError) as error:
        restore_pending(root, state)
    assert str(state) in str(error.value) and "\n" not in str(error.value)
    assert state.exists()  # kept for the user to look at
    assert attr(root, "policy4", "scaling_max_freq") == "1800000"  # nothing written


def test_cli_task_sweep_per_clock_cap_then_restored_with_power_cap_choice(tmp_path, cli):
    """End to end on a copy of the recorded Jetson tree: the real engine answers at each cap, the tree is restored."""
    import json

    root = tree(tmp_path, "jetson-orin-nano")
    state = tmp_path / "state.json"
    out = tmp_path / "rows.json"
    device = tmp_path / "orin-on-battery.toml"
    device.write_text('name = "orin-on-battery"\nram_total_mb = 8192\nmem_bandwidth_gbs = 68\ncores = 6\n'
                      'battery_wh = 50\n')
    done = cli("bench", "--task", "add-small", "--samples", "1", "--limit", "1", "--device", str(device),
               "--presets", "as-is", "--cpu-max-freq", "729.6,max", "--governor", "powersave", "--power-cap", "10",
               "--sysfs-root", str(root), "--dvfs-state", str(state), "--output", "json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["cpu_max_khz"] for r in rows] == [729_600, None] and {r["governor"] for r in rows} == {"powersave"}
    # the recorded tree's VDD_IN rail (tests/sysfs/jetson-orin-nano/SOURCES.md): 5048 mV x 920 mA = 4.64416 W;
    # power and energy are measured
    assert all(r["power_w"] is not None and r["joules_per_question"] is not None for r in rows)
    for r in rows:
        assert r["power_w"] == pytest.approx(5048 * 920 / 1e6, rel=0.01)
        assert r["battery_hours"] == pytest.approx(50 / (5048 * 920 / 1e6), rel=0.01)  # 50 Wh at 4.64 W
        # 50 Wh = 180,000 J, spent joules_per_question at a time
        assert r["answers_per_charge"] == pytest.approx(180_000 / r["joules_per_question"], rel=1e-6)
    assert "under 10 W:" in done.stdout
    # restored: the recorded values are back, and nothing is left to restore
    assert attr(root, "policy0", "scaling_max_freq") == (SYSFS / "jetson-orin-nano" / POLICIES / "policy0" /
                                                         "scaling_max_freq").read_text().strip()
    assert attr(root, "policy0", "scaling_governor") == "schedutil"
    assert not state.exists()


def test_cli_speed_sweep_per_clock_cap_then_restored(tmp_path, cli):
    """The plain speed bench at each cap on a copy of the recorded RK3588 tree: a table per setting, then restored."""
    root = tree(tmp_path, "rk3588")
    state = tmp_path / "state.json"
    text = tmp_path / "eval.txt"
    text.write_text("A short text for the perplexity step of this test, long enough to score. " * 4)
    done = cli("bench", "--presets", "as-is", "-p", "8", "-n", "4", "-r", "1", "--eval-text", str(text),
               "--ppl-ctx", "64", "--cpu-max-freq", "1008,max", "--sysfs-root", str(root), "--dvfs-state", str(state),
               "--out", str(tmp_path / "speed.json"), "--output", "json")
    assert done.returncode == 0, done.stderr
    assert "CPU limits: 1008 MHz" in done.stderr and "CPU limits: as set" in done.stderr
    assert (tmp_path / "speed-1008MHz.json").is_file() and (tmp_path / "speed-max.json").is_file()
    assert attr(root, "policy6", "scaling_max_freq") == "2400000" and attr(root, "policy0", "scaling_max_freq") == "1800000"
    assert not state.exists()
