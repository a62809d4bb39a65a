"""The real engine process on the bundled model: load, chat, reuse, cancel, busy, ops."""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest
from real_engine import ROOMY, loaded_client

from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import (
    ChatMessage,
    EngineFailed,
    Loaded,
    LoadProgressed,
    PrefillProgressed,
    Sampling,
    TokenChunk,
    TurnFinished,
)
from workbench.core.engine.sampling_checks import sampling_problems, validate_sampling
from workbench.core.errors import EngineError, WorkbenchError
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset

# One thread: the test machines have two cores shared with other work, where a second
# llama.cpp thread spends its time waiting for the first.
PRESET = Preset(name="test-1k", ctx_size=1024, batch_size=256, ubatch_size=256, threads=1)
GREEDY = Sampling(temperature=0.0, seed=7, max_tokens=8)
SYSTEM = ChatMessage("system", "You are a helpful assistant. Answer briefly.")


@pytest.fixture(scope="module")
def engine():
    yield from loaded_client(PRESET)


def run_turn(client, messages, sampling=GREEDY, on_chunk=None):
    chunks, others = [], []
    for event in client.chat(messages, sampling):
        if isinstance(event, TokenChunk):
            chunks.append(event)
            if on_chunk is not None:
                on_chunk(len(chunks))
        else:
            others.append(event)
    assert others, "the turn ended without a final event"
    return chunks, others


def test_load_reports_what_llama_cpp_allocated_and_the_context_it_gave(engine):
    from workbench.core.gguf.reader import read_gguf
    from workbench.core.ledger.predict import kv_bytes_per_token

    loaded = engine.loaded
    model = read_gguf(bundled_model_path())
    assert isinstance(loaded, Loaded)
    assert loaded.n_ctx == PRESET.ctx_size
    assert loaded.n_ctx_train == model.n_ctx_train
    # llama.cpp's own "KV buffer size" line agrees with the KV formula for an f16 cache
    assert loaded.kv_buffer_bytes == kv_bytes_per_token(model, "f16", "f16") * loaded.n_ctx
    assert loaded.model_buffer_bytes > 0.9 * model.weights_bytes
    assert loaded.compute_buffer_bytes > 0
    assert loaded.pid == engine.pid != os.getpid()
    assert loaded.rss_bytes >= loaded.uss_bytes > 0
    assert loaded.weights_type == model.file_type == "Q4_1"
    assert loaded.prediction.startswith("ledger for test-roomy")


def test_load_streams_progress_before_the_result():
    client = EngineClient()
    try:
        events = list(client.load(bundled_model_path(), PRESET, device=ROOMY))
    finally:
        client.close()
    stages = [event.stage for event in events if isinstance(event, LoadProgressed)]
    assert stages[0] == "validating" and "loading" in stages
    loading = [event.fraction for event in events if isinstance(event, LoadProgressed) and event.stage == "loading"]
    assert loading == sorted(loading) and loading[-1] > 0.5
    assert isinstance(events[-1], Loaded)


def test_chat_streams_tokens_stamped_in_the_engine_and_reports_the_turn(engine):
    messages = [SYSTEM, ChatMessage("user", "What is the capital of France?")]
    chunks, (finished,) = run_turn(engine, messages)
    assert isinstance(finished, TurnFinished)
    assert finished.text == "".join(chunk.text for chunk in chunks)
    assert finished.generated_tokens == sum(chunk.n_tokens for chunk in chunks) > 0
    assert chunks[0].n_tokens == 1  # the first token is not held back: it is the TTFT
    assert all(len(chunk.timestamps) == chunk.n_tokens and chunk.timestamp == chunk.timestamps[-1]
               for chunk in chunks if chunk.n_tokens)
    stamps = [stamp for chunk in chunks for stamp in chunk.timestamps]
    assert stamps == sorted(stamps) and len(stamps) == finished.generated_tokens
    assert finished.started_at < stamps[0] <= stamps[-1] <= finished.finished_at
    assert finished.ttft_s == pytest.approx(stamps[0] - finished.started_at)
    assert finished.prompt_tokens > 10 and finished.n_ctx == PRESET.ctx_size
    assert finished.prefill_tps > 0 and finished.prefill_s > 0
    assert finished.stop_reason in ("stop", "length")
    # a greedy answer of several tokens (the first is prefill's): the decode speed is measured
    assert finished.generated_tokens > 1 and finished.decode_tps > 0
    # the KV cache holds the prompt and every generated token that was fed back
    fed_back = finished.generated_tokens - (1 if finished.stop_reason == "length" else 0)
    assert finished.kv_cells_used == finished.prompt_tokens + fed_back


