"""The engine process and the pipe to it: start and close, one request's exchange, what a death means."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Iterator
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from workbench.core.engine.child_process import SharedFlag, start_child
from workbench.core.engine.events import EngineFailed, Loaded, TurnFinished, Unloaded
from workbench.core.engine.log_files import new_log_file
from workbench.core.engine.log_tail import describe_exit, exit_signal_name, read_log_tail
from workbench.core.engine.memory_limit import out_of_limit
from workbench.core.engine.protocol import OpFinished, ShutdownRequest
from workbench.core.engine.quantize import remove_partial_files
from workbench.core.engine.sequence_events import SamplesFinished
from workbench.core.rpc.failure import unreachable_nodes

_TERMINAL = (Loaded, TurnFinished, EngineFailed, Unloaded, OpFinished, SamplesFinished)
_LOG_TAIL_LINES = 30
_LOADING = "loading the model"
SERVING = "serving"
# A cancel is honoured within a token, or a graph node in prefill: an engine silent this long
# after one is stuck (a hung kernel, a stopped process) and is killed, so cancel always ends.
CANCEL_GRACE_S = 5.0
_WAKE_S = 0.25  # how often a blocked read looks for a cancel made meanwhile (another thread, a signal)


class EngineLink:
    """One engine process and its pipe; EngineClient builds its requests on it.

    The process starts on `start()` and stops on `close()`, or when the link is dropped
    (a finalizer reaps it). `_exchange()` sends one request and yields its events; when
    the process dies it yields EngineFailed with the exit signal and the last log lines.
    """

    def __init__(self) -> None:
        self._process: Any = None
        self._conn: Any = None
        self._cancel_flag: Any = None  # a shared byte: the engine polls it per graph node in prefill
        self._log_path: str | None = None
        self._lifecycle = threading.Lock()
        self._loaded: Loaded | None = None
        self._prediction = ""
        self._closing = False
        self._finalizer: weakref.finalize | None = None
        self._engine_rpc: tuple[str, ...] = ()  # RPC nodes the running engine registered (they stay registered)
        self.cancel_grace_s = CANCEL_GRACE_S
        self._cancel_due: float | None = None  # monotonic time by which the engine owes an answer to a cancel
        self._due_within_s = CANCEL_GRACE_S  # the grace that deadline came from, for the message
        self._killed_why = ""  # set when the client killed an engine that did not answer in time
        self._memory_limit_bytes = 0  # the running engine's RLIMIT_AS for its model (memory_limit), 0 = none

    # -- state -------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def loaded(self) -> Loaded | None:
        return self._loaded

    @property
    def log_path(self) -> str | None:
        """The engine's log file: llama.cpp's log and the process's stderr."""
        return self._log_path

    def log_tail(self, n_lines: int = _LOG_TAIL_LINES) -> tuple[str, ...]:
        return read_log_tail(self._log_path, n_lines) if self._log_path else ()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine process if it is not running (a dead one is cleaned up first)."""
        with self._lifecycle:
            if self.alive:
                return
            self._discard_process()
            # In the user's state folder, not the temp folder: a killed client leaves its log
            # behind, and the next start prunes it with the other old ones (log_files).
            log_path = new_log_file("engine")
            # A lock-free shared bool, not an Event: reading it costs the engine next to nothing.
            cancel_flag, flag_fd = SharedFlag.create()
            try:
                process, ours = start_child("workbench.core.engine.process", (str(flag_fd), log_path), log_path,
                                            pass_fds=(flag_fd,))
            finally:
                os.close(flag_fd)
            self._process, self._conn, self._cancel_flag, self._log_path = process, ours, cancel_flag, log_path
            self._closing = False
            self._killed_why = ""
            # A client dropped without close() (or an interpreter exiting) still stops its
            # engine and deletes the log.
            self._finalizer = weakref.finalize(self, _reap, process, ours, log_path)

    def close(self) -> None:
        """Stop the engine process (politely, then by force) and delete its log."""
        with self._lifecycle:
            self._closing = True
            self.cancel()
            if self._process is not None and self._process.is_alive():
                try:
                    self._conn.send(ShutdownRequest())
                except (OSError, ValueError):
                    pass
                self._process.join(timeout=5)
            self._discard_process()

    def _discard_process(self) -> None:
        process, conn, log_path = self._process, self._conn, self._log_path
        self._process = self._conn = self._cancel_flag = self._log_path = None
        self._loaded = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        _reap(process, conn, log_path)

    # -- cancelling --------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running generation (within a token; in prefill within a graph node). Thread-safe.

        An engine that has not answered within `cancel_grace_s` is killed: the running request
        ends with EngineFailed(kind="crash") saying so, and `start()` runs a fresh one.
        """
        flag = self._cancel_flag
        if flag is not None:
            flag.value = True
            self.answer_due(self.cancel_grace_s)

    def answer_due(self, within_s: float) -> None:
        """The engine must send something within `within_s` (sooner deadlines stand), or it is killed."""
        due = time.monotonic() + within_s
        if self._cancel_due is None or due < self._cancel_due:
            self._cancel_due, self._due_within_s = due, within_s

    # -- the pipe ----------------------------------------------------------------------------
    def _exchange(self, request: object, doing: str) -> Iterator[object]:
        """Send one request and yield its events up to the final one.

        If the caller stops iterating early, the request is cancelled and its remaining
        events are read and dropped, so the next request starts on a clean pipe.
        """
        self._cancel_flag.value = False  # cleared here, before sending: a cancel() after this counts
        self._cancel_due = None
        try:
            self._conn.send(request)
        except (OSError, ValueError):
            yield self._died(doing)
            return
        finished = False
        try:
            while True:
                event = self._receive(doing)
                finished = isinstance(event, _TERMINAL)
                yield event
                if finished:
                    return
        finally:
            if not finished:
                self.cancel()
                while not isinstance(self._receive(doing), _TERMINAL):
                    pass

    def _receive(self, doing: str) -> object:
        """The next event; EngineFailed when the process died, or was killed for leaving a cancel unanswered.

        Loading is not cancellable in llama.cpp, so no deadline applies to it.
        """
        conn, process = self._conn, self._process
        if conn is None or process is None:
            return self._died(doing)
        try:
            waitables = [conn] if process.sentinel is None else [conn, process.sentinel]
            while not wait(waitables, _WAKE_S):
                due = self._cancel_due
                if due is not None and doing != _LOADING and time.monotonic() >= due:
                    self._kill_unanswered(process, doing)
                    break
            if conn.poll():
                event = conn.recv()
                if doing == SERVING or isinstance(event, _TERMINAL):
                    # Answered: a request's cancel ends in its final event; in serving, the steps
                    # run between pipe reads, so any event after a cancel shows the engine reads it.
                    self._cancel_due = None
                return event
        except (EOFError, OSError, ValueError):
            pass
        return self._died(doing)

    def _kill_unanswered(self, process: Any, doing: str) -> None:
        self._killed_why = (f"the engine did not answer a cancel within {self._due_within_s:g} s while {doing}, "
                            "so it was killed")
        process.kill()  # SIGKILL: it ends a process that is stopped or stuck in native code alike

    def _died(self, doing: str) -> EngineFailed:
        process = self._process
        exitcode = None
        if process is not None:
            process.join(timeout=1.0)
            exitcode = process.exitcode
        tail = self.log_tail()
        self._loaded = None
        if process is not None and doing == _LOADING:
            remove_partial_files(process.pid)  # it may have died re-quantizing into the cache
        if self._closing:
            return EngineFailed("request", f"the engine was closed while {doing}", tail, exit_signal_name(exitcode), exitcode)
        if self._killed_why:
            return EngineFailed("crash", self._killed_why, tail, exit_signal_name(exitcode), exitcode, self._prediction,
                                cancel_unanswered=True)
        kind = "load" if doing == _LOADING else "crash"
        limited = out_of_limit(f"the engine process died while {doing} ({describe_exit(exitcode)})", tail,
                               self._memory_limit_bytes)
        if limited:
            return EngineFailed(kind, limited, tail, exit_signal_name(exitcode), exitcode, self._prediction)
        nodes = ""
        if self._engine_rpc:
            nodes = unreachable_nodes(self._engine_rpc)
            self._engine_rpc = ()  # a fresh engine registers them again
        return EngineFailed(
            kind,
            f"{nodes}the engine process died while {doing} ({describe_exit(exitcode)})",
            tail,
            exit_signal=exit_signal_name(exitcode),
            exit_code=exitcode,
            prediction=self._prediction,
        )


def _reap(process: Any, conn: Any, log_path: str | None) -> None:
    """Stop an engine process (by force: callers have asked politely first) and delete its log."""
    if process is not None:
        if process.is_alive():
            process.kill()
        process.join(timeout=5)
        process.close()
    if conn is not None:
        conn.close()
    if log_path:
        Path(log_path).unlink(missing_ok=True)

