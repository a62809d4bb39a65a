"""Fitting a conversation into the context window: drop the oldest turns, keep the system prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.core.engine.events import ChatMessage

# When turns must go, drop enough that the prompt and the answer's reserve take at most this
# share of the context, as llama.cpp's own context shift frees half. Dropping only what the
# next answer needs would move the window every turn, and every move re-reads the whole
# window: on an edge board that is seconds to minutes of prefill per turn. (llama.cpp could
# instead move the kept cells down, as llama-server's --context-shift does, but those cells
# were computed with the dropped turns in view: on SmolLM2 the next token's distribution then
# differs from a clean prompt's by a KL of ~0.1. The kept window is recomputed, exactly.)
SHIFT_TARGET_FRACTION = 0.5


@dataclass(frozen=True)
class FittedConversation:
    messages: tuple[ChatMessage, ...]  # what goes into the prompt
    prompt_tokens: tuple[int, ...]  # those messages rendered with the chat template, tokenized
    turns_dropped: int  # oldest turns left out of the prompt
    tokens_dropped: int  # prompt tokens of the whole conversation minus those of the kept part
    dropped: tuple[ChatMessage, ...] = ()  # the messages left out (pass back as `previously_dropped`)
    shifted_now: bool = False  # this call dropped turns that the previous one kept


class ConversationTooLong(Exception):
    """Even the system prompt and the newest message alone do not fit the context."""

    def __init__(self, needed_tokens: int, n_ctx: int) -> None:
        super().__init__(f"{needed_tokens} tokens do not fit a context of {n_ctx}")
        self.needed_tokens = needed_tokens
        self.n_ctx = n_ctx


def turn_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Indexes where a turn begins: each user message (the leading system messages precede them)."""
    return [i for i, message in enumerate(messages) if message.role == "user"]


def fit_conversation(
    messages: Sequence[ChatMessage],
    tokenize_chat: Callable[[Sequence[ChatMessage]], Sequence[int]],
    n_ctx: int,
    reserve_tokens: int,
    *,
    previously_dropped: Sequence[ChatMessage] = (),
) -> FittedConversation:
    """Leave out the oldest turns when prompt + `reserve_tokens` would not fit `n_ctx`.

    A turn is a user message and what follows it up to the next user message; leading system
    messages always stay, and so does the newest turn. The turns a previous call dropped
    (`previously_dropped`, when this conversation still starts with them) stay dropped while
    the rest fits, so the prompt's prefix, and with it llama.cpp's KV cache, stays the same
    from turn to turn. A new shift drops the fewest turns that bring the prompt down to
    SHIFT_TARGET_FRACTION of the context (or, failing that, that make it fit at all). When the
    newest turn alone leaves no room for the reserve it is kept if the prompt itself fits
    (the answer then stops at the context's end); otherwise ConversationTooLong.
    """
    messages = tuple(messages)
    starts = turn_starts(messages)
    head = messages[: starts[0]] if starts else messages
    full = tuple(tokenize_chat(messages))

    def kept(drop: int) -> tuple[ChatMessage, ...]:
        return head + messages[starts[drop]:]

    def result(drop: int, tokens: tuple[int, ...], shifted_now: bool) -> FittedConversation:
        dropped = messages[len(head): starts[drop]] if drop else ()
        return FittedConversation(kept(drop) if drop else messages, tokens, drop, len(full) - len(tokens),
                                  dropped, shifted_now)

    previous = _previous_drop(messages, starts, len(head), tuple(previously_dropped))
    if previous == 0 and len(full) + reserve_tokens <= n_ctx:
        return result(0, full, False)
    if previous:
        tokens = tuple(tokenize_chat(kept(previous)))
        if len(tokens) + reserve_tokens <= n_ctx:
            return result(previous, tokens, False)
    if len(starts) <= 1:
        return _last_resort(result(0, full, False), n_ctx)
    first, last = max(previous, 1), len(starts) - 1
    for limit in (int(n_ctx * SHIFT_TARGET_FRACTION), n_ctx):
        found = _fewest_drops(first, last, lambda drop: tuple(tokenize_chat(kept(drop))), limit - reserve_tokens)
        if found is not None:
            return result(found[0], found[1], True)
    return _last_resort(result(last, tuple(tokenize_chat(kept(last))), True), n_ctx)


def _previous_drop(messages: tuple[ChatMessage, ...], starts: list[int], head_length: int,
                   previously_dropped: tuple[ChatMessage, ...]) -> int:
    """How many turns `previously_dropped` covers, if this conversation still begins with them; else 0."""
    if not previously_dropped:
        return 0
    for drop, start in enumerate(starts):
        if start - head_length == len(previously_dropped):
            return drop if drop < len(starts) - 1 and messages[head_length:start] == previously_dropped else 0
        if start - head_length > len(previously_dropped):
            return 0
    return 0


def _fewest_drops(
    first: int, last: int, tokens_after: Callable[[int], tuple[int, ...]], max_tokens: int
) -> tuple[int, tuple[int, ...]] | None:
    """Binary search: dropping more turns never lengthens the prompt."""
    best = None
    while first <= last:
        middle = (first + last) // 2
        tokens = tokens_after(middle)
        if len(tokens) <= max_tokens:
            best = (middle, tokens)
            last = middle - 1
        else:
            first = middle + 1
    return best


def _last_resort(fitted: FittedConversation, n_ctx: int) -> FittedConversation:
    # At least one free cell: the first generated token needs it.
    if len(fitted.prompt_tokens) + 1 > n_ctx:
        raise ConversationTooLong(len(fitted.prompt_tokens), n_ctx)
    return fitted
