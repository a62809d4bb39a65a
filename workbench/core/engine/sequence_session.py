"""The client's side of serving mode: submit requests, get their events by id, cancel by id."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from workbench.core.engine.engine_link import SERVING
from workbench.core.engine.events import EngineFailed
from workbench.core.engine.sequence_events import (
    SequenceCancel,
    SequenceFinished,
    SequenceRejected,
    SequenceRequest,
    SequencesClose,
    SequencesClosed,
    SequencesOpened,
    SequencesStatus,
    SequenceSubmit,
)

# The last event of one request: after it, its handler is forgotten.
REQUEST_DONE = (SequenceFinished, SequenceRejected, EngineFailed)


class SequenceHandle:
    """One submitted request: its id, its events (when no callback was given), cancel()."""

    def __init__(self, session: "SequenceSession", request_id: int) -> None:
        self.request_id = request_id
        self._session = session
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()

    def cancel(self) -> None:
        self._session.cancel(self.request_id)

    def events(self) -> Iterator[object]:
        """SequenceAccepted, SequenceStarted, SequenceTokens..., then SequenceFinished
        (or SequenceRejected, or EngineFailed when the engine died or the session ended)."""
        while True:
            event = self._events.get()
            yield event
            if isinstance(event, REQUEST_DONE):
                return


class SequenceSession:
    """Serving mode of one engine: requests decode together in its slots (see sequence_scheduler.py).

    Made by `EngineClient.open_sequences()`, which holds the engine for the session's life
    (chat and load wait until it is closed). A reader thread takes every event off the pipe
    and hands it to its request's handler, called on that thread: keep handlers short (put
    the event in a queue, or hand it to an event loop with call_soon_threadsafe). When the
    engine dies, every open request gets EngineFailed(kind="crash") and `ended` is set.
    """

    def __init__(self, client: Any, opened: SequencesOpened, release: Callable[[], None],
                 on_status: Callable[[SequencesStatus], None] | None = None) -> None:
        self.opened = opened
        self.status: SequencesStatus | None = None
        self.end: SequencesClosed | EngineFailed | None = None  # why the session ended
        self.ended = threading.Event()
        self._client = client
        self._release = release
        self._on_status = on_status
        self._ids = itertools.count(1)
        self._handlers: dict[int, Callable[[object], None]] = {}
        self._over = False  # set under _lock when the reader stops taking handlers
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._last_heard = time.monotonic()  # when the engine last sent anything (or a request opened on an idle one)
        self._reader = threading.Thread(target=self._read, name="engine-sequences", daemon=True)
        self._reader.start()

    def submit(self, request: SequenceRequest, on_event: Callable[[object], None] | None = None) -> SequenceHandle:
        """Queue a request for a slot; its events go to `on_event`, or to the handle's events()."""
        handle = SequenceHandle(self, next(self._ids))
        handler = on_event or handle._events.put
        with self._lock:
            over = self._over
            if not over:
                if not self._handlers:
                    self._last_heard = time.monotonic()  # an idle engine owes nothing: silence counts from now
                self._handlers[handle.request_id] = handler
        if over:
            handler(self._ended_failure())
            return handle
        if not self._send(SequenceSubmit(handle.request_id, request)):
            with self._lock:
                self._handlers.pop(handle.request_id, None)
            handler(self._ended_failure())
        return handle

    def cancel(self, request_id: int) -> None:
        """Stop a request (queued or decoding); its slot and KV cells are freed at the next step.

        An engine that then sends nothing within the client's cancel grace is killed (see EngineLink.cancel).
        """
        with self._lock:
            open_request = request_id in self._handlers
        if self._send(SequenceCancel(request_id)) and open_request:
            self._client.answer_due(self._client.cancel_grace_s)

    def close(self, timeout: float | None = None, *, grace_s: float | None = None) -> None:
        """End serving: open requests finish "cancelled", the engine is free for other work.

        An engine silent for `grace_s` (the client's cancel grace by default) is killed, so a
        stuck one ends too; `end` then says so."""
        if self._send(SequencesClose()):
            self._client.answer_due(self._client.cancel_grace_s if grace_s is None else grace_s)
        self._reader.join(timeout)

    def unanswered_for(self) -> float:
        """Seconds the engine has been silent while a request is open; 0.0 when none is open."""
        with self._lock:
            if self._over or not self._handlers:
                return 0.0
        return max(0.0, time.monotonic() - self._last_heard)

    @property
    def open_requests(self) -> int:
        with self._lock:
            return len(self._handlers)

    def _send(self, message: object) -> bool:
        conn = self._client._conn
        if self._over or conn is None:
            return False
        with self._send_lock:
            try:
                conn.send(message)
                return True
            except (OSError, ValueError):
                return False

    def _read(self) -> None:
        try:
            while True:
                event = self._client._receive(SERVING)
                self._last_heard = time.monotonic()
                request_id = getattr(event, "request_id", None)
                if request_id is not None:
                    with self._lock:
                        handler = self._handlers.get(request_id)
                        if isinstance(event, REQUEST_DONE):
                            self._handlers.pop(request_id, None)
                    if handler is not None:
                        _call(handler, event)
                elif isinstance(event, SequencesStatus):
                    self.status = event
                    if self._on_status is not None:
                        _call(self._on_status, event)
                elif isinstance(event, (SequencesClosed, EngineFailed)):
                    self.end = event
                    return
        finally:
            with self._lock:
                self._over = True
                handlers, self._handlers = self._handlers, {}
            self._release()  # the engine is free before anyone waiting on `ended` wakes
            self.ended.set()
            failure = self._ended_failure()
            for handler in handlers.values():
                _call(handler, failure)

    def _ended_failure(self) -> EngineFailed:
        end = self.end
        if isinstance(end, EngineFailed):
            return end
        reason = end.error if isinstance(end, SequencesClosed) and end.error else "the serving session has ended"
        return EngineFailed("request", reason)


def _call(handler: Callable[[object], None], event: object) -> None:
    """A handler's failure (e.g. an event loop already closed) must not stop the reader: others still wait."""
    try:
        handler(event)
    except Exception:  # noqa: BLE001
        pass
