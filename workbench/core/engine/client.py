"""The engine client: load, chat, ops, samples and serving on one engine process; what the UI, CLI and bench use."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.engine_link import EngineLink
from workbench.core.engine.events import (
    ChatMessage,
    EngineFailed,
    Loaded,
    LoadProgressed,
    Sampling,
)
from workbench.core.engine.load_plan import plan_load
from workbench.core.engine.load_refused import LoadRefused
from workbench.core.engine.memory_limit import out_of_limit
from workbench.core.engine.protocol import (
    ChatRequest,
    LoadRequest,
    OpFinished,
    RunOpRequest,
    UnloadRequest,
)
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
from workbench.core.ledger.buffer_check import buffer_errors, mismatch_line

_BUSY = "the engine is busy with another request (it runs one at a time); wait for it to finish or cancel it"


class EngineClient(EngineLink):
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
        super().__init__()
        self._busy = threading.Lock()

    def __enter__(self) -> "EngineClient":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------------
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
            request = LoadRequest(str(model_path), preset, plan.quantize_to, plan.prediction, plan.warnings,
                                  plan.memory_budget_bytes)
            self._memory_limit_bytes = 0
            for event in self._exchange(request, "loading the model"):
                if isinstance(event, Loaded):
                    event = _checked(event, plan.predicted_buffers)
                    self._loaded = event
                elif isinstance(event, LoadProgressed) and event.memory_limit_bytes:
                    self._memory_limit_bytes = event.memory_limit_bytes
                elif isinstance(event, EngineFailed) and event.kind == "load":
                    message = out_of_limit(event.message, event.log_tail, self._memory_limit_bytes)
                    event = dataclasses.replace(event, message=message) if message else event
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
        """N samples of one prompt decoded together in llama.cpp (see sequence_loops.run_samples).

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
            self._cancel_due = None
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


def failure_where(failure: EngineFailed, model_path: str) -> str:
    """`model_path` as the error's `where`, or "" when the failure's message already names the file."""
    return "" if model_path in failure.message else model_path


def _engine_error(failure: EngineFailed, where: str = "") -> EngineError:
    last_line = failure.log_tail[-1].strip() if failure.log_tail else ""
    fix = f"llama.cpp's last log line: {last_line}" if last_line and last_line not in failure.message else ""
    error = EngineError(failure.message, where=failure_where(failure, where) if where else "", fix=fix)
    error.failure = failure  # type: ignore[attr-defined]
    return error


def _checked(loaded: Loaded, predicted: tuple[tuple[str, int], ...]) -> Loaded:
    """The load with its buffers set against the ledger's prediction (ledger/buffer_check)."""
    reported = {"weights": loaded.model_buffer_bytes, "KV": loaded.kv_buffer_bytes, "RS": loaded.rs_buffer_bytes,
                "compute": loaded.compute_buffer_bytes}
    return dataclasses.replace(loaded, prediction_check=mismatch_line(predicted, reported),
                               prediction_errors_pct=buffer_errors(predicted, reported))
