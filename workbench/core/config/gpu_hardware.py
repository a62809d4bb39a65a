"""The GPUs this machine has, read under a filesystem root: a Jetson's, NVIDIA cards, render nodes.

Standard library only: `install.py` imports this module before the package and its
dependencies are installed. Everything read is bounded and validated: a file we do not
understand is reported as not understood, never guessed from.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Jetson SoCs by their device-tree compatible string, with the GPU's CUDA compute capability
# (NVIDIA's CUDA GPUs table, developer.nvidia.com/cuda-gpus, Jetson products: AGX Orin / Orin NX /
# Orin Nano 8.7, AGX Xavier / Xavier NX 7.2, TX2 6.2, Nano 5.3; the same four in remy415's
# Ollama Tegra notes: "Nano/TX1 = 5.3, TX2 = 6.2, Xavier = 7.2, Orin = 8.7").
JETSON_SOCS = {
    "nvidia,tegra234": ("Orin", "87"),
    "nvidia,tegra194": ("Xavier", "72"),
    "nvidia,tegra186": ("TX2", "62"),
    "nvidia,tegra210": ("Nano/TX1", "53"),
}
# JetPack 6 (L4T R36) supports the Orin family only, so R36 without a device tree is an Orin.
_L4T_ORIN_ONLY_MAJOR = 36

# DRM drivers of render nodes, as the kernel names them (drivers/gpu/drm/*: v3d, panthor, panfrost,
# lima, i915, xe, amdgpu, nouveau, msm, etnaviv) plus NVIDIA's own and Arm's vendor kbase ("mali").
RENDER_DRIVERS = {
    "v3d": "Broadcom V3D",
    "panthor": "Arm Mali (panthor)",
    "panfrost": "Arm Mali (panfrost)",
    "mali": "Arm Mali (vendor kbase)",
    "lima": "Arm Mali Utgard (lima)",
    "i915": "Intel GPU (i915)",
    "xe": "Intel GPU (xe)",
    "amdgpu": "AMD GPU",
    "nouveau": "NVIDIA GPU (nouveau)",
    "nvidia": "NVIDIA GPU",
    "nvidia-drm": "NVIDIA GPU",
    "tegra": "NVIDIA Tegra display",
    "msm": "Qualcomm Adreno",
    "etnaviv": "Vivante GPU",
}

# Why the install does not build Vulkan for these GPUs by itself, from published runs.
_MALI_SLOWER = ("Vulkan on Mali-G610 runs slower than the CPU: 3.6 vs 13.2 tok/s, Llama-3.2-1B Q4_1 on an "
                "Orange Pi 5 Plus (github.com/ggml-org/llama.cpp/issues/17783)")
VULKAN_NOTES = {
    "panthor": _MALI_SLOWER,
    "panfrost": _MALI_SLOWER,
    "mali": _MALI_SLOWER,
    "v3d": "llama.cpp's Vulkan backend does not run on V3D (github.com/ggml-org/llama.cpp/issues/9801)",
}

_MAX_READ = 4096
_COMPATIBLE = re.compile(r"^[A-Za-z0-9,._+-]{1,80}$")
_L4T_LINE = re.compile(r"^# R(\d{1,3}) \(release\), REVISION: (\d{1,3}(?:\.\d{1,3}){0,2})")
_COMPUTE_CAP = re.compile(r"^(\d{1,2})\.(\d)$")
_GPU_NAME = re.compile(r"^[\x20-\x7e]{1,128}$")
_RENDER_NODE = re.compile(r"^renderD\d{1,4}$")
_UEVENT_KEY = re.compile(r"^(DRIVER|OF_COMPATIBLE_0|PCI_ID)=([\x21-\x7e]{1,80})$")
_MAX_NODES = 16
_MAX_SMI_BYTES = 64 * 1024


@dataclass(frozen=True)
class JetsonGpu:
    """A Jetson's integrated GPU: its SoC, family and CUDA architecture (None when not known)."""

    soc: str  # "nvidia,tegra234", or "" when only /etc/nv_tegra_release says Jetson
    family: str  # "Orin", "Xavier", ...; "Jetson" when the SoC is not known
    cuda_arch: str | None  # "87"; None when neither the SoC nor the L4T release tells it
    l4t: str  # "R36.3.0" from /etc/nv_tegra_release, "" when absent
    source: str  # the file that said so


