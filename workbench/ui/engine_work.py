"""The bodies of the app's thread workers: drive the engine and the sampler, only post messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from textual.message import Message

from workbench.core.engine.events import (
    ChatMessage,
    ContextShifted,
    EngineFailed,
    Loaded,
    LoadProgressed,
    PrefillProgressed,
    Sampling,
    TokenChunk,
    TurnFinished,
)
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.ui.messages import (
    ContextShiftNoticed,
    EngineDied,
    LoadFailed,
    LoadProgressReported,
    ModelLoaded,
    ModelUnloaded,
    PrefillReported,
    TelemetryFailed,
    TelemetrySampled,
    TokensArrived,
    TurnEnded,
)

Post = Callable[[Message], object]
# At most ~10 token messages a second reach the UI thread: each is a repaint of the answer's
# last lines (~3 ms of a core here, and a screen layout every third of a view of new lines);
# every repaint is CPU a 2-core box's engine could use (benchmarks/ui_overhead.py).
TOKEN_BATCH_INTERVAL_S = 0.1


def load_model(engine, model_path: Path, preset: Preset, device: DeviceProfile | None,
               allow_overbudget: bool, post: Post) -> None:
    """Start the engine process when needed, load, and post progress then Loaded or the failure."""
    try:
        if not engine.alive:
            engine.start()
        if engine.loaded is not None:
            engine.unload()  # one engine process serves one model
        for event in engine.load(model_path, preset, device=device, allow_overbudget=allow_overbudget):
            if isinstance(event, LoadProgressed):
                post(LoadProgressReported(event.stage, event.fraction))
            elif isinstance(event, Loaded):
                post(ModelLoaded(event))
            elif isinstance(event, EngineFailed):
                post(LoadFailed(event))
    except Exception as error:  # the engine raises EngineError; anything else is reported the same way
        post(LoadFailed(EngineFailed(kind="load", message=str(error) or type(error).__name__)))


def stream_turn(engine, messages: Sequence[ChatMessage], sampling: Sampling, post: Post,
                interval_s: float = TOKEN_BATCH_INTERVAL_S) -> None:
    """Run one turn, batching token chunks so the UI thread sees at most ~20 messages a second."""
    texts: list[str] = []
    n_tokens = 0
    first_timestamp = last_timestamp = 0.0
    last_post = time.monotonic()

    def flush() -> None:
        nonlocal texts, n_tokens, last_post
        if texts:
            post(TokensArrived("".join(texts), n_tokens, first_timestamp, last_timestamp))
            texts, n_tokens = [], 0
        last_post = time.monotonic()

    try:
        for event in engine.chat(messages, sampling):
            if isinstance(event, TokenChunk):
                if not texts:  # the engine stamps every token; a chunk's first is its earliest
                    first_timestamp = event.timestamps[0] if event.timestamps else event.timestamp
                texts.append(event.text)
                n_tokens += event.n_tokens
                last_timestamp = event.timestamp
                if time.monotonic() - last_post >= interval_s:
                    flush()
                continue
            flush()
            if isinstance(event, PrefillProgressed):
                post(PrefillReported(event.evaluated, event.total))
            elif isinstance(event, ContextShifted):
                post(ContextShiftNoticed(event))
            elif isinstance(event, TurnFinished):
                post(TurnEnded(event))
            elif isinstance(event, EngineFailed):
                post(EngineDied(event))
    except Exception as error:
        flush()
        post(EngineDied(EngineFailed(kind="request", message=str(error) or type(error).__name__)))


def unload_model(engine, post: Post) -> None:
    try:
        engine.unload()
    except Exception as error:
        post(EngineDied(EngineFailed(kind="request", message=f"unload failed: {error}")))
        return
    post(ModelUnloaded())


def close_engine(engine) -> None:
    try:
        engine.close()
    except Exception:
        pass  # a dead engine has nothing left to close; the UI already said why it died


def sample_telemetry(sampler_factory: Callable, engine_pid: Callable[[], int | None], post: Post,
                     stop: threading.Event, is_cancelled: Callable[[], bool], interval_s: float) -> None:
    """Sample at `interval_s` until cancelled; a new engine pid gets a new sampler (its RSS source)."""
    sampler, sampler_pid = None, -1
    failed_before = False
    while not is_cancelled() and not stop.is_set():
        pid = engine_pid()
        try:
            if sampler is None or pid != sampler_pid:
                sampler, sampler_pid = sampler_factory(pid), pid
            post(TelemetrySampled(sampler.sample()))
            failed_before = False
        except Exception as error:
            if not failed_before:  # say it once, not twice a second
                post(TelemetryFailed(str(error) or type(error).__name__))
            failed_before = True
        stop.wait(interval_s)
