"""Does the loaded llama.cpp use what this machine has? One line per mismatch, with the command that rebuilds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.core.config.build_choice import BACKEND_VARIABLE, BuildChoice, choose_build, gpu_words, rebuild_command
from workbench.core.config.gpu_hardware import MachineGpus
from workbench.core.engine.backends import LoadedBackends

_BACKEND_NAMES = {"cuda": "CUDA", "vulkan": "Vulkan"}


@dataclass(frozen=True)
class Mismatch:
    message: str
    fix: str

    @property
    def line(self) -> str:
        return f"mismatch: {self.message}: {self.fix}"


@dataclass(frozen=True)
class BackendCheck:
    choice: BuildChoice  # what the install would build here now
    mismatches: tuple[Mismatch, ...]
    notes: tuple[str, ...]  # not mismatches: what is there and deliberately not used


def _requirement(loaded: LoadedBackends) -> str:
    return f"llama-cpp-python=={loaded.version}" if loaded.version else "llama-cpp-python"


def check_backends(loaded: LoadedBackends, gpus: MachineGpus, nvcc: Path | None, env: Mapping[str, str],
                   *, path_has_nvcc: bool = True) -> BackendCheck:
    """Compare ggml's registered backends with the machine's GPUs and the build the install would choose."""
    choice = choose_build(gpus, nvcc, env, path_has_nvcc=path_has_nvcc)
    requirement = _requirement(loaded)
    mismatches: list[Mismatch] = []
    notes: list[str] = []
    if choice.error:
        mismatches.append(Mismatch(f"the build for this machine cannot be chosen ({choice.error})",
                                   f"fix {BACKEND_VARIABLE} or CMAKE_ARGS"))
        return BackendCheck(choice, tuple(mismatches), ())
    if not loaded.available:
        mismatches.append(Mismatch(loaded.reason, f"rebuild it: {rebuild_command(choice, requirement)}"))
        return BackendCheck(choice, tuple(mismatches), ())
    have = ", ".join(loaded.names) or "no backend"
    wanted = _BACKEND_NAMES.get(choice.backend)
    if wanted and not loaded.has(wanted):
        if env.get(BACKEND_VARIABLE):
            what = f"{BACKEND_VARIABLE}={env[BACKEND_VARIABLE]} asks for {wanted}"
        else:
            what = f"this machine has {gpu_words(gpus, sources=False)} and nvcc"
        mismatches.append(Mismatch(f"{what}, but the loaded llama.cpp has only {have}, so every layer runs on the CPU",
                                   f"rebuild with {rebuild_command(choice, requirement)}"))
    if not loaded.has("RPC"):
        mismatches.append(Mismatch(f"the loaded llama.cpp has {have}, no RPC backend: `workbench node` and --rpc cannot work",
                                   f"rebuild with {rebuild_command(choice, requirement)}"))
    if gpus.has_cuda_gpu and nvcc is None and not loaded.has("CUDA"):
        cuda = choose_build(gpus, Path("/usr/local/cuda/bin/nvcc"), {**env, BACKEND_VARIABLE: "cuda"})
        mismatches.append(Mismatch(f"this machine has {gpu_words(gpus, sources=False)} but no nvcc, and the loaded "
                                   f"llama.cpp has only {have}", f"install the CUDA toolkit, then rebuild with "
                                   f"{rebuild_command(cuda, requirement)}"))
    for backend in loaded.backends:
        if backend.name in ("CUDA", "Vulkan") and not backend.devices:
            mismatches.append(Mismatch(f"the loaded llama.cpp has {backend.name} but sees no {backend.name} device",
                                       "check the GPU driver (nvidia-smi, vulkaninfo); llama.cpp runs on the CPU meanwhile"))
    for node in gpus.render_nodes:
        if not loaded.has("Vulkan"):
            notes.append(f"{node.kind} at {node.node}: not used, no Vulkan backend ({node.vulkan_note})")
    return BackendCheck(choice, tuple(mismatches), tuple(notes))