@dataclass(frozen=True)
class NvidiaGpu:
    """One NVIDIA card as nvidia-smi (or the driver's /proc file) reports it."""

    name: str
    compute_cap: str | None  # "9.0"; None when only the driver's /proc file was read
    source: str

    @property
    def cuda_arch(self) -> str | None:
        return self.compute_cap.replace(".", "") if self.compute_cap else None


@dataclass(frozen=True)
class RenderNode:
    """A DRM render node (or Arm's vendor mali0 device) and the driver behind it."""

    node: str  # "renderD128", "mali0"
    driver: str  # "v3d", "panthor", ...
    compatible: str  # first device-tree compatible, "" for PCI devices
    kind: str  # "Broadcom V3D", ...

    @property
    def vulkan_note(self) -> str:
        """Why Vulkan is not built for it by default (published runs), or the plain fact."""
        return VULKAN_NOTES.get(self.driver, "the install does not build Vulkan by itself")


@dataclass(frozen=True)
class MachineGpus:
    jetson: JetsonGpu | None
    nvidia: tuple[NvidiaGpu, ...]
    render_nodes: tuple[RenderNode, ...]
    notes: tuple[str, ...]  # what was looked at and not found, or found and not understood

    @property
    def cuda_archs(self) -> tuple[str, ...]:
        """Every CUDA architecture found, in order, without repeats (a Jetson's first)."""
        found = [self.jetson.cuda_arch] if self.jetson and self.jetson.cuda_arch else []
        found += [gpu.cuda_arch for gpu in self.nvidia if gpu.cuda_arch]
        return tuple(dict.fromkeys(found))

    @property
    def has_cuda_gpu(self) -> bool:
        return self.jetson is not None or bool(self.nvidia)


def _read_bounded(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_READ)
    except OSError:
        return None


def _compatible_strings(root: Path) -> tuple[tuple[str, ...], str]:
    """The root node's compatible strings and the file they came from (NUL-separated, bounded)."""
    for relative in ("proc/device-tree/compatible", "sys/firmware/devicetree/base/compatible"):
        raw = _read_bounded(root / relative)
        if raw is None:
            continue
        words = [word.decode("ascii", "replace") for word in raw.split(b"\0") if word]
        return tuple(word for word in words if _COMPATIBLE.match(word)), "/" + relative
    return (), ""


def _l4t_release(root: Path) -> str:
    raw = _read_bounded(root / "etc/nv_tegra_release")
    if raw is None:
        return ""
    match = _L4T_LINE.match(raw.decode("ascii", "replace").splitlines()[0] if raw.strip() else "")
    return f"R{match.group(1)}.{match.group(2)}" if match else "?"


def detect_jetson(root: Path) -> tuple[JetsonGpu | None, list[str]]:
    compatible, where = _compatible_strings(root)
    l4t = _l4t_release(root)
    for word in compatible:
        if word in JETSON_SOCS:
            family, arch = JETSON_SOCS[word]
            return JetsonGpu(word, family, arch, "" if l4t == "?" else l4t, f"{where} ({word})"), []
    tegra = [word for word in compatible if word.startswith("nvidia,tegra")]
    if tegra:
        return JetsonGpu(tegra[0], "Jetson", None, "" if l4t == "?" else l4t,
                         f"{where} ({tegra[0]}: a Tegra the workbench has no CUDA architecture for)"), []
    if l4t and l4t != "?":
        major = int(l4t[1:].split(".")[0])
        arch = "87" if major == _L4T_ORIN_ONLY_MAJOR else None
        return JetsonGpu("", "Orin" if arch else "Jetson", arch, l4t, f"/etc/nv_tegra_release (L4T {l4t})"), []
    notes = []
    if l4t == "?":
        notes.append("/etc/nv_tegra_release exists but its first line is not an L4T release line")
    notes.append((f"no nvidia,tegra* in {where}" if where else "no /proc/device-tree/compatible")
                 + ("" if l4t else ", no /etc/nv_tegra_release"))
    return None, notes


