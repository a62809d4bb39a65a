"""Pilot tests of every flow on the main screen, with the fake engine and sampler."""

import re
from pathlib import Path

from fakes import make_app, wait_until

from workbench.ui.engine_session import GENERATING, IDLE, LOADED
from workbench.ui.widgets.chat_view import AnswerBlock, Notice
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import SpeedPanel


async def load(pilot):
    screen = pilot.app.main_screen
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: screen.phase == LOADED)
    return screen


async def ask(pilot, text: str):
    """Send a prompt and wait for the answer to finish."""
    screen = pilot.app.main_screen
    before = len(screen.conversation.messages)
    prompt = screen.query_one(PromptInput)
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")
    # the answer is in the conversation and the turn has ended (LOADED is set last, after its stats line):
    # the new answer block alone is mounted before the turn even starts generating
    await wait_until(pilot, lambda: len(screen.conversation.messages) >= before + 2 and screen.phase == LOADED)


def last_answer(screen) -> AnswerBlock:
    return list(screen.query(AnswerBlock))[-1]


def stats_text(block: AnswerBlock) -> str:
    return str(block.query_one(".answer-stats").content)


async def test_load_chat_unload_reload_keeps_the_conversation():
    engines = []
    async with make_app(engines).run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        assert str(screen.query_one("#load-button").label) == "Unload"
        assert screen.query_one(LedgerPanel).view.loaded is engines[0].loaded
        assert screen.query_one(KvPanel).n_ctx == 2048
        await ask(pilot, "What fits?")
        answer = last_answer(screen)
        assert answer.text == "The ledger says it **fits**: weights and KV cache stay under the budget."
        assert "generated 15" in stats_text(answer) and "stop: stop" in stats_text(answer)
        assert screen.query_one(KvPanel).cells_used == engines[0]._cells
        assert len(screen.query_one(SpeedPanel).turns) == 1
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.phase == IDLE)
        assert "unload" in engines[0].calls and screen.query_one(KvPanel).n_ctx == 0
        await load(pilot)
        await ask(pilot, "And now?")
        await wait_until(pilot, lambda: len(engines[0].chats) == 2 and screen.phase == LOADED)
        sent = [m.content for m in engines[0].chats[-1][0]]
        assert sent[1:] == ["What fits?", answer.text, "And now?"]  # the first exchange was kept


async def test_escape_cancels_a_streaming_answer():
    engine_kwargs = {"answer": ("word ",) * 400, "token_delay_s": 0.01}
    async with make_app(engine_kwargs=engine_kwargs).run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        screen.query_one(PromptInput).value = "Talk a lot"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.phase == GENERATING and len(last_answer(screen).text) > 20)
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        answer = last_answer(screen)
        assert "stop: cancelled" in stats_text(answer)
        assert 0 < answer.text.count("word") < 400
        assert screen.conversation.messages[-1].content == answer.text


async def test_engine_crash_shows_why_and_restart_brings_it_back(tmp_path):
    engines = []
    async with make_app(engines).run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        engines[0].crash_next_chat = True
        prompt = screen.query_one(PromptInput)
        prompt.value = "Crash please"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query("Notice.-error"))
        notice = screen.query_one("Notice.-error", Notice)
        assert "Engine died (SIGKILL)" in notice.title
        assert "llama_decode: decoding batch" in notice.details and "predicted total 206 MiB" in notice.details
        assert screen.phase == IDLE and prompt.value == "Crash please"
        assert prompt.cursor_position == len("Crash please")  # typing goes after the restored prompt
        # the partial answer on screen is in the conversation (marked), so the transcript keeps it
        assert [m.content for m in screen.conversation.messages] == ["Crash please", "The "]
        assert screen.query_one(KvPanel).n_ctx == 0  # the dead engine's cache is not drawn as if alive
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not screen.query("#crash-notice"))  # answered: the box goes
        await wait_until(pilot, lambda: screen.phase == LOADED)
        assert len(engines) == 2 and engines[1].loaded is not None
        prompt.focus()
        await pilot.press("space", "a", "g", "a", "i", "n", "enter")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 4)
        assert screen.conversation.messages[2].content == "Crash please again"
        sent = [m.content for m in engines[1].chats[-1][0] if m.role != "system"]
        assert sent == ["Crash please again"]  # the interrupted exchange is not sent again
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: pilot.app.screen.query("#transcript-path"))
        pilot.app.screen.query_one("#transcript-path").value = str(tmp_path / "crash")
        await pilot.click("#save")
        await wait_until(pilot, (tmp_path / "crash.md").exists)
        markdown = (tmp_path / "crash.md").read_text()
        assert "## Assistant\n\nThe \n\n_interrupted: engine process died (partial answer)_" in markdown


