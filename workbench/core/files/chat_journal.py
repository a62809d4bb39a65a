"""The conversation journal: one JSON object per line, a file per conversation, fsynced per finished turn.

A killed app or `workbench chat` loses no finished turn: each one is appended and fsynced
before the next prompt is taken. The file is read back as hostile input: its size, each
line's length, the JSON shape, the texts and the counts are bounded, and a line that fails
is reported and skipped (a half-written last line is what a kill during a write leaves).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.regular import read_regular_file
from workbench.core.paths import state_dir
from workbench.core.units import MIB

FORMAT_VERSION = 1
MAX_JOURNAL_BYTES = 16 * MIB
MAX_LINE_BYTES = 1 * MIB
# A text longer than this is cut when written: two texts of it, each character escaped to at
# most 6 bytes (\u0000), stay under MAX_LINE_BYTES with room for the stats.
MAX_TEXT_CHARS = 60_000
MAX_TURNS = 5_000
MAX_FIELDS = 40  # stats under one answer, sampling settings
MAX_FIELD_NAME = 64
MAX_FIELD_TEXT = 400
KEEP_JOURNALS = 20  # older conversations are pruned when a new one starts
MAX_LISTED = 500  # names looked at in the folder
TRUNCATED_MARK = "\n[… cut: longer than the journal keeps]"
_NAME = re.compile(r"chat-\d{8}T\d{12}Z-\d{6}\.jsonl")  # UTC to the microsecond, then the pid

Scalar = int | float | str | bool
Fields = tuple[tuple[str, Scalar], ...]


@dataclass(frozen=True)
class JournalHead:
    """What a conversation started with: model, preset, system prompt and sampling."""

    model: str
    preset: str
    system_prompt: str
    sampling: Fields = ()
    started: str = ""  # UTC, ISO 8601


@dataclass(frozen=True)
class JournalTurn:
    """One finished exchange: the prompt, the answer, the engine's stats under it, what it ran with."""

    user: str
    assistant: str
    model: str = ""
    preset: str = ""
    stats: Fields = ()
    interrupted: str = ""  # why the answer stopped short (the engine died); "" = it finished


@dataclass(frozen=True)
class RestoredConversation:
    """A journal read back: its head, the turns that passed the checks, and what was skipped."""

    path: Path
    head: JournalHead
    turns: tuple[JournalTurn, ...]
    closed: bool  # the program that wrote it ended cleanly
    problems: tuple[str, ...] = ()  # one line per skipped line or bound reached

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class JournalScan:
    """The newest journal that qualified (or None), and one line per newer file that was skipped."""

    found: RestoredConversation | None
    skipped: tuple[str, ...] = ()


def stats_fields(stats: object) -> Fields:
    """A stats dataclass as journal fields, without its `text` (the answer is the turn's own field)."""
    return tuple((name, value) for name, value in asdict(stats).items() if name != "text")


def is_journal_name(file_name: str) -> bool:
    return bool(_NAME.fullmatch(file_name))


def journal_folder() -> Path:
    return state_dir() / "conversations"


def _cut(text: str) -> tuple[str, bool]:
    return (text, False) if len(text) <= MAX_TEXT_CHARS else (text[:MAX_TEXT_CHARS] + TRUNCATED_MARK, True)


def _head_record(head: JournalHead) -> dict:
    system, _ = _cut(head.system_prompt)
    return {"kind": "head", "version": FORMAT_VERSION, "model": head.model[:MAX_FIELD_TEXT],
            "preset": head.preset[:MAX_FIELD_TEXT], "system_prompt": system, "sampling": dict(head.sampling),
            "started": head.started}


def _turn_record(turn: JournalTurn) -> dict:
    user, user_cut = _cut(turn.user)
    assistant, assistant_cut = _cut(turn.assistant)
    record = {"kind": "turn", "user": user, "assistant": assistant, "model": turn.model[:MAX_FIELD_TEXT],
              "preset": turn.preset[:MAX_FIELD_TEXT], "stats": dict(turn.stats[:MAX_FIELDS])}
    if turn.interrupted:
        record["interrupted"] = turn.interrupted[:MAX_FIELD_TEXT]
    if user_cut or assistant_cut:
        record["truncated"] = True
    return record


def _line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


