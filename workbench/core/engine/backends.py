"""The backends and devices of the llama.cpp that llama-cpp-python loads: ggml's registry, through ctypes.

Bound on the libggml and libggml-base files libllama is linked against (see rpc/library.py:
another copy of ggml would be a second, empty registry).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from workbench.core.rpc.library import linked_paths

# enum ggml_backend_dev_type (ggml-backend.h)
DEVICE_KINDS = {0: "CPU", 1: "GPU", 2: "IGPU", 3: "ACCEL"}
GPU_BACKENDS = ("CUDA", "Vulkan", "Metal", "SYCL", "HIP", "MUSA", "OpenCL", "CANN")
_MAX_BACKENDS = 64
_MAX_DEVICES = 256
_MAX_TEXT = 256


@dataclass(frozen=True)
class BackendDevice:
    """One device of a backend as ggml reports it; memory None when the backend reports none."""

    name: str  # "CPU", "CUDA0", "Vulkan0"
    description: str
    kind: str  # "CPU", "GPU", "IGPU", "ACCEL"
    free_bytes: int | None
    total_bytes: int | None


@dataclass(frozen=True)
class Backend:
    name: str  # "CPU", "CUDA", "RPC", ...
    devices: tuple[BackendDevice, ...]


@dataclass(frozen=True)
class LoadedBackends:
    """What the loaded llama.cpp can run on; `available` False says why in `reason`."""

    available: bool
    reason: str
    backends: tuple[Backend, ...] = ()
    library: str = ""  # the libggml holding the registry
    version: str = ""  # llama-cpp-python's

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(backend.name for backend in self.backends)

    def has(self, name: str) -> bool:
        return any(backend.name.lower() == name.lower() for backend in self.backends)

    @property
    def gpu_devices(self) -> tuple[BackendDevice, ...]:
        """Devices layers can be offloaded to on this machine: GPU backends' devices (RPC nodes are not counted)."""
        return tuple(device for backend in self.backends if backend.name in GPU_BACKENDS for device in backend.devices)


def _text(raw: bytes | None) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in (raw or b"")[:_MAX_TEXT].decode("utf-8", "replace"))


def _bind(library: ctypes.CDLL, name: str, argtypes: list, restype: object):
    function = getattr(library, name)
    function.argtypes = argtypes
    function.restype = restype
    return function


def read_registry(libggml: str, libggml_base: str) -> tuple[Backend, ...]:
    """Every registered backend and its devices (ggml_backend_reg_* / ggml_backend_dev_*)."""
    ggml = ctypes.CDLL(libggml, mode=ctypes.RTLD_GLOBAL)
    base = ctypes.CDLL(libggml_base, mode=ctypes.RTLD_GLOBAL)
    pointer, size, text = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    reg_count = _bind(ggml, "ggml_backend_reg_count", [], size)
    reg_get = _bind(ggml, "ggml_backend_reg_get", [size], pointer)
    reg_name = _bind(base, "ggml_backend_reg_name", [pointer], text)
    reg_dev_count = _bind(base, "ggml_backend_reg_dev_count", [pointer], size)
    reg_dev_get = _bind(base, "ggml_backend_reg_dev_get", [pointer, size], pointer)
    dev_name = _bind(base, "ggml_backend_dev_name", [pointer], text)
    dev_description = _bind(base, "ggml_backend_dev_description", [pointer], text)
    dev_type = _bind(base, "ggml_backend_dev_type", [pointer], ctypes.c_int)
    dev_memory = _bind(base, "ggml_backend_dev_memory", [pointer, ctypes.POINTER(size), ctypes.POINTER(size)], None)
    backends = []
    for index in range(min(reg_count(), _MAX_BACKENDS)):
        reg = reg_get(index)
        if not reg:
            continue
        devices = []
        for number in range(min(reg_dev_count(reg), _MAX_DEVICES)):
            device = reg_dev_get(reg, number)
            if not device:
                continue
            free, total = size(0), size(0)
            dev_memory(device, ctypes.byref(free), ctypes.byref(total))
            kind = DEVICE_KINDS.get(dev_type(device), f"type {dev_type(device)}")
            devices.append(BackendDevice(_text(dev_name(device)), _text(dev_description(device)), kind,
                                         free.value if total.value else None, total.value or None))
        backends.append(Backend(_text(reg_name(reg)), tuple(devices)))
    return tuple(backends)


@functools.cache
def loaded_backends() -> LoadedBackends:
    """Read once per process, after importing llama_cpp (which loads the libraries)."""
    try:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    except Exception as error:  # noqa: BLE001 - an unimportable build is reported, not raised
        return LoadedBackends(False, f"llama-cpp-python cannot be imported ({error})")
    try:
        version = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        version = getattr(llama_cpp, "__version__", "")
    libllama = Path(llama_cpp.__file__).parent / "lib" / "libllama.so"
    if not libllama.is_file():
        return LoadedBackends(False, f"llama-cpp-python has no {libllama}", version=version)
    paths = linked_paths(libllama, ("libggml", "libggml-base"))
    if not all(paths.values()):
        return LoadedBackends(False, f"{libllama} is not linked against libggml and libggml-base (ldd)", version=version)
    try:
        backends = read_registry(paths["libggml"], paths["libggml-base"])
    except (OSError, AttributeError) as error:
        return LoadedBackends(False, f"ggml's backend registry cannot be read ({error})", version=version)
    return LoadedBackends(True, "", backends, paths["libggml"], version)
