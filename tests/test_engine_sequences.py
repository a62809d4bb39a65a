"""Several llama.cpp sequences in one batch on the real engine: N samples of one prompt, and serving slots."""

from __future__ import annotations

import queue
import threading

import pytest
from fakes import wait_for
from real_engine import loaded_client

from workbench.core.engine.events import ChatMessage, EngineFailed, Sampling, TokenChunk, TurnFinished
from workbench.core.engine.sequence_events import (
    SequenceAccepted,
    SequenceFinished,
    SequenceRejected,
    SequenceRequest,
    SequenceStarted,
    SequenceTokens,
)
from workbench.core.engine.stop_strings import StopStringFilter
from workbench.core.errors import EngineError
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import Preset

PRESET = Preset(name="test-seq", ctx_size=2048, batch_size=256, ubatch_size=256, threads=1)
# A long prompt, so that evaluating it N times instead of once would show in llama.cpp's counters.
LONG_QUESTION = ChatMessage("user", "Here is a list of fruits: " + ", ".join(["apple", "pear", "plum", "fig"] * 30)
                            + ". Name one fruit from the list.")


@pytest.fixture(scope="module")
def engine():
    yield from loaded_client(PRESET)


def test_eight_samples_share_one_prompt_evaluation_and_decode_in_one_batch(engine):
    sampling = Sampling(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=11, max_tokens=12)
    one = engine.sample_n([LONG_QUESTION], 1, sampling)
    eight = engine.sample_n([LONG_QUESTION], 8, sampling)

    prompt = eight.prompt_tokens
    assert prompt == one.prompt_tokens > 120  # 120 fruit names alone
    assert len(eight.samples) == 8 and len(one.samples) == 1
    generated = sum(sample.generated_tokens for sample in eight.samples)
    # llama.cpp's own count of decoded tokens: the prompt once, plus at most each sample's
    # tokens (the last sampled token of a sample is never decoded). Evaluating the prompt per
    # sample would need 8 x prompt tokens, far more than this bound.
    assert eight.llama_tokens_evaluated <= prompt + generated
    assert eight.llama_tokens_evaluated < 2 * prompt
    # Exactly: every sampled token but (at most) each sample's last was fed back, and what llama.cpp
    # evaluated beyond them is one prompt (its counter of single-token calls, reported as max(1, n), read as 0 here).
    assert generated - 8 <= eight.sampled_tokens_decoded <= generated
    assert eight.prompt_evaluations == 1.0 and one.prompt_evaluations == 1.0
    # All eight decode together: one llama_decode per step, not one per sample per step.
    assert eight.max_batch_sequences == 8
    prompt_chunks = -(-prompt // PRESET.ubatch_size)
    assert eight.decode_calls <= prompt_chunks + sampling.max_tokens
    assert eight.decode_calls < generated  # one after another would need a call per token
    # Samples differ (seed + index) and their log-probabilities are real log-probabilities.
    assert len({sample.text for sample in eight.samples}) > 1
    for sample in eight.samples:
        assert sample.stop_reason in ("stop", "length")
        assert sample.logprob_sum < 0.0
        assert sample.generated_tokens <= sampling.max_tokens


def test_greedy_samples_start_with_the_chat_turns_first_token_and_repeat_exactly(engine):
    """What llama.cpp promises for greedy samples, and no more.

    The first token comes from the prompt's logits, evaluated once for all samples just as a
    chat turn evaluates them: it is the turn's first token. Later tokens are decoded four
    sequences to a batch, each sequence's cells at other KV positions than in a one-sequence
    turn, and llama.cpp does not promise the same logits across batch shapes (its SIMD
    reductions add in another order), so the rest may part from the turn at a near tie. The
    same request on the same engine runs the same shapes again, and gives the same samples.
    """
    greedy = Sampling(temperature=0.0, repeat_penalty=1.0, seed=3, max_tokens=10)
    messages = [ChatMessage("user", "What is the capital of France?")]
    events = list(engine.chat(messages, greedy))
    first = next(event for event in events if isinstance(event, TokenChunk))
    assert first.n_tokens == 1 and first.text
    result = engine.sample_n(messages, 4, greedy)
    assert len(result.samples) == 4
    assert all(sample.text.startswith(first.text) for sample in result.samples), (first.text, result.samples)
    again = engine.sample_n(messages, 4, greedy)
    assert again.samples == result.samples  # texts, stop reasons, lengths and log-probabilities, bit for bit


def test_samples_that_cannot_fit_the_context_are_refused_in_one_line(engine):
    huge = ChatMessage("user", "word " * 2100)
    with pytest.raises(EngineError, match="answers need room"):
        engine.sample_n([huge], 4, Sampling(max_tokens=8))


def _collect(session, request):
    events = []
    done = threading.Event()

    def on_event(event):
        events.append(event)
        if isinstance(event, (SequenceFinished, SequenceRejected, EngineFailed)):
            done.set()

    handle = session.submit(request, on_event)
    return handle, events, done


def test_four_independent_requests_decode_in_one_batch_and_free_their_cells(engine):
    session = engine.open_sequences(4)
    try:
        assert session.opened.n_slots == 4 and session.opened.slot_ctx == engine.loaded.n_ctx // 4
        assert session.opened.n_seq_max >= 4 and session.opened.kv_unified
        sampling = Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=24)
        questions = ["Count from one to twenty.", "Name ten colours.", "List the days of the week.", "Say the alphabet."]
        runs = [_collect(session, SequenceRequest(messages=(ChatMessage("user", q),), sampling=sampling, max_tokens=24))
                for q in questions]
        for _handle, _events, done in runs:
            assert done.wait(120)
        for _handle, events, _done in runs:
            kinds = [type(event) for event in events]
            assert kinds[0] is SequenceAccepted and SequenceStarted in kinds and kinds[-1] is SequenceFinished
            finished = events[-1]
            text = "".join(event.text for event in events if isinstance(event, SequenceTokens))
            assert text == finished.text and finished.generated_tokens > 0
        status = _wait_for_idle(session)
        # Submitted together, all four were admitted before the first step: one batch held them all.
        assert status.max_batch_sequences == 4
        assert all(slot.kv_cells == 0 and slot.request_id is None for slot in status.slots)
        assert status.kv_cells_used == 0
    finally:
        session.close(60)
    # The engine is free again, and chat on sequence 0 works as before.
    chat = [event for event in engine.chat([ChatMessage("user", "Hi")], Sampling(max_tokens=4, seed=1))]
    assert isinstance(chat[-1], TurnFinished)


