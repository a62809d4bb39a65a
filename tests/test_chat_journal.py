"""The conversation journal: turns read back as written, and corrupt, half-written or oversized files
reported and skipped without a crash."""

from __future__ import annotations

import json
import os

import pytest

from workbench.core.errors import WorkbenchError
from workbench.core.files import chat_journal
from workbench.core.files.chat_journal import (
    ChatJournal,
    JournalHead,
    JournalTurn,
    find_journal,
    latest_journal,
    list_journals,
    mark_closed,
    read_journal,
)

HEAD = JournalHead("SmolLM2-135M-Instruct", "as-is", "Be brief.", (("temperature", 0.0), ("seed", 3)))
FIRST = JournalTurn("What is the capital of France?", "Paris.", "SmolLM2-135M-Instruct", "as-is",
                    (("prompt_tokens", 31), ("decode_tps", 41.5), ("stop_reason", "stop")))
SECOND = JournalTurn("And of Italy?", "Rome.", "SmolLM2-135M-Instruct", "balanced-q4km", (("prompt_tokens", 44),))


def _written(tmp_path, *turns: JournalTurn, close: bool = False):
    journal = ChatJournal(tmp_path, HEAD)
    for turn in turns:
        assert journal.record(turn) == ""
    if close:
        journal.close()
    return journal.path


def test_turns_read_back_as_written_with_the_head(tmp_path):
    path = _written(tmp_path, FIRST, SECOND)
    restored = read_journal(path)
    assert restored.head.model == "SmolLM2-135M-Instruct" and restored.head.preset == "as-is"
    assert restored.head.system_prompt == "Be brief." and dict(restored.head.sampling) == {"temperature": 0.0, "seed": 3}
    assert restored.turns == (FIRST, SECOND)
    assert not restored.closed and restored.problems == ()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3 and all(isinstance(json.loads(line), dict) for line in lines)  # one object per line


def test_no_file_until_the_first_turn_and_a_closed_one_is_not_offered(tmp_path):
    journal = ChatJournal(tmp_path, HEAD)
    journal.close()
    assert list_journals(tmp_path) == []
    _written(tmp_path, FIRST, close=True)
    assert read_journal(list_journals(tmp_path)[0]).closed
    assert latest_journal(tmp_path, unclosed_only=True).found is None
    assert latest_journal(tmp_path, unclosed_only=False).found.turns == (FIRST,)


def test_a_half_written_last_line_is_reported_and_the_finished_turns_kept(tmp_path):
    path = _written(tmp_path, FIRST, SECOND)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 9])  # the kill came while the second turn was being written
    restored = read_journal(path)
    assert restored.turns == (FIRST,)
    assert restored.problems == ("line 3 is half-written (the program stopped while writing it): skipped",)
    assert mark_closed(path) == ""  # the end mark goes on a line of its own after the half line
    assert read_journal(path).closed and read_journal(path).turns == (FIRST,)


