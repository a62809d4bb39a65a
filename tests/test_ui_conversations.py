"""In the app: the kept conversations listed, renamed, opened in the chat and deleted, and saved system prompts
picked in F5; both survive a restart (two app runs on the same home)."""

from __future__ import annotations

from fakes import FakeEngine, FakeSampler, wait_until
from textual.widgets import Input, OptionList, Select, TextArea

from workbench.cli.main import build_parser
from workbench.core.files.chat_journal import ChatJournal, JournalHead, JournalTurn, journal_folder
from workbench.core.files.conversations import list_conversations, load_titles
from workbench.ui.run import build_app
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.conversations_modal import ConversationsModal
from workbench.ui.screens.settings_modal import SettingsModal

HEAD = JournalHead("SmolLM2-135M-Instruct", "as-is", "Be brief.")


def _app():
    return build_app(build_parser().parse_args([]), engine_factory=FakeEngine,
                     sampler_factory=lambda pid: FakeSampler(pid), telemetry_interval_s=0.2)


def _journal(*exchanges: tuple[str, str]) -> str:
    journal = ChatJournal(journal_folder(), HEAD)
    assert journal.record(*(JournalTurn(user, answer) for user, answer in exchanges)) == ""
    journal.close()
    return journal.path.stem


def _drawn(app, kind, button: str) -> bool:
    return isinstance(app.screen, kind) and bool(app.screen.query(button)) and app.screen.query_one(button).region.width > 0


async def _conversations(app, pilot) -> ConversationsModal:
    app.action_conversations()
    await wait_until(pilot, lambda: _drawn(app, ConversationsModal, "#open"), what="the conversations dialog drawn")
    return app.screen


async def test_conversations_are_renamed_opened_and_deleted_and_kept_across_a_restart():
    capitals = _journal(("Capital of France?", "Paris."), ("And of Italy?", "Rome."))
    other = _journal(("Two plus two?", "Four."))
    app = _app()
    async with app.run_test(size=(120, 34)) as pilot:
        modal = await _conversations(app, pilot)
        assert [s.name for s in modal.summaries] == [other, capitals]
        modal.query_one(OptionList).highlighted = 1
        title = modal.query_one("#conversation-title", Input)
        await wait_until(pilot, lambda: title.value == "Capital of France?", what="the highlighted one's title")
        title.value = "Capitals"
        await pilot.click("#rename")
        await wait_until(pilot, lambda: load_titles(journal_folder()) == {capitals: "Capitals"}, what="the title saved")
        assert modal.summaries[1].title == "Capitals"

        await pilot.click("#open")
        chat = app.main_screen.chat_pane
        await wait_until(pilot, lambda: len(chat.conversation.messages) == 4 and len(list_conversations(journal_folder())) == 2
                         and capitals not in [s.name for s in list_conversations(journal_folder())],
                         what="the conversation opened in the chat")
        assert [m.content for m in chat.conversation.messages] == ["Capital of France?", "Paris.", "And of Italy?", "Rome."]
        listed = list_conversations(journal_folder())
        assert sorted(s.title for s in listed) == ["Capitals", "Two plus two?"]  # once each: the old file went
        assert capitals not in [s.name for s in listed]

        modal = await _conversations(app, pilot)
        modal.query_one(OptionList).highlighted = [s.name for s in modal.summaries].index(other)
        await wait_until(pilot, lambda: modal.current is not None and modal.current.name == other)
        await pilot.click("#delete")
        await wait_until(pilot, lambda: _drawn(app, ConfirmModal, "#confirm"), what="the question drawn")
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: [s.title for s in modal.summaries] == ["Capitals"], what="the list without it")

    second = _app()
    async with second.run_test(size=(120, 34)) as pilot:
        modal = await _conversations(second, pilot)
        assert [(s.title, s.turns) for s in modal.summaries] == [("Capitals", 2)]


async def test_a_system_prompt_saved_in_f5_is_picked_after_a_restart():
    app = _app()
    async with app.run_test(size=(120, 34)) as pilot:
        app.main_screen.action_edit_settings()
        await wait_until(pilot, lambda: _drawn(app, SettingsModal, "#save-prompt"), what="F5 drawn")
        modal = app.screen
        modal.query_one("#system-prompt", TextArea).text = "Answer in one line, in French."
        modal.query_one("#prompt-name", Input).value = "terse-fr"
        await pilot.click("#save-prompt")
        await wait_until(pilot, lambda: app.keeper.settings.system_prompts == (
            ("terse-fr", "Answer in one line, in French."),), what="the prompt saved")

    second = _app()
    async with second.run_test(size=(120, 34)) as pilot:
        second.main_screen.action_edit_settings()
        await wait_until(pilot, lambda: _drawn(second, SettingsModal, "#apply"), what="F5 drawn")
        modal = second.screen
        assert isinstance(modal, SettingsModal) and modal.query_one("#system-prompt", TextArea).text != "Answer in one line, in French."
        picker = modal.query_one("#prompt-preset", Select)
        picker.value = "terse-fr"
        await wait_until(pilot, lambda: modal.query_one("#system-prompt", TextArea).text == "Answer in one line, in French.",
                         what="the saved prompt picked")
        await pilot.click("#apply")
        await wait_until(pilot, lambda: second.main_screen.conversation.system_prompt == "Answer in one line, in French.",
                         what="the prompt applied")
