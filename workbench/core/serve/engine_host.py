"""The server's engine: loaded, N slots open, and started again (same model, same preset) when it dies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import EngineFailed, Loaded
from workbench.core.engine.sequence_events import SequencesOpened, SequencesStatus
from workbench.core.errors import EngineError

RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0)  # then every 10 s: a board may need time to free memory
# The engine reports its slots at least every 0.25 s while it works (sequence_loops.STATUS_INTERVAL_S),
# but one step of a long prompt chunk on a slow board can take seconds: silence this long is stuck.
STUCK_AFTER_S = 30.0


class _SessionFace:
    """What the HTTP layer reads and calls: state, pid, the latest status, submit."""

    state: str
    _client: EngineClient
    _session: Any
    stuck_after_s = STUCK_AFTER_S

    @property
    def pid(self) -> int | None:
        return self._client.pid

    @property
    def status(self) -> SequencesStatus | None:
        session = self._session
        return session.status if session is not None else None

    def stuck(self) -> str:
        """Why the engine counts as stuck: silent past `stuck_after_s` with requests open; "" when it is not."""
        session = self._session if self.state == "ready" else None
        if session is None:
            return ""
        silent = session.unanswered_for()
        if silent < self.stuck_after_s:
            return ""
        return (f"the engine has not answered for {silent:.0f} s with {session.open_requests} request(s) in flight "
                f"(bound {self.stuck_after_s:g} s)")

    def submit(self, request: Any, on_event: Callable[[object], None]) -> Any | None:
        """The request's handle, or None when the engine is not ready (the caller answers 503)."""
        session = self._session if self.state == "ready" else None
        return session.submit(request, on_event) if session is not None else None


class ServingEngine(_SessionFace):
    """One engine process in serving mode for the API; `state` is "starting", "ready", "restarting" or "stopped".

    The HTTP layer only submits and cancels through here: llama.cpp stays in the engine
    process. When the engine dies, its open requests fail (the server answers 503) and a
    thread loads the model again and re-opens the slots.
    """

    def __init__(self, model_path: str | Path, preset: Preset, n_slots: int, *, device: DeviceProfile | None = None,
                 allow_overbudget: bool = False, on_status: Callable[[SequencesStatus], None] | None = None,
                 on_restart: Callable[[str], None] | None = None, client: EngineClient | None = None) -> None:
        self.model_path = str(model_path)
        self._on_restart = on_restart or (lambda line: None)  # one line per step of a restart, for the console
        self.preset = preset
        self.n_slots = n_slots
        self._device = device
        self._allow_overbudget = allow_overbudget
        self._on_status = on_status
        self._owns_client = client is None  # an engine given (the app's) stays its owner's when serving stops
        self._client = client if client is not None else EngineClient()
        self._session: Any = None
        self._lock = threading.Lock()
        self._stopping = False
        self.state = "starting"
        self.loaded: Loaded | None = None
        self.opened: SequencesOpened | None = None
        self.restarts = 0
        self.last_failure = ""  # why the engine last died or could not start, one line
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        """Load and open the slots (blocking); EngineError when that fails the first time. A given engine
        with this model loaded already only opens the slots."""
        loaded = self._client.loaded
        if self._owns_client or loaded is None or loaded.model_path != self.model_path:
            self._open()
        else:
            self.loaded = loaded
            self._open_slots()
        self._watcher = threading.Thread(target=self._watch, name="engine-watch", daemon=True)
        self._watcher.start()

    def _open(self, *, restart: bool = False) -> None:
        self.loaded = self._client.load_blocking(self.model_path, self.preset, device=self._device,
                                                 allow_overbudget=self._allow_overbudget)
        self._open_slots(restart=restart)

    def _open_slots(self, *, restart: bool = False) -> None:
        session = self._client.open_sequences(self.n_slots, self._on_status)
        with self._lock:
            self._session = session
            self.opened = session.opened
            self.restarts += 1 if restart else 0
            self.state = "ready"

    def _watch(self) -> None:
        while True:
            session = self._session
            session.ended.wait()
            if self._stopping:
                return
            end = session.end
            self.last_failure = end.message if isinstance(end, EngineFailed) else (getattr(end, "error", "") or "the slots closed")
            with self._lock:
                self.state = "restarting"
                self._session = None
            died_at = time.monotonic()
            self._on_restart(f"engine stopped: {self.last_failure}; restarting it (requests get 503 meanwhile)")
            attempt = 0
            while not self._stopping:
                time.sleep(RESTART_DELAYS_S[min(attempt, len(RESTART_DELAYS_S) - 1)])
                if self._stopping:
                    return
                try:
                    self._client.close()  # a session that ended without the process dying: start clean
                    self._open(restart=True)
                    self._on_restart(f"engine restarted (pid {self.pid}, restart {self.restarts}) after "
                                     f"{time.monotonic() - died_at:.1f} s: serving again")
                    break
                except EngineError as error:
                    self.last_failure = str(error)
                    attempt += 1
                    self._on_restart(f"engine restart {attempt} failed: {error}; trying again")

    def close(self, *, grace_s: float | None = None) -> str:
        """Stop serving and the engine; why the engine had to be killed ("" when it stopped when asked)."""
        self._stopping = True
        with self._lock:
            session, self._session = self._session, None
            self.state = "stopped"
        killed = ""
        if session is not None:
            session.close(30, grace_s=grace_s)
            killed = session.end.message if isinstance(session.end, EngineFailed) else ""
        if self._owns_client:
            self._client.close()
        return killed


class AttachedEngine(_SessionFace):
    """Serving on an engine someone else owns (the app's loaded model): same face as ServingEngine.

    It opens the slots on the given client and closes them when done; the client and its
    model stay the owner's. When the engine dies the state becomes "stopped" with the reason:
    restarting is the owner's decision (the app's Restart), not the server's.
    """

    def __init__(self, client: EngineClient, n_slots: int,
                 on_status: Callable[[SequencesStatus], None] | None = None) -> None:
        self._client = client
        self.n_slots = n_slots
        self._on_status = on_status
        self._session: Any = None
        self.state = "starting"
        self.loaded: Loaded | None = client.loaded
        self.opened: SequencesOpened | None = None
        self.restarts = 0
        self.last_failure = ""

    def start(self) -> None:
        """Open the slots (blocking); EngineError when the engine is busy, not loaded or cannot."""
        self._session = self._client.open_sequences(self.n_slots, self._on_status)
        self.opened = self._session.opened
        self.state = "ready"
        threading.Thread(target=self._watch, name="engine-watch", daemon=True).start()

    def _watch(self) -> None:
        session = self._session
        session.ended.wait()
        if self.state != "stopped":
            end = session.end
            self.last_failure = end.message if isinstance(end, EngineFailed) else (getattr(end, "error", "") or "the slots closed")
            self.state = "stopped"

    def close(self, *, grace_s: float | None = None) -> str:
        """Close the slots (the engine stays the owner's); why the engine had to be killed ("" when
        it closed them when asked): one silent for `grace_s` is stuck and killed."""
        self.state = "stopped"
        session, self._session = self._session, None
        if session is None:
            return ""
        session.close(30, grace_s=grace_s)
        return session.end.message if isinstance(session.end, EngineFailed) else ""