def _nvidia_smi(path: str | None) -> tuple[list[NvidiaGpu], list[str]]:
    smi = shutil.which("nvidia-smi", path=path)
    if smi is None:
        return [], ["nvidia-smi not on PATH"]
    try:
        done = subprocess.run([smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                              capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return [], [f"{smi} did not run ({error})"]
    if done.returncode != 0:
        return [], [f"{smi} exited with status {done.returncode} (no driver loaded, or no GPU)"]
    gpus, bad = [], 0
    for line in done.stdout[:_MAX_SMI_BYTES].decode("utf-8", "replace").splitlines()[:_MAX_NODES]:
        name, _, cap = line.rpartition(",")
        name, cap = name.strip(), cap.strip()
        if _GPU_NAME.match(name) and _COMPUTE_CAP.match(cap):
            gpus.append(NvidiaGpu(name, cap, "nvidia-smi --query-gpu=name,compute_cap"))
        elif line.strip():
            bad += 1
    return gpus, ([f"{bad} nvidia-smi line(s) not understood"] if bad else [])


def _proc_driver_gpus(root: Path) -> list[NvidiaGpu]:
    """NVIDIA's kernel driver lists each card under /proc/driver/nvidia/gpus/<bus id>/information."""
    folder = root / "proc/driver/nvidia/gpus"
    try:
        entries = sorted(os.listdir(folder))[:_MAX_NODES]
    except OSError:
        return []
    gpus = []
    for entry in entries:
        raw = _read_bounded(folder / entry / "information") or b""
        model = next((line.split(":", 1)[1].strip() for line in raw.decode("ascii", "replace").splitlines()
                      if line.startswith("Model:")), "")
        gpus.append(NvidiaGpu(model if _GPU_NAME.match(model) else "NVIDIA GPU", None,
                              f"/proc/driver/nvidia/gpus/{entry}/information"))
    return gpus


def _uevent(path: Path) -> dict[str, str]:
    raw = _read_bounded(path) or b""
    fields = {}
    for line in raw.decode("ascii", "replace").splitlines():
        match = _UEVENT_KEY.match(line.strip())
        if match:
            fields[match.group(1)] = match.group(2)
    return fields


def detect_render_nodes(root: Path) -> tuple[RenderNode, ...]:
    """/sys/class/drm/renderD*/device/uevent (DRIVER=, OF_COMPATIBLE_0=), and Arm's vendor mali0."""
    found = []
    drm = root / "sys/class/drm"
    try:
        names = sorted(name for name in os.listdir(drm) if _RENDER_NODE.match(name))[:_MAX_NODES]
    except OSError:
        names = []
    places = [(name, drm / name / "device/uevent") for name in names]
    places.append(("mali0", root / "sys/class/misc/mali0/device/uevent"))
    for name, uevent in places:
        fields = _uevent(uevent)
        driver = fields.get("DRIVER", "")
        if not driver:
            continue
        found.append(RenderNode(name, driver, fields.get("OF_COMPATIBLE_0", ""),
                                RENDER_DRIVERS.get(driver, f"GPU (driver {driver})")))
    return tuple(found)


def detect_gpus(root: Path = Path("/"), path: str | None = None) -> MachineGpus:
    """What the machine under `root` has; `path` is the PATH searched for nvidia-smi (None: os.environ's)."""
    root = Path(root)
    jetson, notes = detect_jetson(root)
    nvidia: list[NvidiaGpu] = []
    if jetson is None:  # a Jetson's nvidia-smi (JetPack 6) reports the same integrated GPU
        nvidia, smi_notes = _nvidia_smi(path)
        notes += smi_notes
        if not nvidia:
            nvidia = _proc_driver_gpus(root)
            if not nvidia:
                notes.append("no /proc/driver/nvidia/gpus")
    return MachineGpus(jetson, tuple(nvidia), detect_render_nodes(root), tuple(notes))


def find_nvcc(root: Path = Path("/"), path: str | None = None) -> Path | None:
    """nvcc on PATH, else where the CUDA toolkit installs it (JetPack leaves /usr/local/cuda/bin off PATH)."""
    found = shutil.which("nvcc", path=path)
    if found:
        return Path(found)
    for relative in ("usr/local/cuda/bin/nvcc",):
        candidate = Path(root) / relative
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None
