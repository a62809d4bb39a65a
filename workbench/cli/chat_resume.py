"""`workbench chat`'s conversation journal: each finished turn on disk, `--resume` to continue one."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.errors import WorkbenchError
from workbench.core.files.chat_journal import (
    ChatJournal,
    JournalHead,
    JournalTurn,
    RestoredConversation,
    find_journal,
    journal_folder,
    latest_journal,
    mark_closed,
    read_journal,
    stats_fields,
)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class ChatKeeper:
    """The journal of one `workbench chat` run; a failure to write is said once and the chat goes on."""

    def __init__(self, model: str, preset: str, system_prompt: str, sampling: Sampling) -> None:
        self.model, self.preset = model, preset
        self.journal = ChatJournal(journal_folder(), JournalHead(model, preset, system_prompt,
                                                                 tuple(asdict(sampling).items())))

    def seed(self, restored: RestoredConversation) -> None:
        """Continue `restored` in this run's own journal, and close the one it came from."""
        self._said(self.journal.record(*restored.turns))
        if not self.journal.failure:
            self._said(mark_closed(restored.path))

    def finished(self, question: str, finished: TurnFinished) -> None:
        self._said(self.journal.record(JournalTurn(question, finished.text, self.model, self.preset,
                                                   stats_fields(finished))))

    def close(self) -> None:
        self.journal.close()

    @staticmethod
    def _said(failure: str) -> None:
        if failure:
            _say(f"workbench: {failure}")


def resumed(name: str) -> RestoredConversation:
    """The journal `--resume` names ("latest": the newest with a turn); its skipped lines are said."""
    folder = journal_folder()
    if name == "latest":
        scan = latest_journal(folder, unclosed_only=False)
        for line in scan.skipped:
            _say(f"workbench: skipped: {line}")
        if scan.found is None:
            raise WorkbenchError("no conversation to resume", where=str(folder),
                                 fix="chat without --resume; each finished turn is journaled there")
        restored = scan.found
    else:
        restored = read_journal(find_journal(folder, name))
        for line in restored.problems:
            _say(f"workbench: skipped: {restored.path}: {line}")
    return restored


def restored_history(restored: RestoredConversation, model: str) -> list[ChatMessage]:
    """The messages the engine reads again (not the interrupted ones); what was restored is said."""
    head = restored.head
    _say(f"resuming {restored.name}: {len(restored.turns)} turn(s) with {head.model}, preset {head.preset}")
    last_model = restored.turns[-1].model or head.model if restored.turns else head.model
    if last_model and last_model != model:
        _say(f"  it ran with {last_model}; it continues with {model}")
    history: list[ChatMessage] = []
    for turn in restored.turns:
        _say(f">>> {turn.user}\n{turn.assistant}" + (f"\n[interrupted: {turn.interrupted}]" if turn.interrupted else ""))
        if not turn.interrupted:
            history += [ChatMessage("user", turn.user), ChatMessage("assistant", turn.assistant)]
    return history


def offer_resume(args: Any) -> None:
    """At a start without --resume: say when the last conversation was cut off (no question: stdin may be a pipe)."""
    scan = latest_journal(journal_folder(), unclosed_only=True)
    for line in scan.skipped:
        _say(f"workbench: skipped: {line}")
    if scan.found is not None:
        found = scan.found
        _say(f"the last conversation ({len(found.turns)} turn(s), {found.head.started}) was not closed; "
             f"`workbench chat {args.model} --resume` continues it")
