"""The engine client: starts the engine process and drives it; what the UI, CLI and bench use."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.child_process import SharedFlag, start_child
from workbench.core.engine.events import (
    ChatMessage,
    EngineFailed,
    Loaded,
    LoadProgressed,
    Sampling,
    TurnFinished,
    Unloaded,
)
from workbench.core.engine.load_plan import plan_load
from workbench.core.engine.load_refused import LoadRefused
from workbench.core.engine.log_files import new_log_file
from workbench.core.engine.log_tail import describe_exit, exit_signal_name, read_log_tail
from workbench.core.engine.protocol import (
    ChatRequest,
    LoadRequest,
    OpFinished,
    RunOpRequest,
    ShutdownRequest,
    UnloadRequest,
)
from workbench.core.engine.quantize import remove_partial_files
from workbench.core.engine.sampling_checks import validate_sampling
from workbench.core.engine.sequence_events import (
    SamplesFinished,
    SamplesRequest,
    SequenceRequest,
    SequencesOpen,
    SequencesOpened,
)
from workbench.core.engine.sequence_session import SequenceSession
from workbench.core.errors import EngineError, WorkbenchError
from workbench.core.rpc.failure import unreachable_nodes

_TERMINAL = (Loaded, TurnFinished, EngineFailed, Unloaded, OpFinished, SamplesFinished)
_LOG_TAIL_LINES = 30
_BUSY = "the engine is busy with another request (it runs one at a time); wait for it to finish or cancel it"


class EngineClient:
    """Drives one engine process (one model) over a pipe.

    `load()` and `chat()` return iterators of events; the request is sent when iteration
    starts, and the iterator ends after its final event (Loaded / TurnFinished / EngineFailed).
    One request runs at a time: a second one started meanwhile gets EngineFailed(kind="request")
    at once instead of waiting. `cancel()` may be called from any thread. If the engine process
    dies, the running iterator ends with EngineFailed(kind="crash") carrying the exit signal,
    the last log lines and the ledger's prediction; `start()` (or the next `load()`) starts a
    new one. The conversation is the caller's: `chat()` takes all of it every turn.
    """

    def __init__(self) -> None:
        self._process: Any = None
        self._conn: Any = None
        self._cancel_flag: Any = None  # a shared byte: the engine polls it per graph node in prefill
        self._log_path: str | None = None
        self._busy = threading.Lock()
        self._lifecycle = threading.Lock()
        self._loaded: Loaded | None = None
        self._prediction = ""
        self._closing = False
        self._finalizer: weakref.finalize | None = None
        self._engine_rpc: tuple[str, ...] = ()  # RPC nodes the running engine registered (they stay registered)

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

    def __enter__(self) -> "EngineClient":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running generation (within a token; in prefill within a graph node). Thread-safe."""
        flag = self._cancel_flag
        if flag is not None:
            flag.value = True

    def load(
        self,
        model_path: str | os.PathLike[str],
        preset: Preset,
        *,
        device: DeviceProfile | None = None,
        allow_overbudget: bool = False,
        rpc: tuple = (),
    ) -> Iterator[object]:
        """Validate, then load: LoadProgressed..., then Loaded or EngineFailed.

        `rpc` (RpcEndpoint values, from --rpc) replaces the preset's RPC nodes; an unreachable
        node refuses the load naming it, before any engine connects.

        Refused before llama.cpp sees anything (EngineFailed kind "load" for an unreadable
        GGUF, "refused" for preset errors or a ledger that does not fit `device`, the detected
        host when None, unless `allow_overbudget`).
        """
        if not self._busy.acquire(blocking=False):
            yield EngineFailed("request", _BUSY)
            return
        try:

            yield LoadProgressed("validating", 0.0)
            try:
                if self._engine_rpc and self.alive:
                    # A node serves one client at a time and llama.cpp keeps registered nodes for the
                    # life of the process: an engine that used nodes makes way before they are probed.
                    self.close()
                self._engine_rpc = ()
                plan = plan_load(model_path, preset, device, allow_overbudget=allow_overbudget, rpc=rpc)
            except LoadRefused as refused:
                yield EngineFailed(refused.kind, refused.message)
                return
            yield LoadProgressed("validating", 1.0, message=plan.prediction)
            self.start()
            self._engine_rpc = plan.rpc
            if plan.rpc != preset.rpc:
                preset = dataclasses.replace(preset, rpc=plan.rpc)
            self._loaded = None
            self._prediction = plan.prediction
            request = LoadRequest(str(model_path), preset, plan.quantize_to, plan.prediction, plan.warnings)
            for event in self._exchange(request, "loading the model"):
                if isinstance(event, Loaded):
                    self._loaded = event
                yield event
        finally:
            self._busy.release()

    def load_blocking(
        self,
        model_path: str | os.PathLike[str],
        preset: Preset,
        *,
        device: DeviceProfile | None = None,
        allow_overbudget: bool = False,
    ) -> Loaded:
        """`load()` run to the end: the Loaded event, or EngineError (its `.failure` is the EngineFailed)."""
        for event in self.load(model_path, preset, device=device, allow_overbudget=allow_overbudget):
            if isinstance(event, Loaded):
                return event
            if isinstance(event, EngineFailed):
                raise _engine_error(event, where=str(model_path))
        raise EngineError("the engine ended the load without a result", where=str(model_path))

    def chat(self, messages: Sequence[ChatMessage], sampling: Sampling) -> Iterator[object]:
        """One turn: TokenChunk..., maybe ContextShifted first, then TurnFinished or EngineFailed."""
        return self._chat_events(tuple(messages), sampling)

    def _chat_events(self, messages: tuple[ChatMessage, ...], sampling: Sampling) -> Iterator[object]:
        if not self._busy.acquire(blocking=False):
            yield EngineFailed("request", _BUSY)
            return
        try:
            if not self.alive or self._loaded is None:
                yield EngineFailed("request", "no model is loaded; load one first")
                return
            try:
                validate_sampling(sampling)
            except WorkbenchError as error:
                yield EngineFailed("request", str(error))
                return
            yield from self._exchange(ChatRequest(messages, sampling), "generating")
        finally:
            self._busy.release()

    def unload(self) -> None:
        """Free the model (its memory goes back to the OS); a running request is cancelled first."""
        self.cancel()
        with self._busy:
            if not self.alive:
                self._loaded = None
                return
            for event in self._exchange(UnloadRequest(), "unloading"):
                if isinstance(event, EngineFailed):
                    raise _engine_error(event)
            self._loaded = None

    def run_op(self, name: str, **kwargs: Any) -> Any:
        """Run `measure_ops.OPS[name](llama, **kwargs)` in the engine; its result, or EngineError."""
        with contextlib.closing(self.op_events(name, **kwargs)) as events:  # closing: releases the one-request lock now
            for event in events:
                if isinstance(event, OpFinished):
                    return event.result
        raise EngineError(f"the engine ended {name!r} without a result")

    def op_events(self, name: str, **kwargs: Any) -> Iterator[object]:
        """`run_op` as events: OpProgressed... (from ops that report it), then OpFinished; EngineError on failure."""
        if not self._busy.acquire(blocking=False):
            raise EngineError(_BUSY)
        try:
            if not self.alive or self._loaded is None:
                raise EngineError(f"no model is loaded to run {name!r} on", fix="Load a model first")
            for event in self._exchange(RunOpRequest(name, dict(kwargs)), f"running {name}"):
                if isinstance(event, EngineFailed):
                    raise _engine_error(event)
                yield event
        finally:
            self._busy.release()

    def sample_n(
        self, messages_or_prompt: Sequence[ChatMessage] | str, n: int, sampling: Sampling, *, stop: Sequence[str] = (),
    ) -> SamplesFinished:
        """N samples of one prompt decoded together in llama.cpp (see sequences.run_samples).

        The prompt (chat messages rendered with the model's template, or a raw string) is
        evaluated once; its cells are shared by the N sequences. Each sample gets at most
        sampling.max_tokens, fewer when N answers would not fit the context (the result's
        max_tokens says). EngineError when it cannot run.
        """
        if isinstance(messages_or_prompt, str):
            request = SequenceRequest(prompt=messages_or_prompt, sampling=sampling, stop=tuple(stop))
        else:
            request = SequenceRequest(messages=tuple(messages_or_prompt), sampling=sampling, stop=tuple(stop))
        validate_sampling(sampling)
        if not self._busy.acquire(blocking=False):
            raise EngineError(_BUSY)
        try:
            if not self.alive or self._loaded is None:
                raise EngineError("no model is loaded to sample from", fix="Load a model first")
            for event in self._exchange(SamplesRequest(request, n), f"sampling {n} answers"):
                if isinstance(event, SamplesFinished):
                    return event
                if isinstance(event, EngineFailed):
                    raise _engine_error(event)
            raise EngineError("the engine ended sampling without a result")
        finally:
            self._busy.release()

    def open_sequences(self, n_slots: int, on_status: Any = None) -> Any:
        """Serving mode: a SequenceSession with `n_slots` sequences decoded together (continuous batching).

        The engine is the session's until `session.close()` (or the engine's death); other
        requests meanwhile get the "busy" failure. EngineError when it cannot open.
        """
        if not self._busy.acquire(blocking=False):
            raise EngineError(_BUSY)
        handed_over = False
        try:
            if not self.alive or self._loaded is None:
                raise EngineError("no model is loaded to serve", fix="Load a model first")
            self._cancel_flag.value = False
            try:
                self._conn.send(SequencesOpen(n_slots))
            except (OSError, ValueError):
                raise _engine_error(self._died("opening the slots")) from None
            event = self._receive("opening the slots")
            if isinstance(event, EngineFailed):
                raise _engine_error(event)
            if not isinstance(event, SequencesOpened):
                raise EngineError(f"the engine answered {type(event).__name__} to opening the slots")
            session = SequenceSession(self, event, self._busy.release, on_status)
            handed_over = True
            return session
        finally:
            if not handed_over:
                self._busy.release()

    # -- the pipe ----------------------------------------------------------------------------
    def _exchange(self, request: object, doing: str) -> Iterator[object]:
        """Send one request and yield its events up to the final one.

        If the caller stops iterating early, the request is cancelled and its remaining
        events are read and dropped, so the next request starts on a clean pipe.
        """
        self._cancel_flag.value = False  # cleared here, before sending: a cancel() after this counts
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
        conn, process = self._conn, self._process
        if conn is None or process is None:
            return self._died(doing)
        try:
            wait([conn] if process.sentinel is None else [conn, process.sentinel])
            if conn.poll():
                return conn.recv()
        except (EOFError, OSError, ValueError):
            pass
        return self._died(doing)

    def _died(self, doing: str) -> EngineFailed:
        process = self._process
        exitcode = None
        if process is not None:
            process.join(timeout=1.0)
            exitcode = process.exitcode
        tail = self.log_tail()
        self._loaded = None
        if process is not None and doing == "loading the model":
            remove_partial_files(process.pid)  # it may have died re-quantizing into the cache
        if self._closing:
            return EngineFailed("request", f"the engine was closed while {doing}", tail, exit_signal_name(exitcode), exitcode)
        kind = "load" if doing == "loading the model" else "crash"
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


def failure_where(failure: EngineFailed, model_path: str) -> str:
    """`model_path` as the error's `where`, or "" when the failure's message already names the file."""
    return "" if model_path in failure.message else model_path


def _engine_error(failure: EngineFailed, where: str = "") -> EngineError:
    last_line = failure.log_tail[-1].strip() if failure.log_tail else ""
    fix = f"llama.cpp's last log line: {last_line}" if last_line and last_line not in failure.message else ""
    error = EngineError(failure.message, where=failure_where(failure, where) if where else "", fix=fix)
    error.failure = failure  # type: ignore[attr-defined]
    return error