class ChatJournal:
    """Appends one conversation to its own file in `folder`, created at the first turn.

    Writing never raises: a failure (a full disk, a read-only state folder) is kept in
    `failure`, one line for the caller to show once, and journaling stops.
    """

    def __init__(self, folder: Path, head: JournalHead) -> None:
        self.folder = folder
        self.head = head
        self.path: Path | None = None
        self.failure = ""
        self._fd: int | None = None

    def record(self, *turns: JournalTurn) -> str:
        """Append `turns` and fsync; "" when they are on disk, else why not (said once)."""
        if self.failure:
            return ""
        try:
            if self._fd is None:
                self._create()
            self._write(b"".join(_line(_turn_record(turn)) for turn in turns))
        except (OSError, ValueError) as error:  # ValueError: a stats value json cannot write
            self.failure = f"conversation journal: cannot write {self.path or self.folder} ({error}); " \
                           "later turns are not journaled"
            self._close_fd()
            return self.failure
        return ""

    def close(self) -> None:
        """The conversation ended cleanly: mark it closed (no restore offer for it)."""
        if self._fd is not None and not self.failure:
            try:
                self._write(_line({"kind": "end"}))
            except OSError:
                pass
        self._close_fd()

    def _create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        started = time.gmtime(now)
        stamp = f"{time.strftime('%Y%m%dT%H%M%S', started)}{int(now % 1 * 1_000_000):06d}Z"
        for attempt in range(100):
            name = f"chat-{stamp}-{(os.getpid() + attempt) % 1_000_000:06d}.jsonl"
            try:
                self._fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                                   0o600)
            except FileExistsError:
                continue
            self.path = self.folder / name
            break
        else:
            raise OSError("no free journal name")
        head = JournalHead(self.head.model, self.head.preset, self.head.system_prompt, self.head.sampling,
                           self.head.started or time.strftime("%Y-%m-%dT%H:%M:%SZ", started))
        self._write(_line(_head_record(head)))
        _fsync_folder(self.folder)  # the new name survives a power cut, not only a kill
        prune_journals(self.folder, keep=KEEP_JOURNALS, spare=self.path)

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def list_journals(folder: Path) -> list[Path]:
    """The journals in `folder`, newest first (names only: at most MAX_LISTED entries are looked at)."""
    try:
        entries = []
        with os.scandir(folder) as scan:
            for count, entry in enumerate(scan):
                if count >= MAX_LISTED:
                    break
                if _NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    entries.append(Path(entry.path))
    except OSError:
        return []
    return sorted(entries, key=lambda path: path.name, reverse=True)


def prune_journals(folder: Path, *, keep: int, spare: Path | None = None) -> None:
    """Remove all but the newest `keep` journals (never `spare`, the one being written)."""
    for path in list_journals(folder)[keep:]:
        if path != spare:
            try:
                path.unlink()
            except OSError:
                pass


