"""llama.cpp's quantizer, run in the current process (the engine's, or a quantize process)."""

from __future__ import annotations

import ctypes
import os
import re
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from workbench.core.engine.child_process import child_connection
from workbench.core.engine.log_capture import LOG_LEVEL_ERROR, LlamaLog

# llama-quant.cpp starts each tensor's line with "[  12/ 272] blk.0.attn_q.weight ..."
_TENSOR_LINE = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]")


class QuantizeFailed(Exception):
    def __init__(self, message: str, log_tail: tuple[str, ...]) -> None:
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail


def quantize_here(
    src: Path, out: Path, ftype_id: int, log: LlamaLog, on_progress: Callable[[float], None] | None = None
) -> None:
    """`llama_model_quantize(src, out)` to llama_ftype `ftype_id`; QuantizeFailed with the log's words."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype_id
    params.allow_requantize = True  # the caller has already warned about re-quantizing
    params.nthread = 0  # llama.cpp: hardware concurrency

    def progress(_level: int, line: str) -> None:
        match = _TENSOR_LINE.match(line)
        if match and on_progress is not None:
            done, total = int(match.group(1)), int(match.group(2))
            on_progress(min(1.0, done / max(1, total)))

    log.on_line = progress
    log.start_capture()
    try:
        status = llama_cpp.llama_model_quantize(str(src).encode(), str(out).encode(), ctypes.byref(params))
    finally:
        log.on_line = None
        captured = log.stop_capture()
    if status != 0:
        errors = [line.strip() for level, line in captured if level == LOG_LEVEL_ERROR and line.strip(" =")]
        detail = " ".join(errors[-4:]) or f"status {status}"
        raise QuantizeFailed(f"llama.cpp's quantizer failed on {src.name}: {detail}", log.tail())


def child_main(argv: list[str]) -> None:
    """The quantize process's entry (see child_process.start_child): [pipe fd, src, out, ftype id, log path]."""
    conn, (src, out, ftype_id, log_path) = child_connection(argv)
    worker_main(conn, src, out, int(ftype_id), log_path)


def worker_main(conn: Connection, src: str, out: str, ftype_id: int, log_path: str) -> None:
    """Entry point of a quantize process: reports ("progress", f), then ("done",) or ("failed", msg, tail)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop us
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log_fd, 2)  # ggml's asserts print to stderr, not through the log callback
    log = LlamaLog(log_fd)
    log.install()
    last = [-1.0]

    def progress(fraction: float) -> None:
        if fraction - last[0] >= 0.01 or fraction >= 1.0:
            last[0] = fraction
            conn.send(("progress", fraction))

    try:
        quantize_here(Path(src), Path(out), ftype_id, log, progress)
    except QuantizeFailed as failure:
        conn.send(("failed", failure.message, failure.log_tail))
    except Exception as error:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("failed", f"quantizing failed: {error}", log.tail()))
    else:
        conn.send(("done",))
    finally:
        conn.close()
