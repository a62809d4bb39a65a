"""`workbench conversations`: list, show, rename, delete and export the journaled conversations; hostile names and files."""

from __future__ import annotations

import json

import pytest

from workbench.cli.main import main
from workbench.core.files.chat_journal import ChatJournal, JournalHead, JournalTurn, journal_folder
from workbench.core.files.conversations import TITLES_FILE, list_conversations, load_titles

HEAD = JournalHead("/models/SmolLM2-135M-Instruct.Q4_1.gguf", "as-is", "Be brief.", (("temperature", 0.0),))
TURNS = (JournalTurn("What is the capital of France?", "Paris.", stats=(("decode_tps", 41.5), ("stop_reason", "stop"))),
         JournalTurn("And of Italy?", "Rome.", interrupted="the engine died (SIGKILL)"))


def _journal(*turns: JournalTurn, close: bool = True) -> str:
    journal = ChatJournal(journal_folder(), HEAD)
    assert journal.record(*turns) == ""
    if close:
        journal.close()
    return journal.path.stem


def test_list_show_rename_export_delete(tmp_path, capsys):
    older = _journal(TURNS[0])
    newer = _journal(*TURNS, close=False)
    assert main(["conversations", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["conversations"]
    assert [(c["name"], c["turns"], c["closed"], c["title"]) for c in listed] == [
        (newer, 2, False, "What is the capital of France?"), (older, 1, True, "What is the capital of France?")]

    assert main(["conversations", "rename", older, "Capitals, first try"]) == 0
    assert capsys.readouterr().out.strip() == f"{older}: titled 'Capitals, first try'"
    assert main(["conversations"]) == 0
    out = capsys.readouterr().out
    assert "Capitals, first try" in out and newer in out and "SmolLM2-135M-Instruct.Q4_1.gguf" in out

    assert main(["conversations", "show", "latest"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# What is the capital of France?\n")
    for part in ("## User\n\nAnd of Italy?", "## Assistant\n\nRome.", "_interrupted: the engine died (SIGKILL)",
                 "_decode_tps 41.5, stop_reason stop_", "## System\n\nBe brief."):
        assert part in shown

    out_md, out_json = tmp_path / "older.md", tmp_path / "older.json"
    assert main(["conversations", "export", older, "--out", str(out_md)]) == 0
    assert main(["conversations", "export", older, "--out", str(out_json)]) == 0
    assert out_md.read_text().startswith("# Capitals, first try\n")
    data = json.loads(out_json.read_text())
    assert (data["title"], data["model"], data["system_prompt"]) == ("Capitals, first try", HEAD.model, "Be brief.")
    assert data["turns"] == [{"user": "What is the capital of France?", "assistant": "Paris.", "model": "", "preset": "",
                              "stats": {"decode_tps": 41.5, "stop_reason": "stop"}}]
    assert oct(out_json.stat().st_mode & 0o777) == "0o600"
    capsys.readouterr()

    assert main(["conversations", "delete", older]) == 2
    assert f"would delete {older} (1 turn). Pass --yes" in capsys.readouterr().err
    assert main(["conversations", "delete", older, "--yes"]) == 0
    assert [s.name for s in list_conversations(journal_folder())] == [newer]
    assert load_titles(journal_folder()) == {}


@pytest.mark.parametrize("name", ["../../etc/passwd", "chat-x", "/tmp/chat-20260101T120000000000Z-001234",
                                  "chat-20260101T120000000000Z-001234/../x", "a" * 500])
def test_hostile_names_touch_nothing(name, tmp_path, capsys):
    kept = _journal(TURNS[0])
    for argv in (["show", name], ["rename", name, "t"], ["delete", name, "--yes"],
                 ["export", name, "--out", str(tmp_path / "x.md")]):
        assert main(["conversations", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("workbench: ") and err.count("\n") == 1
    assert [s.name for s in list_conversations(journal_folder())] == [kept]
    assert not (tmp_path / "x.md").exists()


def test_bad_titles_a_damaged_index_and_a_damaged_journal(tmp_path, capsys):
    name = _journal(TURNS[0])
    for title in ("", "   ", "a\x1b[2Jb", "x" * 121):
        assert main(["conversations", "rename", name, title]) == 2
        assert "the title" in capsys.readouterr().err
    folder = journal_folder()
    (folder / TITLES_FILE).write_text('{"' + name + '": "Good title"')  # cut JSON: no titles, no crash
    assert load_titles(folder) == {}
    (folder / TITLES_FILE).write_text(json.dumps({name: "Good title", "../evil": "x", name + "x": "y",
                                                  "chat-20200101T000000000000Z-000002": "a\x00b"}))
    assert load_titles(folder) == {name: "Good title"}
    (folder / TITLES_FILE).write_text(json.dumps({name: 7}))
    assert load_titles(folder) == {}
    broken = folder / "chat-20200101T000000000000Z-000001.jsonl"
    broken.write_text("not json\n")
    assert main(["conversations", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["conversations"]
    assert [(c["name"], c["problem"]) for c in listed] == [(name, ""), (broken.stem, "line 1 (the head) is not JSON")]
    assert main(["conversations", "export", name, "--out", str(tmp_path / "x.txt")]) == 2
    assert "cannot tell the export format of 'x.txt'" in capsys.readouterr().err
    assert main(["conversations", "export", name, "--out", str(tmp_path), "--format", "md"]) == 2  # a folder
    assert "is not a file that can be written" in capsys.readouterr().err
