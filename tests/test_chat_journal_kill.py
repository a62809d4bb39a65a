"""kill -9 of `workbench chat` and of the app mid-answer loses no finished turn; the next start restores it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
from fakes import SCRIPTED_ANSWER, FakeEngine, make_app, wait_for, wait_until
from textual.widgets import Button

from workbench.core.files.chat_journal import (
    ChatJournal,
    JournalHead,
    JournalTurn,
    journal_folder,
    latest_journal,
    list_journals,
    read_journal,
)

TESTS = Path(__file__).parent


def _journal_turns() -> int:
    paths = list_journals(journal_folder())
    return len(read_journal(paths[0]).turns) if paths else 0


class _Reader(threading.Thread):
    """Collects a pipe's text as it comes, so the test can wait on it without blocking."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.text = stream, ""

    def run(self) -> None:
        while character := self.stream.read(1):
            self.text += character


@contextlib.contextmanager
def _reaped(process: subprocess.Popen):
    """The process is gone when the block ends: waited for after the test's kill, killed after a failure."""
    try:
        yield
    except BaseException:
        process.kill()
        process.wait()
        raise
    process.wait(timeout=30)


def test_kill_9_of_workbench_chat_mid_answer_keeps_the_finished_turn(tmp_path):
    preset = tmp_path / "journal-chat.toml"
    preset.write_text('name = "journal-chat"\nctx_size = 512\nbatch_size = 128\nubatch_size = 128\nthreads = 1\n')
    chat = subprocess.Popen(
        [sys.executable, "-m", "workbench", "chat", "bundled", "--preset", str(preset), "--device", "host",
         "--temp", "0", "--seed", "1", "--max-tokens", "300", "--no-stats"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    out, err = _Reader(chat.stdout), _Reader(chat.stderr)
    out.start(), err.start()
    with _reaped(chat):
        chat.stdin.write("What is the capital of France?\n")
        chat.stdin.flush()
        wait_for(lambda: _journal_turns() == 1 or chat.poll() is not None, what="the first turn journaled")
        assert chat.poll() is None, err.text
        first_answer = out.text
        engine = next(child for child in psutil.Process(chat.pid).children()
                      if "workbench.core.engine.process" in " ".join(child.cmdline()))
        chat.stdin.write("Write a very long story about a dragon who guards a library.\n")
        chat.stdin.flush()
        wait_for(lambda: len(out.text) > len(first_answer) + 5, what="the second answer streaming")
        os.kill(chat.pid, signal.SIGKILL)
    restored = read_journal(list_journals(journal_folder())[0])
    assert len(restored.turns) == 1 and not restored.closed and restored.problems == ()
    turn = restored.turns[0]
    assert turn.user == "What is the capital of France?"
    assert turn.assistant.strip() == first_answer.strip() and turn.assistant.strip()
    assert turn.preset == "journal-chat" and turn.model == "SmolLM2-135M-Instruct.Q4_1"
    stats = dict(turn.stats)
    assert stats["stop_reason"] in ("stop", "length") and stats["generated_tokens"] > 0
    assert restored.head.preset == "journal-chat" and dict(restored.head.sampling)["temperature"] == 0.0
    wait_for(lambda: not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE,
             what="the orphaned engine to exit")


class _RpcFakeEngine(FakeEngine):
    def load(self, model_path, preset, *, device=None, allow_overbudget=False, rpc=()):
        return super().load(model_path, preset, device=device, allow_overbudget=allow_overbudget)


def test_chat_resume_sends_the_journaled_turns_and_keeps_journaling(cli, monkeypatch):
    from workbench.cli import cmd_chat

    folder = journal_folder()
    journal = ChatJournal(folder, JournalHead("SmolLM2-135M-Instruct.Q4_1", "as-is", "Answer in French.", ()))
    journal.record(JournalTurn("Capital of France?", "Paris.", stats=(("stop_reason", "stop"),)),
                   JournalTurn("Tell a story.", "Once upon", interrupted="the engine process died"))
    old = journal.path
    engines: list[FakeEngine] = []
    monkeypatch.setattr(cmd_chat, "EngineClient", lambda: engines.append(_RpcFakeEngine()) or engines[-1])
    done = cli("chat", "bundled", "--resume", "--no-stats", stdin="And of Italy?\n")
    assert done.returncode == 0, done.stderr
    assert f"resuming {old.name}: 2 turn(s)" in done.stderr
    sent = engines[0].chats[0][0]
    # the system prompt comes back from the journal; the interrupted exchange is shown, not re-sent
    assert [(m.role, m.content) for m in sent] == [
        ("system", "Answer in French."), ("user", "Capital of France?"), ("assistant", "Paris."),
        ("user", "And of Italy?")]
    assert read_journal(old).closed  # continued elsewhere: no second offer for it
    newest = read_journal(list_journals(folder)[0])
    assert newest.path != old and newest.closed
    assert [turn.user for turn in newest.turns] == ["Capital of France?", "Tell a story.", "And of Italy?"]
    assert newest.turns[-1].assistant == "".join(SCRIPTED_ANSWER)


def test_chat_resume_of_nothing_or_a_bad_name_is_one_line(cli):
    done = cli("chat", "bundled", "--resume", stdin="")
    assert done.returncode == 2 and "no conversation to resume" in done.stderr and done.stderr.count("\n") == 1
    done = cli("chat", "bundled", "--resume", "../../etc/passwd", stdin="")
    assert done.returncode == 2 and "not a conversation journal name" in done.stderr


_APP_SCRIPT = """
import asyncio, sys, threading
sys.path.insert(0, {tests!r})
import fakes
from fakes import SCRIPTED_ANSWER, make_app, wait_until
from workbench.core.engine.events import TokenChunk
from workbench.ui.engine_session import GENERATING, LOADED
from workbench.ui.widgets.prompt_input import PromptInput


class SecondAnswerHangs(fakes.FakeEngine):
    \"\"\"The first answer whole; the second stops after two tokens, as if the model were still thinking.\"\"\"

    def chat(self, messages, sampling):
        for event in super().chat(messages, sampling):
            if self._turns == 2 and isinstance(event, TokenChunk) and event.text == SCRIPTED_ANSWER[2]:
                held.set()
                threading.Event().wait()
            yield event


held = threading.Event()


fakes.FakeEngine = SecondAnswerHangs
app = make_app()


async def main():
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        for prompt in ("What fits?", "And now?"):
            screen.query_one(PromptInput).value = prompt
            screen.query_one(PromptInput).focus()
            await pilot.press("enter")
            if prompt == "What fits?":
                await wait_until(pilot, lambda: len(screen.conversation.messages) == 2 and screen.phase == LOADED)
        await wait_until(pilot, lambda: held.is_set() and screen.phase == GENERATING)
        print("STREAMING", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def _drawn_stats(screen) -> str:
    """The line under the last answer drawn ("" until an answer has finished drawing)."""
    from workbench.ui.widgets.chat_view import AnswerBlock

    blocks = list(screen.query(AnswerBlock))
    labels = list(blocks[-1].query(".answer-stats")) if blocks else []
    return str(labels[0].content) if labels else ""


def _kill_the_app_mid_answer() -> None:
    """The app, headless with the fake engine, in a process of its own: one turn finished, the next streaming."""
    app_process = subprocess.Popen([sys.executable, "-c", _APP_SCRIPT.format(tests=str(TESTS))],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = _Reader(app_process.stdout), _Reader(app_process.stderr)
    out.start(), err.start()
    with _reaped(app_process):
        # the second answer is streaming: two of its tokens are out of the engine
        wait_for(lambda: "STREAMING" in out.text or app_process.poll() is not None, what="the second answer")
        assert app_process.poll() is None, err.text
        os.kill(app_process.pid, signal.SIGKILL)


async def test_kill_9_of_the_app_mid_answer_keeps_the_finished_turn_and_the_next_start_restores_it():
    from workbench.ui.screens.confirm_modal import ConfirmModal

    _kill_the_app_mid_answer()
    restored = read_journal(list_journals(journal_folder())[0])
    assert not restored.closed and restored.problems == ()
    assert [(turn.user, turn.assistant) for turn in restored.turns] == [("What fits?", "".join(SCRIPTED_ANSWER))]
    assert dict(restored.turns[0].stats)["generated_tokens"] == len(SCRIPTED_ANSWER)
    assert restored.head.preset == "as-is"

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal) and app.screen.query("#confirm"),
                         what="the restore offer")
        assert "1 finished turn" in app.screen.body
        app.screen.query_one("#confirm", Button).press()  # a click can land before the layout is drawn
        screen = app.main_screen
        await wait_until(pilot, lambda: _drawn_stats(screen), what="the restored answer drawn with its stats")
        assert [m.content for m in screen.conversation.messages] == ["What fits?", "".join(SCRIPTED_ANSWER)]
        assert screen.conversation.stats[1].generated_tokens == len(SCRIPTED_ANSWER)
        assert f"generated {len(SCRIPTED_ANSWER)}" in _drawn_stats(screen)
    assert read_journal(restored.path).closed  # restored: it is not offered again
    continued = read_journal(list_journals(journal_folder())[0])
    assert continued.path != restored.path and continued.turns == restored.turns and continued.closed
    assert latest_journal(journal_folder(), unclosed_only=True).found is None  # the app quit cleanly: no offer


async def test_an_answer_cut_by_an_engine_crash_is_journaled_as_interrupted_and_restored_as_such():
    from workbench.ui.engine_session import IDLE, LOADED
    from workbench.ui.screens.confirm_modal import ConfirmModal
    from workbench.ui.widgets.prompt_input import PromptInput

    engines: list[FakeEngine] = []
    app = make_app(engines)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        engines[0].crash_next_chat = True
        screen.query_one(PromptInput).value = "Crash please"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.conversation.interrupted and screen.phase == IDLE)
        restored = read_journal(list_journals(journal_folder())[0])
        assert [(turn.user, turn.assistant, turn.interrupted, turn.stats) for turn in restored.turns] == [
            ("Crash please", "The ", "engine process died", ())]
    assert read_journal(restored.path).closed
    mark_open = restored.path.read_bytes().replace(b'{"kind": "end"}\n', b"")
    restored.path.write_bytes(mark_open)  # as if the app had been killed
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal) and app.screen.query("#confirm"))
        app.screen.query_one("#confirm", Button).press()  # a click can land before the layout is drawn
        screen = app.main_screen
        await wait_until(pilot, lambda: _drawn_stats(screen), what="the restored answer drawn")
        assert _drawn_stats(screen) == "interrupted: engine process died"
        assert screen.conversation.interrupted == {1: "engine process died"} and screen.conversation.stats == {}
        # restored as on screen before: kept for the transcript, not sent to the model again
        assert [m.content for m in screen.conversation.for_engine() if m.role != "system"] == []


def test_chat_says_when_the_last_conversation_was_cut_off_and_resume_skips_a_damaged_newer_journal(cli, monkeypatch):
    from workbench.cli import cmd_chat

    folder = journal_folder()
    journal = ChatJournal(folder, JournalHead("SmolLM2-135M-Instruct.Q4_1", "as-is", "", ()))
    journal.record(JournalTurn("Capital of France?", "Paris."))  # never closed: the chat was killed
    monkeypatch.setattr(cmd_chat, "EngineClient", _RpcFakeEngine)
    done = cli("chat", "bundled", "--no-stats", stdin="")
    assert done.returncode == 0, done.stderr
    assert "the last conversation (1 turn(s)" in done.stderr and "`workbench chat bundled --resume`" in done.stderr
    damaged = folder / "chat-29991231T235959000000Z-000001.jsonl"
    damaged.write_bytes(b'{"kind": "head", "version": 1, "model": "m", "preset": "p", "system_prompt": ""}\n'
                        b'{"kind": "turn", "user": "half')
    done = cli("chat", "bundled", "--resume", "--no-stats", stdin="")
    assert done.returncode == 0, done.stderr
    assert f"skipped: {damaged}: line 2 is half-written" in done.stderr  # said, and an older one resumed
    assert f"resuming {journal.path.name}: 1 turn(s)" in done.stderr and "Traceback" not in done.stderr
