"""`workbench bench serve --url URL --clients 1,2,4,8`: load-test any OpenAI-compatible server."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from urllib.parse import urlparse

from workbench.core.config.loopback import is_loopback_host
from workbench.core.errors import WorkbenchError
from workbench.core.serve.load_test import PROMPTS, run_level, server_queue_wait, stream_one, summarize
from workbench.core.telemetry.sampler import Sampler
from workbench.core.units import size

MAX_CLIENTS = 256
MAX_MODELS_BYTES = 1_000_000
MAX_METRICS_BYTES = 5_000_000


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "serve",
        help="load-test an OpenAI-compatible server (ours, llama-server, Ollama) at several concurrency levels",
        description="For each concurrency level C, C clients stream chat completions back to back. Prints TTFT "
        "p50/p95, per-request and aggregate tok/s, queue wait (from a workbench server's /metrics), "
        "rejections (429) and errors per level, with telemetry beside it when the server is on this machine.",
    )
    parser.add_argument("--url", required=True, help="the server or its API base: http://127.0.0.1:8080 or "
                        "http://127.0.0.1:8080/v1 (without /v1, /v1 is added when the URL itself has no /models)")
    parser.add_argument("--clients", default="1,2,4,8", help="comma-separated concurrency levels (default 1,2,4,8)")
    parser.add_argument("-n", "--max-tokens", type=int, default=64, help="tokens per answer (default 64)")
    parser.add_argument("--requests", type=int, default=3, help="requests per client and level (default 3)")
    parser.add_argument("--duration", type=float, help="seconds per level instead of a fixed number of requests")
    parser.add_argument("--model", default="", help="model id to send (default: the first of GET /models)")
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY'")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    parser.set_defaults(func=run_serve)


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise WorkbenchError(f"--clients {text!r} is not a list of numbers", fix="Give e.g. --clients 1,2,4,8") from None
    if not levels or any(not 1 <= level <= MAX_CLIENTS for level in levels):
        raise WorkbenchError(f"--clients {text!r}: each level must be 1 to {MAX_CLIENTS}", fix="Give e.g. --clients 1,2,4,8")
    return levels


def run_serve(args: argparse.Namespace) -> int:
    import httpx  # deferred: importing httpx costs start-up time


    levels = parse_levels(args.clients)
    if not 1 <= args.max_tokens <= 100_000:
        raise WorkbenchError(f"-n {args.max_tokens} is out of range", fix="Give 1 to 100000 tokens per answer")
    if not 1 <= args.requests <= 10_000 or (args.duration is not None and not 0 < args.duration <= 86_400):
        raise WorkbenchError("--requests must be 1 to 10000 and --duration 0 to 86400 seconds")
    url = args.url.rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise WorkbenchError(f"--url {args.url!r} is not an http(s) URL", fix="Give e.g. --url http://127.0.0.1:8080/v1")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    timeout = httpx.Timeout(600.0, connect=10.0)
    with httpx.Client(timeout=timeout, limits=httpx.Limits(max_connections=max(levels) + 4)) as client:
        url = api_base(client, url, headers)
        model = args.model or _first_model(client, url, headers)
        local = is_loopback_host(parsed.hostname)
        sampler = _sampler() if local else None
        metrics_url = f"{parsed.scheme}://{parsed.netloc}/metrics"
        results = []
        for level in levels:
            before = _get_text(client, metrics_url, headers)
            first_sample = sampler.sample() if sampler is not None else None

            outcomes, wall = run_level(level, args.requests, args.duration, lambda i: stream_one(
                client, url, model, PROMPTS[i % len(PROMPTS)], args.max_tokens, headers))
            after = _get_text(client, metrics_url, headers)
            telemetry = _telemetry_text(sampler, first_sample) if sampler is not None else "not shown: the server is not on this machine"
            results.append(summarize(level, outcomes, wall, _queue_wait(server_queue_wait(before), server_queue_wait(after)), telemetry))
            _print_level(results[-1], args.json)
    if sampler is not None:
        sampler.close()
    return 0 if all(result.ok for result in results) else 1


def api_base(client, url: str, headers: dict[str, str]) -> str:
    """The OpenAI base the user means: the URL as given when its /models answers, else the URL + /v1
    (a server's address without the /v1 that llama-server, Ollama and ours put the API under)."""
    if urlparse(url).path.endswith("/v1"):
        return url
    status, _ = _get_capped(client, url + "/models", headers, MAX_MODELS_BYTES)
    if status in (404, 405):
        with_v1 = url + "/v1"
        status_v1, _ = _get_capped(client, with_v1 + "/models", headers, MAX_MODELS_BYTES)
        if status_v1 is not None and status_v1 != 404:
            return with_v1
    return url


def _first_model(client, url: str, headers: dict[str, str]) -> str:
    status, text = _get_capped(client, url + "/models", headers, MAX_MODELS_BYTES)
    if status is None:
        raise WorkbenchError(f"cannot reach {url}: {text}", fix="Check the --url and that the server runs")
    if status != 200:
        raise WorkbenchError(f"{url}/models answered HTTP {status}", fix="Check --url and --api-key")
    try:
        model = json.loads(text)["data"][0]["id"]
        if not isinstance(model, str) or not model.isprintable() or not 0 < len(model) <= 200:
            raise ValueError(model)
        return model
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        raise WorkbenchError(f"{url}/models did not list a usable model id", fix="Give the model id with --model") from None


def _get_capped(client, url: str, headers: dict[str, str], limit: int) -> tuple[int | None, str]:
    """(status, at most `limit` bytes of the body as text); (None, why) when the server cannot be reached."""
    try:
        with client.stream("GET", url, headers=headers) as response:
            body = b""
            for piece in response.iter_bytes():
                body += piece
                if len(body) > limit:
                    return response.status_code, ""  # too large to be what was asked for
            return response.status_code, body.decode("utf-8", errors="replace")
    except Exception as error:  # noqa: BLE001 - one line, not a traceback
        return None, f"{type(error).__name__}: {error}"[:200]


def _get_text(client, url: str, headers: dict[str, str]) -> str | None:
    # A server without /metrics is normal (llama-server without --metrics).
    status, text = _get_capped(client, url, headers, MAX_METRICS_BYTES)
    return text if status == 200 and text else None


def _queue_wait(before, after) -> tuple[float | None, str]:
    if before is None or after is None:
        return None, "unavailable: the server exposes no workbench_api_queue_wait_seconds in /metrics"
    count = after[1] - before[1]
    if count <= 0:
        return None, "unavailable: no request got a slot during this level"
    return (after[0] - before[0]) / count, "server /metrics (workbench_api_queue_wait_seconds)"


def _sampler():
    return Sampler()


def _telemetry_text(sampler, first) -> str:
    last = sampler.sample()
    parts = []
    if last.temperatures:
        hottest = max(last.temperatures, key=lambda t: t.celsius)
        parts.append(f"{hottest.name} {hottest.celsius:.0f} °C")
    else:
        why = next((u.why for u in last.unavailable if u.what == "temperature"), "no sensor")
        parts.append(f"temperature unavailable ({why})")
    if first is not None and first.energy_j is not None and last.energy_j is not None and last.timestamp > first.timestamp:
        parts.append(f"{(last.energy_j - first.energy_j) / (last.timestamp - first.timestamp):.1f} W mean ({last.energy_source})")
    elif last.total_power_w is not None:
        parts.append(f"{last.total_power_w:.1f} W ({last.total_power_source})")
    else:
        why = next((u.why for u in last.unavailable if u.what in ("power", "energy")), "no power source")
        parts.append(f"power unavailable ({why})")
    used = last.mem_total_bytes - last.mem_available_bytes
    parts.append(f"memory used {size(used)} of {size(last.mem_total_bytes)}")
    return "; ".join(parts)


def _print_level(result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(result)), flush=True)
        return

    def seconds(value):
        return f"{value * 1000:,.0f} ms" if value is not None else "n/a"

    rate = f"{result.request_tps_mean:.1f}" if result.request_tps_mean is not None else "n/a"
    print(f"clients {result.clients}: {result.ok}/{result.requests} answered, {result.rejected} rejected (429), "
          f"{result.errors} errors; TTFT p50 {seconds(result.ttft_p50_s)}, p95 {seconds(result.ttft_p95_s)}; "
          f"{rate} tok/s per request, {result.aggregate_tps:.1f} tok/s aggregate over {result.wall_s:.1f} s "
          f"(tokens from {result.tokens_source})", flush=True)
    wait = seconds(result.queue_wait_mean_s) if result.queue_wait_mean_s is not None else "n/a"
    print(f"  queue wait {wait} ({result.queue_wait_source}); telemetry: {result.telemetry}", flush=True)
    if result.first_error:
        print(f"  first error: {result.first_error}", file=sys.stderr, flush=True)
