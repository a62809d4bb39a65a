"""Board detection from the device tree and DMI, with the suggested device profile."""

from pathlib import Path

import pytest

from workbench.core.telemetry.detect import detect_board

TREES = Path(__file__).parent / "sysfs"


@pytest.mark.parametrize(
    ("tree", "kind", "model", "soc", "profile"),
    [
        ("jetson-orin-nano", "jetson", "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", "tegra234",
         "jetson-orin-nano-8gb"),
        ("rk3588", "rockchip", "Radxa ROCK 5B", "rk3588", "rk3588-8gb"),
        ("raspberry-pi-5", "raspberry-pi", "Raspberry Pi 5 Model B Rev 1.0", "bcm2712", "raspberry-pi-5-8gb"),
        ("x86-laptop", "x86", "LENOVO ThinkPad X1 Carbon Gen 9", "", "x86-mini-pc-16gb"),
        ("empty-container", "unknown", "unknown board", "", "host"),
        # the Orange Pi vendor device tree ends in "rockchip,rk3588", yet the board is an RK3588S
        ("orange-pi-5", "rockchip", "Orange Pi 5", "rk3588s", "rk3588s-4gb"),
        ("rk3588-mainline", "rockchip", "Radxa ROCK 5B", "rk3588", "rk3588-8gb"),
        ("jetson-nano", "jetson", "NVIDIA Jetson Nano Developer Kit", "tegra210", "host"),
    ],
)
def test_recorded_boards(tree, kind, model, soc, profile):
    board = detect_board(TREES / tree)
    assert (board.kind, board.model, board.soc, board.profile) == (kind, model, soc, profile)


def _device_tree(root, model, *compatible):
    base = root / "proc/device-tree"
    base.mkdir(parents=True)
    (base / "model").write_bytes(model.encode() + b"\0")
    (base / "compatible").write_bytes(b"".join(entry.encode() + b"\0" for entry in compatible))


@pytest.mark.parametrize(
    ("model", "compatible", "kind", "soc", "profile"),
    [
        ("Orange Pi 5", ("rockchip,rk3588s-orangepi-5", "rockchip,rk3588s"), "rockchip", "rk3588s", "rk3588s-4gb"),
        ("Raspberry Pi 4 Model B Rev 1.4", ("raspberrypi,4-model-b", "brcm,bcm2711"), "raspberry-pi", "bcm2711", "host"),
        ("NVIDIA Jetson AGX Orin Developer Kit", ("nvidia,p3737-0000+p3701-0005", "nvidia,tegra234"), "jetson",
         "tegra234", "host"),
        ("NVIDIA Jetson Nano Developer Kit", ("nvidia,p3450-0000", "nvidia,jetson-nano", "nvidia,tegra210"), "jetson",
         "tegra210", "host"),
        ("BeagleBone Black", ("ti,am335x-bone-black", "ti,am33xx"), "unknown", "ti,am33xx", "host"),
    ],
)
def test_proc_device_tree_boards(tmp_path, model, compatible, kind, soc, profile):
    _device_tree(tmp_path, model, *compatible)
    board = detect_board(tmp_path)
    assert (board.kind, board.model, board.soc, board.profile) == (kind, model, soc, profile)
    assert board.source.endswith("proc/device-tree/model")


def test_dmi_placeholder_names_are_dropped(tmp_path):
    dmi = tmp_path / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_text("Default string\n")
    (dmi / "product_name").write_text("NUC12WSHi5\n")
    assert detect_board(tmp_path).model == "NUC12WSHi5"


@pytest.mark.parametrize(("mem_total_kb", "profile"), [(3_880_000, "rk3588s-4gb"), (16_120_000, "host")])
def test_rockchip_profile_only_when_the_ram_fits(tmp_path, mem_total_kb, profile):
    # An Orange Pi 5 sold with 16 GB is not the 4 GB profile (MemTotal values written here by hand).
    _device_tree(tmp_path, "Orange Pi 5", "rockchip,rk3588s-orangepi-5", "rockchip,rk3588")
    (tmp_path / "proc/meminfo").write_text(f"MemTotal:       {mem_total_kb} kB\nMemFree:  1000 kB\n")
    board = detect_board(tmp_path)
    assert (board.soc, board.profile) == ("rk3588s", profile)
