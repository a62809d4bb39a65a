"""llama.cpp's log, captured inside the engine process: written to the engine's log file, tail kept."""

from __future__ import annotations

import ctypes
import os
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workbench.core.engine.events import DeviceBuffers
from workbench.core.engine.log_files import MAX_LOG_FILE_BYTES
from workbench.core.units import MIB

# ggml.h `enum ggml_log_level`
LOG_LEVEL_DEBUG = 1  # graph-building chatter, hundreds of lines per context: dropped, as llama-server does
LOG_LEVEL_INFO = 2
# llama-model-loader.cpp logs each tensor a tensor_buft_override moves at DEBUG level; those are kept
_KEPT_DEBUG = " buffer type overridden to "
LOG_LEVEL_WARN = 3
LOG_LEVEL_ERROR = 4
LOG_LEVEL_CONT = 5  # continues the previous line (the loading progress dots use it)

# llama.cpp prints one line per backend buffer it allocates, e.g.
#   load_tensors:   CPU_Mapped model buffer size =    98.00 MiB
#   llama_kv_cache:        CPU KV buffer size =    45.00 MiB
#   llama_context:        CPU  output buffer size =     0.19 MiB
#   llama_context:        CPU compute buffer size =   104.00 MiB
_BUFFER_LINE = re.compile(r"(\S+)\s+(model|KV|RS|output|compute) buffer size =\s*([0-9.]+) MiB")
@dataclass(frozen=True)
class BufferSizes:
    """Bytes llama.cpp said it allocated, summed over backends (CPU, CPU_Mapped, CPU_REPACK, ...)."""

    model_bytes: int = 0
    kv_bytes: int = 0  # KV cache (attention layers)
    output_bytes: int = 0
    compute_bytes: int = 0
    rs_bytes: int = 0  # recurrent state (llama.cpp's "RS buffer"): models with recurrent layers


# A backend buffer's name -> the device it lives on: CPU_Mapped, CPU_REPACK and the pinned
# host buffers of a GPU backend (CUDA_Host, Vulkan_Host) are host RAM; RPC buffers are named
# "RPC<n>[host:port]" (ggml-rpc.cpp, the buffer type's name).
_RPC_BUFFER = re.compile(r"^(RPC\d+)\[([^\]]*)\]$")


def buffer_device(buffer_name: str) -> tuple[str, str]:
    """(device name, endpoint) of a llama.cpp buffer name; endpoint is "" except for RPC nodes."""
    rpc = _RPC_BUFFER.match(buffer_name)
    if rpc:
        return rpc.group(1), rpc.group(2)
    if buffer_name.startswith("CPU") or buffer_name.endswith("_Host"):
        return "CPU", ""
    return buffer_name, ""


def parse_device_buffers(lines: Iterable[str], rpc_endpoints: tuple[str, ...] = ()) -> tuple[DeviceBuffers, ...]:
    """llama.cpp's buffer lines summed per device: the host ("CPU") first, the RPC nodes in `rpc_endpoints`
    order, then the rest (GPUs) in order of appearance.

    An RPC buffer's name carries the node's own device index ("RPC0[host:port]" on every
    single-device node); the node is named here as llama.cpp's device list names it: RPC<i>
    for the i-th endpoint given.
    """
    totals: dict[tuple[str, str], dict[str, float]] = {("CPU", ""): {}}
    for line in lines:
        for match in _BUFFER_LINE.finditer(line):
            name, endpoint = buffer_device(match.group(1))
            if endpoint in rpc_endpoints:
                name = f"RPC{rpc_endpoints.index(endpoint)}"
            kind = match.group(2).lower()
            kind = "kv" if kind == "rs" else kind
            sizes = totals.setdefault((name, endpoint), {})
            sizes[kind] = sizes.get(kind, 0.0) + float(match.group(3))

    def order(key: tuple[str, str]) -> tuple[int, int]:
        if key[0] == "CPU":
            return (0, 0)
        return (1, rpc_endpoints.index(key[1])) if key[1] in rpc_endpoints else (2, 0)

    return tuple(
        DeviceBuffers(name, endpoint, *(round(sizes.get(kind, 0.0) * MIB) for kind in ("model", "kv", "compute", "output")))
        for (name, endpoint), sizes in sorted(totals.items(), key=lambda item: order(item[0]))
    )


