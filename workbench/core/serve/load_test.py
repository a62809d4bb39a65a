"""A load test for any OpenAI-compatible server: C clients streaming chat completions, measured per request."""

from __future__ import annotations

import json
import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PROMPTS = (
    "Explain in a few sentences why the sky is blue.",
    "Write a short note to a colleague about a delayed delivery.",
    "List some uses of a Raspberry Pi in a workshop.",
    "Describe how a bicycle gear works.",
)


@dataclass(frozen=True)
class RequestOutcome:
    status: int  # HTTP status; 0 when the connection failed
    ttft_s: float | None  # request sent to the first content token
    tokens: int  # completion tokens: the server's usage when it sends one, else content chunks
    tokens_source: str  # "usage" or "chunks"
    total_s: float
    decode_tps: float | None  # (tokens - 1) / (last token - first token)
    error: str = ""


@dataclass(frozen=True)
class LevelResult:
    clients: int
    requests: int
    ok: int
    rejected: int  # 429
    errors: int  # anything else that is not a complete answer
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    request_tps_mean: float | None  # per request decode tok/s
    aggregate_tps: float  # completion tokens of all answers / the level's wall time
    wall_s: float
    queue_wait_mean_s: float | None  # from the server's own /metrics (workbench servers only)
    queue_wait_source: str  # where queue_wait came from, or why it is unavailable
    tokens_source: str
    telemetry: str  # temperatures / power beside it when the server is local; else why not
    first_error: str = ""


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (the value at rank ceil(fraction * n)), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def stream_one(client: Any, url: str, model: str, prompt: str, max_tokens: int, headers: dict[str, str]) -> RequestOutcome:
    """One streamed chat completion through an httpx.Client; timings on this machine's clock."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.7}
    started = time.monotonic()
    first = last = None
    chunks = 0
    max_chunks = 4 * max_tokens + 16  # a token may come as several chunks, never as this many
    usage_tokens = None
    try:
        with client.stream("POST", url.rstrip("/") + "/chat/completions", json=body, headers=headers) as response:
            if response.status_code != 200:
                return RequestOutcome(response.status_code, None, 0, "chunks", time.monotonic() - started, None,
                                      _error_text(_head(response)))
            for line in _lines(response):
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                payload = json.loads(data)
                if not isinstance(payload, dict):
                    raise ValueError(f"an SSE event is {type(payload).__name__}, not an object")
                if "error" in payload:
                    return RequestOutcome(500, None, chunks, "chunks", time.monotonic() - started, None,
                                          str(payload["error"].get("message", payload["error"]))[:200])
                if payload.get("usage"):
                    usage_tokens = payload["usage"].get("completion_tokens")
                for choice in payload.get("choices") or ():
                    if (choice.get("delta") or {}).get("content"):
                        now = time.monotonic()
                        first = first or now
                        last = now
                        chunks += 1
                if chunks > max_chunks:  # a server streaming past what was asked is not waited for
                    return RequestOutcome(200, None, chunks, "chunks", time.monotonic() - started, None,
                                          f"the server sent more than {max_chunks} chunks for max_tokens {max_tokens}")
    except Exception as error:  # noqa: BLE001 - a load test counts failures, it does not stop on them
        return RequestOutcome(0, None, chunks, "chunks", time.monotonic() - started, None, f"{type(error).__name__}: {error}"[:200])
    total = time.monotonic() - started
    tokens, source = (usage_tokens, "usage") if isinstance(usage_tokens, int) else (chunks, "chunks")
    tps = (tokens - 1) / (last - first) if first is not None and last is not None and last > first and tokens > 1 else None
    return RequestOutcome(200, (first - started) if first else None, tokens, source, total, tps)


MAX_LINE_BYTES = 1_000_000  # an SSE line longer than this is no answer chunk


def _lines(response: Any) -> Any:
    """The response's text lines, refusing one longer than MAX_LINE_BYTES (a server could send one endless line)."""
    pending = b""
    for piece in response.iter_bytes():
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(pending) > MAX_LINE_BYTES:
            raise ValueError(f"the server sent a line of more than {MAX_LINE_BYTES} bytes")
    if pending:
        yield pending.decode("utf-8", errors="replace")


def _head(response: Any, limit: int = 65_536) -> str:
    """At most `limit` bytes of an error body, as text."""
    body = b""
    for piece in response.iter_bytes():
        body += piece
        if len(body) >= limit:
            break
    return body[:limit].decode("utf-8", errors="replace")


def _error_text(text: str) -> str:
    try:
        return str(json.loads(text)["error"]["message"])[:200]
    except Exception:  # noqa: BLE001 - any other body is shown as it is, cut
        return text[:200]


def run_level(clients: int, requests_per_client: int, duration_s: float | None, send: Callable[[int], RequestOutcome]
              ) -> tuple[list[RequestOutcome], float]:
    """C threads sending back to back: K requests each, or until `duration_s` has passed."""
    outcomes: list[RequestOutcome] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)
    began = [0.0]

    def client_loop(index: int) -> None:
        start.wait()
        if index == 0:
            began[0] = time.monotonic()
        sent = 0
        deadline = time.monotonic() + duration_s if duration_s else None
        while (deadline is None and sent < requests_per_client) or (deadline is not None and time.monotonic() < deadline):
            outcome = send(index * 1000 + sent)
            with lock:
                outcomes.append(outcome)
            sent += 1
            if outcome.status == 429:
                time.sleep(0.2)  # a rejected client backs off a little before trying again

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    t0 = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes, time.monotonic() - (began[0] or t0)


def summarize(clients: int, outcomes: list[RequestOutcome], wall_s: float, queue_wait: tuple[float | None, str],
              telemetry: str) -> LevelResult:
    ok = [o for o in outcomes if o.status == 200 and not o.error]
    ttfts = [o.ttft_s for o in ok if o.ttft_s is not None]
    rates = [o.decode_tps for o in ok if o.decode_tps is not None]
    failures = [o for o in outcomes if o.status not in (200, 429) or o.error and o.status != 429]
    sources = {o.tokens_source for o in ok}
    return LevelResult(
        clients=clients, requests=len(outcomes), ok=len(ok),
        rejected=sum(1 for o in outcomes if o.status == 429),
        errors=len(failures),
        ttft_p50_s=percentile(ttfts, 0.5), ttft_p95_s=percentile(ttfts, 0.95),
        request_tps_mean=statistics.fmean(rates) if rates else None,
        aggregate_tps=sum(o.tokens for o in ok) / wall_s if wall_s > 0 else 0.0,
        wall_s=wall_s, queue_wait_mean_s=queue_wait[0], queue_wait_source=queue_wait[1],
        tokens_source="usage" if sources == {"usage"} else ("chunks" if sources else "none"),
        telemetry=telemetry, first_error=failures[0].error if failures else "",
    )


def server_queue_wait(metrics_text: str | None) -> tuple[float, float] | None:
    """(sum, count) of workbench_api_queue_wait_seconds from a /metrics text, None when absent."""
    if not metrics_text:
        return None
    from prometheus_client.parser import text_string_to_metric_families  # deferred: importing prometheus_client costs start-up time

    total = count = None
    try:
        for family in text_string_to_metric_families(metrics_text):
            if family.name == "workbench_api_queue_wait_seconds":
                for sample in family.samples:
                    if sample.name.endswith("_sum"):
                        total = sample.value
                    elif sample.name.endswith("_count"):
                        count = sample.value
    except ValueError:
        return None
    return (total, count) if total is not None and count is not None else None