async def test_load_failure_is_reported_and_the_app_stays_usable():
    async with make_app(engine_kwargs={"fail_load": "unsupported model architecture"}).run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: screen.query("Notice.-error"))
        assert "Load failed: unsupported model architecture" in screen.query_one("Notice.-error", Notice).title
        assert screen.phase == IDLE and str(screen.query_one("#load-button").label) == "Load"
        screen.query_one(PromptInput).value = "hello?"
        await pilot.press("enter")
        await pilot.pause()
        assert not screen.query(AnswerBlock)  # not sent: a notification says to load first


async def test_save_transcript_asks_for_the_name_and_writes_both_files(tmp_path):
    async with make_app().run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        await ask(pilot, "Save me")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: pilot.app.screen.query("#transcript-path"))
        assert pilot.app.screen.query_one("#transcript-path").value.startswith(str(Path.cwd()))
        pilot.app.screen.query_one("#transcript-path").value = str(tmp_path / "demo")
        await pilot.click("#save")
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        assert "Save me" in (tmp_path / "demo.md").read_text()
        assert '"role": "assistant"' in (tmp_path / "demo.json").read_text()


async def test_settings_modal_validates_and_applies_sampling():
    engines = []
    async with make_app(engines).run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        await pilot.press("f5")
        await wait_until(pilot, lambda: pilot.app.screen.query("#sampling-temperature"))
        modal = pilot.app.screen
        modal.query_one("#sampling-temperature").value = "hot"
        # the check runs when Input.Changed reaches the modal: wait for it, not for a moment
        await wait_until(pilot, lambda: "temperature: 'hot' is not a number" in str(
            modal.query_one("#settings-problems").content))
        assert modal.query_one("#apply").disabled
        modal.query_one("#sampling-temperature").value = "0.3"
        modal.query_one("#sampling-max_tokens").value = "4"
        modal.query_one("#system-prompt").text = "Answer in one word."
        await wait_until(pilot, lambda: not modal.query_one("#apply").disabled)  # a click on a disabled Apply is lost
        await pilot.click("#apply")
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        await ask(pilot, "Short")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2)
        messages, sampling = engines[0].chats[-1]
        assert sampling.temperature == 0.3 and sampling.max_tokens == 4
        assert messages[0].content == "Answer in one word."
        assert "stop: length" in stats_text(last_answer(screen))


async def test_prompt_history_walks_with_up_and_down():
    async with make_app().run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        for text in ("one", "two"):
            await ask(pilot, text)
            await wait_until(pilot, lambda: screen.phase == LOADED)
        prompt = screen.query_one(PromptInput)
        prompt.value = "draft"
        await pilot.press("up")
        assert prompt.value == "two"
        await pilot.press("up", "up")
        assert prompt.value == "one"
        await pilot.press("down", "down")
        assert prompt.value == "draft"


async def test_small_terminal_puts_chat_and_panels_in_tabs():
    async with make_app().run_test(size=(80, 24)) as pilot:
        screen = pilot.app.main_screen
        await pilot.pause()
        assert screen.compact and screen.query_one("#layout-tabs").display
        assert screen.query_one("#chat-pane").display and not screen.query_one("#panels").display
        screen.show_tab("ledger")
        await pilot.pause()
        assert not screen.query_one("#chat-pane").display and screen.query_one("#panels").display
        assert screen.query_one("#ledger-panel").display and not screen.query_one("#kv-panel").display
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not screen.compact and not screen.query_one("#layout-tabs").display
        assert all(screen.query_one(f"#{name}-panel").display for name in ("ledger", "kv", "speed", "thermal"))
        assert screen.query_one("#chat-pane").display


