"""The main screen's parts on their own: the engine session against the real engine, the chat pane with a fake one."""

from __future__ import annotations

import threading

from fakes import SCRIPTED_ANSWER, FakeEngine, wait_until
from real_engine import ROOMY
from textual.app import App, ComposeResult

from workbench.core.config.presets import load_preset
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, EngineFailed, Sampling
from workbench.core.paths import bundled_model_path
from workbench.ui import engine_work
from workbench.ui.engine_session import EngineSession, Phase
from workbench.ui.loaded_choice import Choice
from workbench.ui.messages import (
    AnswerEnded,
    LoadFailed,
    ModelLoaded,
    ModelUnloaded,
    TokensArrived,
)
from workbench.ui.themes import APP_COLOUR_DEFAULTS
from workbench.ui.widgets.chat_pane import ChatPane
from workbench.ui.widgets.chat_view import AnswerBlock, Notice
from workbench.ui.widgets.prompt_input import PromptInput

CHOICE = Choice(str(bundled_model_path()), "as-is", ROOMY.name)


def test_engine_session_loads_answers_and_unloads_the_bundled_model_in_the_real_engine():
    phases: list[Phase] = []
    session = EngineSession(EngineClient, phases.append)
    posted: list[object] = []
    try:
        engine = session.begin_load(CHOICE)
        assert session.phase == Phase.LOADING and session.choice.loaded is None
        engine_work.load_model(engine, bundled_model_path(), load_preset("as-is"), ROOMY, False, posted.append)
        (loaded,) = [message.loaded for message in posted if isinstance(message, ModelLoaded)]
        session.load_finished()
        assert session.phase == Phase.LOADED and session.choice.loaded == CHOICE
        assert session.loaded == loaded and loaded.n_ctx > 0
        assert session.engine_pid() == engine.pid is not None
        assert not session.reload_needed(CHOICE) and session.reload_needed(Choice(CHOICE.model_path, "other", "host"))

        session.turn_started()
        posted.clear()
        sampling = Sampling(temperature=0.0, max_tokens=8, seed=7)
        engine_work.run_turn(engine, (ChatMessage("user", "Say hello."),), sampling, 1, loaded.n_ctx, posted.append)
        (ended,) = [message for message in posted if isinstance(message, AnswerEnded)]
        assert ended.finished.generated_tokens > 0
        assert sum(m.n_tokens for m in posted if isinstance(m, TokensArrived)) == ended.finished.generated_tokens
        session.turn_ended()
        assert session.phase == Phase.LOADED

        assert session.begin_unload() is engine and session.phase == Phase.UNLOADING
        posted.clear()
        engine_work.unload_model(engine, posted.append)
        assert any(isinstance(message, ModelUnloaded) for message in posted)
        session.unloaded()
        assert session.phase == Phase.IDLE and session.choice.loaded is None and session.loaded is None
        assert engine.alive  # the process stays for the next load: unloading returns only the model's memory
    finally:
        session.close()
    assert phases == [Phase.LOADING, Phase.LOADED, Phase.GENERATING, Phase.LOADED, Phase.UNLOADING, Phase.IDLE]
    assert not engine.alive


def test_engine_session_after_a_failed_load_and_a_crash():
    engines: list[FakeEngine] = []

    def factory() -> FakeEngine:
        engines.append(FakeEngine(fail_load="file is not a GGUF"))
        return engines[-1]

    session = EngineSession(factory)
    posted: list[object] = []
    engine = session.begin_load(CHOICE)
    engine_work.load_model(engine, bundled_model_path(), load_preset("as-is"), ROOMY, False, posted.append)
    (failed,) = [message.failure for message in posted if isinstance(message, LoadFailed)]
    session.load_failed(failed)
    assert session.phase == Phase.IDLE and session.last_failure == failed and session.choice.loaded is None

    engine.fail_load = ""
    assert session.begin_load(CHOICE) is engine  # a live engine is kept for the next load
    engine_work.load_model(engine, bundled_model_path(), load_preset("as-is"), ROOMY, False, posted.append)
    session.load_finished()
    assert session.phase == Phase.LOADED and session.loaded is not None
    # a request that failed in a live engine leaves the model loaded; a crash takes it with the process
    assert session.failed(EngineFailed(kind="request", message="bad sampling")) is True
    assert session.phase == Phase.LOADED
    engine.alive = False
    assert session.failed(EngineFailed(kind="crash", message="engine process died")) is False
    assert session.phase == Phase.IDLE and session.choice.loaded is None
    assert session.begin_load(CHOICE) is not engine and len(engines) == 2  # a dead engine is replaced
    assert "close" in engine.calls


class ChatHost(App):
    """The chat pane alone; each TurnStarted is answered by the fake engine in a thread, as the screen does."""

    def __init__(self, engine: FakeEngine) -> None:
        super().__init__()
        self.engine = engine
        self.pane = ChatPane(id="chat-pane")
        self.ended: list[ChatPane.TurnEnded] = []
        self.failed: list[ChatPane.TurnFailed] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOUR_DEFAULTS)

    def compose(self) -> ComposeResult:
        yield self.pane

    def on_chat_pane_turn_started(self, message: ChatPane.TurnStarted) -> None:
        threading.Thread(target=engine_work.run_turn, daemon=True,
                         args=(self.engine, message.messages, message.sampling, message.samples, self.engine.n_ctx,
                               self.pane.post_message, 0.01)).start()

    def on_chat_pane_turn_ended(self, message: ChatPane.TurnEnded) -> None:
        self.ended.append(message)

    def on_chat_pane_turn_failed(self, message: ChatPane.TurnFailed) -> None:
        self.failed.append(message)


async def test_chat_pane_owns_the_conversation_and_the_streamed_answer():
    engine = FakeEngine()
    engine.start()
    app = ChatHost(engine)
    pane, ended, failed = app.pane, app.ended, app.failed
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = pane.query_one(PromptInput)
        prompt.value = "Does it fit?"
        await prompt.action_submit()
        await pilot.pause()
        assert pane.conversation.messages == [] and not pane.answering  # not loaded: nothing is sent
        pane.phase = Phase.LOADED
        await prompt.action_submit()
        await wait_until(pilot, lambda: len(ended) == 1)
        finished = ended[0].finished
        assert finished.text == "".join(SCRIPTED_ANSWER) and not pane.answering
        assert [m.role for m in pane.conversation.messages] == ["user", "assistant"]
        assert pane.conversation.stats[1] == finished
        assert ended[0].segments and sum(n for _, n in ended[0].segments) == finished.kv_cells_used
        (answer,) = pane.query(AnswerBlock)
        assert answer.text == finished.text and prompt.value == ""
        sent, _sampling = engine.chats[-1]
        assert sent[-1] == ChatMessage("user", "Does it fit?")

        engine.crash_next_chat = True
        prompt.value = "Crash please"
        await prompt.action_submit()
        await wait_until(pilot, lambda: len(failed) == 1)
        assert failed[0].failure.kind == "crash"
        # the partial answer stays in the transcript (not for the model); the prompt waits to be sent again
        assert len(pane.conversation.messages) == 4 and 3 in pane.conversation.interrupted
        assert prompt.value == "Crash please" and len(ended) == 1
        await pane.show_engine_died(failed[0].failure, None)
        await pilot.pause()
        assert pane.query("#crash-notice") and any("Engine died" in str(n.query_one(".notice-title").render())
                                                   for n in pane.query(Notice))