def mark_closed(path: Path) -> str:
    """Close a journal another run left open (restored elsewhere, or declined); "" or why it failed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        return f"conversation journal: cannot close {path} ({error.strerror or error})"
    try:
        size = os.fstat(fd).st_size
        ends_clean = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
        # after a half-written line, a newline first: the mark is a line of its own
        os.write(fd, (b"" if ends_clean else b"\n") + _line({"kind": "end"}))
        os.fsync(fd)
    except OSError as error:
        return f"conversation journal: cannot close {path} ({error.strerror or error})"
    finally:
        os.close(fd)
    return ""


def find_journal(folder: Path, name: str) -> Path:
    """The journal called `name` (with or without .jsonl) in `folder`; only journal names are taken."""
    file_name = name if name.endswith(".jsonl") else f"{name}.jsonl"
    if not _NAME.fullmatch(file_name):
        raise WorkbenchError(f"{name!r} is not a conversation journal name", where=str(folder),
                             fix="give a name like chat-20260101T120000000000Z-001234, or no name for the latest")
    path = folder / file_name
    if not path.is_file():
        raise WorkbenchError(f"no conversation journal {file_name}", where=str(folder),
                             fix="`--resume` without a name takes the latest")
    return path


def read_journal(path: Path) -> RestoredConversation:
    """Read a journal back, bounded and checked; a bad line is skipped and named in `problems`.

    Raises WorkbenchError when nothing of it can be used: too large, not a regular file, no head.
    """
    fix = "it is skipped; delete it or resume another conversation"
    try:
        data = read_regular_file(path, max_bytes=MAX_JOURNAL_BYTES, what="a conversation journal", fix=fix)
    except OSError as error:
        raise WorkbenchError(f"cannot read it ({error.strerror or error})", where=str(path), fix=fix) from None
    lines = data.split(b"\n")
    half_written = lines.pop()  # b"" when the file ends with a newline, as every complete write does
    head: JournalHead | None = None
    turns: list[JournalTurn] = []
    problems: list[str] = []
    closed = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record, problem = _parse_line(raw)
        if problem:
            if number == 1:
                raise WorkbenchError(f"line 1 (the head) {problem}", where=str(path), fix=fix)
            problems.append(f"line {number} {problem}: skipped")
            continue
        kind = record.get("kind")
        if number == 1:
            head = _head(record)
            if head is None:
                raise WorkbenchError("line 1 is not a conversation head (model, preset, system prompt)",
                                     where=str(path), fix=fix)
        elif kind == "turn":
            turn = _turn(record)
            if turn is None:
                problems.append(f"line {number} is not a turn (user and assistant texts, flat stats): skipped")
            elif len(turns) >= MAX_TURNS:
                problems.append(f"more than {MAX_TURNS:,} turns: the rest is skipped")
                break
            else:
                turns.append(turn)
        elif kind == "end":
            closed = True
        else:
            problems.append(f"line {number} is no journal record (kind {str(kind)[:20]!r}): skipped")
    if head is None:
        raise WorkbenchError("empty: no conversation head", where=str(path), fix=fix)
    if half_written.strip():
        problems.append(f"line {len(lines) + 1} is half-written (the program stopped while writing it): skipped")
    return RestoredConversation(path, head, tuple(turns), closed, tuple(problems))


def latest_journal(folder: Path, *, unclosed_only: bool) -> JournalScan:
    """The newest journal with at least one turn (with `unclosed_only`, one its program did not close).

    A newer file that cannot be read is reported in `skipped` and passed over, never raised."""
    skipped: list[str] = []
    for path in list_journals(folder):
        try:
            restored = read_journal(path)
        except WorkbenchError as error:
            skipped.append(str(error))
            continue
        skipped += [f"{path}: {problem}" for problem in restored.problems]
        if unclosed_only and restored.closed:
            return JournalScan(None, tuple(skipped))  # the latest conversation ended cleanly: nothing to offer
        if restored.turns:
            return JournalScan(restored, tuple(skipped))
    return JournalScan(None, tuple(skipped))


def _parse_line(raw: bytes) -> tuple[dict, str]:
    if len(raw) > MAX_LINE_BYTES:
        return {}, f"is longer than {MAX_LINE_BYTES // MIB} MiB"
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return {}, "is not UTF-8 text"
    except (ValueError, RecursionError):
        return {}, "is not JSON"
    if not isinstance(record, dict):
        return {}, "is not a JSON object"
    return record, ""


def _text(value: object, limit: int) -> str | None:
    return value if isinstance(value, str) and len(value) <= limit else None


def _fields(value: object) -> Fields | None:
    """A flat object of at most MAX_FIELDS short names to numbers, booleans or short strings."""
    if not isinstance(value, dict) or len(value) > MAX_FIELDS:
        return None
    fields = []
    for name, item in value.items():
        if not isinstance(name, str) or len(name) > MAX_FIELD_NAME:
            return None
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, str) and len(item) > MAX_FIELD_TEXT:
            return None
        if not isinstance(item, (int, float, str, bool)):
            return None
        fields.append((name, item))
    return tuple(fields)


def _head(record: dict) -> JournalHead | None:
    if record.get("kind") != "head" or record.get("version") != FORMAT_VERSION:
        return None
    model, preset = _text(record.get("model"), MAX_FIELD_TEXT), _text(record.get("preset"), MAX_FIELD_TEXT)
    system = _text(record.get("system_prompt"), MAX_TEXT_CHARS + len(TRUNCATED_MARK))
    sampling, started = _fields(record.get("sampling", {})), _text(record.get("started", ""), 40)
    if None in (model, preset, system, sampling, started):
        return None
    return JournalHead(model, preset, system, sampling, started)


def _turn(record: dict) -> JournalTurn | None:
    limit = MAX_TEXT_CHARS + len(TRUNCATED_MARK)
    user, assistant = _text(record.get("user"), limit), _text(record.get("assistant"), limit)
    model, preset = _text(record.get("model", ""), MAX_FIELD_TEXT), _text(record.get("preset", ""), MAX_FIELD_TEXT)
    stats, interrupted = _fields(record.get("stats", {})), _text(record.get("interrupted", ""), MAX_FIELD_TEXT)
    if None in (user, assistant, model, preset, stats, interrupted):
        return None
    return JournalTurn(user, assistant, model, preset, stats, interrupted)
