"""Which part of the KV cache holds what after a turn: segments for the KV panel's grid."""

from __future__ import annotations

from workbench.core.engine.events import TurnFinished
from workbench.ui.conversation import Conversation


def kv_segments(conversation: Conversation, finished: TurnFinished) -> tuple[tuple[str, int], ...]:
    """(state, n_tokens) in context order: system, reused, history, current.

    The engine counts the prompt's tokens but not each message's, so the prompt is split
    between system prompt, earlier turns and the new message in proportion to their
    characters; the reused prefix and the generated tokens are the engine's exact counts.
    The result is scaled to the cells llama.cpp reports in use (they differ after a shift).
    """
    messages = conversation.for_engine()
    while messages and messages[-1].role != "user":
        messages.pop()  # the answer just added is not part of the prompt
    if not messages:
        return ()
    system_chars = sum(len(m.content) for m in messages if m.role == "system")
    current_chars = len(messages[-1].content)
    history_chars = sum(len(m.content) for m in messages[:-1] if m.role != "system")
    total_chars = max(1, system_chars + history_chars + current_chars)
    prompt = finished.prompt_tokens
    system_end = round(prompt * system_chars / total_chars)
    history_end = round(prompt * (system_chars + history_chars) / total_chars)
    reused_end = max(system_end, min(finished.reused_tokens, history_end))
    segments = [
        ("system", system_end),
        ("reused", reused_end - system_end),
        ("history", history_end - reused_end),
        ("current", prompt - history_end + finished.generated_tokens),
    ]
    counted = sum(n for _, n in segments)
    cells = finished.kv_cells_used
    if cells and counted and cells != counted:
        segments = [(state, round(n * cells / counted)) for state, n in segments]
    return tuple((state, n) for state, n in segments if n > 0)
