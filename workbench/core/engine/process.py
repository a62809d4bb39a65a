"""The engine process's main loop: one request at a time from the pipe, events back."""

from __future__ import annotations

import os
import signal
from multiprocessing.connection import Connection
from typing import Any

from workbench.core.engine.child_process import SharedFlag, child_connection
from workbench.core.engine.events import EngineFailed
from workbench.core.engine.log_capture import LlamaLog
from workbench.core.engine.model_runner import ModelRunner
from workbench.core.engine.protocol import ChatRequest, LoadRequest, RunOpRequest, ShutdownRequest, UnloadRequest
from workbench.core.engine.sequence_events import SamplesRequest, SequencesOpen


def child_main(argv: list[str]) -> None:
    """The engine process's entry (see child_process.start_child): [pipe fd, cancel flag fd, log path]."""
    conn, (flag_fd, log_path) = child_connection(argv)
    serve(conn, SharedFlag(int(flag_fd)), log_path)


def serve(conn: Connection, cancel_flag: Any, log_path: str) -> None:
    """Run until the client says shut down or goes away (its end of the pipe closes).

    Requests are handled strictly one after another on this thread, so calls into llama.cpp
    never overlap. Only the cancel flag (a shared ctypes bool) is shared, and only read here.
    """
    # Ctrl-C in a terminal goes to the whole process group; the client decides what it means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    # ggml's assertions and llama-cpp-python's prints bypass the log callback: catch them too.
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    log = LlamaLog(log_fd)
    log.install()

    runner = ModelRunner(log, lambda: cancel_flag.value, conn.send)
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                break
            if isinstance(request, ShutdownRequest):
                break
            try:
                if isinstance(_dispatch(runner, request, conn), ShutdownRequest):
                    break  # it arrived while serving sequences
            except (BrokenPipeError, EOFError):
                break
            except Exception as error:  # noqa: BLE001 - one bad request must not end the engine
                log.write_note(f"request {type(request).__name__} failed: {error!r}")
                conn.send(EngineFailed("request", f"the engine could not handle the request: {error}", log.tail()))
    finally:
        runner.unload(quiet=True)


def _dispatch(runner: Any, request: object, conn: Connection) -> object | None:
    if isinstance(request, LoadRequest):
        runner.load(request)
    elif isinstance(request, ChatRequest):
        runner.chat(request)
    elif isinstance(request, UnloadRequest):
        runner.unload()
    elif isinstance(request, RunOpRequest):
        runner.run_op(request)
    elif isinstance(request, SamplesRequest):
        runner.sample_n(request)
    elif isinstance(request, SequencesOpen):
        # Serving mode reads its own requests (submit, cancel, close) from the pipe between steps.
        return runner.serve_sequences(request, conn.recv, lambda: conn.poll(0))
    else:
        raise TypeError(f"unknown request {type(request).__name__}")