def _wait_for_idle(session):
    def idle():
        status = session.status
        if status is not None and all(slot.request_id is None for slot in status.slots) and status.waiting == 0:
            return status
        return None

    return wait_for(idle, what="the session to become idle")


def test_a_request_too_long_for_its_slot_is_rejected_with_the_numbers(engine):
    session = engine.open_sequences(4)
    try:
        slot_ctx = session.opened.slot_ctx
        request = SequenceRequest(prompt="hello " * 10, sampling=Sampling(), max_tokens=slot_ctx)
        _handle, events, done = _collect(session, request)
        assert done.wait(60)
        assert isinstance(events[-1], SequenceRejected) and events[-1].kind == "too_long"
        assert f"holds {slot_ctx} tokens" in events[-1].message
    finally:
        session.close(60)


def test_cancelling_a_request_frees_its_slot_while_others_continue(engine):
    session = engine.open_sequences(2)
    try:
        long_run = SequenceRequest(prompt="Once upon a time", sampling=Sampling(temperature=0.8, seed=5), max_tokens=400)
        first_tokens: queue.SimpleQueue = queue.SimpleQueue()
        events: list = []

        def on_event(event):
            events.append(event)
            if isinstance(event, SequenceTokens):
                first_tokens.put(event)

        victim = session.submit(long_run, on_event)
        _short, short_events, short_done = _collect(
            session, SequenceRequest(prompt="One, two,", sampling=Sampling(temperature=0.0), max_tokens=6))
        first_tokens.get(timeout=120)
        victim.cancel()
        assert short_done.wait(120)
        wait_for(lambda: any(isinstance(event, SequenceFinished) for event in events), what="the cancelled run's end")
        finished = [event for event in events if isinstance(event, SequenceFinished)][0]
        assert finished.stop_reason == "cancelled" and finished.generated_tokens < 400
        assert isinstance(short_events[-1], SequenceFinished)
        status = _wait_for_idle(session)
        assert all(slot.kv_cells == 0 for slot in status.slots)
    finally:
        session.close(60)


def test_stop_strings_are_cut_even_when_split_over_tokens():
    stops = StopStringFilter(["END"])
    shown = stops.feed("abc E") + stops.feed("N") + stops.feed("D tail")
    assert shown == "abc " and stops.stopped
    plain = StopStringFilter(["END"])
    assert plain.feed("EN") == "" and plain.feed("x") == "ENx" and plain.flush() == ""


def test_a_long_prompt_is_taken_in_chunks_while_another_sequence_keeps_decoding():
    """The scheduler driven step by step in this process: one llama_decode per step, a micro-batch at most."""
    from llama_cpp import Llama

    from workbench.core.engine.chat_template import ChatTemplate
    from workbench.core.engine.sequence_context import ensure_sequences
    from workbench.core.engine.sequence_scheduler import SequenceScheduler

    llama = Llama(model_path=str(bundled_model_path()), n_ctx=2048, n_batch=128, n_ubatch=64, n_threads=1,
                  n_threads_batch=1, verbose=False)  # a second thread only waits on a shared 2-core box
    try:
        assert ensure_sequences(llama, 2)
        events: list = []
        scheduler = SequenceScheduler(llama, 2, 1024, events.append, ChatTemplate(llama))
        greedy = Sampling(temperature=0.0, repeat_penalty=1.0)
        scheduler.submit(1, SequenceRequest(prompt="One, two, three,", sampling=greedy, max_tokens=40))
        while scheduler.status().slots[0].generated_tokens < 2:
            scheduler.step()
        long_prompt = "The list goes on: " + ", ".join(["red", "green", "blue"] * 30)
        scheduler.submit(2, SequenceRequest(prompt=long_prompt, sampling=greedy, max_tokens=4))
        accepted = [event for event in events if isinstance(event, SequenceAccepted) and event.request_id == 2][0]
        assert accepted.prompt_tokens > 128  # three micro-batches of 64 at least
        before = scheduler.status().slots[0].generated_tokens
        scheduler.step()
        status = scheduler.status()
        # One batch: the decoding sequence's next token plus the first 63 prompt tokens (64 in all).
        assert status.last_batch_sequences == 2 and status.last_batch_tokens == 64
        assert status.slots[1].phase == "prefill" and status.slots[1].kv_cells == 63
        assert status.slots[0].generated_tokens == before + 1
        scheduler.step()
        assert scheduler.status().slots[1].kv_cells == 126 and scheduler.status().slots[0].generated_tokens == before + 2
        scheduler.cancel_all()
        finished = {event.request_id: event for event in events if isinstance(event, SequenceFinished)}
        assert {event.stop_reason for event in finished.values()} == {"cancelled"} and set(finished) == {1, 2}
        assert all(scheduler.slot_cells(slot) == 0 for slot in range(2))  # both freed their cells
        scheduler.close()
    finally:
        llama.close()
