"""The RPC backend in the llama.cpp that llama-cpp-python built: is it there, and its C functions.

The wheel holds copies, not symlinks, of each library (`libggml.so`, `libggml.so.0`, ...).
Only the files `libllama` is linked against (their sonames, as `ldd` resolves them) share
llama.cpp's backend registry: a device registered through another copy would be invisible
to it. So the libraries are found through `ldd` on the wheel's `libllama.so`, and ctypes
opens exactly those paths (dlopen returns the handle already loaded by llama_cpp).
"""

from __future__ import annotations

import ctypes
import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError

REINSTALL_COMMAND = 'CMAKE_ARGS="-DGGML_RPC=on" pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python'
_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)\s+\(0x[0-9a-f]+\)", re.MULTILINE)

# enum ggml_backend_dev_type (ggml-backend.h)
DEVICE_TYPE_CPU = 0
DEVICE_TYPE_GPU = 1
DEVICE_TYPE_IGPU = 2
DEVICE_TYPE_ACCEL = 3


@dataclass(frozen=True)
class RpcSupport:
    """Whether this llama-cpp-python can use RPC nodes, and the library files that say so."""

    available: bool
    reason: str  # one line when not available, naming the reinstall command
    libllama: str = ""
    libggml: str = ""  # holds the backend registry (ggml_backend_register)
    libggml_base: str = ""  # devices and buffers (ggml_backend_dev_*)
    libggml_rpc: str = ""


def _not_available(reason: str) -> RpcSupport:
    return RpcSupport(False, f"{reason}; rebuild it with the RPC backend: {REINSTALL_COMMAND}")


def _linked_libraries(libllama: Path) -> dict[str, str]:
    """soname -> resolved path, as the dynamic linker resolves libllama's dependencies."""
    try:
        out = subprocess.run(["ldd", str(libllama)], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {name: path for name, path in _LDD_LINE.findall(out)}


def _find(linked: dict[str, str], stem: str) -> str:
    for name, path in linked.items():
        if name == f"{stem}.so" or name.startswith(f"{stem}.so."):
            return path
    return ""


def linked_paths(libllama: Path, stems: tuple[str, ...]) -> dict[str, str]:
    """stem -> the file libllama is linked against (ldd), "" for a stem it does not link."""
    linked = _linked_libraries(libllama)
    return {stem: _find(linked, stem) for stem in stems}


@functools.cache
def rpc_support() -> RpcSupport:
    """Checked once per process: llama_cpp imports, says it supports RPC, and links libggml-rpc."""
    try:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    except Exception as error:  # noqa: BLE001 - an unimportable build is reported, not raised
        return RpcSupport(False, f"llama-cpp-python cannot be imported ({error})")
    supports = getattr(llama_cpp, "llama_supports_rpc", None)
    if supports is None or not supports():
        return _not_available("this llama-cpp-python was built without llama.cpp's RPC backend (llama_supports_rpc() is false)")
    libllama = Path(llama_cpp.__file__).parent / "lib" / "libllama.so"
    if not libllama.is_file():
        return _not_available(f"llama-cpp-python has no {libllama}")
    paths = linked_paths(libllama, ("libggml", "libggml-base", "libggml-rpc"))
    missing = [f"{stem}.so" for stem, path in paths.items() if not path]
    if missing:
        return _not_available(f"{libllama.name} is not linked against {', '.join(missing)} (ldd)")
    return RpcSupport(True, "", str(libllama), paths["libggml"], paths["libggml-base"], paths["libggml-rpc"])


def require_rpc() -> RpcSupport:
    """RpcSupport when available; WorkbenchError (one line with the reinstall command) otherwise."""
    support = rpc_support()
    if not support.available:
        raise WorkbenchError(support.reason)
    return support


class GgmlRpc:
    """The C functions the node server and the engine call, bound on the libraries libllama links."""

    def __init__(self, support: RpcSupport) -> None:
        rpc = ctypes.CDLL(support.libggml_rpc, mode=ctypes.RTLD_GLOBAL)
        ggml = ctypes.CDLL(support.libggml, mode=ctypes.RTLD_GLOBAL)
        base = ctypes.CDLL(support.libggml_base, mode=ctypes.RTLD_GLOBAL)
        pointer, size, text = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        # ggml-rpc.h, ggml-backend.h of the installed llama.cpp (checked with nm -D on the wheel's libraries)
        self.start_server = _bind(rpc, "ggml_backend_rpc_start_server", [text, text, size, size, ctypes.POINTER(pointer)], None)
        self.add_server = _bind(rpc, "ggml_backend_rpc_add_server", [text], pointer)
        self.register = _bind(ggml, "ggml_backend_register", [pointer], None)
        self.dev_count = _bind(ggml, "ggml_backend_dev_count", [], size)
        self.dev_get = _bind(ggml, "ggml_backend_dev_get", [size], pointer)
        self.dev_name = _bind(base, "ggml_backend_dev_name", [pointer], text)
        self.dev_description = _bind(base, "ggml_backend_dev_description", [pointer], text)
        self.dev_type = _bind(base, "ggml_backend_dev_type", [pointer], ctypes.c_int)

    def devices(self) -> list[tuple[int, str, str, int]]:
        """(handle, name, description, type) of every device llama.cpp's registry holds."""
        out = []
        for index in range(self.dev_count()):
            handle = self.dev_get(index)
            out.append((handle, (self.dev_name(handle) or b"").decode(), (self.dev_description(handle) or b"").decode(),
                        self.dev_type(handle)))
        return out


def _bind(library: ctypes.CDLL, name: str, argtypes: list, restype: object) -> object:
    function = getattr(library, name)
    function.argtypes = argtypes
    function.restype = restype
    return function


@functools.cache
def ggml_rpc() -> GgmlRpc:
    """The bound functions (WorkbenchError naming the reinstall command when the backend is missing)."""
    return GgmlRpc(require_rpc())