def test_the_same_prompt_again_is_served_from_the_kv_cache_but_its_last_token(engine):
    messages = [SYSTEM, ChatMessage("user", "Name a colour.")]
    first = run_turn(engine, messages)[1][-1]
    second = run_turn(engine, messages)[1][-1]
    assert second.prompt_tokens == first.prompt_tokens
    # one token is evaluated again so that there are fresh logits to sample from
    assert second.reused_tokens == second.prompt_tokens - 1


def test_the_next_turn_reuses_the_previous_prompt_from_the_kv_cache(engine):
    history = [SYSTEM, ChatMessage("user", "Say hello.")]
    first = run_turn(engine, history)[1][-1]
    history += [ChatMessage("assistant", first.text), ChatMessage("user", "Say goodbye.")]
    second = run_turn(engine, history)[1][-1]
    assert second.reused_tokens >= first.prompt_tokens
    assert second.prompt_tokens > second.reused_tokens


def test_cancel_from_another_thread_stops_decode_within_a_token_and_keeps_the_partial_answer(engine):
    cancelled_at = []

    def cancel_soon(n_chunks: int) -> None:
        if n_chunks == 2:
            canceller = threading.Thread(target=lambda: (cancelled_at.append(time.monotonic()), engine.cancel()))
            canceller.start()
            canceller.join()

    messages = [SYSTEM, ChatMessage("user", "Write a long story about a dragon and a knight.")]
    chunks, (finished,) = run_turn(engine, messages, Sampling(temperature=0.0, seed=7, max_tokens=300), cancel_soon)
    assert finished.stop_reason == "cancelled"
    assert finished.text == "".join(chunk.text for chunk in chunks) != ""
    # engine-side timestamps (one system-wide monotonic clock): at most the token being
    # computed when cancel() was called is still delivered
    assert sum(1 for chunk in chunks for stamp in chunk.timestamps if stamp > cancelled_at[0]) <= 1
    assert finished.generated_tokens < 300
    after = run_turn(engine, [SYSTEM, ChatMessage("user", "Hi")])[1][-1]
    assert isinstance(after, TurnFinished) and after.stop_reason != "cancelled"


def test_cancel_during_prefill_stops_inside_the_prompt_and_the_engine_recovers(engine):
    long_text = " ".join(f"item{i}" for i in range(150))  # ~450 prompt tokens
    messages = [SYSTEM, ChatMessage("user", f"Summarise this list: {long_text}")]
    chunks, events = [], []
    # cancelled once the engine says it has started reading the prompt (not after a fixed delay, which a
    # loaded machine can spend before the request is even sent, so that the cancel is cleared unseen)
    for event in engine.chat(messages, Sampling(temperature=0.0, max_tokens=16)):
        if isinstance(event, PrefillProgressed) and event.evaluated == 0:
            engine.cancel()  # thread-safe: the flag the engine polls per graph node
        (chunks if isinstance(event, TokenChunk) else events).append(event)
    *progress, finished = events
    assert all(isinstance(event, PrefillProgressed) for event in progress)  # one per prompt batch taken
    assert finished.stop_reason == "cancelled"
    assert chunks == [] and finished.generated_tokens == 0 and finished.text == ""
    assert finished.kv_cells_used < finished.prompt_tokens  # the prompt was not finished
    again = run_turn(engine, [SYSTEM, ChatMessage("user", "Hi")], Sampling(temperature=0.0, max_tokens=2))[1][-1]
    assert isinstance(again, TurnFinished) and again.stop_reason != "cancelled"
    # only what the aborted prefill really stored is reused: the system prompt at most
    assert again.reused_tokens <= finished.kv_cells_used
    assert again.kv_cells_used >= again.prompt_tokens


def test_a_second_request_while_one_runs_is_refused_with_a_reason(engine):
    messages = [SYSTEM, ChatMessage("user", "Count to ten.")]
    running = engine.chat(messages, Sampling(temperature=0.0, max_tokens=6))
    first = next(running)
    assert isinstance(first, (TokenChunk, TurnFinished))
    refused = list(engine.chat(messages, GREEDY))
    assert len(refused) == 1 and isinstance(refused[0], EngineFailed)
    assert refused[0].kind == "request" and "one at a time" in refused[0].message
    with pytest.raises(EngineError, match="busy"):
        engine.run_op("system_info")
    rest = list(running)
    assert isinstance(rest[-1], TurnFinished) if rest else isinstance(first, TurnFinished)


