"""Which board this is (Jetson, Raspberry Pi, Rockchip, x86) from the device tree or DMI."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from workbench.core.telemetry.sysfs import Reader, read_optional, read_text, under

_DEVICE_TREE_DIRS = ("/proc/device-tree", "/sys/firmware/devicetree/base")
_DMI_PLACEHOLDERS = {"", "to be filled by o.e.m.", "default string", "system product name", "none", "not applicable"}


@dataclass(frozen=True)
class BoardInfo:
    kind: str  # "jetson", "raspberry-pi", "rockchip", "x86", "unknown"
    model: str  # "NVIDIA Jetson Orin Nano Developer Kit", "LENOVO ThinkPad X1 Carbon Gen 9", ...
    soc: str  # "tegra234", "bcm2712", "rk3588", "rk3588s", "" when not known
    profile: str  # suggested device profile name, "host" when none fits
    source: str  # the file the model came from


def detect_board(root: str | Path = "/", reader: Reader = read_text) -> BoardInfo:
    root = Path(root)
    for folder in _DEVICE_TREE_DIRS:
        base = under(root, folder)
        model = read_optional(reader, base / "model")
        if model is None:
            continue
        compatible = _compatible(base / "compatible")
        return _from_device_tree(model, compatible, str(base / "model"), _ram_mib(root, reader))
    dmi = under(root, "/sys/class/dmi/id")
    vendor = read_optional(reader, dmi / "sys_vendor")
    product = read_optional(reader, dmi / "product_name")
    if vendor is not None or product is not None:
        version = read_optional(reader, dmi / "product_version") or ""
        # Lenovo puts the machine type in product_name and the marketing name in product_version.
        name = version if vendor == "LENOVO" and version.lower() not in _DMI_PLACEHOLDERS else product or ""
        model = " ".join(part for part in (vendor, name) if part and part.lower() not in _DMI_PLACEHOLDERS)
        return BoardInfo("x86", model or "x86 PC", "", "x86-mini-pc-16gb", str(dmi / "product_name"))
    if str(root) == "/" and platform.machine() in ("x86_64", "AMD64", "i686"):
        return BoardInfo("x86", "x86 machine (no DMI exposed)", "", "host", "platform.machine()")
    return BoardInfo("unknown", "unknown board", "", "host", "")


def _compatible(path: Path) -> tuple[str, ...]:
    # Device-tree string lists are NUL-separated; the generic reader would join them.
    try:
        raw = path.read_bytes()
    except OSError:
        return ()
    return tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)


def _ram_mib(root: Path, reader: Reader) -> int | None:
    """MemTotal of the board in MiB from /proc/meminfo under the root; None when not there."""
    text = read_optional(reader, under(root, "/proc/meminfo"))
    for line in (text or "").splitlines():
        if line.startswith("MemTotal:"):
            try:
                return int(line.split()[1]) // 1024
            except (IndexError, ValueError):
                return None
    return None


def _rockchip_soc(model: str, compatible: tuple[str, ...]) -> str:
    """The SoC from the first (most specific) compatible entry that names a part: "rk3588s" for an
    Orange Pi 5 whose vendor device tree lists "rockchip,rk3588s-orangepi-5", "rockchip,rk3588"."""
    parts = [entry.split(",", 1)[1].split("-", 1)[0] for entry in compatible if entry.startswith("rockchip,")]
    parts += [word for word in model.lower().split() if word.startswith("rk35")]
    return next((part for part in parts if part.startswith("rk")), "")


def _from_device_tree(model: str, compatible: tuple[str, ...], source: str, ram_mib: int | None = None) -> BoardInfo:
    lowered = model.lower()
    compatible_text = " ".join(compatible).lower()
    if "jetson" in lowered or "nvidia,tegra" in compatible_text:
        soc = next((entry.split(",", 1)[1] for entry in compatible if entry.startswith("nvidia,tegra")), "")
        fits = "orin nano" in lowered and "4gb" not in lowered
        return BoardInfo("jetson", model, soc, "jetson-orin-nano-8gb" if fits else "host", source)
    if "raspberry pi" in lowered:
        soc = next((entry.split(",", 1)[1] for entry in compatible if entry.startswith("brcm,bcm")), "")
        return BoardInfo("raspberry-pi", model, soc, "raspberry-pi-5-8gb" if "pi 5" in lowered else "host", source)
    if any(entry.startswith("rockchip,") for entry in compatible) or "rk35" in lowered:
        soc = _rockchip_soc(model, compatible)
        profile, profile_mib = {"rk3588s": ("rk3588s-4gb", 4096), "rk3588": ("rk3588-8gb", 8192)}.get(soc, ("host", 0))
        if ram_mib is not None and profile != "host" and not profile_mib * 0.75 <= ram_mib <= profile_mib:
            profile = "host"  # a 16 GB board is not the 8 GB profile: the host's own figures fit it better
        return BoardInfo("rockchip", model, soc, profile, source)
    return BoardInfo("unknown", model, compatible[-1] if compatible else "", "host", source)