def parse_buffer_sizes(lines: Iterable[str]) -> BufferSizes:
    """Sum llama.cpp's "<backend> <kind> buffer size = X MiB" lines by kind."""
    totals = {"model": 0.0, "kv": 0.0, "output": 0.0, "compute": 0.0, "rs": 0.0}
    for line in lines:
        for match in _BUFFER_LINE.finditer(line):
            totals[match.group(2).lower()] += float(match.group(3))
    return BufferSizes(*(round(totals[key] * MIB) for key in ("model", "kv", "output", "compute", "rs")))


class LlamaLog:
    """Receives llama.cpp's log through `llama_log_set`.

    Every byte goes to `log_fd` (the engine's log file, which also receives the process's
    stderr), so the client can read the tail even after the process died. Complete lines are
    kept in memory too: a tail for error reports, and a capture window for parsing a load.
    Past `max_file_bytes` the file starts again from empty (with a note), so a long session
    never fills the disk and the file's tail is always the latest lines.
    """

    def __init__(self, log_fd: int, *, tail_lines: int = 400, max_file_bytes: int = MAX_LOG_FILE_BYTES) -> None:
        self._fd = log_fd
        self._max_file_bytes = max_file_bytes
        self._file_bytes = 0
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._partial = ""
        self._partial_level = 0
        self._last_level = 0
        self._capture: list[tuple[int, str]] | None = None
        self.on_continue: Callable[[str], None] | None = None  # told about CONT fragments (progress dots)
        self.on_line: Callable[[int, str], None] | None = None  # told about every complete line
        self._callback = None  # the ctypes callback must outlive its registration

    def install(self) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        self._callback = llama_cpp.llama_log_callback(self._receive)
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def write_note(self, text: str) -> None:
        """A line of the engine's own, kept with llama.cpp's so a failure report shows it."""
        self._feed(LOG_LEVEL_WARN, f"workbench engine: {text}\n")

    def tail(self, n_lines: int = 30) -> tuple[str, ...]:
        lines = list(self._tail)
        if self._partial.strip():
            lines.append(self._partial.rstrip("\n"))
        return tuple(lines[-n_lines:])

    def start_capture(self) -> None:
        self._capture = []

    def stop_capture(self) -> tuple[tuple[int, str], ...]:
        captured = tuple(self._capture or ())
        self._capture = None
        return captured

    def _receive(self, level: int, text: bytes | None, _user_data: ctypes.c_void_p) -> None:
        # An exception must never unwind through llama.cpp's C frames: swallow and go on.
        try:
            if text:
                self._feed(level, text.decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - see above
            pass

    def _feed(self, level: int, text: str) -> None:
        if level == LOG_LEVEL_DEBUG and _KEPT_DEBUG in text:
            level = LOG_LEVEL_INFO  # where a preset's tensor overrides (n_cpu_moe) put each tensor: a few lines
        if level == LOG_LEVEL_DEBUG or (level == LOG_LEVEL_CONT and self._last_level == LOG_LEVEL_DEBUG):
            if level == LOG_LEVEL_DEBUG:
                self._last_level = level
            return
        self._write_file(text.encode("utf-8", errors="replace"))
        if level == LOG_LEVEL_CONT:
            level = self._last_level
            if self.on_continue is not None:
                self.on_continue(text)
        else:
            self._last_level = level
        if not self._partial:
            self._partial_level = level
        self._partial += text
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self._keep(self._partial_level, line)
            self._partial_level = level

    def _write_file(self, data: bytes) -> None:
        try:
            if self._file_bytes + len(data) > self._max_file_bytes:
                os.ftruncate(self._fd, 0)  # O_APPEND: the next write lands at the new end
                note = f"workbench engine: the log passed {self._max_file_bytes >> 20} MiB and restarted here\n"
                self._file_bytes = os.write(self._fd, note.encode())
            self._file_bytes += os.write(self._fd, data)
        except OSError:
            pass

    def _keep(self, level: int, line: str) -> None:
        if not line.strip() or set(line.strip()) == {"."}:
            return  # progress dots are not worth a tail line
        self._tail.append(line)
        if self._capture is not None:
            self._capture.append((level, line))
        if self.on_line is not None:
            self.on_line(level, line)
