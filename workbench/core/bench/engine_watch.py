"""Watches an engine process during a bench: peak RSS (fast) and telemetry samples (<= 2 Hz)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psutil

from workbench.core.telemetry.sample import TelemetrySample

RSS_PERIOD_S = 0.05  # one psutil call on one pid: cheap enough to catch short peaks
TELEMETRY_PERIOD_S = 0.5  # the samplers' agreed ceiling of 2 Hz


class EngineWatch:
    """A daemon thread sampling one engine process; read its figures after stop()."""

    def __init__(self, pid: int, sample: Callable[[], TelemetrySample]) -> None:
        self._process = psutil.Process(pid)
        self._sample = sample
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sample_lock = threading.Lock()  # samplers keep state (energy counters): one caller at a time
        self._rss_frozen = False
        self.peak_rss_bytes = 0
        self.samples: list[TelemetrySample] = []
        self.sample_errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name=f"bench-watch-{pid}", daemon=True)

    def start(self) -> EngineWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def freeze_rss(self) -> None:
        """Stop tracking the peak (perplexity's all-position logits would inflate it)."""
        self._read_rss()
        with self._lock:
            self._rss_frozen = True

    def sample_now(self) -> TelemetrySample | None:
        """One telemetry sample taken now (marks the ends of a timed phase)."""
        try:
            with self._sample_lock:
                sample = self._sample()
        except Exception as error:  # a broken sensor must not end the bench; it is reported
            self.sample_errors.append(f"{type(error).__name__}: {error}")
            return None
        with self._lock:
            self.samples.append(sample)
        return sample

    def samples_between(self, start: float, end: float) -> list[TelemetrySample]:
        with self._lock:
            return [s for s in self.samples if start <= s.timestamp <= end]

    def _read_rss(self) -> None:
        try:
            rss = self._process.memory_info().rss
        except psutil.Error:  # the process ended; the client reports why
            return
        with self._lock:
            if not self._rss_frozen and rss > self.peak_rss_bytes:
                self.peak_rss_bytes = rss

    def _run(self) -> None:
        next_telemetry = time.monotonic()
        while not self._stop.is_set():
            self._read_rss()
            if time.monotonic() >= next_telemetry:
                self.sample_now()
                next_telemetry = time.monotonic() + TELEMETRY_PERIOD_S
            self._stop.wait(RSS_PERIOD_S)
