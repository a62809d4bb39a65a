"""Which llama.cpp backend to build for this machine, why, and the pip command that builds it.

Standard library only: `install.py` runs it before the package is installed. CUDA is chosen
when the machine has an NVIDIA GPU (a Jetson's or a card) and the CUDA compiler; the CPU
otherwise; RPC always. Vulkan is never chosen by itself: on the boards this workbench targets it
runs slower than the CPU (Mali) or not at all (V3D), see gpu_hardware.VULKAN_NOTES;
`WORKBENCH_BACKEND=vulkan` asks for it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.core.config.gpu_hardware import MachineGpus

BACKEND_VARIABLE = "WORKBENCH_BACKEND"
BACKENDS = ("cpu", "cuda", "vulkan")
LLAMA_REQUIREMENT = "llama-cpp-python>=0.3.36,<0.3.37"  # as pyproject.toml pins it
# The libraries a llama-cpp-python wheel holds per backend (llama_cpp/lib/libggml-<name>.so).
BACKEND_LIBRARIES = {"cpu": "libggml-cpu.so", "cuda": "libggml-cuda.so", "vulkan": "libggml-vulkan.so",
                     "rpc": "libggml-rpc.so"}
_CMAKE_ARG = re.compile(r"^-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=[A-Za-z0-9_.;,:/+-]*$")


@dataclass(frozen=True)
class BuildChoice:
    """The backend chosen, the CMake arguments that build it, the environment they need, and why."""

    backend: str  # "cpu", "cuda" or "vulkan"
    cmake_args: tuple[str, ...]  # ours first, then the user's own CMAKE_ARGS (later -D wins in CMake)
    env: tuple[tuple[str, str], ...]  # besides CMAKE_ARGS: CUDACXX when nvcc is not on PATH
    reasons: tuple[str, ...]
    error: str = ""  # non-empty: this choice cannot be built as asked (one line, with the fix)

    @property
    def wanted_libraries(self) -> frozenset[str]:
        """The backends the built llama.cpp must have: the chosen one (the CPU's is always there) and RPC."""
        return frozenset({"cpu", "rpc", self.backend})

    @property
    def cmake_args_text(self) -> str:
        return " ".join(self.cmake_args)


def user_cmake_args(env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """The user's own CMAKE_ARGS, split as a shell would, each a -DNAME=value; (args, error)."""
    text = env.get("CMAKE_ARGS", "").strip()
    if not text:
        return (), ""
    try:
        words = shlex.split(text)
    except ValueError as error:
        return (), f"CMAKE_ARGS cannot be split as a shell would ({error})"
    bad = [word for word in words if not _CMAKE_ARG.match(word)]
    if bad:
        return (), f"CMAKE_ARGS holds {bad[0]!r}, not a -DNAME=value CMake definition"
    return tuple(words), ""


def gpu_words(gpus: MachineGpus, *, sources: bool = True) -> str:
    """"a Jetson Orin GPU (...)" / "an NVIDIA GPU: ..." for a machine that has one."""
    if gpus.jetson is not None:
        arch = f"CUDA architecture {gpus.jetson.cuda_arch}" if gpus.jetson.cuda_arch else "CUDA architecture unknown"
        return f"a Jetson {gpus.jetson.family} GPU ({gpus.jetson.source + ', ' if sources else ''}{arch})"
    names = ", ".join(f"{gpu.name}" + (f" (compute {gpu.compute_cap})" if gpu.compute_cap else "") for gpu in gpus.nvidia)
    return f"an NVIDIA GPU: {names}" + (f" ({gpus.nvidia[0].source})" if sources else "")


# x86 /proc/cpuinfo flag -> the ggml option that compiles for it without -march=native (ggml-cpu/CMakeLists.txt)
_X86_OPTIONS = (("sse4_2", "GGML_SSE42"), ("f16c", "GGML_F16C"), ("fma", "GGML_FMA"), ("bmi2", "GGML_BMI2"),
                ("avx", "GGML_AVX"), ("avx2", "GGML_AVX2"), ("avx_vnni", "GGML_AVX_VNNI"), ("avx512f", "GGML_AVX512"),
                ("avx512vbmi", "GGML_AVX512_VBMI"), ("avx512_vnni", "GGML_AVX512_VNNI"),
                ("avx512_bf16", "GGML_AVX512_BF16"))


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first `flags` line of /proc/cpuinfo (x86); empty where there is none (Arm says `Features`)."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def without_amx(flags: frozenset[str]) -> tuple[str, ...]:
    """CMake arguments for a CPU with AMX: -march=native would compile ggml-cpu's AMX buffer, which takes the
    weights its kernel has and then crashes llama.cpp 0c1e570 (a segfault loading SmolLM2 Q4_1, whose token
    embedding it takes; an assert in ggml-backend.cpp at every MLA file's permuted attn_k_b product). The same
    instruction sets named one by one, AMX left out; () for a CPU without AMX."""
    if "amx_int8" not in flags:
        return ()
    return ("-DGGML_NATIVE=OFF",) + tuple(f"-D{option}=ON" for flag, option in _X86_OPTIONS if flag in flags)


def choose_build(gpus: MachineGpus, nvcc: Path | None, env: Mapping[str, str], *, path_has_nvcc: bool = True,
                 flags: frozenset[str] = frozenset()) -> BuildChoice:
    """The build for this machine, or for the backend `WORKBENCH_BACKEND` names; `flags` are its CPU's."""
    reasons: list[str] = []
    user, user_error = user_cmake_args(env)
    override = env.get(BACKEND_VARIABLE, "").strip().lower()
    if override and override not in BACKENDS:
        return BuildChoice("cpu", (), (), (), f"{BACKEND_VARIABLE}={override!r} is not one of {', '.join(BACKENDS)}")
    if user_error:
        return BuildChoice("cpu", (), (), (), user_error)
    if override:
        backend = override
        reasons.append(f"{BACKEND_VARIABLE}={override} asks for it")
    elif gpus.has_cuda_gpu and nvcc is not None:
        backend = "cuda"
        reasons.append(f"this machine has {gpu_words(gpus)} and the CUDA compiler ({nvcc})")
    else:
        backend = "cpu"
        if gpus.has_cuda_gpu:
            reasons.append(f"this machine has {gpu_words(gpus)} but no CUDA compiler (nvcc not on PATH, "
                           "no /usr/local/cuda/bin/nvcc): install the CUDA toolkit to use the GPU")
        else:
            reasons.append(f"no Jetson and no NVIDIA GPU ({'; '.join(gpus.notes)})")
            if nvcc is not None:
                reasons.append(f"nvcc is there ({nvcc}) but there is no GPU for it")
    for node in gpus.render_nodes:
        reasons.append(f"{node.kind} at {node.node}: no Vulkan ({node.vulkan_note}; {BACKEND_VARIABLE}=vulkan "
                       "builds it)")
    args = ["-DGGML_RPC=on"]
    extra_env: list[tuple[str, str]] = []
    error = ""
    user_names = {word.split("=", 1)[0].split(":", 1)[0] for word in user}
    if backend == "cuda":
        args.append("-DGGML_CUDA=on")
        archs = gpus.cuda_archs
        if "-DCMAKE_CUDA_ARCHITECTURES" in user_names:
            reasons.append("CMAKE_CUDA_ARCHITECTURES from your CMAKE_ARGS")
        elif archs:
            args.append(f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}")
            reasons.append(f"CUDA architecture {';'.join(archs)} only (a build for every architecture takes far longer)")
        elif gpus.has_cuda_gpu:
            args.append("-DCMAKE_CUDA_ARCHITECTURES=native")
            reasons.append("CUDA architecture: native (the GPU's compute capability was not readable here)")
        else:
            error = ("no NVIDIA GPU found to build CUDA for: add its architecture, e.g. "
                     'CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=87" (Orin)')
        if nvcc is None:
            error = error or "no CUDA compiler (nvcc not on PATH, no /usr/local/cuda/bin/nvcc): install the CUDA toolkit"
        elif not path_has_nvcc:
            extra_env.append(("CUDACXX", str(nvcc)))
            reasons.append(f"CUDACXX={nvcc} (nvcc is not on PATH, so CMake would not find it)")
    elif backend == "vulkan":
        args.append("-DGGML_VULKAN=on")
    amx_free = without_amx(flags)
    if amx_free:
        args.extend(amx_free)
        reasons.append("the CPU has AMX: its instruction sets are named one by one, AMX left out (llama.cpp's AMX "
                       "buffer crashes it on SmolLM2 Q4_1 and on every MLA model)")
    if user:
        reasons.append(f"your CMAKE_ARGS added after ours: {' '.join(user)}")
    return BuildChoice(backend, tuple(args) + user, tuple(extra_env), tuple(reasons), error)


def rebuild_command(choice: BuildChoice, requirement: str = LLAMA_REQUIREMENT) -> str:
    """The one shell command that rebuilds llama-cpp-python with `choice` (no wheel from pip's cache)."""
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in choice.env)
    return (f"{env + ' ' if env else ''}CMAKE_ARGS=\"{choice.cmake_args_text}\" pip install "
            f"--force-reinstall --no-cache-dir --no-deps '{requirement}'")


def installed_backends(lib_dir: Path | None) -> frozenset[str] | None:
    """The backends a llama-cpp-python wheel's lib folder holds; None when there is no such folder."""
    if lib_dir is None or not lib_dir.is_dir():
        return None
    found = {name for name, library in BACKEND_LIBRARIES.items() if (lib_dir / library).exists()}
    if "cpu" in found and b"ggml_backend_amx_buffer_type" in (lib_dir / BACKEND_LIBRARIES["cpu"]).read_bytes():
        found.add("amx")  # its symbol is compiled only with AMX (ggml-cpu/amx/amx.cpp)
    return frozenset(found)
