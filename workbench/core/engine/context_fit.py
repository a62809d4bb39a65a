"""Fitting a conversation into the context window: drop the oldest turns, keep the system prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.core.engine.events import ChatMessage


@dataclass(frozen=True)
class FittedConversation:
    messages: tuple[ChatMessage, ...]  # what goes into the prompt
    prompt_tokens: tuple[int, ...]  # those messages rendered with the chat template, tokenized
    turns_dropped: int
    tokens_dropped: int  # prompt tokens of the whole conversation minus those of the kept part


class ConversationTooLong(Exception):
    """Even the system prompt and the newest message alone do not fit the context."""

    def __init__(self, needed_tokens: int, n_ctx: int) -> None:
        super().__init__(f"{needed_tokens} tokens do not fit a context of {n_ctx}")
        self.needed_tokens = needed_tokens
        self.n_ctx = n_ctx


def turn_starts(messages: Sequence[ChatMessage]) -> list[int]:
    """Indexes where a turn begins: each user message after the leading system message(s)."""
    return [i for i, message in enumerate(messages) if message.role == "user"]


def fit_conversation(
    messages: Sequence[ChatMessage],
    tokenize_chat: Callable[[Sequence[ChatMessage]], Sequence[int]],
    n_ctx: int,
    reserve_tokens: int,
) -> FittedConversation:
    """Drop the fewest oldest turns so that prompt + `reserve_tokens` fits `n_ctx`.

    A turn is a user message and everything after it up to the next user message; leading
    system messages always stay, and so does the newest turn. When the newest turn alone
    cannot leave `reserve_tokens` free, it is kept if the prompt itself fits (generation then
    stops at the context's end); otherwise ConversationTooLong.
    """
    messages = tuple(messages)
    full = tuple(tokenize_chat(messages))
    if len(full) + reserve_tokens <= n_ctx:
        return FittedConversation(messages, full, 0, 0)
    starts = turn_starts(messages)
    head = messages[: starts[0]] if starts else messages
    if len(starts) <= 1:
        return _last_resort(messages, full, full, n_ctx, turns_dropped=0)

    def kept(drop: int) -> tuple[ChatMessage, ...]:
        return head + messages[starts[drop]:]

    # Dropping more turns never makes the prompt longer, so binary search the fewest drops.
    low, high = 1, len(starts) - 1
    best: tuple[int, tuple[int, ...]] | None = None
    while low <= high:
        middle = (low + high) // 2
        tokens = tuple(tokenize_chat(kept(middle)))
        if len(tokens) + reserve_tokens <= n_ctx:
            best = (middle, tokens)
            high = middle - 1
        else:
            low = middle + 1
    if best is None:
        drop = len(starts) - 1
        return _last_resort(kept(drop), tuple(tokenize_chat(kept(drop))), full, n_ctx, turns_dropped=drop)
    drop, tokens = best
    return FittedConversation(kept(drop), tokens, drop, len(full) - len(tokens))


def _last_resort(
    messages: tuple[ChatMessage, ...], tokens: tuple[int, ...], full: tuple[int, ...], n_ctx: int, *, turns_dropped: int
) -> FittedConversation:
    # Leave at least one free cell: the first generated token needs it.
    if len(tokens) + 1 > n_ctx:
        raise ConversationTooLong(len(tokens), n_ctx)
    return FittedConversation(messages, tokens, turns_dropped, len(full) - len(tokens))
