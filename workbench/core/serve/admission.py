"""How many requests the server holds: N in slots, M waiting; beyond that a 429 with a Retry-After estimate."""

from __future__ import annotations

import math
import threading
from collections import deque

from workbench.core.engine.events import EngineFailed
from workbench.core.engine.sequence_events import SequenceFinished, SequenceRejected, SequenceStarted

_RECENT = 32  # durations remembered for the Retry-After estimate


class Admission:
    """Counts requests from admission to their last engine event; thread-safe (the engine's reader calls observe)."""

    def __init__(self, n_slots: int, queue_limit: int) -> None:
        self.n_slots = n_slots
        self.queue_limit = queue_limit
        self._lock = threading.Lock()
        self._in_flight: set[int] = set()  # admission tickets not yet finished
        self._running: set[int] = set()
        self._durations: deque[float] = deque(maxlen=_RECENT)
        self._tickets = 0

    def try_enter(self) -> int | None:
        """A ticket, or None when N slots and M queue places are all taken."""
        with self._lock:
            if len(self._in_flight) >= self.n_slots + self.queue_limit:
                return None
            self._tickets += 1
            self._in_flight.add(self._tickets)
            return self._tickets

    def observe(self, ticket: int, event: object) -> None:
        with self._lock:
            if isinstance(event, SequenceStarted):
                self._running.add(ticket)
            elif isinstance(event, (SequenceFinished, SequenceRejected, EngineFailed)):
                self._in_flight.discard(ticket)
                self._running.discard(ticket)
                if isinstance(event, SequenceFinished) and event.stop_reason in ("stop", "length"):
                    self._durations.append(event.finished_at - event.started_at)

    def leave(self, ticket: int) -> None:
        """Give a ticket back that never reached the engine."""
        with self._lock:
            self._in_flight.discard(ticket)
            self._running.discard(ticket)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._in_flight) - len(self._running)

    def retry_after_s(self) -> int:
        """Seconds until a place is likely free: the queue ahead, served N at a time, at the recent mean duration."""
        with self._lock:
            mean = sum(self._durations) / len(self._durations) if self._durations else 1.0
            rounds = (len(self._in_flight) - self.n_slots) / self.n_slots + 1
        return max(1, math.ceil(mean * max(rounds, 1.0)))