def test_an_abandoned_chat_iterator_leaves_the_engine_in_step(engine):
    messages = [SYSTEM, ChatMessage("user", "Tell me about the sea.")]
    for event in engine.chat(messages, Sampling(temperature=0.0, max_tokens=200)):
        assert isinstance(event, TokenChunk)
        break  # the iterator is dropped here: its request is cancelled and drained
    chunks, (finished,) = run_turn(engine, [SYSTEM, ChatMessage("user", "Hi")])
    assert isinstance(finished, TurnFinished) and finished.text == "".join(c.text for c in chunks)


def test_a_message_longer_than_the_context_is_refused_and_the_engine_stays_up(engine):
    messages = [SYSTEM, ChatMessage("user", "word " * 2000)]
    (failed,) = run_turn(engine, messages)[1]
    assert isinstance(failed, EngineFailed) and failed.kind == "request"
    assert "1024" in failed.message and "ctx_size" in failed.message
    assert engine.alive and engine.loaded is not None


@pytest.mark.parametrize(
    ("change", "said"),
    [({"temperature": -1.0}, "temperature -1 must be 0 to 2 (0 = greedy)"),
     ({"temperature": 5.0}, "temperature 5 must be 0 to 2"),  # the app took 5, the API 2: one range
     ({"top_p": 0.0}, "top_p 0 must be more than 0 and at most 1"),
     ({"top_p": 1.5}, "top_p 1.5 must be"),
     ({"top_k": -1}, "top_k -1 must be 0 or more"),
     ({"min_p": 2.0}, "min_p 2 must be between 0 and 1"),
     ({"repeat_penalty": 0.0}, "repeat_penalty 0 must be more than 0"),
     ({"max_tokens": 0}, "max_tokens 0 must be at least 1"),
     ({"temperature": float("nan")}, "temperature nan must be 0 to 2")],
)
def test_out_of_range_sampling_is_refused_in_one_line_before_the_engine_sees_it(engine, change, said):
    bad = dataclasses.replace(GREEDY, **change)
    with pytest.raises(WorkbenchError) as raised:
        validate_sampling(bad)
    assert said in str(raised.value) and "\n" not in str(raised.value)
    (failed,) = run_turn(engine, [SYSTEM, ChatMessage("user", "Hi")], bad)[1]
    assert isinstance(failed, EngineFailed) and failed.kind == "request" and said in failed.message
    assert engine.alive and engine.loaded is not None


def test_sampling_checks_name_every_bad_setting_and_pass_the_edges():
    validate_sampling(Sampling(temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=0.01, max_tokens=1))
    validate_sampling(Sampling(min_p=1.0, seed=2**32 - 1))
    problems = sampling_problems(Sampling(temperature=-0.5, max_tokens=0), {"temperature": "--temp"})
    assert [field for field, _ in problems] == ["temperature", "max_tokens"]
    assert problems[0][1].startswith("--temp -0.5 ")


def test_run_op_runs_a_measurement_in_the_engine_and_names_unknown_ops(engine):
    facts = engine.run_op("system_info")
    assert facts.n_ctx == PRESET.ctx_size and facts.n_threads == PRESET.threads
    with pytest.raises(EngineError, match="unknown measurement op 'nope'.*system_info"):
        engine.run_op("nope")
    # the op used the context freely; chat starts from a clean cache afterwards
    finished = run_turn(engine, [SYSTEM, ChatMessage("user", "Hi")])[1][-1]
    assert isinstance(finished, TurnFinished) and finished.reused_tokens == 0


def test_perplexity_reports_its_progress_window_by_window(engine):
    """Issue 11 item 8: the bench's perplexity step sat at one figure for a minute; the op now reports each window."""
    from workbench.core.engine.protocol import OpFinished, OpProgressed

    text = " ".join(f"word{i}" for i in range(60))
    *progress, finished = list(engine.op_events("perplexity", text=text, n_ctx=32))
    assert isinstance(finished, OpFinished) and all(isinstance(event, OpProgressed) for event in progress)
    measured = finished.result
    assert len(progress) == measured.n_windows >= 3
    # the first window of 32 tokens scores positions 1..31 (token 0 has no prediction): 31 of the text's n - 1
    assert progress[0].fraction == pytest.approx(31 / (measured.n_tokens_text - 1))
    fractions = [event.fraction for event in progress]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
