"""`workbench api` on the real engine, driven by the official `openai` client over HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import httpx
import openai
import pytest
from fakes import wait_for
from prometheus_client.parser import text_string_to_metric_families

KEY = "test-key-123"
SLOTS = 4
QUEUE = 1
PRESET_TOML = """
name = "api-test"
description = "small context, one thread: fast on a shared two-core machine"
weights = "keep"
ctx_size = 2048
batch_size = 256
ubatch_size = 256
threads = 1
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = false
mlock = false
mmap = true
"""
SLOT_CTX = 2048 // SLOTS  # llama-server's rule: ctx / parallel
START_TIMEOUT_S = 180  # loading on a loaded two-core machine; only an upper bound, never a threshold
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Server:
    def __init__(self, process: subprocess.Popen, url: str, lines: list[str]) -> None:
        self.process = process
        self.url = url
        self.lines = lines

    def client(self, key: str = KEY, **kwargs) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=300, **kwargs)

    def health(self) -> dict:
        return httpx.get(self.url + "/health", headers={"Authorization": f"Bearer {KEY}"}, timeout=60).json()

    def metrics(self) -> dict:
        text = httpx.get(self.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=60).text
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    preset = tmp_path_factory.mktemp("api") / "api-test.toml"
    preset.write_text(PRESET_TOML)
    process = subprocess.Popen(
        [sys.executable, "-m", "workbench", "api", "bundled", "--preset", str(preset), "--port", "0",
         "--parallel", str(SLOTS), "--queue", str(QUEUE), "--api-key", KEY],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            match = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    found.wait(START_TIMEOUT_S)
    if not url:
        process.kill()
        pytest.fail("the server did not start:\n" + "".join(lines[-30:]))
    yield Server(process, url[0], lines)
    process.send_signal(signal.SIGINT)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_the_plan_shows_the_per_slot_context_and_the_ledger_before_serving(server):
    text = "".join(server.lines)
    assert f"slots: {SLOTS} x {SLOT_CTX:,} tokens of context" in text
    assert "KV cache" in text and "left for the LLM" in text  # the ledger table
    assert text.index("slots:") < text.index("serving ")
    # the ledger is the one for SLOTS sequences, and the engine made its context for them at load
    assert f"{SLOTS} (parallel): one KV cache of ctx cells shared (kv_unified)" in text
    assert f"cells shared by {SLOTS} sequences" in text and "context re-made" not in text


def test_plain_chat_answer_and_text_completion(server):
    client = server.client()
    answer = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=8, temperature=0)
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert 0 < answer.usage.completion_tokens <= 8 and answer.usage.prompt_tokens > 5
    completion = client.completions.create(model="any", prompt="The capital of France is", max_tokens=6, temperature=0)
    assert completion.choices[0].text and completion.usage.completion_tokens <= 6
    models = client.models.list()
    assert [model.id for model in models.data] == [m.id for m in models.data][:1]


def test_a_stream_carries_the_same_greedy_answer_as_the_plain_request(server):
    client = server.client()
    whole = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=12, temperature=0)
    stream = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=12, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    pieces, reasons, usage = [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
    assert "".join(pieces) == whole.choices[0].message.content
    assert reasons == [whole.choices[0].finish_reason]
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
    # each token is streamed as it is decoded, in a chunk of its own (this greedy answer is ASCII)
    assert len([piece for piece in pieces if piece]) == usage.completion_tokens


def test_four_concurrent_streams_decode_in_one_batch(server):
    client = server.client()
    barrier = threading.Barrier(SLOTS)
    texts: dict[int, str] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(60)
            stream = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": f"Count from {index} to {index + 30}."}],
                max_tokens=32, temperature=0, stream=True)
            texts[index] = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(SLOTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    assert len(texts) == SLOTS and all(texts.values())
    metrics = server.metrics()
    assert metrics[("workbench_api_batch_sequences_max", ())] == SLOTS


def test_past_the_queue_a_request_gets_429_and_disconnects_free_their_slots(server):
    client = server.client()
    long_question = [{"role": "user", "content": "Tell me a very long story about a dragon."}]
    # SLOTS running + QUEUE waiting: the server is full. Each stream's headers arrive once
    # the engine accepted it, so after create() returns it is counted.
    streams = [client.chat.completions.create(model="any", messages=long_question, max_tokens=400, temperature=0.8,
                                              stream=True) for _ in range(SLOTS + QUEUE)]
    try:
        wait_for(lambda: server.health()["slots_busy"] == SLOTS)
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="any", messages=QUESTION, max_tokens=4)
        assert int(refused.value.response.headers["retry-after"]) >= 1
        assert "queue" in str(refused.value)
    finally:
        for stream in streams:
            stream.close()  # the client goes away mid-answer
    # Every disconnect cancelled its generation: the slots are free and their KV cells released.
    wait_for(lambda: server.health()["slots_busy"] == 0 and server.health()["queued"] == 0)
    metrics = wait_for(lambda: (lambda m: m if m[("workbench_api_kv_cells_used", ())] == 0 else None)(server.metrics()))
    assert all(metrics[("workbench_api_slot_kv_cells", (("slot", str(slot)),))] == 0 for slot in range(SLOTS))
    assert metrics[("workbench_api_requests_total", (("endpoint", "chat"), ("status", "429")))] >= 1


def test_a_client_that_hangs_up_on_a_whole_answer_frees_its_slot(server):
    import json
    import socket
    from urllib.parse import urlparse

    address = urlparse(server.url)
    body = json.dumps({"messages": [{"role": "user", "content": "Write a long essay about rivers."}],
                       "max_tokens": 400, "temperature": 0.8}).encode()
    with socket.create_connection((address.hostname, address.port), timeout=60) as raw:
        raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: server.health()["slots_busy"] == 1)
    # The connection is closed before any answer: the generation is cancelled, the slot freed.
    wait_for(lambda: server.health()["slots_busy"] == 0)
    metrics = server.metrics()
    assert metrics[("workbench_api_requests_total", (("endpoint", "chat"), ("status", "499")))] >= 1


def test_the_cli_server_refuses_a_rebound_host_and_a_text_plain_post(server):
    # The page-facing attacks of issue 21, against `workbench api` as the CLI wires it.
    headers = {"Authorization": f"Bearer {KEY}"}
    port = server.url.rsplit(":", 1)[1]
    rebound = httpx.get(server.url + "/metrics", headers={**headers, "Host": f"rebind.evil.example:{port}"}, timeout=60)
    assert rebound.status_code == 421
    plain = httpx.post(server.url + "/v1/chat/completions", content=b'{"messages": [{"role": "user", "content": "hi"}]}',
                       headers={**headers, "Content-Type": "text/plain"}, timeout=60)
    assert plain.status_code == 415
    foreign = httpx.get(server.url + "/v1/models", headers={**headers, "Origin": "https://evil.example"}, timeout=60)
    assert foreign.status_code == 403
    assert "process list" in "".join(server.lines)  # --api-key on the command line is warned about


def test_without_the_key_every_request_gets_401(server):
    with pytest.raises(openai.AuthenticationError):
        server.client(key="wrong").chat.completions.create(model="any", messages=QUESTION, max_tokens=4)
    for path in ("/v1/models", "/metrics", "/health"):
        assert httpx.get(server.url + path, timeout=60).status_code == 401


def test_a_request_too_long_for_a_slot_gets_400_with_the_numbers(server):
    client = server.client()
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "word " * SLOT_CTX}], max_tokens=4)
    assert f"a slot's context holds {SLOT_CTX}" in str(too_long.value)
    with pytest.raises(openai.BadRequestError) as too_many:
        client.chat.completions.create(model="any", messages=QUESTION, max_tokens=SLOT_CTX)
    assert "lower max_tokens to" in str(too_many.value)


@pytest.mark.parametrize("body, words", [
    ({"messages": "hi"}, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "hi"}], "temperature": 3}, "'temperature' 3"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}, "'max_tokens' must be an integer"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0}, "'top_p'"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 3}, "one choice per request"),
    ({"messages": [{"role": "user", "content": "hi"}], "stop": ["a", "b", "c", "d", "e"]}, "'stop' takes at most 4"),
])
def test_bad_bodies_get_a_clear_400(server, body, words):
    response = httpx.post(server.url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert response.status_code == 400
    assert words in response.json()["error"]["message"]


def test_a_body_over_the_size_limit_gets_413_and_broken_json_400(server):
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * 1_100_000 + b'"}]}'
    assert httpx.post(server.url + "/v1/chat/completions", content=big, headers=headers, timeout=60).status_code == 413
    broken = httpx.post(server.url + "/v1/chat/completions", content=b"{not json", headers=headers, timeout=60)
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]


def test_metrics_count_what_the_client_was_told(server):
    client = server.client()
    before = server.metrics()
    answer = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=6, temperature=0)
    after = server.metrics()

    def delta(name, labels=()):
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    assert delta("workbench_api_requests_total", (("endpoint", "chat"), ("status", "200"))) == 1
    assert delta("workbench_api_prompt_tokens_total") == answer.usage.prompt_tokens
    assert delta("workbench_api_completion_tokens_total") == answer.usage.completion_tokens
    assert delta("workbench_api_time_to_first_token_seconds_count") == 1
    assert delta("workbench_api_token_latency_seconds_count") == answer.usage.completion_tokens - 1
    assert after[("workbench_api_slots", ())] == SLOTS and after[("workbench_api_engine_up", ())] == 1
    assert after[("workbench_api_kv_cells", ())] == 2048
    # The telemetry beside it (issue 12's families): memory is readable on any Linux machine.
    assert any(name.startswith("workbench_") and not name.startswith("workbench_api_") for name, _ in after)


def test_metrics_show_llama_cpps_own_decode_time_beside_the_clients_figures(server):
    """One answer alone: every token after the first (and a final end-of-generation token) took one
    next-token-only llama_decode of 1 sequence; its time is part of all llama_decode time."""
    client = server.client()
    steps_1 = ("workbench_api_decode_steps", (("sequences", "1"),))
    seconds_1 = ("workbench_api_decode_step_seconds", (("sequences", "1"),))
    llama = ("workbench_api_llama_decode_seconds", ())
    before = server.metrics()
    answer = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=8, temperature=0)
    ended_on_eog = answer.choices[0].finish_reason == "stop"
    expected_steps = answer.usage.completion_tokens - 1 + (1 if ended_on_eog else 0)
    # the engine's status reaches /metrics just after the answer: waited for, not raced
    def booked():
        metrics = server.metrics()
        return metrics if metrics.get(steps_1, 0) - before.get(steps_1, 0) >= expected_steps else None

    after = wait_for(booked)
    assert after[steps_1] - before.get(steps_1, 0) == expected_steps
    step_time = after[seconds_1] - before.get(seconds_1, 0)
    assert step_time > 0
    assert after[llama] - before.get(llama, 0) > step_time  # the prompt's llama_decode too


def test_engine_killed_mid_answer_gives_503_then_the_server_recovers(server):
    client = server.client()
    pid = server.health()["engine_pid"]
    outcome: dict = {}

    def whole_request() -> None:
        try:
            client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Write a long poem."}],
                                           max_tokens=400, temperature=0.8)
            outcome["answered"] = True
        except openai.APIStatusError as error:
            outcome["status"] = error.status_code
            outcome["message"] = str(error)

    stream = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Write a long story."}],
                                            max_tokens=400, temperature=0.8, stream=True)
    chunks = iter(stream)
    next(chunks)
    waiter = threading.Thread(target=whole_request)
    waiter.start()
    wait_for(lambda: server.health()["slots_busy"] == 2)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(openai.APIError):
        for _chunk in chunks:
            pass
    waiter.join(120)
    assert outcome.get("status") == 503 and "restart" in outcome["message"]
    health = wait_for(lambda: (lambda h: h if h["status"] == "ok" else None)(server.health()), START_TIMEOUT_S)
    assert health["engine_pid"] != pid and health["restarts"] == 1
    console = "".join(server.lines)  # the server's console says what happened, in order
    stopped = console.index("workbench api: engine stopped: ")
    restarted = console.index(f"workbench api: engine restarted (pid {health['engine_pid']}, restart 1) after ")
    assert stopped < restarted and "restarting it (requests get 503 meanwhile)" in console
    again = client.chat.completions.create(model="any", messages=QUESTION, max_tokens=4, temperature=0)
    assert again.choices[0].message.content


def test_bench_serve_measures_each_concurrency_level_against_the_server(server, cli):
    result = cli("bench", "serve", "--url", server.url + "/v1", "--clients", "1,2", "-n", "8", "--requests", "1",
                 "--api-key", KEY, "--json")
    assert result.returncode == 0, result.stderr
    import json

    levels = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [level["clients"] for level in levels] == [1, 2]
    for level in levels:
        assert level["ok"] == level["requests"] == level["clients"] and level["errors"] == 0
        assert level["tokens_source"] == "usage" and level["aggregate_tps"] > 0
        assert level["ttft_p50_s"] is not None and level["ttft_p50_s"] <= level["ttft_p95_s"]
        # Our server exposes its own queue wait; the load test reads it from /metrics.
        assert level["queue_wait_mean_s"] is not None and "workbench_api_queue_wait_seconds" in level["queue_wait_source"]