async def test_every_action_is_in_the_command_palette():
    async with make_app().run_test(size=(160, 48)) as pilot:
        titles = {command.title for command in pilot.app.get_system_commands(pilot.app.screen)}
        for title in ("Load or unload the model", "Cancel the answer", "Restart engine", "Save transcript",
                      "System prompt and sampling", "New conversation", "Models", "Presets", "Bench", "Theme"):
            assert title in titles


async def test_loading_what_does_not_fit_asks_and_names_what_breaks(tmp_path):
    device = tmp_path / "tiny-board.toml"
    device.write_text('name = "tiny-board"\nram_total_mb = 256\nmem_bandwidth_gbs = 10\ncores = 4\n\n'
                      '[reserves_mb]\nos = 200\n')
    engines = []
    async with make_app(engines, device=str(device)).run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        assert screen.ledger.verdict == "does not fit"
        verdict = str(screen.query_one("#verdict").content)
        assert "DOES NOT FIT" in verdict and " MB" not in verdict and "over the 56.0 MiB left" in verdict
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: pilot.app.screen.query("#load-anyway"))
        body = str(pilot.app.screen.query_one(".dialog-body").content)
        assert "tiny-board" in body and "OOM killer" in body
        dialog = " ".join(str(static.content) for static in pilot.app.screen.query("Static"))
        # one unit (MiB, llama.cpp's), one shortfall figure, said once
        assert " MB" not in dialog and "does not fit: does not fit" not in dialog
        assert len(re.findall(r"\bover\b", body)) == 1
        assert "against the 56.0 MiB left for the LLM" in body  # 256 MiB of RAM − 200 MiB os reserve, by hand
        over = (screen.ledger.total_bytes - 56 * 2**20) / 2**20
        assert f"{over:,.0f} MiB over." in body
        await pilot.click("#back")
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        assert engines == [] and screen.phase == IDLE
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: pilot.app.screen.query("#load-anyway"))
        await pilot.click("#load-anyway")
        await wait_until(pilot, lambda: screen.phase == LOADED)
        assert engines[0].load_options[-1]["allow_overbudget"] is True


async def test_choosing_another_preset_updates_the_prediction():
    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48)) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        before = screen.ledger
        screen.query_one("#preset-select").value = "long-context-kv4"
        await wait_until(pilot, lambda: screen.ledger is not before)
        assert screen.ledger.preset == "long-context-kv4" and screen.ledger.kv_bytes != before.kv_bytes
        assert screen.query_one(LedgerPanel).view.ledger is screen.ledger


async def test_new_conversation_and_quit_ask_before_discarding_unsaved_messages(tmp_path):
    from workbench.ui.screens.confirm_modal import ConfirmModal

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await load(pilot)
        await ask(pilot, "Keep me")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2)
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
        await pilot.press("escape")
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        assert len(screen.conversation.messages) == 2  # Back keeps it
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
        await pilot.click("#back")
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        assert app.is_running and len(screen.conversation.messages) == 2
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal))
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: not screen.conversation.messages and screen.query("#welcome"))
        welcome = screen.query_one("#welcome", Notice)
        assert "Ctrl+L loads" not in welcome.title and "loaded" in welcome.title  # the model is still loaded
        await ask(pilot, "Saved one")
        await wait_until(pilot, lambda: len(screen.conversation.messages) == 2)
        from workbench.ui.conversation import save_transcript

        save_transcript(screen.conversation, tmp_path / "t")
        await pilot.press("ctrl+n")  # everything is in a transcript: no question
        await wait_until(pilot, lambda: not screen.conversation.messages)
        assert pilot.app.screen is screen
