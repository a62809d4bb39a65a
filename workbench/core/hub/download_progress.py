"""A download's progress over all its parts: bytes done, a rate over the last seconds, throttled events."""

from __future__ import annotations

import time
from collections import deque

from workbench.core.hub.download_events import DownloadProgressed, EventSink

PROGRESS_INTERVAL_S = 0.2
RATE_WINDOW_S = 5.0


class DownloadProgress:
    """Bytes done over all parts, a rate over the last few seconds, throttled events."""

    def __init__(self, repo: str, filename: str, total: int, emit: EventSink) -> None:
        self.repo, self.filename, self.total, self._emit = repo, filename, total, emit
        self.done = 0
        self._samples: deque[tuple[float, int]] = deque()
        self._last_emit = 0.0
        self._transferred = 0

    def add_done(self, n_bytes: int, *, force: bool = False) -> None:
        self.done += n_bytes
        now = time.monotonic()
        if not force:
            self._transferred += n_bytes
            self._samples.append((now, self._transferred))
            while self._samples and now - self._samples[0][0] > RATE_WINDOW_S:
                self._samples.popleft()
        if force or now - self._last_emit >= PROGRESS_INTERVAL_S or self.done >= self.total:
            self._last_emit = now
            rate = self._rate(now)
            eta = max(self.total - self.done, 0) / rate if rate else None
            self._emit(DownloadProgressed(self.repo, self.filename, self.done, self.total, rate, eta))

    def _rate(self, now: float) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        span = max(now - t0, t1 - t0)
        return (b1 - b0) / span if span >= 0.2 else None
