"""Context fitting: which turns leave the prompt when a conversation outgrows the context."""

from __future__ import annotations

import pytest

from workbench.core.engine.context_fit import SHIFT_TARGET_FRACTION, ConversationTooLong, fit_conversation
from workbench.core.engine.events import ChatMessage


def word_tokens(messages):
    """A stand-in tokenizer with a per-message overhead, as chat templates have: 2 + one per word."""
    return [0 for message in messages for _ in range(2 + len(message.content.split()))]


def conversation(n_turns: int, words: int = 8) -> list[ChatMessage]:
    messages = [ChatMessage("system", "be brief")]
    for turn in range(n_turns):
        messages.append(ChatMessage("user", " ".join([f"q{turn}"] * words)))
        messages.append(ChatMessage("assistant", " ".join([f"a{turn}"] * words)))
    messages.append(ChatMessage("user", "last question"))
    return messages


def test_a_conversation_that_fits_is_left_alone():
    messages = conversation(3)
    fitted = fit_conversation(messages, word_tokens, n_ctx=200, reserve_tokens=20)
    assert fitted.messages == tuple(messages)
    assert (fitted.turns_dropped, fitted.tokens_dropped, fitted.shifted_now) == (0, 0, False)
    assert len(fitted.prompt_tokens) == len(word_tokens(messages))


def test_overflow_drops_oldest_turns_down_to_the_shift_target_and_keeps_the_system_prompt():
    messages = conversation(20)  # 20 turns x 20 tokens + system 4 + last 4 = 408 tokens
    n_ctx, reserve = 256, 16
    fitted = fit_conversation(messages, word_tokens, n_ctx=n_ctx, reserve_tokens=reserve)
    assert fitted.messages[0] == messages[0]
    assert fitted.messages[-1] == messages[-1]
    assert fitted.shifted_now
    assert len(fitted.prompt_tokens) + reserve <= n_ctx * SHIFT_TARGET_FRACTION
    # the fewest turns: keeping one more would miss the target
    assert len(fitted.prompt_tokens) + 20 + reserve > n_ctx * SHIFT_TARGET_FRACTION
    assert fitted.messages[1] == messages[1 + 2 * fitted.turns_dropped]
    assert fitted.tokens_dropped == 20 * fitted.turns_dropped
    assert fitted.dropped == tuple(messages[1 : 1 + 2 * fitted.turns_dropped])


def test_dropped_turns_stay_dropped_while_the_rest_fits_so_the_prompt_prefix_is_stable():
    messages = conversation(20)
    first = fit_conversation(messages, word_tokens, n_ctx=256, reserve_tokens=16)
    grown = messages[:-1] + [messages[-1], ChatMessage("assistant", "fine"), ChatMessage("user", "and next")]
    second = fit_conversation(grown, word_tokens, n_ctx=256, reserve_tokens=16, previously_dropped=first.dropped)
    assert second.turns_dropped == first.turns_dropped
    assert not second.shifted_now
    assert second.messages[: len(first.messages)] == first.messages


def test_previously_dropped_turns_of_another_conversation_are_ignored():
    first = fit_conversation(conversation(20), word_tokens, n_ctx=256, reserve_tokens=16)
    other = [ChatMessage("user", "hello")]
    fitted = fit_conversation(other, word_tokens, n_ctx=256, reserve_tokens=16, previously_dropped=first.dropped)
    assert fitted.messages == tuple(other) and fitted.turns_dropped == 0


def test_a_newest_message_that_cannot_fit_is_refused():
    messages = [ChatMessage("system", "s"), ChatMessage("user", "word " * 300)]
    with pytest.raises(ConversationTooLong) as raised:
        fit_conversation(messages, word_tokens, n_ctx=128, reserve_tokens=16)
    assert raised.value.needed_tokens == len(word_tokens(messages))


def test_a_newest_message_that_fits_without_its_reserve_is_kept_alone():
    messages = conversation(2) + [ChatMessage("assistant", "x"), ChatMessage("user", "word " * 100)]
    fitted = fit_conversation(messages, word_tokens, n_ctx=110, reserve_tokens=32)
    assert fitted.messages == (messages[0], messages[-1])
    assert len(fitted.prompt_tokens) < 110
