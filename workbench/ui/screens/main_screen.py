"""The main screen: choose and load a model, chat with it, and watch the four live panels."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Button, Header
from textual.worker import get_current_worker

from workbench.core.engine.events import EngineFailed
from workbench.core.ledger.fixes import apply_fix
from workbench.core.ledger.types import DOES_NOT_FIT, Ledger, LedgerFix
from workbench.ui import engine_work, fit_work
from workbench.ui.engine_session import Engine, EngineSession, Phase, close_quietly
from workbench.ui.messages import (
    EngineDied,
    LedgerPredicted,
    LoadFailed,
    LoadProgressReported,
    ModelLoaded,
    ModelUnloaded,
    PredictionFailed,
    SplitPredicted,
    TokensArrived,
)
from workbench.ui.screens import other_screens
from workbench.ui.screens.model_screen import ModelScreen
from workbench.ui.screens.overbudget_modal import OverbudgetModal
from workbench.ui.screens.tabbed_layout import TabbedLayoutScreen
from workbench.ui.selection import Selection
from workbench.ui.widgets.chat_pane import ChatPane
from workbench.ui.widgets.choice_bar import LOAD_KEY_LABELS, ChoiceBar
from workbench.ui.widgets.key_footer import KeyFooter
from workbench.ui.widgets.panel_grid import PanelGrid
from workbench.ui.widgets.verdict_line import LoadProgress, Prediction, VerdictLine
from workbench.ui.worker_requests import Requests


class MainScreen(TabbedLayoutScreen):
    """Composes the parts and routes their messages; runs the thread workers (each gets its arguments).

    The choice bar owns the selection, the verdict line the prediction, the chat pane the conversation,
    the engine session the engine and its phase, the panel grid what the panels show.
    """

    CSS_PATH = "main_screen.tcss"
    BINDINGS = [
        # one Ctrl+L binding per word on the button: the footer shows the one the button shows (check_action)
        *(Binding("ctrl+l", f"toggle_load('{label}')", label) for label in LOAD_KEY_LABELS),
        Binding("escape", "cancel_turn", "Stop"),
        Binding("ctrl+s", "save_transcript", "Save"),
        Binding("f2", "open_models", "Models"),
        Binding("f3", "open_presets", "Presets"),
        Binding("f4", "open_bench", "Bench"),
        Binding("f5", "edit_settings", "Settings"),
        Binding("f6", "open_serve", "Serve"),
        Binding("ctrl+r", "restart_engine", "Restart"),
        Binding("ctrl+n", "new_conversation", "New"),
        Binding("ctrl+t", "cycle_vote", "N samples, vote", show=False),
    ]

    def __init__(self, selection: Selection, engine_factory, sampler_factory, *,
                 telemetry_interval_s: float = 0.5, token_batch_interval_s: float = 0.1) -> None:
        super().__init__()
        self.sampler_factory = sampler_factory
        self.telemetry_interval_s = telemetry_interval_s
        self.token_batch_interval_s = token_batch_interval_s
        self.session = EngineSession(engine_factory, self._phase_changed)
        self.choice_bar = ChoiceBar(selection, id="selectors")
        self.verdict_line = VerdictLine(id="status-row")
        self.chat_pane = ChatPane(id="chat-pane")
        self.panels = PanelGrid(id="panels")
        self._telemetry_stop = threading.Event()
        self._requests = Requests()

    # ---- what the parts own, by name ------------------------------------------------------

    @property
    def selection(self) -> Selection:
        return self.choice_bar.selection

    @property
    def conversation(self):
        return self.chat_pane.conversation

    @property
    def phase(self) -> Phase:
        return self.session.phase

    @property
    def engine(self) -> Engine | None:
        return self.session.engine

    @property
    def latest_sample(self):
        return self.panels.latest_sample

    @property
    def ledger(self) -> Ledger | None:
        """The ledger predicted for the selection (None while unknown or when it cannot be predicted)."""
        prediction = self.verdict_line.prediction
        return prediction.ledger if prediction is not None else None

    # ---- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="▦")
        yield self.choice_bar
        yield self.verdict_line
        yield self.layout_tabs()
        with Horizontal(id="body"):
            yield self.chat_pane
            yield self.panels
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = "Edge LLM Workbench"
        self.focus_chat()
        # the workers start once the first frame is on screen: their threads compete for the GIL
        self.call_after_refresh(self._start_workers)

    def _start_workers(self) -> None:
        self.predict()
        self.sample_telemetry()

    def focus_chat(self) -> None:
        self.chat_pane.focus_prompt()

    def type_into_chat(self, character: str) -> None:
        self.chat_pane.type_into_prompt(character)

    # ---- the phase, shown by the parts ----------------------------------------------------

    def _phase_changed(self, phase: Phase) -> None:
        loaded = self.session.choice.loaded
        self.choice_bar.phase, self.choice_bar.loaded = phase, loaded
        self.verdict_line.loaded = loaded
        if phase != Phase.LOADING:
            self.verdict_line.progress = None
        self.chat_pane.phase = phase
        self.refresh_bindings()

    def _in_thread(self, body: Callable[..., None], *args: object, group: str, exclusive: bool = True) -> None:
        """Run `body(*args)` in a thread worker: it gets these arguments, never the screen, and only posts."""
        self.run_worker(partial(body, *args), thread=True, exclusive=exclusive, group=group)

    # ---- the prediction -------------------------------------------------------------------

    def predict(self) -> None:
        self._in_thread(engine_work.predict_choice, self.selection, self.choice_bar.choice,
                        self._requests.ask("predict"), self.post_message, group="predict")

    def on_choice_bar_changed(self, message: ChoiceBar.Changed) -> None:
        self.predict()
        self.refresh_bindings()  # Ctrl+L may now reload

    def select_model(self, path: Path, label: str | None = None) -> None:
        self.choice_bar.select_model(path, label)

    def select_preset(self, name: str) -> None:
        self.choice_bar.select_preset(name)

    def on_ledger_predicted(self, message: LedgerPredicted) -> None:
        if self._requests.stale("predict", message.request):
            return
        self.session.predicted(message.choice, message.ledger)
        self.verdict_line.prediction = Prediction(message.choice, message.ledger, tuple(message.problems))
        self.panels.battery_wh = message.device.battery_wh
        self.panels.show_ledger(self.session.choice.panel_ledger(message.ledger))

    def on_prediction_failed(self, message: PredictionFailed) -> None:
        if self._requests.stale("predict", message.request):
            return
        self.verdict_line.prediction = Prediction(self.choice_bar.choice, None, failure=message.reason)
        self.panels.show_ledger(self.session.choice.panel_ledger(None))
        self.notify(message.reason, title="Cannot predict the ledger", severity="error", timeout=8)

    def on_split_predicted(self, message: SplitPredicted) -> None:
        if self._requests.stale("predict", message.request):
            return
        self.panels.show_split(message.split)

    # ---- load, unload, restart ------------------------------------------------------------

    def on_choice_bar_load_pressed(self, message: ChoiceBar.LoadPressed) -> None:
        self.action_toggle_load()

    def on_choice_bar_fit_pressed(self, message: ChoiceBar.FitPressed) -> None:
        self.notify("searching the presets that fit…", title="Fit", timeout=3)
        self._in_thread(fit_work.fit_choice, self.selection, self.choice_bar.choice, self.choice_bar.post_message,
                        group="fit")  # the choice bar applies the result

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Ctrl+L's footer entry says what the button says; dimmed while a load or an unload runs."""
        if action != "toggle_load" or not parameters:
            return True
        label = self.choice_bar.button_label
        return True if parameters[0] == label else (None if parameters[0] == "Load" and label not in LOAD_KEY_LABELS
                                                    else False)

    def action_toggle_load(self, _label: str = "") -> None:
        """Ctrl+L: load; unload; or, when another choice is selected, reload with it in one press."""
        if self.session.reload_needed(self.choice_bar.choice):
            self.request_load()
        elif self.phase in (Phase.LOADED, Phase.GENERATING):
            self.unload()
        elif self.phase == Phase.IDLE:
            self.request_load()

    def request_load(self) -> None:
        """Load, asking first when the ledger says it does not fit."""
        ledger = self.ledger
        if ledger is not None and ledger.verdict == DOES_NOT_FIT:
            def confirmed(answer: object) -> None:
                if isinstance(answer, LedgerFix):
                    self.use_fix(answer)
                elif answer:
                    self.start_load(allow_overbudget=True)

            self.app.push_screen(OverbudgetModal(ledger), confirmed)
            return
        self.start_load(allow_overbudget=False)

    def use_fix(self, fix: LedgerFix) -> None:
        """Use the preset with the fix applied, as an unsaved copy, and predict again."""
        self.choice_bar.use_unsaved(apply_fix(self.selection.preset(), fix))
        self.notify(f"{fix.change}: saves {fix.saved_bytes / 2**20:,.0f} MiB; {fix.cost}", title="Fix applied")

    def start_load(self, *, allow_overbudget: bool) -> None:
        choice = self.choice_bar.choice
        try:
            model, preset, device = self.selection.resolve(choice)
        except Exception as error:
            self.notify(str(error), title="Cannot load", severity="error", timeout=8)
            return
        try:
            engine = self.session.begin_load(choice)
        except Exception as error:
            self.notify(str(error), title="Cannot start the engine", severity="error", timeout=8)
            return
        self.verdict_line.progress = LoadProgress()
        self.chat_pane.load_started(model.name or Path(model.source).name, preset.name)
        self._in_thread(engine_work.load_model, engine, Path(model.source), preset, device, allow_overbudget,
                        self.post_message, group="engine")

    def on_load_progress_reported(self, message: LoadProgressReported) -> None:
        self.verdict_line.progress = LoadProgress(message.stage, message.fraction)

    async def on_model_loaded(self, message: ModelLoaded) -> None:
        loaded = message.loaded
        self.session.load_finished()
        self.panels.model_loaded(loaded)
        self.predict()  # the loaded choice's ledger, when the load overtook its prediction
        await self.chat_pane.model_loaded(loaded)
        for warning in loaded.warnings:
            if warning != loaded.chat_notice:
                # the preset's checks and the engine's notes, not lines of llama.cpp's log
                self.notify(warning, title="Load warning", severity="warning", timeout=8)
        if loaded.prediction_check:  # a buffer over 5% off the ledger: said once, both figures
            self.notify(loaded.prediction_check, title="Ledger mismatch", severity="warning", timeout=10)

    async def on_load_failed(self, message: LoadFailed) -> None:
        failure = message.failure
        self.session.load_failed(failure)
        self.predict()
        await self.chat_pane.show_load_failed(failure)

    def unload(self) -> None:
        engine = self.session.begin_unload()
        if engine is not None:
            self._in_thread(engine_work.unload_model, engine, self.post_message, group="engine")

    def on_model_unloaded(self, message: ModelUnloaded) -> None:
        self.session.unloaded()
        self._clear_loaded_panels()
        self.notify("The engine returned the model's memory to the system.", title="Model unloaded")

    def _clear_loaded_panels(self) -> None:
        """No model in memory: the ledger loses its reported column, the KV panel its cache."""
        self.chat_pane.model_unloaded()
        self.panels.model_gone()
        self.panels.show_ledger(self.ledger)  # the panels go back to describing the selection
        self.predict()  # the verdict line follows a later change of the selection too

    def action_restart_engine(self) -> None:
        """Start a fresh engine process and load the same model and preset again."""
        if self.phase in (Phase.LOADING, Phase.UNLOADING):
            return
        self.run_worker(self.chat_pane.remove_crash_notice())  # answered: the restart is under way
        old = self.session.detach()
        if old is not None:
            if old.alive:
                # a live process takes a moment to stop: off the UI thread
                self._in_thread(close_quietly, old, group="close", exclusive=False)
            else:
                close_quietly(old)
        self.start_load(allow_overbudget=self.ledger is not None and self.ledger.verdict == DOES_NOT_FIT)

    @on(Button.Pressed, "#restart-engine")
    def _restart_pressed(self) -> None:
        self.action_restart_engine()

    # ---- turns ----------------------------------------------------------------------------

    def on_chat_pane_turn_started(self, message: ChatPane.TurnStarted) -> None:
        self.panels.turn_started()
        self.session.turn_started()
        loaded = self.session.loaded
        # the pane draws the answer; what the panels need bubbles up to this screen
        self._in_thread(engine_work.run_turn, self.session.engine, message.messages, message.sampling, message.samples,
                        loaded.n_ctx if loaded is not None else 0, self.chat_pane.post_message,
                        self.token_batch_interval_s, group="chat")

    def on_tokens_arrived(self, message: TokensArrived) -> None:
        self.panels.tokens_arrived(message)  # bubbled up from the chat pane, which drew the text

    def on_chat_pane_context_shifted(self, message: ChatPane.ContextShifted) -> None:
        self.panels.context_shifted(message.notice)
        self.notify(message.notice, title="Context full", severity="warning", timeout=8)

    def on_chat_pane_turn_ended(self, message: ChatPane.TurnEnded) -> None:
        finished = message.finished
        self.session.turn_ended()
        self.panels.turn_ended(finished, message.segments)

    async def on_chat_pane_turn_failed(self, message: ChatPane.TurnFailed) -> None:
        await self._engine_failed(message.failure)

    async def on_engine_died(self, message: EngineDied) -> None:
        await self._engine_failed(message.failure)  # an unload that failed

    async def _engine_failed(self, failure: EngineFailed) -> None:
        if self.session.failed(failure):
            await self.chat_pane.show_request_failed(failure)
            return
        self._clear_loaded_panels()  # the dead process's cache is gone with it
        # killed for not answering Esc: load it again at once (a kill during an unload ends as asked)
        if failure.cancel_unanswered and not self.session.unload_asked:
            await self.chat_pane.show_engine_restarted(failure)
            self.action_restart_engine()
            return
        await self.chat_pane.show_engine_died(failure, self.ledger)

    def action_cancel_turn(self) -> None:
        self.session.cancel_turn()

    def action_edit_settings(self) -> None:
        self.chat_pane.edit_settings()

    def action_save_transcript(self) -> None:
        self.chat_pane.save_transcript()

    def action_new_conversation(self) -> None:
        self.chat_pane.new_conversation()

    def action_cycle_vote(self) -> None:
        self.chat_pane.cycle_vote()

    # ---- telemetry ------------------------------------------------------------------------

    def sample_telemetry(self) -> None:
        """Sample in a thread until the screen closes; the panels take the samples."""
        self._in_thread(engine_work.sample_telemetry, self.sampler_factory, self.session.engine_pid,
                        self.panels.post_message, self._telemetry_stop, lambda: get_current_worker().is_cancelled,
                        self.telemetry_interval_s, group="telemetry")

    # ---- closing and other screens -------------------------------------------------------

    def on_unmount(self) -> None:
        """The app is closing: stop sampling and stop the engine process (its memory goes back)."""
        self._telemetry_stop.set()
        self.session.close()

    def action_open_models(self) -> None:
        other_screens.open_models(self)

    def on_model_screen_model_offered(self, message: ModelScreen.ModelOffered) -> None:
        message.stop()  # the app routed it here; it goes no further
        self.choice_bar.offer_model(message.path)

    def action_open_presets(self) -> None:
        other_screens.open_presets(self)

    def action_open_serve(self) -> None:
        other_screens.open_serve(self)

    def action_open_bench(self) -> None:
        other_screens.open_bench(self)
