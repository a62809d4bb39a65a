"""The kept conversations: the journals listed with their titles, renamed, deleted, exported as Markdown or JSON.

A title lives in `titles.json` beside the journals (a journal is append-only and fsynced per
turn; its name is its start time), written whole. Both are read back as outside data: the
index bounded and each entry checked, only journal names taken, the journals read with
chat_journal's own checks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.chat_journal import (
    RestoredConversation,
    find_journal,
    is_journal_name,
    latest_journal,
    list_journals,
    read_journal,
)
from workbench.core.files.json_file import write_json_replacing, write_text_replacing
from workbench.core.files.regular import read_regular_file
from workbench.core.files.safe_paths import is_control_character, shown_value

TITLES_FILE = "titles.json"
MAX_TITLES_BYTES = 256 * 1024
MAX_TITLE_CHARS = 120
MAX_SUMMARIES = 100  # journals read for a list (the journal keeps 20; a folder may hold more)
FORMATS = ("md", "json")


@dataclass(frozen=True)
class ConversationSummary:
    name: str  # the journal's name without .jsonl
    path: Path
    title: str  # the given title, else the first prompt's start
    started: str
    model: str
    preset: str
    turns: int
    closed: bool
    problem: str = ""  # why it cannot be read (then the other fields are empty)


def list_conversations(folder: Path) -> tuple[ConversationSummary, ...]:
    """Every journal in `folder`, newest first, with its title; one that cannot be read says why."""
    titles = load_titles(folder)
    summaries = []
    for path in list_journals(folder)[:MAX_SUMMARIES]:
        name = path.stem
        try:
            restored = read_journal(path)
        except WorkbenchError as error:
            summaries.append(ConversationSummary(name, path, titles.get(name, ""), "", "", "", 0, False, error.what))
            continue
        summaries.append(ConversationSummary(name, path, titles.get(name) or default_title(restored),
                                             restored.head.started, restored.head.model, restored.head.preset,
                                             len(restored.turns), restored.closed))
    return tuple(summaries)


def default_title(restored: RestoredConversation) -> str:
    first = restored.turns[0].user if restored.turns else ""
    line = " ".join(first.split())
    return (line[: MAX_TITLE_CHARS - 1] + "…") if len(line) > MAX_TITLE_CHARS else (line or "(no turns)")


def open_conversation(folder: Path, name: str) -> RestoredConversation:
    """The journal `name` names ("latest": the newest with a turn), read with its checks."""
    if name == "latest":
        found = latest_journal(folder, unclosed_only=False).found
        if found is None:
            raise WorkbenchError("no conversation with a finished turn", where=str(folder),
                                 fix="Chat first (the app or `workbench chat`)")
        return found
    return read_journal(find_journal(folder, name))


def title_problem(title: object) -> str | None:
    if not isinstance(title, str) or not title.strip():
        return "is empty"
    if len(title) > MAX_TITLE_CHARS:
        return f"is longer than {MAX_TITLE_CHARS} characters"
    if any(is_control_character(c) for c in title):
        return "holds a control character"
    return None


def load_titles(folder: Path) -> dict[str, str]:
    """name -> title; an index that cannot be read is no titles (the journals are what matter)."""
    path = folder / TITLES_FILE
    try:
        data = json.loads(read_regular_file(path, max_bytes=MAX_TITLES_BYTES, what="a titles index", fix="").decode())
    except (OSError, WorkbenchError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {name: title for name, title in data.items()
            if isinstance(name, str) and is_journal_name(name + ".jsonl") and title_problem(title) is None}


def rename_conversation(folder: Path, name: str, title: str) -> str:
    """Give the conversation `name` a title; returns its journal name."""
    path = find_journal(folder, name) if name != "latest" else open_conversation(folder, name).path
    problem = title_problem(title)
    if problem:
        raise WorkbenchError(f"the title {shown_value(title)} {problem}", fix=f"Give 1-{MAX_TITLE_CHARS} printable characters")
    titles = load_titles(folder)
    titles[path.stem] = title.strip()
    _save_titles(folder, titles)
    return path.stem


def delete_conversation(folder: Path, name: str) -> Path:
    """Remove the journal `name` (and its title); returns the removed path."""
    path = find_journal(folder, name) if name != "latest" else open_conversation(folder, name).path
    if path.is_symlink() or not path.is_file():
        raise WorkbenchError("is not a conversation journal file", where=str(path), fix="Nothing was deleted")
    path.unlink()
    titles = load_titles(folder)
    if titles.pop(path.stem, None) is not None:
        _save_titles(folder, titles)
    return path


def move_title(folder: Path, old: str, new: str) -> None:
    """The conversation continued in a new journal keeps its title."""
    titles = load_titles(folder)
    if old in titles:
        titles[new] = titles.pop(old)
        _save_titles(folder, titles)


def _save_titles(folder: Path, titles: dict[str, str]) -> None:
    present = {path.stem for path in list_journals(folder)}
    write_json_replacing(folder / TITLES_FILE, {name: title for name, title in titles.items() if name in present})


def conversation_markdown(restored: RestoredConversation, title: str = "") -> str:
    head = restored.head
    lines = [f"# {title or default_title(restored)}", "", f"- conversation: `{restored.path.stem}`",
             f"- started: {head.started or 'unknown'}", f"- model: `{head.model or 'unknown'}`",
             f"- preset: `{head.preset or 'unknown'}`"]
    if head.sampling:
        lines.append("- sampling: " + ", ".join(f"{name} {value}" for name, value in head.sampling))
    lines += ["", "## System", "", head.system_prompt or "(none)", ""]
    for turn in restored.turns:
        lines += ["## User", "", turn.user, "", "## Assistant", "", turn.assistant, ""]
        if turn.interrupted:
            lines += [f"_interrupted: {turn.interrupted} (partial answer)_", ""]
        elif turn.stats:
            lines += ["_" + ", ".join(f"{name} {value}" for name, value in turn.stats) + "_", ""]
    return "\n".join(lines)


def conversation_json(restored: RestoredConversation, title: str = "") -> str:
    head = restored.head
    data = {"conversation": restored.path.stem, "title": title or default_title(restored), "started": head.started,
            "model": head.model, "preset": head.preset, "system_prompt": head.system_prompt,
            "sampling": dict(head.sampling),
            "turns": [{"user": t.user, "assistant": t.assistant, "model": t.model, "preset": t.preset,
                       "stats": dict(t.stats)} | ({"interrupted": t.interrupted} if t.interrupted else {})
                      for t in restored.turns]}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def export_conversation(folder: Path, name: str, out: Path, fmt: str = "") -> Path:
    """Write the conversation to `out` as Markdown or JSON (from `fmt`, else the suffix); returns `out`."""
    fmt = fmt or out.suffix.lstrip(".").lower().replace("markdown", "md")
    if fmt not in FORMATS:
        raise WorkbenchError(f"cannot tell the export format of {out.name!r}", fix="Name it .md or .json, or pass --format")
    restored = open_conversation(folder, name)
    title = load_titles(folder).get(restored.path.stem, "")
    text = conversation_markdown(restored, title) if fmt == "md" else conversation_json(restored, title)
    if out.is_dir() or (out.is_symlink() and not out.exists()) or (out.exists() and not out.is_file()):
        raise WorkbenchError("is not a file that can be written", where=str(out), fix="Give a file path")
    write_text_replacing(out, text)
    os.chmod(out, 0o600)  # a conversation is private, as its journal is
    return out
