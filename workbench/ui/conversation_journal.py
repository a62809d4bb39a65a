"""The chat pane's conversation to and from its journal: each finished turn written, a restored one read in."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.files.chat_journal import (
    ChatJournal,
    JournalHead,
    JournalTurn,
    RestoredConversation,
    stats_fields,
)
from workbench.core.files.conversations import move_title
from workbench.ui.conversation import Conversation


def journal_head(conversation: Conversation) -> JournalHead:
    return JournalHead(conversation.model_name, conversation.preset_name, conversation.system_prompt,
                       tuple(asdict(conversation.sampling).items()))


def journal_turn(conversation: Conversation, answer_index: int) -> JournalTurn:
    """The exchange ending at the answer `answer_index`, with its stats or why it was interrupted."""
    messages = conversation.messages
    prompt = messages[answer_index - 1].content if answer_index > 0 else ""
    finished = conversation.stats.get(answer_index)
    return JournalTurn(prompt, messages[answer_index].content, conversation.model_name, conversation.preset_name,
                       stats_fields(finished) if finished is not None else (),
                       conversation.interrupted.get(answer_index, ""))


def _typed(cls: type, values: dict[str, object]):
    """`cls(**values)` when every field is present with its declared type (a journal is outside data), else None."""
    kwargs = {}
    for field in fields(cls):
        if field.name not in values:
            continue  # its default stands
        value, declared = values[field.name], field.type
        wanted = {"int": int, "float": (int, float), "str": str}.get(str(declared))
        if wanted is None or isinstance(value, bool) or not isinstance(value, wanted):
            return None
        kwargs[field.name] = float(value) if declared == "float" else value
    try:
        return cls(**kwargs)
    except TypeError:  # a field without a default was missing
        return None


def restore(conversation: Conversation, restored: RestoredConversation) -> None:
    """Fill the (empty) conversation from a journal: messages, the stats under each answer, the settings."""
    head = restored.head
    conversation.clear()
    conversation.system_prompt = head.system_prompt
    sampling = _typed(Sampling, dict(head.sampling))
    if sampling is not None:
        conversation.sampling = sampling
    last = restored.turns[-1] if restored.turns else None
    conversation.model_name = (last.model if last is not None and last.model else head.model)
    conversation.preset_name = (last.preset if last is not None and last.preset else head.preset)
    for turn in restored.turns:
        conversation.messages += [ChatMessage("user", turn.user), ChatMessage("assistant", turn.assistant)]
        index = len(conversation.messages) - 1
        if turn.interrupted:
            conversation.interrupted[index] = turn.interrupted
            continue
        finished = _typed(TurnFinished, dict(turn.stats) | {"text": turn.assistant})
        if finished is not None:
            conversation.stats[index] = finished


def offer_text(restored: RestoredConversation) -> tuple[str, str]:
    """The restore question: title and body."""
    head = restored.head
    count = len(restored.turns)
    skipped = f"\n{len(restored.problems)} damaged line(s) of it are skipped." if restored.problems else ""
    body = (f"The app stopped before it was closed: {count} finished {'turn' if count == 1 else 'turns'} with "
            f"{head.model or 'a model'} ({head.preset or 'no preset'}), started {head.started or 'at an unknown time'}."
            f"{skipped}\nStart fresh keeps it on disk: `workbench chat MODEL --resume {restored.path.stem}`.")
    return "Restore the last conversation?", body


def retire(folder: Path, opened: RestoredConversation, journal: ChatJournal | None) -> None:
    """An opened conversation goes on in `journal`, which now holds all its turns: its title moves there and
    the old file goes, so the list holds it once. Kept when the new journal could not be written."""
    if journal is None or journal.path is None or journal.failure or journal.path == opened.path:
        return
    move_title(folder, opened.path.stem, journal.path.stem)
    opened.path.unlink(missing_ok=True)
