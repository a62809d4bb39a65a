"""A full context on the real engine: 50 turns on 256 tokens (four or five context shifts), and an answer that hits the end."""

from __future__ import annotations

import pytest
from real_engine import ROOMY

from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, ContextShifted, EngineFailed, Sampling, TokenChunk, TurnFinished
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset

SYSTEM = ChatMessage("system", "You are terse.")
TURNS = 50  # about 12 tokens a turn: the first shift comes near turn 20, then one every ten or so


@pytest.fixture(scope="module")
def client():
    """One engine for both tests: each loads its own context size."""
    engine = EngineClient()
    yield engine
    engine.close()


def test_fifty_turns_on_a_small_context_shift_instead_of_failing(client):
    preset = Preset(name="test-256", ctx_size=256, batch_size=128, ubatch_size=128, threads=1)
    sampling = Sampling(temperature=0.0, seed=1, max_tokens=1)
    history: list[ChatMessage] = []
    shifts: list[ContextShifted] = []
    finished: list[TurnFinished] = []
    client.load_blocking(bundled_model_path(), preset, device=ROOMY)
    for turn in range(TURNS):
        question = ChatMessage("user", f"Number {turn}?")
        events = list(client.chat([SYSTEM, *history, question], sampling))
        failures = [event for event in events if isinstance(event, EngineFailed)]
        assert not failures, f"turn {turn}: {failures[0].message}"
        shifts += [event for event in events if isinstance(event, ContextShifted)]
        result = events[-1]
        assert isinstance(result, TurnFinished)
        assert result.prompt_tokens + result.generated_tokens <= result.n_ctx == 256
        assert result.kv_cells_used <= 256
        finished.append(result)
        history += [question, ChatMessage("assistant", result.text)]
    assert len(shifts) >= 2, f"{TURNS} turns filled 256 tokens less than twice?"
    # each shift frees about half the context, then the window stays put for a while
    assert len(shifts) < TURNS // 4
    assert all(later.turns_dropped > earlier.turns_dropped for earlier, later in zip(shifts, shifts[1:]))
    assert finished[-1].context_shifts == shifts[-1].turns_dropped
    # the system prompt stays in front: after a shift the prompt still starts from the cache
    assert all(turn.reused_tokens > 0 for turn in finished[1:])
    # between shifts, each turn re-reads only what is new
    steady = [turn for turn in finished[1:] if turn.prompt_tokens - turn.reused_tokens < 40]
    assert len(steady) > 3 * TURNS // 4


def test_an_answer_that_reaches_the_end_of_the_context_stops_with_length(client):
    # llama.cpp rounds a context of 128 up to 256; the engine uses what it really gave
    preset = Preset(name="test-128", ctx_size=128, batch_size=128, ubatch_size=128, threads=1)
    counting = ", ".join(str(n) for n in range(1, 30))
    messages = [ChatMessage("user", f"Continue counting: {counting},")]
    loaded = client.load_blocking(bundled_model_path(), preset, device=ROOMY)
    assert loaded.n_ctx == 256 and any("gave a context of 256" in text for text in loaded.warnings)
    events = list(client.chat(messages, Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=1000)))
    result = events[-1]
    assert isinstance(result, TurnFinished), result
    assert result.stop_reason == "length"
    assert result.prompt_tokens + result.generated_tokens == result.n_ctx == 256
    assert result.generated_tokens == sum(event.n_tokens for event in events if isinstance(event, TokenChunk))
