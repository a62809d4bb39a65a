"""The engine session: the engine client, its phase and what it has loaded, with the transitions between them.

Plain Python (no Textual): the main screen calls a transition when a message arrives and redraws
from the session's state; a test drives it without a screen.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.events import ChatMessage, EngineFailed, Loaded, Sampling
from workbench.core.ledger.types import Ledger
from workbench.ui.loaded_choice import Choice, LoadedChoice


class Phase(enum.StrEnum):
    """What the engine is doing, as the UI shows it."""

    IDLE = "idle"
    LOADING = "loading"
    LOADED = "loaded"
    GENERATING = "generating"
    UNLOADING = "unloading"


IDLE, LOADING, LOADED, GENERATING, UNLOADING = Phase  # the members by name, for comparisons


class Engine(Protocol):
    """What the UI uses of an engine client (workbench.core.engine.client.EngineClient, or a test's fake)."""

    @property
    def alive(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def loaded(self) -> Loaded | None: ...

    def start(self) -> None: ...

    def load(self, model_path: Path, preset: Preset, *, device: DeviceProfile | None = None,
             allow_overbudget: bool = False) -> Iterator[object]: ...

    def chat(self, messages: Sequence[ChatMessage], sampling: Sampling) -> Iterator[object]: ...

    def sample_n(self, messages: list[ChatMessage], n: int, sampling: Sampling) -> object: ...

    def cancel(self) -> None: ...

    def unload(self) -> None: ...

    def close(self) -> None: ...


def close_quietly(engine: Engine) -> None:
    try:
        engine.close()
    except Exception:
        pass  # a dead engine has nothing left to close; the UI already said why it died


class EngineSession:
    """Owns the engine client (made by `engine_factory` when needed), the phase and the loaded choice.

    `on_phase(phase)` is called after every change of phase, on the thread that made it (the UI's)."""

    def __init__(self, engine_factory: Callable[[], Engine],
                 on_phase: Callable[[Phase], object] = lambda phase: None) -> None:
        self._factory = engine_factory
        self._on_phase = on_phase
        self.engine: Engine | None = None
        self.phase = Phase.IDLE
        self.choice = LoadedChoice()  # what the engine runs, with the ledger predicted for it
        self.last_failure: EngineFailed | None = None
        self.unload_asked = False  # since the last load: an engine killed meanwhile stays down, as asked

    def _enter(self, phase: Phase) -> None:
        self.phase = phase
        self._on_phase(phase)

    @property
    def alive(self) -> bool:
        return self.engine is not None and self.engine.alive

    @property
    def loaded(self) -> Loaded | None:
        return self.engine.loaded if self.engine is not None else None

    def engine_pid(self) -> int | None:
        """The engine process's pid while it runs (the telemetry thread asks: one attribute read)."""
        engine = self.engine
        return engine.pid if engine is not None and engine.alive else None

    def reload_needed(self, selected: Choice) -> bool:
        """Whether a model is loaded and the selectors name another: a load press reloads."""
        return self.phase == Phase.LOADED and self.choice.differs(selected)

    def predicted(self, choice: Choice, ledger: Ledger) -> None:
        self.choice.predicted(choice, ledger)

    # ---- load -----------------------------------------------------------------------------

    def begin_load(self, choice: Choice) -> Engine:
        """A load starts: return a live engine client (a dead one is replaced); raises when none starts."""
        if self.engine is None or not self.engine.alive:
            if self.engine is not None:
                close_quietly(self.engine)
                self.engine = None
            self.engine = self._factory()
        self.choice.load_started(choice)
        self.unload_asked = False
        self._enter(Phase.LOADING)
        return self.engine

    def load_finished(self) -> None:
        self.choice.load_finished()
        self.last_failure = None
        self._enter(Phase.LOADED)

    def load_failed(self, failure: EngineFailed) -> None:
        self.choice.unloaded()  # a failed load leaves no model in the engine
        self.last_failure = failure
        self._enter(Phase.IDLE)

    # ---- unload and restart ---------------------------------------------------------------

    def begin_unload(self) -> Engine | None:
        """An unload starts (cancelling an answer first); None when there is no engine."""
        if self.engine is None:
            return None
        self.unload_asked = True
        if self.phase == Phase.GENERATING:
            self.engine.cancel()
        self._enter(Phase.UNLOADING)
        return self.engine

    def unloaded(self) -> None:
        """No model in memory any more (unloaded, or the process died)."""
        self.choice.unloaded()
        self._enter(Phase.IDLE)

    def detach(self) -> Engine | None:
        """For a restart: give up the engine client (the caller closes it); the session is idle."""
        old, self.engine = self.engine, None
        self.choice.unloaded()
        self._enter(Phase.IDLE)
        return old

    def close(self) -> None:
        """The app is closing: stop the engine process (its memory goes back to the system)."""
        if self.engine is not None:
            close_quietly(self.engine)

    # ---- turns ----------------------------------------------------------------------------

    def turn_started(self) -> None:
        self._enter(Phase.GENERATING)

    def turn_ended(self) -> None:
        self._enter(Phase.LOADED if self.loaded is not None else Phase.IDLE)

    def cancel_turn(self) -> None:
        if self.phase == Phase.GENERATING and self.engine is not None:
            self.engine.cancel()  # thread-safe: the turn ends with stop reason "cancelled"

    def failed(self, failure: EngineFailed) -> bool:
        """A turn or request failed; return whether the engine lives on (else the model is gone)."""
        self.last_failure = failure
        if self.alive and failure.kind != "crash":
            self._enter(Phase.LOADED if self.loaded is not None else Phase.IDLE)
            return True
        self.unloaded()
        return False