@pytest.mark.parametrize("bad_line, problem", [
    (b"{not json", "is not JSON"),
    (b"\xff\xfe\x00garbage", "is not UTF-8 text"),
    (b"[1, 2, 3]", "is not a JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "is not JSON"),  # nesting deeper than the parser's recursion
    (b'{"kind": "turn", "user": 7, "assistant": "x"}', "is not a turn"),
    (b'{"kind": "turn", "user": "a", "assistant": "b", "stats": {"nested": {"x": 1}}}', "is not a turn"),
    (b'{"kind": "turn", "user": "a", "assistant": "b", "stats": {"tps": NaN}}', "is not a turn"),
    (b'{"kind": "turn", "user": "a", "assistant": "b", "stats": {' + b",".join(b'"k%d": 1' % i for i in range(41))
     + b"}}", "is not a turn"),
    (b'{"kind": "shell", "user": "a"}', "is no journal record"),
    (b'{"kind": "turn", "user": "' + b"x" * (chat_journal.MAX_LINE_BYTES + 1) + b'", "assistant": ""}',
     "is longer than 1 MiB"),
], ids=["not-json", "not-utf8", "array", "deep-nesting", "text-not-string", "nested-stats", "nan-stats",
        "too-many-stats", "unknown-kind", "long-line"])
def test_a_corrupt_line_is_reported_and_skipped_and_the_others_kept(tmp_path, bad_line, problem):
    path = _written(tmp_path, FIRST)
    with path.open("ab") as stream:
        stream.write(bad_line + b"\n")
    with path.open("ab") as stream:  # a later turn after the bad line is still read
        stream.write(json.dumps(chat_journal._turn_record(SECOND)).encode() + b"\n")
    restored = read_journal(path)
    assert restored.turns == (FIRST, SECOND)
    assert len(restored.problems) == 1 and restored.problems[0].startswith(f"line 3 {problem}")


@pytest.mark.parametrize("content, what", [
    (b"", "no conversation head"),
    (b'{"kind": "turn", "user": "a", "assistant": "b"}\n', "not a conversation head"),
    (b'{"kind": "head", "version": 99, "model": "m", "preset": "p", "system_prompt": ""}\n', "not a conversation head"),
    (b"\x00" * 64 + b"\n", "is not JSON"),
])
def test_a_file_without_a_usable_head_is_one_error(tmp_path, content, what):
    path = tmp_path / "chat-20260101T000000000000Z-000001.jsonl"
    path.write_bytes(content)
    with pytest.raises(WorkbenchError, match=what):
        read_journal(path)


def test_an_oversized_or_special_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = _written(tmp_path, FIRST)
    monkeypatch.setattr(chat_journal, "MAX_JOURNAL_BYTES", 64)
    with pytest.raises(WorkbenchError, match="too large for a conversation journal"):
        read_journal(path)
    fifo = tmp_path / "chat-20260101T000000000000Z-000002.jsonl"
    os.mkfifo(fifo)
    monkeypatch.undo()
    with pytest.raises(WorkbenchError, match="not a conversation journal"):
        read_journal(fifo)  # would block for ever on a plain open


def test_the_turn_count_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(chat_journal, "MAX_TURNS", 2)
    restored = read_journal(_written(tmp_path, FIRST, SECOND, FIRST))
    assert restored.turns == (FIRST, SECOND)
    assert restored.problems == ("more than 2 turns: the rest is skipped",)


def test_a_long_text_is_cut_when_written_so_the_line_stays_readable(tmp_path):
    control = "\x01" * (chat_journal.MAX_TEXT_CHARS + 10)  # each character escapes to 6 bytes
    path = _written(tmp_path, JournalTurn(control, control))
    restored = read_journal(path)
    assert restored.problems == ()
    assert restored.turns[0].user.endswith(chat_journal.TRUNCATED_MARK)
    assert len(restored.turns[0].user) == chat_journal.MAX_TEXT_CHARS + len(chat_journal.TRUNCATED_MARK)


def test_a_broken_newer_journal_is_reported_and_an_older_one_offered(tmp_path):
    older = _written(tmp_path, FIRST)
    newer = tmp_path / "chat-29991231T235959000000Z-000001.jsonl"
    newer.write_bytes(b"\x00\x01 not a journal\n")
    scan = latest_journal(tmp_path, unclosed_only=True)
    assert scan.found is not None and scan.found.path == older
    assert len(scan.skipped) == 1 and str(newer) in scan.skipped[0]


def test_pruning_keeps_a_bounded_number_of_journals(tmp_path, monkeypatch):
    monkeypatch.setattr(chat_journal, "KEEP_JOURNALS", 3)
    for index in range(5):
        (tmp_path / f"chat-20200101T0000{index:02d}000000Z-000001.jsonl").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not ours")
    newest = _written(tmp_path, FIRST)
    names = [path.name for path in list_journals(tmp_path)]
    assert names == [newest.name, "chat-20200101T000004000000Z-000001.jsonl", "chat-20200101T000003000000Z-000001.jsonl"]
    assert (tmp_path / "notes.txt").exists()


def test_a_journal_is_named_by_its_name_only(tmp_path):
    path = _written(tmp_path, FIRST)
    assert find_journal(tmp_path, path.stem) == path == find_journal(tmp_path, path.name)
    for name in ("../../etc/passwd", "/etc/passwd", "chat-2026.jsonl"):
        with pytest.raises(WorkbenchError, match="not a conversation journal name"):
            find_journal(tmp_path, name)


def test_a_write_failure_is_one_line_and_journaling_stops(tmp_path):
    blocked = tmp_path / "state"
    blocked.write_text("a file where the folder should be")
    journal = ChatJournal(blocked / "conversations", HEAD)
    failure = journal.record(FIRST)
    assert failure.startswith("conversation journal: cannot write") and "\n" not in failure
    assert journal.record(SECOND) == ""  # said once
    journal.close()
