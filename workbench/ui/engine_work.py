"""The bodies of the app's thread workers: drive the engine and the sampler, only post messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from textual.message import Message

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import preset_problems
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
from workbench.core.ledger.predict import predict_ledger
from workbench.ui.chat_vote import sample_and_vote
from workbench.ui.device_problems import device_problems
from workbench.ui.engine_session import Engine
from workbench.ui.loaded_choice import Choice
from workbench.ui.messages import (
    AnswerEnded,
    ContextShiftNoticed,
    EngineDied,
    LedgerPredicted,
    LoadFailed,
    LoadProgressReported,
    ModelLoaded,
    ModelUnloaded,
    PredictionFailed,
    PrefillReported,
    SplitPredicted,
    TelemetryFailed,
    TelemetrySampled,
    TokensArrived,
)
from workbench.ui.selection import Selection
from workbench.ui.split_prediction import predict_split_or_none

Post = Callable[[Message], object]
# At most ~10 token messages a second reach the UI thread: each is a repaint of the answer's
# last lines (~3 ms of a core here, and a screen layout every third of a view of new lines);
# every repaint is CPU a 2-core box's engine could use (benchmarks/ui_overhead.py).
TOKEN_BATCH_INTERVAL_S = 0.1


def predict_choice(selection: Selection, choice: Choice, request: int, post: Post) -> None:
    """Predict the ledger (and the per-device split) for `choice`; post it with the preset's problems with
    the model and the device's with the preset (the CLI's offload warning), or why there is none. Each
    message carries `request`: a thread cannot be stopped, so an earlier prediction may finish after a
    later one, and its receiver drops what an older request posts."""
    try:
        model, preset, device = selection.resolve(choice)
        ledger = predict_ledger(model, preset, device)
        problems = preset_problems(preset, model) + device_problems(preset, device)
    except Exception as error:
        post(PredictionFailed(str(error) or type(error).__name__, request))
        return
    post(LedgerPredicted(model, preset, device, ledger, problems, choice, request))
    post(SplitPredicted(predict_split_or_none(model, preset, device, selection.rpc), request))


def load_model(engine: Engine, model_path: Path, preset: Preset, device: DeviceProfile | None,
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


def stream_turn(engine: Engine, messages: Sequence[ChatMessage], sampling: Sampling, post: Post,
                interval_s: float = TOKEN_BATCH_INTERVAL_S) -> None:
    """Run one turn, batching token chunks so the UI thread sees a message every `interval_s` at most."""
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
                post(AnswerEnded(event))
            elif isinstance(event, EngineFailed):
                post(EngineDied(event))
    except Exception as error:
        flush()
        post(EngineDied(EngineFailed(kind="request", message=str(error) or type(error).__name__)))


def run_turn(engine: Engine, messages: Sequence[ChatMessage], sampling: Sampling, samples: int, n_ctx: int,
             post: Post, interval_s: float = TOKEN_BATCH_INTERVAL_S) -> None:
    """One chat turn: a streamed answer, or with `samples` > 1 the samples' vote (VoteArrived)."""
    if samples > 1:
        sample_and_vote(engine, messages, sampling, samples, n_ctx, post)
    else:
        stream_turn(engine, messages, sampling, post, interval_s)


def unload_model(engine: Engine, post: Post) -> None:
    try:
        engine.unload()
    except Exception as error:
        post(EngineDied(EngineFailed(kind="request", message=f"unload failed: {error}")))
        return
    post(ModelUnloaded())


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
            if not failed_before:  # say it once, not at every sample
                post(TelemetryFailed(str(error) or type(error).__name__))
            failed_before = True
        stop.wait(interval_s)
