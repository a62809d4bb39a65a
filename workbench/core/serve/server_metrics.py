"""The server's Prometheus metrics: requests, queue, slots, tokens, TTFT and token latency, KV cells, telemetry."""

from __future__ import annotations

import threading
import time
from typing import Any

from workbench.core.engine.events import EngineFailed
from workbench.core.engine.sequence_events import (
    SequenceAccepted,
    SequenceFinished,
    SequenceRejected,
    SequenceStarted,
    SequenceTokens,
)
from workbench.core.telemetry.metrics import SampleCollector

# Seconds. TTFT on a board ranges from tens of ms (short prompt, small model) to minutes (queued behind long ones).
TTFT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TOKEN_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
TELEMETRY_MAX_AGE_S = 0.5  # telemetry is sampled at scrape time, at most at 2 Hz (DESIGN: <= 2 Hz)


class ServerMetrics:
    """A prometheus_client registry of its own; `observe()` is called on the engine's reader thread."""

    def __init__(self, admission: Any, host: Any, telemetry: Any = None) -> None:
        from prometheus_client import (  # deferred: importing prometheus_client costs start-up time
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self.registry = CollectorRegistry()
        self._admission = admission
        self._host = host
        self._telemetry = telemetry  # a telemetry Sampler, or None (no telemetry in /metrics)
        self._telemetry_at = 0.0
        self._telemetry_lock = threading.Lock()
        r = self.registry
        self.requests = Counter("workbench_api_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("workbench_api_prompt_tokens", "Prompt tokens of accepted requests (llama.cpp's tokenizer)", registry=r)
        self.completion_tokens = Counter("workbench_api_completion_tokens", "Tokens generated", registry=r)
        self.ttft = Histogram("workbench_api_time_to_first_token_seconds",
                              "Submission to first token, queue wait included (engine clock)", buckets=TTFT_BUCKETS, registry=r)
        self.token_latency = Histogram("workbench_api_token_latency_seconds",
                                       "Time between consecutive tokens of one request (engine clock)", buckets=TOKEN_BUCKETS, registry=r)
        self.queue_wait = Histogram("workbench_api_queue_wait_seconds", "Submission to getting a slot",
                                    buckets=TTFT_BUCKETS, registry=r)
        Gauge("workbench_api_queue_depth", "Requests waiting for a slot", registry=r).set_function(lambda: admission.waiting)
        Gauge("workbench_api_slots_busy", "Slots holding a request", registry=r).set_function(lambda: admission.running)
        Gauge("workbench_api_slots", "Slots (sequences decoded together)", registry=r).set_function(lambda: admission.n_slots)
        Gauge("workbench_api_queue_limit", "Requests allowed to wait beyond the slots", registry=r).set_function(lambda: admission.queue_limit)
        Gauge("workbench_api_engine_up", "1 when the engine is ready to take requests", registry=r).set_function(
            lambda: 1.0 if host.state == "ready" else 0.0)
        Gauge("workbench_api_engine_restarts", "Engine restarts after a crash", registry=r).set_function(lambda: host.restarts)
        self._kv_used = Gauge("workbench_api_kv_cells_used", "KV cells in use (llama.cpp's sequence positions)", registry=r)
        self._kv_total = Gauge("workbench_api_kv_cells", "KV cells in the context (n_ctx)", registry=r)
        self._batch_max = Gauge("workbench_api_batch_sequences_max",
                                 "Most sequences one llama_decode call held since the engine (re)started", registry=r)
        self._slot_cells = Gauge("workbench_api_slot_kv_cells", "KV cells of one slot's sequence", ["slot"], registry=r)
        # what llama.cpp itself costs, beside what the clients see: the server's overhead is the difference
        self._llama_seconds = Gauge("workbench_api_llama_decode_seconds",
                                    "Time in llama_decode (to llama_synchronize) since the engine (re)started", registry=r)
        self._decode_steps = Gauge("workbench_api_decode_steps",
                                   "llama_decode calls of next tokens only (no prompt), by sequences in the batch, "
                                   "since the engine (re)started", ["sequences"], registry=r)
        self._decode_step_seconds = Gauge("workbench_api_decode_step_seconds",
                                          "Time in those llama_decode calls, by sequences in the batch", ["sequences"], registry=r)
        self._last_token_at: dict[int, float] = {}
        if telemetry is not None:
            self._collector = SampleCollector()
            r.register(self._collector)  # type: ignore[arg-type]

    def observe(self, request_id: int, event: object) -> None:
        if isinstance(event, SequenceAccepted):
            self.prompt_tokens.inc(event.prompt_tokens)
        elif isinstance(event, SequenceStarted):
            self.queue_wait.observe(event.queued_s)
        elif isinstance(event, SequenceTokens):
            previous = self._last_token_at.get(request_id)
            for stamp in event.timestamps:
                if previous is not None:
                    self.token_latency.observe(max(0.0, stamp - previous))
                previous = stamp
            if previous is not None:
                self._last_token_at[request_id] = previous
            self.completion_tokens.inc(event.n_tokens)
        elif isinstance(event, SequenceFinished):
            self._last_token_at.pop(request_id, None)
            if event.generated_tokens:
                self.ttft.observe(event.ttft_s)
        elif isinstance(event, (SequenceRejected, EngineFailed)):
            self._last_token_at.pop(request_id, None)

    def exposition(self) -> bytes:
        """The text format, with the KV figures and telemetry read now."""
        from prometheus_client import generate_latest  # deferred: importing prometheus_client costs start-up time

        status = self._host.status
        opened = self._host.opened
        if opened is not None:
            self._kv_total.set(opened.n_ctx)
        if status is not None:
            self._kv_used.set(status.kv_cells_used)
            self._batch_max.set(status.max_batch_sequences)
            for slot in status.slots:
                self._slot_cells.labels(slot=str(slot.slot)).set(slot.kv_cells)
            self._llama_seconds.set(status.llama_seconds)
            for steps in status.decode_steps:
                self._decode_steps.labels(sequences=str(steps.sequences)).set(steps.steps)
                self._decode_step_seconds.labels(sequences=str(steps.sequences)).set(steps.seconds)
        self._refresh_telemetry()
        return generate_latest(self.registry)

    def _refresh_telemetry(self) -> None:
        if self._telemetry is None:
            return
        with self._telemetry_lock:
            now = time.monotonic()
            if now - self._telemetry_at < TELEMETRY_MAX_AGE_S:
                return
            self._telemetry_at = now
            self._telemetry.set_engine_pid(self._host.pid)
            self._collector.update(self._telemetry.sample())
